//! QueueBox over HTTP: the webhook sources (axum routes), the HTTP and `log` destinations, the admin API and its web console, and the data and management ports.

pub mod admin;
pub mod console;
pub mod destination;
pub mod server;
pub mod source;
mod standard_webhooks;
