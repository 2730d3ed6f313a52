//! Secrets split by characters that render as nothing (docs/security.md#redaction).
//!
//! A U+2060 WORD JOINER inside a Telegram token, or a U+200B ZERO WIDTH SPACE or U+00AD SOFT
//! HYPHEN inside a GitHub token, shows the token whole to the reader and to anyone who copies
//! it, but to a byte pattern it is two words: the token went out whole, or half of it did.
//! So each line holding such a character is also read without them; where that reading holds
//! a secret, the secret is replaced in the line as written, the invisible characters inside
//! it with it. Lines without one (nearly every line) cost a byte search.

/// Whether `c` is a format character that renders as nothing between two visible ones:
/// U+200B–U+200F (zero-width space, joiners, direction marks), U+202A–U+202E (embeddings and
/// overrides), U+2060–U+2064 (word joiner, invisible operators), U+FEFF (zero-width no-break
/// space) and U+00AD (soft hyphen).
pub fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{00AD}')
}

/// Whether `text` holds an invisible character: the UTF-8 lead bytes of all of them are
/// `0xC2`, `0xE2` and `0xEF`, so one byte search passes text without them.
pub fn has_invisible(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr3_iter(0xC2, 0xE2, 0xEF, bytes).any(|at| {
        text.get(at..)
            .and_then(|rest| rest.chars().next())
            .is_some_and(is_invisible)
    })
}

/// A text whose secrets split by invisible characters were replaced: the part from the first
/// secret the visible reading found to its last is that reading's, its invisible characters
/// gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The text with that part replaced.
    pub text: String,
    /// Where the replaced part was in the text as written.
    pub written: std::ops::Range<usize>,
    /// Where what replaced it is in [`Joined::text`].
    pub replaced: std::ops::Range<usize>,
}

/// `text` with every secret that invisible characters split replaced; `None` when no line
/// changes. `read` is redaction's reading of a line's visible text: the line redacted, or
/// `None` when it holds no secret.
pub fn redact_hidden(text: &str, mut read: impl FnMut(&str) -> Option<String>) -> Option<Joined> {
    if !has_invisible(text) {
        return None;
    }
    // The whole text is read at once, not line by line: a header line ending in `Bearer`
    // takes its token from the next line, and read alone the line lost the word, so the
    // token on the next line went out (`\u{200D}Authorization::Bearer` and a token under
    // it; found by fuzzing the pipeline, 2026-12-06). The cost: the invisible characters
    // between the first and the last secret replaced go with them.
    redact_line(text, &mut read)
}

/// One line: read without its invisible characters, and the part the reading changed
/// replaced in the line as written.
fn redact_line(line: &str, read: &mut impl FnMut(&str) -> Option<String>) -> Option<Joined> {
    if !line.chars().any(is_invisible) {
        return None;
    }
    // The visible text, and for each of its bytes where that byte is in `line`.
    let mut visible = String::with_capacity(line.len());
    let mut origin: Vec<usize> = Vec::with_capacity(line.len() + 1);
    for (at, c) in line.char_indices() {
        if is_invisible(c) {
            continue;
        }
        visible.push(c);
        origin.extend((0..c.len_utf8()).map(|k| at + k));
    }
    origin.push(line.len());
    let seen = read(&visible).filter(|seen| *seen != visible)?;
    let prefix = visible
        .char_indices()
        .zip(seen.chars())
        .find(|((_, a), b)| a != b)
        .map_or(visible.len().min(seen.len()), |((at, _), _)| at);
    let suffix: usize = visible[prefix..]
        .chars()
        .rev()
        .zip(seen[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum();
    let start = *origin.get(prefix)?;
    let end = *origin.get(visible.len() - suffix)?;
    let replacement = seen.get(prefix..seen.len() - suffix)?;
    Some(Joined {
        text: format!("{}{replacement}{}", line.get(..start)?, line.get(end..)?),
        written: start..end,
        replaced: start..start + replacement.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_format_characters_are_invisible() {
        for c in [
            '\u{200B}', '\u{200F}', '\u{202A}', '\u{202E}', '\u{2060}', '\u{2064}', '\u{FEFF}',
            '\u{00AD}',
        ] {
            assert!(is_invisible(c), "{:?}", c);
        }
        for c in ['a', ' ', '\u{2010}', '\u{00A0}', '\u{2065}', '\u{202F}'] {
            assert!(!is_invisible(c), "{:?}", c);
        }
        assert!(!has_invisible("“quoted” — text … €"));
        assert!(has_invisible("a\u{00AD}b"));
    }
}
