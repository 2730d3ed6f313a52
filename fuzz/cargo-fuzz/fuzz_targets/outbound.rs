#![no_main]
//! libFuzzer entry for `bot_connect_fuzz::outbound::outbound`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| bot_connect_fuzz::outbound::outbound(data));
