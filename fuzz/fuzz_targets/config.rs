//! cargo-fuzz target `config`: see queuebox_fuzz::config.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| queuebox_fuzz::config(data));
