//! Control characters in outbound text (docs/architecture.md#the-outbound-pipeline).
//!
//! Agent output can carry raw control bytes (a NUL from a binary file, an ANSI escape from a
//! test runner). Platforms refuse or mangle them: Telegram rejects a message holding NUL,
//! Slack and Discord drop or garble C0/C1 controls. Every one the platforms reject is
//! replaced with U+FFFD, so the message still goes and the reader sees where something was.

use std::borrow::Cow;

/// The replacement character written in place of a rejected control.
pub const REPLACEMENT: char = '\u{FFFD}';

/// True for a character no platform accepts in a message: C0 controls other than tab, line
/// feed and carriage return (a CRLF is a line break, I29), DEL, and the C1 controls.
pub fn is_rejected_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` with every rejected control replaced by U+FFFD; borrowed when there is none (the
/// common case costs one scan and no copy). U+FFFD is one character and one UTF-16 unit,
/// like what it replaces, so a limit measured in either is not moved by the replacement.
pub fn replace_rejected_controls(text: &str) -> Cow<'_, str> {
    if !may_hold_a_rejected_control(text.as_bytes()) || !text.chars().any(is_rejected_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| {
                if is_rejected_control(c) {
                    REPLACEMENT
                } else {
                    c
                }
            })
            .collect(),
    )
}

/// A byte scan that clean text, the common case, passes without being decoded: every
/// rejected control is a byte below 0x20, DEL, or a C1 control (0xC2 then 0x80..=0x9F in
/// UTF-8), so text without those bytes holds none. (0xC2 alone also starts `·` or a
/// no-break space, which the decoding check then clears.)
///
/// Whole blocks are folded without a branch per byte, which the compiler turns into vector
/// compares: the earlier byte-by-byte `any` was 7 % of the whole Slack pipeline on 64 KiB.
fn may_hold_a_rejected_control(bytes: &[u8]) -> bool {
    let flagged = |b: u8| {
        u8::from(b < 0x20) & u8::from(b != b'\t') & u8::from(b != b'\n') & u8::from(b != b'\r')
            | u8::from(b == 0x7f)
            | u8::from(b == 0xc2)
    };
    let mut blocks = bytes.chunks_exact(64);
    blocks
        .by_ref()
        .any(|block| block.iter().fold(0, |any, b| any | flagged(*b)) != 0)
        || blocks.remainder().iter().any(|b| flagged(*b) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_controls_become_the_replacement_character() {
        let cases = [
            ("a\u{0}b", "a\u{FFFD}b"),
            ("\u{1b}[2Jx\u{7}", "\u{FFFD}[2Jx\u{FFFD}"),
            ("del\u{7f} c1\u{85}\u{9f}", "del\u{FFFD} c1\u{FFFD}\u{FFFD}"),
            ("tab\tlf\ncrlf\r\n", "tab\tlf\ncrlf\r\n"),
            ("é日本\u{a0}", "é日本\u{a0}"),
        ];
        for (input, expected) in cases {
            assert_eq!(replace_rejected_controls(input), expected, "{input:?}");
        }
    }

    #[test]
    fn clean_text_is_not_copied() {
        assert!(matches!(
            replace_rejected_controls("plain text\n"),
            Cow::Borrowed(_)
        ));
    }

    proptest::proptest! {
        /// The block scan lets through every text that holds a rejected control, whatever
        /// block it falls in, and stops text with none of its bytes.
        #[test]
        fn the_byte_gate_misses_no_control(
            text in "[a-z \n\t\r\u{0}-\u{1f}\u{7f}-\u{a0}·é日]{0,300}",
        ) {
            let holds = text.chars().any(is_rejected_control);
            let suspicious = text.bytes().any(|b| {
                (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || b == 0x7f || b == 0xc2
            });
            proptest::prop_assert_eq!(may_hold_a_rejected_control(text.as_bytes()), suspicious);
            proptest::prop_assert!(!holds || suspicious);
        }
    }
}
