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

/// The characters a markdown renderer may drop from between two pieces of text; all
/// ASCII, so they are removed byte by byte (a char walk cost a quarter of a millisecond
/// per 64 KiB). A link's brackets go too: `…SAs[link](url)` shows as `…SAslink`, a
/// longer token (found by fuzzing). So do spoiler bars: a table's cells written without
/// blanks (`|ab|cd|`) then join in the view, which costs a redaction only when the joined
/// cells read as a secret, leaning to more redaction.
const DELIMITERS: [u8; 7] = [b'*', b'~', b'`', b'\\', b'[', b']', b'|'];

/// Whether `b` is one of [`DELIMITERS`], as compares without a branch, so a block of
/// bytes is checked with vector compares.
fn is_delimiter(b: u8) -> u8 {
    DELIMITERS.iter().fold(0, |any, d| any | u8::from(b == *d))
}

/// Where the next delimiter is in `bytes`. Blocks without one, most of any text, are
/// passed with one branch each: a branch per byte cost 8 % of the whole Slack pipeline on
/// 64 KiB of agent text.
fn next_delimiter(bytes: &[u8]) -> Option<usize> {
    let mut blocks = bytes.chunks_exact(32);
    let mut base = 0;
    for block in blocks.by_ref() {
        if block.iter().fold(0, |any, b| any | is_delimiter(*b)) != 0 {
            return block
                .iter()
                .position(|b| is_delimiter(*b) != 0)
                .map(|k| base + k);
        }
        base += block.len();
    }
    blocks
        .remainder()
        .iter()
        .position(|b| is_delimiter(*b) != 0)
        .map(|k| base + k)
}

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
    let first = next_delimiter(bytes)?;
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = &bytes[first..];
    out.extend_from_slice(&bytes[..first]);
    // Copy the runs between delimiters whole.
    while let Some(at) = next_delimiter(rest) {
        out.extend_from_slice(&rest[..at]);
        // Redaction's own markers keep their brackets: without them `[redacted]` reads as
        // a value a shape would replace again.
        if rest[at..].starts_with(MARKER)
            && let Some(close) = memchr::memchr(b']', &rest[at..])
        {
            out.extend_from_slice(&rest[at..=at + close]);
            rest = &rest[at + close + 1..];
            continue;
        }
        if rest[at] == b'*'
            && let Some(star) = star_as
        {
            out.push(star);
        }
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
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
            if rest.starts_with("[redacted")
                && let Some(close) = rest.find(']')
            {
                out.push_str(&rest[..=close]);
                rest = &rest[close + 1..];
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
        assert_eq!(underscored("no star `x`"), None);
        assert_eq!(
            underscored(r"m*bold*t_ ~s~ `c`"),
            Some("m_bold_t_ s c".to_string())
        );
    }
}
