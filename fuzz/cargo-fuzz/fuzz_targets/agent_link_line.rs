#![no_main]
//! libFuzzer entry for `bot_connect_fuzz::lines::agent_link_line`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| bot_connect_fuzz::lines::agent_link_line(data));
