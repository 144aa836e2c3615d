//! cargo-fuzz target `intake_body`: see queuebox_fuzz::intake_body.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| queuebox_fuzz::intake_body(data));
