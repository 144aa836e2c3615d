//! QueueBox's domain vocabulary, with no I/O: secrets, table layouts, topic globs, templates,
//! JSONPath extraction and redaction.

pub mod layout;
pub mod secret;

pub use layout::{InboxColumns, OutboxColumns, SqlIdentifier, TableLayout};
pub use secret::Secret;
