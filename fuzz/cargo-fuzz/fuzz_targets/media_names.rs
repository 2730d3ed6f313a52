#![no_main]
//! libFuzzer entry for `bot_connect_fuzz::media::media_names`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| bot_connect_fuzz::media::media_names(data));
