//! QueueBox over HTTP: the webhook sources (axum routes), the HTTP and `log` destinations, and the data and management ports.

pub mod console;
pub mod destination;
pub mod server;
pub mod source;
mod standard_webhooks;
