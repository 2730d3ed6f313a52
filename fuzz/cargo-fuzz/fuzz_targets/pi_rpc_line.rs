#![no_main]
//! libFuzzer entry for `bot_connect_fuzz::lines::pi_rpc_line`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| bot_connect_fuzz::lines::pi_rpc_line(data));
