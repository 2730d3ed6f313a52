//! Where the catalog's keywords occur in a text: the first step of the span stage
//! (`secret_spans.rs`), run on the text and on each of redaction's views of it.
//!
//! Three hundred and fifty keywords, compared without ASCII case, defeat aho-corasick's
//! prefilters, and its DFA then reads about 3 ns a byte whatever the API: that scan was three
//! quarters of the span stage, and redaction runs the stage four or five times per text
//! (docs/benchmarks.md). Every keyword is at least two bytes, and its first three (two for
//! the two short ones) are one of under three hundred grams, which ordinary text meets at a
//! few positions in a hundred. So each position's three bytes, case-folded, are hashed by
//! table lookups into a bit set of those grams; only where the bit is set are the keywords
//! of that gram compared. What is found is exactly what aho-corasick's overlapping search
//! finds: every occurrence of every keyword (the tests hold the two equal).

use std::borrow::Cow;

use crate::core::line_reuse;

/// One occurrence: the keyword's index (in the list given to [`Keywords::new`]) and the
/// byte offset where it starts.
pub type Hit = (usize, usize);

/// Bits in the gram set: 65,536 bits (8 KiB) keep it in the first-level cache, and with a
/// few hundred grams (plus the short keywords' grams, one per third byte) a position
/// passes falsely about once in a hundred.
const SET_BITS: u32 = 16;

/// Words of 64 bits in the gram set.
pub const SET_WORDS: usize = 1 << (SET_BITS - 6);

/// One of the scan's tables: the catalog's are computed at compile time ([`keywords_of!`])
/// and borrowed from the component's data, which every instance maps copy-on-write; a
/// list given at run time ([`Keywords::new`]) owns its own. Building the catalog's in each
/// new instance was most of a hibernated session's wake (docs/scaling.md#idle-sessions).
type Table<T> = Cow<'static, [T]>;

/// The keywords, ready to be searched for.
#[derive(PartialEq, Eq)]
pub struct Keywords {
    /// The keywords in lower case, one after another.
    bytes: Table<u8>,
    /// Where each keyword ends in `bytes`, by index; it starts where the one before ends.
    ends: Table<u32>,
    /// Each keyword's first eight bytes (lower case, little-endian) and the mask of the bytes
    /// it has: a position that passes the gram filter is compared to its keywords a word at a
    /// time. Text like `client`, `Accept` and `api.example.com` passes the filter at about
    /// one position in twelve (the grams of `client_secret`, `access_key`, `api_key` are real
    /// English), and a byte-by-byte comparison there cost as much as the scan itself.
    heads: Table<(u64, u64)>,
    /// Per byte position in a gram, a random word per (case-folded) byte value: a gram's
    /// hash is the XOR of its three words (tabulation hashing: three loads, no multiply).
    tables: [[u16; 256]; 3],
    /// One bit per gram hash ([`SET_WORDS`] words): set where some keyword starts with that
    /// gram.
    set: Table<u64>,
    /// The keywords of each exact gram (three folded bytes packed into a `u32`, then the
    /// keyword's index), grouped by the gram's hash; a two-byte keyword is under each of its
    /// grams.
    grams: Table<(u32, u32)>,
    /// How many bits of `set` come before each of its words: with a popcount inside the
    /// word, a set bit's rank among the set bits, which is its group's index in `starts`.
    ranks: Table<u16>,
    /// Where each set bit's group starts in `grams` (one more entry than set bits): a
    /// position whose bit is set reads its few candidates at once, where a binary search
    /// over `grams` cost more than the scan itself. Indexed by rank, not by hash: a table
    /// per hash was 256 KiB, built again by every session's component (a third of an idle
    /// session's memory).
    starts: Table<u32>,
    /// The longest keyword's length in bytes: how far an occurrence reaches from its start.
    longest: usize,
}

