//! Kafka for QueueBox, through `rdkafka` (librdkafka): a source (one consumer group per source,
//! inbox.md §10.5) and a destination (one idempotent producer per destination, destinations.md
//! §6). The engine owns every delivery rule; this crate only translates.
//!
//! # Why librdkafka is built from its bundled source
//!
//! `rdkafka` links librdkafka either from Debian's `librdkafka-dev` (its `dynamic-linking`
//! feature) or from the copy of the librdkafka source that `rdkafka-sys` ships, built with
//! librdkafka's own `configure` and `make` (no cmake). This crate uses the bundled build:
//! `rdkafka-sys` 4.10 binds librdkafka 2.12.1 and refuses an older system library, and Debian 12
//! ships 2.0.2, so the Debian package cannot be used at all; and the bundled build needs only
//! a C compiler, `make` and `perl`, which a Rust toolchain on Debian already brings, so the
//! README's two commands still do all the set-up on a fresh machine. The cost is a few minutes
//! of compiling librdkafka on the first build (about 4 minutes on 2 cores).
//!
//! The features are minimal: the tokio runtime, OpenSSL from the system for `SSL`,
//! `SASL_SSL` and the SCRAM mechanisms (`libssl-dev`), and zlib for gzip-compressed batches;
//! no GSSAPI (Kerberos), curl (OIDC) or zstd. The binary has this crate behind its default
//! `kafka` feature, so the other crates build without librdkafka.

mod client;
pub mod convert;
mod destination;
mod error;
mod source;

pub use destination::{KafkaDestination, KafkaDestinationSettings, RoutedKafka};
pub use error::KafkaConfigError;
pub use source::{KafkaSource, KafkaSourceSettings, POLL_WAIT, SEEK_BACK_PAUSE};
