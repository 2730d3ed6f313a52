#![no_main]
//! libFuzzer entry for `bot_connect_fuzz::normalizers::telegram`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| bot_connect_fuzz::normalizers::telegram(data));
