//! A libFuzzer dictionary of the redaction catalog's keywords, for the `outbound` target
//! (docs/fuzzing.md#speed).
//!
//! A build without `-sanitizer-coverage-trace-compares` runs the target about three times
//! as fast here, but libFuzzer then no longer learns the keywords the scan compares against
//! (`ghp_`, `AccountKey=`, `xoxb-`): without them a mutation rarely makes a secret a
//! family reads, and most of the catalog goes untried. Given as `-dict=`, each keyword is a
//! piece a mutation may insert.
//!
//! `cargo run --release -p bot-connect-fuzz --no-default-features --example outbound_dict >
//! outbound.dict`

use guest::core::secret_index::WORDS;

fn main() {
    for word in WORDS {
        println!("\"{}\"", escaped(word));
    }
}

/// `word` as a dictionary entry's body: `"` and `\` escaped, bytes outside printable ASCII
/// as `\xNN` (libFuzzer's format).
fn escaped(word: &str) -> String {
    word.bytes()
        .map(|byte| match byte {
            b'"' | b'\\' => format!("\\{}", char::from(byte)),
            0x20..=0x7e => char::from(byte).to_string(),
            _ => format!("\\x{byte:02X}"),
        })
        .collect()
}
