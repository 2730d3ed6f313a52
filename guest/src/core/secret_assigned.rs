//! A matcher written for `secret_generic.rs`'s `assigned!` shape: a key name that says it
//! holds a secret, an assignment sign and a value (docs/security.md#redaction).
//!
//! A config dump holds such a key every few dozen bytes, and its values mostly stay
//! (`changeme`, `${VAR}`, `3600`): the lazy DFA's unanchored search found each match with a
//! forward scan and a reverse scan back to its start, then the value check refused it, and
//! that was forty times pulldown-cmark's parse of the same text. The shape needs neither
//! scan: a key is a run of `[A-Za-z0-9_.-]`, and what must follow it (a quote, a blank or a
//! sign) is none of those, so a match's key ends where its run ends, and from a given start
//! the rest of the match is forced. What is left to decide is the leftmost start, and that
//! follows from where the key words sit in the run (see [`Assigned::find`]).
//!
//! [`Assigned::new`] reads a pattern and accepts it only when it is exactly the shape this
//! matcher implements; any other pattern stays with the regex engine.

use std::ops::Range;

/// The `assigned!` key's character class, as the pattern spells it around the key words.
const KEY_CLASS: &str = "[A-Za-z0-9_.-]{0,40}";
/// How many key characters the pattern allows on each side of a key word.
const KEY_SIDE: usize = 40;
/// The tail of `assigned!` after the key for a quoted value.
const QUOTED_TAIL: &str =
    r#")["']?[ \t]{0,8}(?:=>|:=|=|:)[ \t]{0,8}["'](?P<secret>[^"'\r\n]{1,200})["']"#;
/// The tail of `assigned!` after the key for a bare value.
const BARE_TAIL: &str =
    r#")["']?[ \t]{0,8}(?:=>|:=|=|:)[ \t]{0,8}(?P<secret>[^\s"'`<>;,\[{(:=][^\s"'`<>;,]{0,199})"#;

/// One `assigned!` pattern, as the matcher runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    /// Every spelling the key's word alternation accepts, lower case, longest first.
    words: Vec<String>,
    /// The value is in quotes (`quoted`), or bare.
    quoted: bool,
    /// The words by their first byte, lower case, longest first: a key character starts few
    /// or none, and comparing every word at every key character cost more than the regex.
    by_first: Vec<Vec<String>>,
    /// Whether a byte starts a word, in either case: checked before `by_first` is looked at.
    firsts: [bool; 256],
}

/// The key characters by byte: a config dump asks this of every key character several
/// times per pass, and the table is one load where the test was a chain of compares.
static KEY: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.');
        b += 1;
    }
    table
};

/// The bytes that end a bare value (`\s`, quotes, backtick, `<>;,`), by byte: looked up
/// for every byte of every value, where a chain of compares cost a tenth of the matcher.
static STOPS: [bool; 256] = {
    let mut table = [false; 256];
    let stops = b"\t\n\x0B\x0C\r \"'`<>;,";
    let mut i = 0;
    while i < stops.len() {
        table[stops[i] as usize] = true;
        i += 1;
    }
    table
};

fn is_key(b: u8) -> bool {
    KEY[usize::from(b)]
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Whether `b` begins a character (is not a UTF-8 continuation byte): the pattern's counted
/// repetitions count characters.
fn starts_char(b: u8) -> bool {
    b & 0xC0 != 0x80
}

/// How many characters `bytes` (whole characters) holds.
fn char_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| starts_char(b)).count()
}

/// Every spelling an alternation of words such as `secret|api[_.-]?key|credentials?` accepts,
/// lower case: each `[…]?` and `c?` taken and left out. `None` for anything else in it
/// (a group, a repetition, an escape): the matcher then does not take the pattern.
pub fn spellings(alternation: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for word in alternation.split('|') {
        let mut forms = vec![String::new()];
        let mut rest = word;
        while let Some(c) = rest.chars().next() {
            let (options, len): (Vec<char>, usize) = match c {
                '[' => {
                    let close = rest.find(']')?;
                    (rest[1..close].chars().collect(), close + 1)
                }
                c if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') => (vec![c], 1),
                _ => return None,
            };
            if options.is_empty() || !options.iter().all(|&o| is_key(o as u8) && o.is_ascii()) {
                return None;
            }
            rest = &rest[len..];
            let optional = rest.starts_with('?');
            if optional {
                rest = &rest[1..];
            }
            let mut next = Vec::new();
            for form in &forms {
                if optional {
                    next.push(form.clone());
                }
                for option in &options {
                    next.push(format!("{form}{}", option.to_ascii_lowercase()));
                }
            }
            forms = next;
        }
        out.extend(forms);
    }
    (!out.is_empty() && out.iter().all(|w| !w.is_empty())).then_some(out)
}

