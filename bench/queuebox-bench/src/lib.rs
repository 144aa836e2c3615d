//! The QueueBox benchmarks (docs/benchmarks.md, quality.md "Benchmarks"): the pure helpers the
//! three binaries share (receiver records, percentiles, `/proc` readings, the Markdown page) and
//! the outbox benchmark driver. Benchmarks are never timed tests; only these helpers have tests.

pub mod driver;
pub mod procfs;
pub mod receipts;
pub mod report;
pub mod stats;
