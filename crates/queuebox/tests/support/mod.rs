//! Helpers shared by the binary's integration tests.
#![allow(dead_code)]

pub mod markdown;
pub mod mysql;
pub mod pg;
pub mod process;
pub mod proxy;
pub mod receiver;
pub mod service;
