//! Helpers shared by the binary's integration tests.
#![allow(dead_code)]

/// The RabbitMQ helpers (pika, private nodes) are the connector crate's, shared.
#[path = "../../../queuebox-amqp/tests/support/mod.rs"]
pub mod amqp;
pub mod markdown;
pub mod mysql;
pub mod pg;
pub mod process;
pub mod proxy;
pub mod receiver;
pub mod service;
