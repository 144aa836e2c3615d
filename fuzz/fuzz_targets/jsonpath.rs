//! cargo-fuzz target `jsonpath`: see queuebox_fuzz::jsonpath.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| queuebox_fuzz::jsonpath(data));
