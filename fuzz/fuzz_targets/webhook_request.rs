//! cargo-fuzz target `webhook_request`: see queuebox_fuzz::webhook_request.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| queuebox_fuzz::webhook_request(data));