/// ASCII upper case to lower case, every other byte as it is: the keywords' comparison.
const fn fold(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

/// [`fold`] on each of the eight bytes of `x` at once.
fn fold8(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte, with its high bit cleared (so no sum carries into the next byte): the high
    // bit of `b + 0x3F` says `b >= b'A'`, that of `b + 0x25` says `b > b'Z'`. A byte whose
    // own high bit is set is no ASCII letter and stays as it is.
    let low = x & !HIGH;
    let from_a = low + ONES * u64::from(0x80 - b'A');
    let past_z = low + ONES * u64::from(0x80 - b'Z' - 1);
    let upper = from_a & !past_z & !x & HIGH;
    x | (upper >> 2)
}

/// The eight bytes of `text` from `at`, little-endian, zeros past its end.
fn word_at(text: &[u8], at: usize) -> u64 {
    match text.get(at..at + 8) {
        Some(eight) => u64::from_le_bytes(eight.try_into().unwrap_or_default()),
        None => {
            let mut padded = [0u8; 8];
            let rest = text.get(at..).unwrap_or_default();
            padded[..rest.len().min(8)].copy_from_slice(&rest[..rest.len().min(8)]);
            u64::from_le_bytes(padded)
        }
    }
}

// The scan's tables are made by the `const fn`s below, so that the catalog's are computed
// by the compiler ([`keywords_of!`]) and a list given at run time ([`Keywords::new`]) gets
// the same tables from the same code.

/// How large a word list's tables are ([`sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// The words' bytes, all together.
    pub bytes: usize,
    /// (gram, keyword) pairs before repeats are dropped: one per keyword of three bytes or
    /// more, one per folded third byte for a two-byte keyword.
    pub pairs: usize,
}

/// The third bytes a two-byte keyword is filed under: it is met whatever follows it, the
/// text's end included (read as 0), so every byte that is its own fold.
const SHORT_THIRDS: usize = 256 - 26;

/// The sizes of `words`' tables, or why the gram filter cannot take them.
pub const fn sizes(words: &[&str]) -> Result<Sizes, &'static str> {
    let (mut bytes, mut pairs) = (0, 0);
    let mut i = 0;
    while i < words.len() {
        let word = words[i].as_bytes();
        if word.len() < 2 {
            return Err("a keyword is shorter than two bytes: the gram filter cannot find it");
        }
        // `find_all_reusing` relies on no occurrence spanning two lines.
        let mut k = 0;
        while k < word.len() {
            if word[k] == b'\n' {
                return Err("a keyword holds a line break: an occurrence could span two lines");
            }
            k += 1;
        }
        bytes += word.len();
        pairs += if word.len() == 2 { SHORT_THIRDS } else { 1 };
        i += 1;
    }
    // Ranks are u16 and group starts u32: a list this long is no catalog of keywords.
    if pairs > u16::MAX as usize {
        return Err("too many keywords for the gram filter");
    }
    Ok(Sizes { bytes, pairs })
}

/// The hash tables ([`Keywords::tables`]): a fixed seed, so the same tables in every run
/// and a figure is repeatable.
pub const fn hash_tables() -> [[u16; 256]; 3] {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut tables = [[0u16; 256]; 3];
    let mut t = 0;
    while t < 3 {
        let mut by_folded = [0u16; 256];
        let mut i = 0;
        while i < 256 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            by_folded[i] = (state >> 32) as u16;
            i += 1;
        }
        let mut b = 0;
        while b < 256 {
            tables[t][b] = by_folded[fold(b as u8) as usize];
            b += 1;
        }
        t += 1;
    }
    tables
}

/// A gram's hash: the XOR of its three bytes' words.
const fn hash_in(tables: &[[u16; 256]; 3], a: u8, b: u8, c: u8) -> usize {
    (tables[0][a as usize] ^ tables[1][b as usize] ^ tables[2][c as usize]) as usize
}

/// Each (gram, keyword) pair of `words` as one sort key, the gram's hash first, then the
/// gram, then the keyword's index (so a position's hits come out in keyword order), written
/// to `keys` (of [`Sizes::pairs`]) sorted and without repeats; returns how many there are.
pub const fn gram_keys(words: &[&str], tables: &[[u16; 256]; 3], keys: &mut [u64]) -> usize {
    let mut n = 0;
    let mut index = 0;
    while index < words.len() {
        let word = words[index].as_bytes();
        let (a, b) = (fold(word[0]), fold(word[1]));
        let mut third = 0;
        while third < 256 {
            let c = third as u8;
            let wanted = match word.len() {
                2 => fold(c) == c,
                _ => c == fold(word[2]),
            };
            if wanted {
                let gram = u32::from_le_bytes([a, b, c, 0]) as u64;
                keys[n] = ((hash_in(tables, a, b, c) as u64) << 48) | (gram << 24) | index as u64;
                n += 1;
            }
            third += 1;
        }
        index += 1;
    }
    // Insertion sort: a few hundred keys, and a `const fn` has no sort of its own.
    let mut i = 1;
    while i < n {
        let key = keys[i];
        let mut j = i;
        while j > 0 && keys[j - 1] > key {
            keys[j] = keys[j - 1];
            j -= 1;
        }
        keys[j] = key;
        i += 1;
    }
    let mut kept = 0;
    let mut i = 0;
    while i < n {
        if kept == 0 || keys[kept - 1] != keys[i] {
            keys[kept] = keys[i];
            kept += 1;
        }
        i += 1;
    }
    kept
}

