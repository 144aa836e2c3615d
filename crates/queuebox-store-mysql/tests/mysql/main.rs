//! Integration tests of the MySQL / MariaDB store against the real server (quality.md): each
//! test works in a database of its own (`qb_mysql_…`), so they run in parallel and leave
//! nothing behind.

mod conformance;
mod conformance_hooks;
mod errors;
mod support;
mod tls;
