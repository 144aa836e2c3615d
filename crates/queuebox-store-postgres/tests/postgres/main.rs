//! Integration tests of the PostgreSQL store against the real server (quality.md): each test
//! works in a schema of its own, so they run in parallel and leave nothing behind.

mod conformance;
mod conformance_hooks;
mod connect;
mod errors;
mod guard;
mod liveness;
mod migrate;
mod stats;
mod support;