/// How many distinct hashes the sorted `keys` hold: the groups of [`Keywords::starts`].
pub const fn groups(keys: &[u64]) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < keys.len() {
        if i == 0 || keys[i] >> 48 != keys[i - 1] >> 48 {
            count += 1;
        }
        i += 1;
    }
    count
}

/// The tables [`fill`] writes, each of the size its field of [`Keywords`] says.
pub struct Parts<'a> {
    /// [`Sizes::bytes`].
    pub bytes: &'a mut [u8],
    /// One per word.
    pub ends: &'a mut [u32],
    /// One per word.
    pub heads: &'a mut [(u64, u64)],
    /// [`SET_WORDS`].
    pub set: &'a mut [u64],
    /// One per key.
    pub grams: &'a mut [(u32, u32)],
    /// [`SET_WORDS`].
    pub ranks: &'a mut [u16],
    /// One per group, and one more.
    pub starts: &'a mut [u32],
}

/// Fills the tables of `words` from their sorted `keys` ([`gram_keys`]); returns the
/// longest keyword's length.
pub const fn fill(words: &[&str], keys: &[u64], parts: Parts<'_>) -> usize {
    let Parts {
        bytes,
        ends,
        heads,
        set,
        grams,
        ranks,
        starts,
    } = parts;
    let mut longest = 2;
    let mut at = 0;
    let mut index = 0;
    while index < words.len() {
        let word = words[index].as_bytes();
        let mut head = 0u64;
        let mut k = 0;
        while k < word.len() {
            let b = fold(word[k]);
            bytes[at + k] = b;
            if k < 8 {
                head |= (b as u64) << (8 * k);
            }
            k += 1;
        }
        let mask = match word.len() {
            8.. => u64::MAX,
            n => (1u64 << (8 * n)) - 1,
        };
        heads[index] = (head, mask);
        at += word.len();
        ends[index] = at as u32;
        if word.len() > longest {
            longest = word.len();
        }
        index += 1;
    }
    // `keys` is sorted by hash, so each group is a run; its start is recorded as the run
    // begins, in the order of the hashes, which is the order of their ranks.
    let mut group = 0;
    let mut k = 0;
    while k < keys.len() {
        let bit = (keys[k] >> 48) as usize;
        set[bit >> 6] |= 1 << (bit & 63);
        grams[k] = (
            ((keys[k] >> 24) & 0xFF_FFFF) as u32,
            (keys[k] & 0xFF_FFFF) as u32,
        );
        if k == 0 || keys[k] >> 48 != keys[k - 1] >> 48 {
            starts[group] = k as u32;
            group += 1;
        }
        k += 1;
    }
    starts[group] = keys.len() as u32;
    let mut before = 0;
    let mut w = 0;
    while w < SET_WORDS {
        ranks[w] = before as u16;
        before += set[w].count_ones();
        w += 1;
    }
    longest
}

