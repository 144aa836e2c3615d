//! The SQLite store's integration tests: the conformance suite on a file database in a
//! temporary folder per test, and the SQLite-only checks (file settings, several connections
//! on one file).

mod conformance;
mod support;
