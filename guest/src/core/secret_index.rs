//! The catalog indexed by the compiler: its keywords (each once), the rules each keyword
//! stands for, and the keyword scan's tables (docs/scaling.md#idle-sessions).
//!
//! A session's component built these when it first redacted or checked a config value, and
//! a hibernated session's wake starts a fresh instance: each wake built them again, most of
//! its cost. As `static` data they are in the component's data segment, which every
//! instance maps copy-on-write and none builds. Everything here is a function of the
//! catalog's source (`secret_families.rs`, `secret_generic.rs`), computed by `const fn`s;
//! the tests hold it equal to what building it at run time gives.

use crate::core::secret_families::{FAMILIES, Family};
use crate::core::secret_generic::GENERIC;
use crate::core::secret_keywords::Keywords;

/// Every family the engine knows: the provider catalog, then the generic shapes.
pub const FAMILY_COUNT: usize = FAMILIES.len() + GENERIC.len();

/// Family `index` in the engine's order ([`FAMILY_COUNT`] of them).
pub const fn family(index: usize) -> &'static Family {
    if index < FAMILIES.len() {
        &FAMILIES[index]
    } else {
        &GENERIC[index - FAMILIES.len()]
    }
}

/// Whether `a` and `b` are the same string (`==` is no `const fn`).
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The catalog's keyword mentions: a keyword of several families is one per family.
const MENTIONS: usize = {
    let mut mentions = 0;
    let mut f = 0;
    while f < FAMILY_COUNT {
        mentions += family(f).keywords.len();
        f += 1;
    }
    mentions
};

/// The catalog's distinct keywords in the order of their first mention (the first of the
/// array's places), each mention's keyword (by that index), and how many distinct keywords
/// there are: one pass, each mention looked up among the keywords found before it.
const INDEX: ([&str; MENTIONS], [u16; MENTIONS], usize) = {
    let mut words = [""; MENTIONS];
    let mut word_of = [0u16; MENTIONS];
    let (mut count, mut mention) = (0, 0);
    let mut f = 0;
    while f < FAMILY_COUNT {
        let keywords = family(f).keywords;
        let mut k = 0;
        while k < keywords.len() {
            let mut w = 0;
            while w < count && !same(words[w], keywords[k]) {
                w += 1;
            }
            if w == count {
                words[count] = keywords[k];
                count += 1;
            }
            word_of[mention] = w as u16;
            mention += 1;
            k += 1;
        }
        f += 1;
    }
    (words, word_of, count)
};

/// The catalog's distinct keywords.
pub const WORD_COUNT: usize = INDEX.2;

/// The catalog's keywords, each once, in the order of their first mention; a keyword's
/// index here is its index in the scan's hits.
pub static WORDS: [&str; WORD_COUNT] = {
    let mut words = [""; WORD_COUNT];
    let mut w = 0;
    while w < WORD_COUNT {
        words[w] = INDEX.0[w];
        w += 1;
    }
    words
};

/// For each keyword, the families it stands for, in the engine's order (a family that
/// names a keyword twice is there twice): the first array from the end of the word
/// before (in the second) to the word's own end.
static OWNERS_BY_WORD: ([u16; MENTIONS], [u16; WORD_COUNT]) = {
    let word_of = &INDEX.1;
    // How many mentions each keyword has, then where its run ends.
    let mut ends = [0u16; WORD_COUNT];
    let mut m = 0;
    while m < MENTIONS {
        ends[word_of[m] as usize] += 1;
        m += 1;
    }
    let mut w = 1;
    while w < WORD_COUNT {
        ends[w] += ends[w - 1];
        w += 1;
    }
    // Each run filled from its start in mention order, which is the families' order.
    let mut next = [0u16; WORD_COUNT];
    let mut w = 1;
    while w < WORD_COUNT {
        next[w] = ends[w - 1];
        w += 1;
    }
    let mut owners = [0u16; MENTIONS];
    let (mut m, mut f) = (0, 0);
    while f < FAMILY_COUNT {
        let mut k = 0;
        while k < family(f).keywords.len() {
            let w = word_of[m] as usize;
            owners[next[w] as usize] = f as u16;
            next[w] += 1;
            m += 1;
            k += 1;
        }
        f += 1;
    }
    (owners, ends)
};

// Family indices, and positions in the list of mentions, are kept in a u16.
const _: () = assert!(FAMILY_COUNT <= u16::MAX as usize);
const _: () = assert!(MENTIONS <= u16::MAX as usize);

/// The families keyword `word` stands for ([`WORDS`]' index), in the engine's order.
pub fn owners(word: usize) -> &'static [u16] {
    let (owners, ends) = &OWNERS_BY_WORD;
    let start = match word {
        0 => 0,
        _ => ends.get(word - 1).map_or(0, |&end| usize::from(end)),
    };
    let end = ends.get(word).map_or(0, |&end| usize::from(end));
    owners.get(start..end).unwrap_or_default()
}