/// The [`Keywords`] of a `const` list of words (`&[&str]`), every table computed by the
/// compiler: a `static` of it is data in the component, which no instance builds. A list
/// the gram filter cannot take fails the build with the reason.
#[macro_export]
macro_rules! keywords_of {
    ($words:expr) => {{
        use $crate::core::secret_keywords::{self as kw, Parts, SET_WORDS, Sizes};
        // Named apart from anything `$words` may name: items here shadow the caller's.
        const KEYWORD_LIST: &[&str] = $words;
        const SIZES: Sizes = match kw::sizes(KEYWORD_LIST) {
            Ok(sizes) => sizes,
            Err(why) => panic!("{}", why),
        };
        const TABLES: [[u16; 256]; 3] = kw::hash_tables();
        const SORTED: ([u64; SIZES.pairs], usize) = {
            let mut keys = [0; SIZES.pairs];
            let n = kw::gram_keys(KEYWORD_LIST, &TABLES, &mut keys);
            (keys, n)
        };
        const KEYS: &[u64] = SORTED.0.split_at(SORTED.1).0;
        const GROUPS: usize = kw::groups(KEYS);
        #[allow(clippy::type_complexity)]
        const BUILT: (
            [u8; SIZES.bytes],
            [u32; KEYWORD_LIST.len()],
            [(u64, u64); KEYWORD_LIST.len()],
            [u64; SET_WORDS],
            [(u32, u32); SORTED.1],
            [u16; SET_WORDS],
            [u32; GROUPS + 1],
            usize,
        ) = {
            let mut bytes = [0; SIZES.bytes];
            let mut ends = [0; KEYWORD_LIST.len()];
            let mut heads = [(0, 0); KEYWORD_LIST.len()];
            let mut set = [0; SET_WORDS];
            let mut grams = [(0, 0); SORTED.1];
            let mut ranks = [0; SET_WORDS];
            let mut starts = [0; GROUPS + 1];
            let longest = kw::fill(
                KEYWORD_LIST,
                KEYS,
                Parts {
                    bytes: &mut bytes,
                    ends: &mut ends,
                    heads: &mut heads,
                    set: &mut set,
                    grams: &mut grams,
                    ranks: &mut ranks,
                    starts: &mut starts,
                },
            );
            (bytes, ends, heads, set, grams, ranks, starts, longest)
        };
        kw::Keywords::from_tables(
            &BUILT.0, &BUILT.1, &BUILT.2, TABLES, &BUILT.3, &BUILT.4, &BUILT.5, &BUILT.6, BUILT.7,
        )
    }};
}

impl Keywords {
    /// The scanner for `words` (compared without ASCII case), its tables built now; `None`
    /// when one is shorter than two bytes, which this scan cannot find, or holds a line
    /// break. A `const` list is better made by [`keywords_of!`], at compile time.
    pub fn new(words: &[&str]) -> Option<Keywords> {
        let sizes = sizes(words).ok()?;
        let tables = hash_tables();
        let mut keys = vec![0; sizes.pairs];
        let kept = gram_keys(words, &tables, &mut keys);
        keys.truncate(kept);
        let mut bytes = vec![0; sizes.bytes];
        let mut ends = vec![0; words.len()];
        let mut heads = vec![(0, 0); words.len()];
        let mut set = vec![0; SET_WORDS];
        let mut grams = vec![(0, 0); keys.len()];
        let mut ranks = vec![0; SET_WORDS];
        let mut starts = vec![0; groups(&keys) + 1];
        let longest = fill(
            words,
            &keys,
            Parts {
                bytes: &mut bytes,
                ends: &mut ends,
                heads: &mut heads,
                set: &mut set,
                grams: &mut grams,
                ranks: &mut ranks,
                starts: &mut starts,
            },
        );
        Some(Keywords {
            bytes: Cow::Owned(bytes),
            ends: Cow::Owned(ends),
            heads: Cow::Owned(heads),
            tables,
            set: Cow::Owned(set),
            grams: Cow::Owned(grams),
            ranks: Cow::Owned(ranks),
            starts: Cow::Owned(starts),
            longest,
        })
    }

