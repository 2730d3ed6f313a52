#![no_main]
//! libFuzzer entry for `bot_connect_fuzz::normalizers::robo_claw`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| bot_connect_fuzz::normalizers::robo_claw(data));
