//! Markdown emphasis seen by redaction: `_xapp-1-…_` renders as an italic token, but `_` is
//! a word character, so a shape's word boundary fails on both sides and the token would be
//! sent whole (found by fuzzing the pipeline). Redaction therefore looks at a view of the
//! text where each paired emphasis underscore is a placeholder that is no word character,
//! and puts the underscores back afterwards.
//!
//! Pairing is deliberately simple and leans to more redaction, never less: per line, every
//! underscore run that opens (no letter or digit before it, no space after) and is still
//! waiting pairs with the next run that closes (no space before, no letter or digit after), so
//! nested or overlapping emphasis (`__a __b___`, which a renderer may pair either way)
//! marks every opener (found by fuzzing: a JWT between two openers lost its underscores to
//! the renderer and was sent). An opener nothing closes stays in the text, glued to what
//! follows (`_ghp_…`), and is marked too. A lone `token_` is not emphasis and stays a
//! near-miss.

/// What is next to an underscore run, as the flanking rules read it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// An ASCII letter or digit: the run is inside a word on that side.
    Alnum,
    /// Whitespace, or the line's start or end.
    Space,
    /// Anything else: punctuation, symbols, other scripts (read as punctuation, which
    /// lets more runs pair: more redaction, never less).
    Other,
}

fn side(byte: Option<u8>) -> Side {
    match byte {
        None => Side::Space,
        Some(b) if b.is_ascii_alphanumeric() => Side::Alnum,
        Some(b) if b.is_ascii_whitespace() => Side::Space,
        Some(_) => Side::Other,
    }
}

/// The characters that may stand for an emphasis underscore: private-use, so no shape's
/// class holds them as a word character; the first one the text does not hold is used.
const PLACEHOLDERS: [char; 4] = ['\u{E000}', '\u{E001}', '\u{E002}', '\u{E003}'];

/// The text with its paired emphasis underscores replaced by a placeholder, and that
/// placeholder; `None` when there is nothing to replace (or every placeholder is taken,
/// which leaves the text as it is).
pub fn view(text: &str) -> Option<(String, char)> {
    if !text.contains('_') {
        return None;
    }
    let bytes = text.as_bytes();
    // Byte ranges of the paired runs, in text order. Ranges and slice copies, not a flag
    // per byte and a walk over every character: this look runs on every reply that holds
    // an underscore (most agent text), and the per-character walk was a fifth of the
    // pipeline's time on 64 KiB.
    let mut paired: Vec<(usize, usize)> = Vec::new();
    let mut openers: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while let Some(offset) = memchr::memchr2(b'_', b'\n', &bytes[i..]) {
        let start = i + offset;
        if bytes[start] == b'\n' {
            paired.append(&mut openers);
            i = start + 1;
            continue;
        }
        let mut end = start;
        while end < bytes.len() && bytes[end] == b'_' {
            end += 1;
        }
        let before = side(start.checked_sub(1).map(|p| bytes[p]));
        let after = side(bytes.get(end).copied());
        // CommonMark's flanking rules, read wide: a run opens unless a letter is before it
        // or a space after it, and closes unless a space is before it or a letter after
        // it. Punctuation and symbols on both sides (`�__ghp_…��__�`) both open and close
        // in a renderer (found by fuzzing: such a pair rendered a token in bold, unseen).
        let opens = before != Side::Alnum && after != Side::Space;
        let closes = before != Side::Space && after != Side::Alnum;
        if closes && !openers.is_empty() {
            paired.append(&mut openers);
            paired.push((start, end));
        } else if opens {
            openers.push((start, end));
        }
        i = end;
    }
    // An opener nothing closes is shown as it is, glued to what follows: `_ghp_…` reads
    // as a token after an underscore (found by fuzzing), so it is a boundary too.
    paired.append(&mut openers);
    paired.sort_unstable();
    if paired.is_empty() {
        return None;
    }
    let placeholder = PLACEHOLDERS.into_iter().find(|c| !text.contains(*c))?;
    let mut out = String::with_capacity(text.len() + 2 * paired.len());
    let mut copied = 0;
    for (start, end) in paired {
        out.push_str(&text[copied..start]);
        out.extend(std::iter::repeat_n(placeholder, end - start));
        copied = end;
    }
    out.push_str(&text[copied..]);
    Some((out, placeholder))
}

/// `text` with `placeholder` turned back into underscores.
pub fn restore(text: &str, placeholder: char) -> String {
    text.replace(placeholder, "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> Option<String> {
        view(text).map(|(v, p)| v.replace(p, "|"))
    }

    #[test]
    fn pairs_table() {
        let rows: [(&str, Option<&str>); 14] = [
            ("_xapp-1-A05B_ ith", Some("|xapp-1-A05B| ith")),
            ("__bold__ and _it_", Some("||bold|| and |it|")),
            ("npm_abcdef_", None),
            ("snake_case_name", None),
            ("_open only", Some("|open only")),
            ("close_ only", None),
            ("_a\nb_", Some("|a\nb_")),
            ("no underscore", None),
            ("(_x_)", Some("(|x|)")),
            // Every waiting opener pairs with the closer.
            ("__a __b___ c", Some("||a ||b||| c")),
            ("_a _b c", Some("|a |b c")),
            // Symbols on both sides open and close, as in a renderer.
            (
                "\u{FFFD}__ghp_x\u{FFFD}__\u{FFFD}",
                Some("\u{FFFD}||ghp_x\u{FFFD}||\u{FFFD}"),
            ),
            ("a _ b _ c", None),
            ("x = _y_;", Some("x = |y|;")),
        ];
        for (text, expected) in rows {
            assert_eq!(shown(text), expected.map(String::from), "{text:?}");
        }
    }

    #[test]
    fn restore_gives_the_text_back() {
        for text in ["_xapp-1-A05B_ ith", "__bold__ é _it_ \u{E000}"] {
            let (v, p) = view(text).expect("paired");
            assert_ne!(v, text);
            assert_eq!(restore(&v, p), text);
        }
    }
}
