//! QueueBox's domain vocabulary, with no I/O: secrets, table layouts, headers, filters, topic
//! globs, templates, JSONPath extraction and redaction; and the contracts between the engine and
//! the connectors (intake, source, destination, readiness).

pub mod correlation;
pub mod database;
pub mod destination;
pub mod filter;
pub mod glob;
pub mod headers;
pub mod inbox;
pub mod intake;
pub mod jsonpath;
pub mod layout;
pub mod publish_time;
pub mod rawjson;
pub mod readiness;
pub mod redact;
pub mod retry;
pub mod row_check;
pub mod secret;
pub mod source;
pub mod template;

pub use destination::{Destination, DestinationType, Outcome, OutgoingMessage};
pub use headers::{HeaderName, ReceivedHeaders};
pub use intake::{Intake, IntakeOutcome, ReceivedMessage, SourceName};
pub use layout::{InboxColumns, OutboxColumns, SqlIdentifier, TableLayout};
pub use readiness::{ComponentDown, ReadinessComponent};
pub use secret::Secret;
pub use source::Source;