    /// The scanner over tables [`fill`] computed (by [`keywords_of!`], at compile time).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn from_tables(
        bytes: &'static [u8],
        ends: &'static [u32],
        heads: &'static [(u64, u64)],
        tables: [[u16; 256]; 3],
        set: &'static [u64],
        grams: &'static [(u32, u32)],
        ranks: &'static [u16],
        starts: &'static [u32],
        longest: usize,
    ) -> Keywords {
        Keywords {
            bytes: Cow::Borrowed(bytes),
            ends: Cow::Borrowed(ends),
            heads: Cow::Borrowed(heads),
            tables,
            set: Cow::Borrowed(set),
            grams: Cow::Borrowed(grams),
            ranks: Cow::Borrowed(ranks),
            starts: Cow::Borrowed(starts),
            longest,
        }
    }

    /// Keyword `index`, in lower case.
    fn word(&self, index: usize) -> &[u8] {
        let start = match index {
            0 => 0,
            _ => self.ends.get(index - 1).map_or(0, |&end| end as usize),
        };
        let end = self.ends.get(index).map_or(0, |&end| end as usize);
        self.bytes.get(start..end).unwrap_or_default()
    }

    /// The set bit `h`'s index among the set bits (`h` must be set).
    fn rank(&self, h: usize) -> usize {
        let word = self.set.get(h >> 6).copied().unwrap_or(0);
        let below = word & ((1u64 << (h & 63)) - 1);
        usize::from(self.ranks.get(h >> 6).copied().unwrap_or(0)) + below.count_ones() as usize
    }

    fn hash(&self, a: u8, b: u8, c: u8) -> usize {
        hash_in(&self.tables, a, b, c)
    }

    /// Every occurrence of every keyword in `text`, overlapping ones included, sorted by
    /// start then keyword index.
    pub fn find_all(&self, text: &[u8]) -> Vec<Hit> {
        let mut hits = Vec::new();
        let n = text.len();
        if n < 2 {
            return hits;
        }
        let at = |i: usize| text.get(i).copied().unwrap_or(0);
        let check = |i: usize, h: usize, hits: &mut Vec<Hit>| {
            let folded = fold8(word_at(text, i));
            // The low three bytes are the gram (zeros past the end, as the scan reads them).
            let gram = (folded & 0x00FF_FFFF) as u32;
            let rank = self.rank(h);
            let first = self.starts.get(rank).map_or(0, |&k| k as usize);
            let last = self.starts.get(rank + 1).map_or(0, |&k| k as usize);
            for &(g, index) in self.grams.get(first..last).unwrap_or_default() {
                let index = index as usize;
                let Some(&(head, mask)) = self.heads.get(index) else {
                    continue;
                };
                if g != gram || folded & mask != head {
                    continue;
                }
                let word = self.word(index);
                // A head of eight bytes may be the whole keyword or only its start; a
                // shorter one also needs the text to be that long (past its end are zeros,
                // which no keyword holds).
                let found = match word.get(8..) {
                    Some(tail) => text
                        .get(i + 8..i + word.len())
                        .is_some_and(|s| s.iter().zip(tail).all(|(&t, &w)| fold(t) == w)),
                    None => i + word.len() <= n,
                };
                if found {
                    hits.push((index, i));
                }
            }
        };
        // The hot loop: three table loads and a bit test per position. The last two
        // positions read past the end as 0, which no keyword's gram holds but a two-byte
        // keyword's at the very end, whose grams include the 0 third byte.
        let (t0, t1, t2) = (&self.tables[0], &self.tables[1], &self.tables[2]);
        // A fixed-size array: a hash indexes it without a bounds check in the hot loop.
        let Ok(set): Result<&[u64; SET_WORDS], _> = (*self.set).try_into() else {
            return hits;
        };
        let mut i = 0;
        if n >= 3 {
            let mut h1 = t0[usize::from(text[0])] ^ t1[usize::from(text[1])];
            let mut h2 = t0[usize::from(text[1])];
            while i + 2 < n {
                // h1: the gram at i without its third byte; h2: the gram at i + 1 without
                // its second and third.
                let c = usize::from(text[i + 2]);
                let h = h1 ^ t2[c];
                if set[usize::from(h) >> 6] & (1 << (h & 63)) != 0 {
                    check(i, usize::from(h), &mut hits);
                }
                h1 = h2 ^ t1[c];
                h2 = t0[c];
                i += 1;
            }
        }
        while i + 1 < n {
            let h = self.hash(fold(at(i)), fold(at(i + 1)), fold(at(i + 2)));
            if set[h >> 6] & (1 << (h & 63)) != 0 {
                check(i, h, &mut hits);
            }
            i += 1;
        }
        hits
    }
}

