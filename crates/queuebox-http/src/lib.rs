//! HTTP connectors: the HTTP and `log` destinations (the HTTP source comes later).

pub mod destination;
pub mod server;