impl Assigned {
    /// The matcher for `pattern` when it is exactly
    /// `(?P<key>[A-Za-z0-9_.-]{0,40}(?i:WORDS)[A-Za-z0-9_.-]{0,40})` followed by `assigned!`'s
    /// quoted or bare tail, `WORDS` an alternation of plain words; `None` otherwise.
    pub fn new(pattern: &str) -> Option<Assigned> {
        let rest = pattern.strip_prefix("(?P<key>")?;
        let rest = rest.strip_prefix(KEY_CLASS)?;
        let rest = rest.strip_prefix("(?i:")?;
        let close = rest.find(')')?;
        let words = spellings(&rest[..close])?;
        let rest = rest[close + 1..].strip_prefix(KEY_CLASS)?;
        let quoted = match rest {
            QUOTED_TAIL => true,
            BARE_TAIL => false,
            _ => return None,
        };
        let mut words = words;
        words.sort_by_key(|w| std::cmp::Reverse(w.len()));
        words.dedup();
        let mut by_first: Vec<Vec<String>> = vec![Vec::new(); 256];
        for word in &words {
            by_first[usize::from(word.as_bytes()[0])].push(word.clone());
        }
        let mut firsts = [false; 256];
        for word in &words {
            let first = word.as_bytes()[0];
            firsts[usize::from(first)] = true;
            firsts[usize::from(first.to_ascii_uppercase())] = true;
        }
        Some(Assigned {
            words,
            quoted,
            by_first,
            firsts,
        })
    }

    /// The length of the longest key word at `k` in `bytes`, compared without ASCII case.
    fn word_at(&self, bytes: &[u8], k: usize) -> Option<usize> {
        let first = bytes.get(k)?.to_ascii_lowercase();
        let rest = bytes.get(k + 1..)?;
        self.by_first
            .get(usize::from(first))?
            .iter()
            .find(|w| {
                let tail = &w.as_bytes()[1..];
                rest.get(..tail.len())
                    .is_some_and(|r| r.eq_ignore_ascii_case(tail))
            })
            .map(|w| w.len())
    }

    /// Where the value after the sign at `sign` (a `=` or `:`) starts, if one of this rule's
    /// kind can start there: its opening quote, or its first character. The first part of
    /// the tail after the key, checked first because it refuses most signs (a quoted rule's
    /// in a dump of bare values, `<your-key>`) in a few steps. Of the signs only the first
    /// that fits can be followed by a value, since a value starts with neither `>` nor `=`.
    fn value_start(&self, hay: &[u8], sign: usize) -> Option<usize> {
        let n = hay.len();
        let mut i = sign;
        i += match (hay.get(i), hay.get(i + 1)) {
            (Some(b'='), Some(b'>')) | (Some(b':'), Some(b'=')) => 2,
            (Some(b'=' | b':'), _) => 1,
            _ => return None,
        };
        let mut after = 0;
        while i < n && is_blank(hay[i]) {
            i += 1;
            after += 1;
            if after > 8 {
                return None;
            }
        }
        let first = *hay.get(i)?;
        let opens = match self.quoted {
            true => matches!(first, b'"' | b'\''),
            false => {
                !STOPS[usize::from(first)] && !matches!(first, b'[' | b'{' | b'(' | b':' | b'=')
            }
        };
        opens.then_some(i)
    }