impl Keywords {
    /// [`Keywords::find_all`] of `new`, given `old_hits`, which is `find_all(old)`: the lines
    /// `new` shares with `old` keep their hits, and only the others are scanned (see
    /// [`line_reuse::by_line`]). No keyword holds a line break (checked in
    /// [`Keywords::new`]), so every occurrence lies inside one line and a line's hits depend
    /// on its bytes alone.
    pub fn find_all_reusing(&self, old: &[u8], old_hits: &[Hit], new: &[u8]) -> Vec<Hit> {
        self.find_all_carried(&line_reuse::shared_runs(old, new), old, old_hits, new)
    }

    /// [`Keywords::find_all_reusing`] given the runs of lines `new` shares with `old`
    /// ([`line_reuse::shared_runs`]).
    ///
    /// Between two shared runs lie lines that differ, and those of a view differ from the
    /// text's in a few bytes (a dropped backtick, an emphasis mark): the old and new pieces
    /// share a head and a tail, and only what lies between is scanned. An occurrence is its
    /// own bytes (a keyword, compared without case), so one that lies inside the shared
    /// head, or starts in the shared tail (which runs to a line break or the text's end,
    /// and no keyword holds one), is in both texts alike. Half the lines of agent text
    /// change in the delimiter view (its backticks and fences), and each was scanned in
    /// full: 5.96 M to 5.86 M instructions per redaction of the clean 64 KiB text
    /// (cachegrind, 2026-12-07). Pairing the lines one by one and keeping each line's
    /// head and tail saved nothing more: a scan must start a keyword's length before a
    /// change and read a keyword's length past it, which is most of a short line.
    pub fn find_all_carried(
        &self,
        runs: &[line_reuse::Shared],
        old: &[u8],
        old_hits: &[Hit],
        new: &[u8],
    ) -> Vec<Hit> {
        let mut hits: Vec<Hit> = Vec::with_capacity(old_hits.len() + 16);
        // The next old hit not handed on or passed over yet.
        let mut k = 0;
        let (mut done, mut old_done) = (0, 0);
        let gaps = runs
            .iter()
            .map(|run| (run.from, run.old, Some(run)))
            .chain(std::iter::once((new.len(), old.len(), None)));
        for (to, old_to, run) in gaps {
            if to > done || old_to > old_done {
                self.piece_carried(
                    (old, old_done, old_to.max(old_done)),
                    (new, done, to.max(done)),
                    old_hits,
                    &mut k,
                    &mut hits,
                );
            }
            let Some(run) = run else {
                break;
            };
            // The run's lines are the same bytes: their hits move with them.
            let len = run.to - run.from;
            k = skip_to(old_hits, k, run.old);
            while let Some(&(keyword, at)) = old_hits.get(k).filter(|&&(_, at)| at < run.old + len)
            {
                hits.push((keyword, at - run.old + run.from));
                k += 1;
            }
            done = run.to;
            old_done = run.old + len;
        }
        hits
    }

    /// The hits of `new[from..to]`, a piece between shared runs (or before the first, or
    /// after the last), given the old text's piece `old[old_from..old_to]` in its place and
    /// its hits from `old_hits[*k..]`: those in the pieces' shared head and tail are handed
    /// on, the rest of the new piece is scanned. Each piece ends at a line break or its
    /// text's end.
    fn piece_carried(
        &self,
        (old, old_from, old_to): (&[u8], usize, usize),
        (new, from, to): (&[u8], usize, usize),
        old_hits: &[Hit],
        k: &mut usize,
        hits: &mut Vec<Hit>,
    ) {
        let old_piece = old.get(old_from..old_to).unwrap_or_default();
        let new_piece = new.get(from..to).unwrap_or_default();
        let head = line_reuse::common_prefix(old_piece, new_piece);
        let tail = line_reuse::common_suffix(
            old_piece.get(head..).unwrap_or_default(),
            new_piece.get(head..).unwrap_or_default(),
        );
        // An occurrence starting before `scan_from` ends inside the head (no keyword is
        // longer than `longest`); the others that start before the tail are scanned.
        let scan_from = from + head.saturating_sub(self.longest - 1);
        let old_scan_from = old_from + (scan_from - from);
        let scan_to = to - tail;
        let old_tail = old_to - tail;
        *k = skip_to(old_hits, *k, old_from);
        while let Some(&(keyword, at)) = old_hits.get(*k).filter(|&&(_, at)| at < old_scan_from) {
            hits.push((keyword, at - old_from + from));
            *k += 1;
        }
        if scan_from < scan_to {
            // Read as far as an occurrence starting before `scan_to` can reach; the piece
            // ends at a line break or the text's end, which none crosses.
            let read_to = (scan_to + self.longest - 1).min(to);
            let piece = new.get(scan_from..read_to).unwrap_or_default();
            hits.extend(
                self.find_all(piece)
                    .into_iter()
                    .filter(|&(_, at)| scan_from + at < scan_to)
                    .map(|(keyword, at)| (keyword, at + scan_from)),
            );
        }
        *k = skip_to(old_hits, *k, old_tail);
        while let Some(&(keyword, at)) = old_hits.get(*k).filter(|&&(_, at)| at < old_to) {
            hits.push((keyword, at - old_tail + scan_to));
            *k += 1;
        }
    }
}

