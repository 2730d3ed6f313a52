//! Markdown delimiters seen by redaction: `/~bot123:AAH…~` renders as a struck-through
//! `/bot123:AAH…`, a Telegram Bot API URL with its token, but in the source `~` stands
//! between `/` and `bot`, so no shape matches there (found by fuzzing the pipeline). The
//! same holds for any delimiter the renderer drops between two halves of a shape: `*`
//! (emphasis), `~` (strikethrough), `` ` `` (code spans), `\` (escapes), a link's
//! `[` `]`, and `|`: Discord shows `||x||` as a spoiler that reads as part of its word once
//! tapped, so `ghp_||0123…||` hands a whole token to whoever taps it (found in review,
//! 2026-12-02).
//!
//! A renderer may also turn `*` into `_` (Slack's italics, the Markdown dialects'), which
//! lengthens a token whose class holds `_`: `Bearer abcdefghijklm*bold*t_` shows as the
//! 20-character `abcdefghijklm_bold_t_`, a bearer value (found by fuzzing the pipeline).
//! So a text with `*` gets a second look with each `*` as `_` ([`underscored`]).
//!
//! Redaction therefore takes one more look at the text with those characters removed. When
//! that view holds a secret the text as written did not, the view's redacted text is what
//! is sent: the delimiters of that message are lost, which only a message holding a secret
//! ever pays, and which leans to more redaction, never less.

use crate::core::scan::positions_of;
use crate::core::secrets::markers;

/// The characters a markdown renderer may drop from between two pieces of text; all
/// ASCII, so they are found and removed byte by byte (a char walk cost a quarter of a
/// millisecond per 64 KiB). A link's brackets go too: `…SAs[link](url)` shows as `…SAslink`, a
/// longer token (found by fuzzing). So do spoiler bars: a table's cells written without
/// blanks (`|ab|cd|`) then join in the view, which costs a redaction only when the joined
/// cells read as a secret, leaning to more redaction.
const DELIMITERS: [u8; 7] = [b'*', b'~', b'`', b'\\', b'[', b']', b'|'];

/// `text` without its delimiter characters; `None` when it holds none.
pub fn view(text: &str) -> Option<String> {
    rewritten(text, None)
}

/// `text` with each `*` as `_` and the other delimiters removed; `None` without a `*`.
pub fn underscored(text: &str) -> Option<String> {
    memchr::memchr(b'*', text.as_bytes())?;
    rewritten(text, Some(b'_'))
}

/// How every redaction marker begins (`[redacted]`, `[redacted:jwt]`).
const MARKER: &[u8] = b"[redacted";

fn rewritten(text: &str, star_as: Option<u8>) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out: Option<Vec<u8>> = None;
    // `bytes[..copied]` is written out or dropped; the runs between delimiters are copied
    // whole.
    let mut copied = 0;
    for at in positions_of(bytes, DELIMITERS) {
        // Inside a marker copied whole below.
        if at < copied {
            continue;
        }
        let out = out.get_or_insert_with(|| Vec::with_capacity(bytes.len()));
        out.extend_from_slice(bytes.get(copied..at).unwrap_or_default());
        let rest = bytes.get(at..).unwrap_or_default();
        // Redaction's own markers keep their brackets: without them `[redacted]` reads as
        // a value a shape would replace again. Only a marker redaction writes: kept up to
        // the next `]`, any `[redacted` shielded what followed it, over lines, from this
        // look (`[redacted` … `ghp_Q1w2E3r4d*~T5y6…` … `]`, found by fuzzing, 2026-12-02).
        if rest.starts_with(MARKER)
            && let Some(marker) = markers().find(|m| rest.starts_with(m.as_bytes()))
        {
            out.extend_from_slice(marker.as_bytes());
            copied = at + marker.len();
            continue;
        }
        if rest.first() == Some(&b'*')
            && let Some(star) = star_as
        {
            out.push(star);
        }
        copied = at + 1;
    }
    let mut out = out?;
    out.extend_from_slice(bytes.get(copied..).unwrap_or_default());
    // Removing or swapping ASCII bytes in UTF-8 leaves UTF-8: no multi-byte character
    // holds one.
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The views as first written: a char walk, a delimiter at a time.
    fn by_chars(text: &str, star_as: Option<char>) -> Option<String> {
        let delimiter = |c: char| u8::try_from(c).is_ok_and(|b| DELIMITERS.contains(&b));
        if !text.chars().any(delimiter) {
            return None;
        }
        let mut out = String::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if let Some(marker) = markers().find(|m| rest.starts_with(m)) {
                out.push_str(marker);
                rest = &rest[marker.len()..];
                continue;
            }
            match (c, star_as) {
                ('*', Some(star)) => out.push(star),
                _ if delimiter(c) => {}
                _ => out.push(c),
            }
            rest = &rest[c.len_utf8()..];
        }
        Some(out)
    }

    proptest::proptest! {
        /// The block scan finds every delimiter, in any block and at any block's edge.
        #[test]
        fn the_views_drop_every_delimiter_and_nothing_else(
            text in "([a-z_ é]{0,40}|[*~`|\\\\\\[\\]]|\\[redacted(:jwt)?\\]?){0,24}",
        ) {
            proptest::prop_assert_eq!(view(&text), by_chars(&text, None));
            let starred = text.contains('*').then(|| by_chars(&text, Some('_'))).flatten();
            proptest::prop_assert_eq!(underscored(&text), starred);
        }
    }

    #[test]
    fn every_delimiter_goes_and_nothing_else() {
        assert_eq!(view("plain text"), None);
        assert_eq!(
            view(r"/~bot1~ *a* `b` \_c [d](e) ||f|| [redacted:jwt]"),
            Some("/bot1 a b _c d(e) f [redacted:jwt]".to_string())
        );
        // Text that only starts like a marker keeps nothing from the look.
        assert_eq!(
            view("[redacted:x ghp_a*b*c] [redacted:jwt]"),
            Some("redacted:x ghp_abc [redacted:jwt]".to_string())
        );
        assert_eq!(underscored("no star `x`"), None);
        assert_eq!(
            underscored(r"m*bold*t_ ~s~ `c`"),
            Some("m_bold_t_ s c".to_string())
        );
    }
}
