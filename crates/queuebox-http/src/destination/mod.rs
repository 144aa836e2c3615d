//! Destinations of this crate: HTTP (`POST` to a URL) and `log` (one JSON line per delivery).

mod body;
mod classify;
mod error;
mod headers;
mod http;
mod log;
mod oauth2;
mod private;
mod shared;
mod target;

pub use classify::status_class;
pub use error::DestinationError;
pub use http::{HttpAuth, HttpDestination, HttpDestinationSettings};
pub use log::{LogDestination, LogDestinationSettings};
pub use private::{check_private_addresses, is_blocked_address};
pub use shared::SharedHttp;