    /// The end of the match whose value starts at `start` (see [`Assigned::value_start`]):
    /// a quoted value runs to its closing quote, within 200 characters and one line; a bare
    /// one to the first blank, quote, backtick or `<>;,`, or 200 characters.
    fn value_end(&self, hay: &[u8], start: usize) -> Option<usize> {
        let n = hay.len();
        if self.quoted {
            let value = start + 1;
            let mut j = value;
            while j < n && !matches!(hay[j], b'"' | b'\'' | b'\r' | b'\n') {
                j += 1;
            }
            let fits = j - value <= 200 || char_count(&hay[value..j]) <= 200;
            (j > value && fits && j < n && matches!(hay[j], b'"' | b'\'')).then_some(j + 1)
        } else {
            let mut j = start;
            while j < n && !STOPS[usize::from(hay[j])] {
                j += 1;
            }
            // Counted in characters, and only where the bytes could hold more than 200.
            if j - start > 200 {
                let mut chars = 0;
                let mut k = start;
                while k < j {
                    if starts_char(hay[k]) {
                        chars += 1;
                        if chars > 200 {
                            break;
                        }
                    }
                    k += 1;
                }
                j = k;
            }
            Some(j)
        }
    }

    /// The leftmost match in `hay` starting in `from..before`, as the regex's leftmost-first
    /// search of `hay[from..]` gives it.
    ///
    /// A match starts at a key character `s` and its key is the run of key characters from
    /// `s` to the run's end `r` (what follows a key is no key character). It matches when the
    /// tail after `r` does and a key word at some `k` in the run has at most 40 key
    /// characters before it from `s` and at most 40 after it to `r`. So for a run, the
    /// leftmost start is the one the first such word allows: `max(run start, from, k - 40)`.
    ///
    /// Every tail has a sign, so the runs worth a look are found from the signs: memchr's
    /// vectorised search for `=` and `:`, then back over blanks and a quote to the run. A
    /// look at every byte cost as much as the regex's search (about 30 instructions a byte,
    /// for each of the four rules).
    pub fn find(&self, hay: &[u8], from: usize, before: usize) -> Option<Range<usize>> {
        let longest = self.words.first().map_or(0, String::len);
        // How far before its run's end a match can start: 40 key characters, a word, 40.
        let reach = 2 * KEY_SIDE + longest;
        for p in memchr::memchr2_iter(b'=', b':', hay.get(from..)?).map(|p| p + from) {
            // The run's end is at least `p - 9` (a quote and eight blanks), so a match from
            // here or later starts at `before` or after.
            if p.saturating_sub(9 + reach) >= before {
                return None;
            }
            let Some(value) = self.value_start(hay, p) else {
                continue;
            };
            let mut r = p;
            while r > from && p - r <= 8 && is_blank(hay[r - 1]) {
                r -= 1;
            }
            if p - r > 8 {
                continue;
            }
            if r > from && matches!(hay[r - 1], b'"' | b'\'') {
                r -= 1;
            }
            if r <= from || !is_key(hay[r - 1]) {
                continue;
            }
            let floor = from.max(r.saturating_sub(reach));
            let mut run = r;
            while run > floor && is_key(hay[run - 1]) {
                run -= 1;
            }
            // A word that starts earlier leaves more than 40 key characters after it.
            let mut k = run.max(r.saturating_sub(KEY_SIDE + longest));
            while k < r {
                if !self.firsts[usize::from(hay[k])] {
                    k += 1;
                    continue;
                }
                if self
                    .word_at(hay, k)
                    .is_some_and(|len| k + len <= r && r - (k + len) <= KEY_SIDE)
                {
                    let s = run.max(k.saturating_sub(KEY_SIDE));
                    if s >= before {
                        return None;
                    }
                    match self.value_end(hay, value) {
                        Some(end) => return Some(s..end),
                        None => break,
                    }
                }
                k += 1;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::secret_generic::GENERIC;

    #[test]
    fn the_four_generic_assignments_are_taken_and_nothing_else() {
        let taken: Vec<(&str, bool)> = GENERIC
            .iter()
            .filter_map(|f| Assigned::new(f.pattern).map(|a| (f.label, a.quoted)))
            .collect();
        assert_eq!(
            taken,
            [
                ("password", true),
                ("password", false),
                ("secret", true),
                ("secret", false)
            ]
        );
        // A pattern one character off the shape stays with the regex.
        let pattern = GENERIC[0].pattern.replace("{0,8}", "{0,9}");
        assert_eq!(Assigned::new(&pattern), None);
        assert_eq!(
            spellings("api[_.-]?key|credentials?").map(|s| s.len()),
            Some(6)
        );
        assert_eq!(spellings("a(b)"), None);
    }
}
