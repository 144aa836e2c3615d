//! QueueBox's domain vocabulary, with no I/O: the tables and their row ids, secrets, table
//! layouts, database targets, the SQL file grammar, headers, filters, topic globs, templates,
//! JSONPath extraction and redaction; and the contracts between the engine and the connectors
//! (intake, source, destination, readiness).

pub mod correlation;
pub mod database;
pub mod destination;
pub mod filter;
pub mod glob;
pub mod headers;
pub mod ids;
pub mod inbox;
pub mod intake;
pub mod jsonpath;
pub mod layout;
pub mod outgoing_headers;
pub mod publish_time;
pub mod rawjson;
pub mod readiness;
pub mod redact;
pub mod retry;
pub mod row_check;
pub mod secret;
pub mod source;
pub mod sql_template;
pub mod table;
pub mod template;

pub use destination::{Destination, DestinationType, Outcome, OutgoingMessage};
pub use headers::{HeaderName, ReceivedHeaders};
pub use ids::{ClaimToken, RowId};
pub use intake::{Intake, IntakeOutcome, ReceivedMessage, SourceName};
pub use layout::{InboxColumns, OutboxColumns, SqlIdentifier, TableLayout};
pub use readiness::{ComponentDown, ReadinessComponent};
pub use secret::Secret;
pub use source::Source;
pub use table::{Consumption, Table};
