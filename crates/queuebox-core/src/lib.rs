//! QueueBox's domain vocabulary, with no I/O: the tables and their row ids, secrets, table
//! layouts, database targets, the SQL file grammar, topic globs, templates, JSONPath extraction
//! and redaction.

pub mod database;
pub mod delivery;
pub mod glob;
pub mod ids;
pub mod jsonpath;
pub mod layout;
pub mod redact;
pub mod retry;
pub mod row_check;
pub mod secret;
pub mod sql_template;
pub mod table;
pub mod template;

pub use ids::{ClaimToken, RowId};
pub use layout::{InboxColumns, OutboxColumns, SqlIdentifier, TableLayout};
pub use secret::Secret;
pub use table::{Consumption, Table};
