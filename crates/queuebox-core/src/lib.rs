//! QueueBox's domain vocabulary, with no I/O: secrets, table layouts, topic globs, templates,
//! JSONPath extraction and redaction.

pub mod database;
pub mod delivery;
pub mod glob;
pub mod jsonpath;
pub mod layout;
pub mod redact;
pub mod retry;
pub mod row_check;
pub mod secret;
pub mod sql_template;
pub mod template;

pub use layout::{InboxColumns, OutboxColumns, SqlIdentifier, TableLayout};
pub use secret::Secret;