/// What redaction writes in place of a family's secret, before its label.
const MARKER_OPEN: &str = "[redacted:";

/// Whether family `index` is the first with its label (the generic shapes' quoted and bare
/// forms share one).
const fn first_label(index: usize) -> bool {
    let mut before = 0;
    while before < index {
        if same(family(before).label, family(index).label) {
            return false;
        }
        before += 1;
    }
    true
}

/// How many distinct labels there are, and the bytes of all their markers.
const fn marker_sizes() -> (usize, usize) {
    let (mut labels, mut bytes) = (0, 0);
    let mut f = 0;
    while f < FAMILY_COUNT {
        if first_label(f) {
            labels += 1;
            bytes += MARKER_OPEN.len() + family(f).label.len() + 1;
        }
        f += 1;
    }
    (labels, bytes)
}

/// Every family's marker, one after another (see [`SPAN_MARKERS`]).
static MARKER_BYTES: [u8; marker_sizes().1] = {
    let mut bytes = [0u8; marker_sizes().1];
    let mut n = 0;
    let mut f = 0;
    while f < FAMILY_COUNT {
        if first_label(f) {
            let parts = [MARKER_OPEN.as_bytes(), family(f).label.as_bytes(), b"]"];
            let mut p = 0;
            while p < parts.len() {
                let mut i = 0;
                while i < parts[p].len() {
                    bytes[n] = parts[p][i];
                    n += 1;
                    i += 1;
                }
                p += 1;
            }
        }
        f += 1;
    }
    bytes
};

/// The marker of each label (`[redacted:stripe]`), once, in the engine's order of the
/// families: the first redaction of each new instance made all of them (and compared each
/// with those before it) to tell a marker from text.
pub static SPAN_MARKERS: [&str; marker_sizes().0] = {
    let mut markers = [""; marker_sizes().0];
    let mut rest: &[u8] = &MARKER_BYTES;
    let mut m = 0;
    let mut f = 0;
    while f < FAMILY_COUNT {
        if first_label(f) {
            let (marker, after) = rest.split_at(MARKER_OPEN.len() + family(f).label.len() + 1);
            markers[m] = match std::str::from_utf8(marker) {
                Ok(marker) => marker,
                Err(_) => panic!("a label is not UTF-8"),
            };
            rest = after;
            m += 1;
        }
        f += 1;
    }
    markers
};

/// The keyword scan of [`WORDS`]. A catalog keyword the gram filter cannot take (shorter
/// than two bytes, or holding a line break) fails the build, saying which rule it breaks.
pub static KEYWORDS: Keywords = crate::keywords_of!(&WORDS);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The words and owners as the engine built them at run time before they were
    /// computed at compile time.
    fn built_at_run_time() -> (Vec<&'static str>, Vec<Vec<usize>>) {
        let mut words: Vec<&'static str> = Vec::new();
        let mut owners: Vec<Vec<usize>> = Vec::new();
        let mut known: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (index, family) in FAMILIES.iter().chain(GENERIC.iter()).enumerate() {
            for keyword in family.keywords {
                match known.get(keyword) {
                    Some(&at) => owners[at].push(index),
                    None => {
                        known.insert(keyword, words.len());
                        words.push(keyword);
                        owners.push(vec![index]);
                    }
                }
            }
        }
        (words, owners)
    }

    #[test]
    fn the_compiled_index_is_the_one_built_at_run_time() {
        let (words, owners) = built_at_run_time();
        assert_eq!(WORDS.as_slice(), words.as_slice());
        for (w, expected) in owners.iter().enumerate() {
            let compiled: Vec<usize> = super::owners(w).iter().map(|&f| usize::from(f)).collect();
            assert_eq!(&compiled, expected, "the families of {:?}", WORDS[w]);
        }
        assert!(super::owners(WORD_COUNT).is_empty());
        for (index, f) in FAMILIES.iter().chain(GENERIC.iter()).enumerate() {
            assert!(std::ptr::eq(family(index), f), "family {index}");
        }
    }

    #[test]
    fn the_compiled_markers_are_each_label_once() {
        let mut expected: Vec<String> = Vec::new();
        for family in FAMILIES.iter().chain(GENERIC.iter()) {
            let marker = format!("[redacted:{}]", family.label);
            if !expected.contains(&marker) {
                expected.push(marker);
            }
        }
        assert_eq!(SPAN_MARKERS.as_slice(), expected.as_slice());
    }

    #[test]
    fn the_compiled_keyword_scan_is_the_one_built_at_run_time() {
        let built = Keywords::new(&WORDS).expect("the catalog's keywords are two bytes or more");
        // Compared table by table (a derived `==`): a scan over other tables could still
        // find the same hits in the samples the other tests read.
        assert!(
            KEYWORDS == built,
            "the keyword tables computed at compile time differ from those built now"
        );
    }
}
