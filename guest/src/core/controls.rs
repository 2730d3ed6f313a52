//! Control characters in outbound text (reference-behaviour §3.8, issue 15 §3).
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
    // A byte scan first: every rejected control is a byte below 0x20, DEL, or a C1 control
    // (0xC2 then 0x80..=0x9F in UTF-8). Clean text, the common case, is never decoded.
    let maybe = text
        .bytes()
        .any(|b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || b == 0x7f || b == 0xc2);
    if !maybe || !text.chars().any(is_rejected_control) {
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
}