/// The index of the first of `hits[k..]` (sorted by start) that starts at or after `at`.
///
/// A binary search, not a walk: a piece read alone (a few lines cut out of the text) is
/// compared with the whole last text, whose hits it passes over; walking them once per
/// piece made a 1 MiB redaction 16.9x a 64 KiB one (cachegrind, 2026-12-07).
fn skip_to(hits: &[Hit], k: usize, at: usize) -> usize {
    let rest = hits.get(k..).unwrap_or_default();
    // Mostly there is nothing to pass over: the next hit is the piece's own.
    match rest.first() {
        Some(&(_, start)) if start < at => k + rest.partition_point(|&(_, start)| start < at),
        _ => k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::secret_families::FAMILIES;
    use crate::core::secret_generic::GENERIC;
    use aho_corasick::{AhoCorasick, MatchKind};
    use proptest::prelude::*;

    fn reference(words: &[&str], text: &str) -> Vec<Hit> {
        let ac = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(words)
            .expect("builds");
        let mut hits: Vec<Hit> = ac
            .find_overlapping_iter(text)
            .map(|m| (m.pattern().as_usize(), m.start()))
            .collect();
        hits.sort_unstable_by_key(|&(index, at)| (at, index));
        hits
    }

    const WORDS: [&str; 9] = [
        "sk", "q~", "token", "tok", "ghp_", "-us", "sk_live", "ab", "bab",
    ];

    proptest! {
        /// Every occurrence aho-corasick's overlapping search finds, and no other, on text
        /// made of the keywords' letters in any case, non-ASCII and the text's edges.
        #[test]
        fn finds_what_aho_corasick_finds(text in "([sSkKqQ~tToOkKeEnNgGhHpP_uU\\-aAbB ]|é|ſ|\u{212A}){0,40}") {
            let scan = Keywords::new(&WORDS).expect("two bytes or more");
            let mut found = scan.find_all(text.as_bytes());
            found.sort_unstable_by_key(|&(index, at)| (at, index));
            prop_assert_eq!(found, reference(&WORDS, &text));
        }
    }

    proptest! {
        /// The hits reused from an earlier text's lines are the hits a full scan of the new
        /// text finds: texts of keywords and line breaks, the new one the old with lines
        /// changed, inserted or removed, and format characters and planted keywords put in.
        #[test]
        fn reused_hits_are_a_full_scans_hits(
            old in "([sStTkKoOeEnN_\\-aAbB ]|token|\n|\u{200B}){0,80}",
            edits in proptest::collection::vec((0usize..90, 0usize..4, "(token|sk|\n|x|\u{AD}|ab){0,3}"), 0..6),
        ) {
            let scan = Keywords::new(&WORDS).expect("two bytes or more");
            let mut new = old.clone();
            for (at, cut, insert) in edits {
                let mut at = at.min(new.len());
                while !new.is_char_boundary(at) {
                    at -= 1;
                }
                let mut end = (at + cut).min(new.len());
                while !new.is_char_boundary(end) {
                    end += 1;
                }
                new.replace_range(at..end, &insert);
            }
            let old_hits = scan.find_all(old.as_bytes());
            prop_assert_eq!(
                scan.find_all_reusing(old.as_bytes(), &old_hits, new.as_bytes()),
                scan.find_all(new.as_bytes())
            );
        }
    }

    proptest! {
        /// As a view makes them: characters dropped inside lines, the line count kept, so
        /// a changed line's head and tail carry their hits; and a piece of the old text
        /// read alone against all of it, as the lost-secret search reads its regions.
        #[test]
        fn hits_carried_past_dropped_characters_and_into_a_piece_are_a_full_scans(
            lines in proptest::collection::vec("([sStTkK_\\-aAbB `*~]|token|sk_live|ghp_|Q~){0,24}", 1..10),
            drops in proptest::collection::vec((0usize..10, 0usize..60), 0..8),
            piece in (0usize..10, 1usize..4),
        ) {
            let scan = Keywords::new(&WORDS).expect("two bytes or more");
            let old = lines.join("\n");
            let mut new_lines = lines.clone();
            for (line, at) in drops {
                if let Some(text) = new_lines.get_mut(line % lines.len())
                    && let Some((i, _)) = text.char_indices().nth(at)
                {
                    text.remove(i);
                }
            }
            let new = new_lines.join("\n");
            let old_hits = scan.find_all(old.as_bytes());
            prop_assert_eq!(
                scan.find_all_reusing(old.as_bytes(), &old_hits, new.as_bytes()),
                scan.find_all(new.as_bytes())
            );
            let (first, count) = piece;
            let part = lines.iter().skip(first % lines.len()).take(count).cloned().collect::<Vec<_>>().join("\n");
            prop_assert_eq!(
                scan.find_all_reusing(old.as_bytes(), &old_hits, part.as_bytes()),
                scan.find_all(part.as_bytes())
            );
        }
    }

    #[test]
    fn reused_hits_move_with_their_lines_and_changed_lines_are_scanned() {
        let scan = Keywords::new(&WORDS).expect("two bytes or more");
        let old = "a token\nxx\nsk here\n";
        let new = "a token\nthe ghp_ line\nsk here\nab";
        let old_hits = scan.find_all(old.as_bytes());
        let reused = scan.find_all_reusing(old.as_bytes(), &old_hits, new.as_bytes());
        // token at 2 (and tok), ghp_ at 12, sk at 22, ab at 30.
        assert_eq!(reused, [(2, 2), (3, 2), (4, 12), (0, 22), (7, 30)]);
        assert_eq!(reused, scan.find_all(new.as_bytes()));
        assert!(Keywords::new(&["to\nken"]).is_none());
    }

    #[test]
    fn eight_bytes_fold_as_each_byte_folds() {
        // Every byte value in every lane, beside neighbours that would carry into it if the
        // lanes leaked (0x7F, 0xFF) or that sit on the letters' edges (`@`, `[`, `Z`).
        for b in 0..=255u8 {
            for lane in 0..8 {
                for fill in [0u8, b'@', b'Z', b'[', 0x7F, 0xFF] {
                    let mut bytes = [fill; 8];
                    bytes[lane] = b;
                    let expected = bytes.map(fold);
                    assert_eq!(
                        fold8(u64::from_le_bytes(bytes)).to_le_bytes(),
                        expected,
                        "{bytes:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_short_keyword_at_the_very_end_is_found() {
        let scan = Keywords::new(&WORDS).expect("two bytes or more");
        assert_eq!(scan.find_all(b"a SK"), [(0, 2)]);
        assert_eq!(scan.find_all(b"sk"), [(0, 0)]);
        assert_eq!(scan.find_all(b"Q~"), [(1, 0)]);
        assert!(scan.find_all(b"s").is_empty());
        assert!(Keywords::new(&["a"]).is_none());
    }

    #[test]
    fn the_catalog_keywords_are_found_as_aho_corasick_finds_them() {
        // The catalog and the generic shapes, as the span stage reads them (named here,
        // not through that stage, which imports this module).
        let families = || FAMILIES.iter().chain(GENERIC.iter());
        let mut words: Vec<&str> = Vec::new();
        for keyword in families().flat_map(|f| f.keywords.iter().copied()) {
            if !words.contains(&keyword) {
                words.push(keyword);
            }
        }
        let scan = Keywords::new(&words).expect("the catalog's keywords are two bytes or more");
        for family in families() {
            for sample in family.positives.iter().chain(family.near_misses) {
                let text = format!("x {sample} Token: {} y", sample.to_uppercase());
                let mut found = scan.find_all(text.as_bytes());
                found.sort_unstable_by_key(|&(index, at)| (at, index));
                assert_eq!(found, reference(&words, &text), "{text}");
            }
        }
    }
}
