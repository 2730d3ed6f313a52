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

use crate::core::line_reuse;

/// One occurrence: the keyword's index (in the list given to [`Keywords::new`]) and the
/// byte offset where it starts.
pub type Hit = (usize, usize);

/// Bits in the gram set: 65,536 bits (8 KiB) keep it in the first-level cache, and with a
/// few hundred grams (plus the short keywords' grams, one per third byte) a position
/// passes falsely about once in a hundred.
const SET_BITS: u32 = 16;

/// Words of 64 bits in the gram set.
const SET_WORDS: usize = 1 << (SET_BITS - 6);

/// The keywords, ready to be searched for.
pub struct Keywords {
    /// Each keyword in lower case, by index.
    words: Vec<Vec<u8>>,
    /// Each keyword's first eight bytes (lower case, little-endian) and the mask of the bytes
    /// it has: a position that passes the gram filter is compared to its keywords a word at a
    /// time. Text like `client`, `Accept` and `api.example.com` passes the filter at about
    /// one position in twelve (the grams of `client_secret`, `access_key`, `api_key` are real
    /// English), and a byte-by-byte comparison there cost as much as the scan itself.
    heads: Vec<(u64, u64)>,
    /// Per byte position in a gram, a random word per (case-folded) byte value: a gram's
    /// hash is the XOR of its three words (tabulation hashing: three loads, no multiply).
    tables: [[u16; 256]; 3],
    /// One bit per gram hash: set where some keyword starts with that gram.
    /// A fixed-size array: a hash indexes it without a bounds check in the hot loop.
    set: Box<[u64; SET_WORDS]>,
    /// The keywords of each exact gram (three folded bytes packed into a `u32`), grouped
    /// by the gram's hash; a two-byte keyword is under each of its grams.
    grams: Vec<(u32, usize)>,
    /// How many bits of `set` come before each of its words: with a popcount inside the
    /// word, a set bit's rank among the set bits, which is its group's index in `starts`.
    ranks: Vec<u16>,
    /// Where each set bit's group starts in `grams` (one more entry than set bits): a
    /// position whose bit is set reads its few candidates at once, where a binary search
    /// over `grams` cost more than the scan itself. Indexed by rank, not by hash: a table
    /// per hash was 256 KiB, built again by every session's component (a third of an idle
    /// session's memory).
    starts: Vec<u32>,
    /// The longest keyword's length in bytes: how far an occurrence reaches from its start.
    longest: usize,
}

/// ASCII upper case to lower case, every other byte as it is: the keywords' comparison.
fn fold(b: u8) -> u8 {
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

impl Keywords {
    /// The scanner for `words` (compared without ASCII case); `None` when one is shorter
    /// than two bytes, which this scan cannot find, or holds a line break (the caller then
    /// keeps aho-corasick).
    pub fn new(words: &[&str]) -> Option<Keywords> {
        // A keyword holding a line break could span two lines, which
        // `find_all_reusing` relies on no occurrence doing.
        if words.iter().any(|w| w.len() < 2 || w.contains('\n')) {
            return None;
        }
        let words: Vec<Vec<u8>> = words
            .iter()
            .map(|w| w.bytes().map(fold).collect())
            .collect();
        // Fixed seed: the same tables in every run, so a figure is repeatable.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u16
        };
        let mut tables = [[0u16; 256]; 3];
        for table in &mut tables {
            let mut by_folded = [0u16; 256];
            for slot in &mut by_folded {
                *slot = next();
            }
            for (b, entry) in table.iter_mut().enumerate() {
                *entry = by_folded[usize::from(fold(b as u8))];
            }
        }
        let heads = words
            .iter()
            .map(|word| {
                let head = word_at(word, 0);
                let mask = match word.len() {
                    8.. => u64::MAX,
                    n => (1u64 << (8 * n)) - 1,
                };
                (head & mask, mask)
            })
            .collect();
        let longest = words.iter().map(Vec::len).max().unwrap_or(2);
        let mut scanner = Keywords {
            words,
            heads,
            tables,
            set: Box::new([0; SET_WORDS]),
            grams: Vec::new(),
            ranks: Vec::new(),
            starts: Vec::new(),
            longest,
        };
        let mut grams = Vec::new();
        for (index, word) in scanner.words.iter().enumerate() {
            let thirds: Vec<u8> = match word.get(2) {
                Some(&third) => vec![third],
                // A two-byte keyword is met whatever follows it, the text's end included:
                // every folded third byte is one of its grams, and the end is read as 0.
                None => (0..=255u8).filter(|&b| fold(b) == b).collect(),
            };
            for third in thirds {
                let gram = [word[0], word[1], third];
                grams.push((pack(gram), index));
            }
        }
        let hash_of = |gram: u32| {
            let [a, b, c, _] = gram.to_le_bytes();
            scanner.hash(a, b, c)
        };
        // By hash, then gram, then keyword index: a position's hits come out in keyword
        // order.
        grams.sort_unstable_by_key(|&(gram, index)| (hash_of(gram), gram, index));
        grams.dedup();
        let mut set = Box::new([0u64; SET_WORDS]);
        // `grams` is sorted by hash, so each group is a run; its start is recorded as the
        // run begins, in the order of the hashes, which is the order of their ranks.
        let mut starts = Vec::new();
        let mut previous = None;
        for (k, &(gram, _)) in grams.iter().enumerate() {
            let bit = hash_of(gram);
            set[bit >> 6] |= 1 << (bit & 63);
            if previous != Some(bit) {
                starts.push(u32::try_from(k).ok()?);
                previous = Some(bit);
            }
        }
        starts.push(u32::try_from(grams.len()).ok()?);
        let mut ranks = Vec::with_capacity(set.len());
        let mut before = 0u32;
        for word in set.iter() {
            ranks.push(u16::try_from(before).ok()?);
            before += word.count_ones();
        }
        scanner.set = set;
        scanner.ranks = ranks;
        scanner.grams = grams;
        scanner.starts = starts;
        Some(scanner)
    }

    /// The set bit `h`'s index among the set bits (`h` must be set).
    fn rank(&self, h: usize) -> usize {
        let word = self.set.get(h >> 6).copied().unwrap_or(0);
        let below = word & ((1u64 << (h & 63)) - 1);
        usize::from(self.ranks.get(h >> 6).copied().unwrap_or(0)) + below.count_ones() as usize
    }

    fn hash(&self, a: u8, b: u8, c: u8) -> usize {
        usize::from(
            self.tables[0][usize::from(a)]
                ^ self.tables[1][usize::from(b)]
                ^ self.tables[2][usize::from(c)],
        )
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
                let Some(&(head, mask)) = self.heads.get(index) else {
                    continue;
                };
                if g != gram || folded & mask != head {
                    continue;
                }
                let word = &self.words[index];
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
        let set = &self.set;
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

fn pack([a, b, c]: [u8; 3]) -> u32 {
    u32::from_le_bytes([a, b, c, 0])
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
