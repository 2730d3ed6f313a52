//! Finds carried from one text to the next, line by line
//! (docs/benchmarks.md#redaction-by-instruction-count).
//!
//! Redaction reads one text several times over: the text, the text with its secrets
//! replaced (to confirm nothing is left), and its views through markup (emphasis, dropped
//! delimiters). Each differs from the one before in a few lines, and reading each in full
//! (the keyword scan, the shapes' trigger scan) was most of redaction's cost. Both scans find
//! things that lie inside one line and depend on that line's bytes alone, so a line the new
//! text shares with the old keeps its finds, moved to where it now starts, and only the
//! other lines are read. Inside [`remembering`] (one redaction) each scan keeps its last text
//! and finds for the next; outside it nothing is kept.

use std::cell::{Cell, RefCell};
use std::thread::LocalKey;

/// A text and what a scan found in it.
pub struct Remembered<T> {
    text: Vec<u8>,
    finds: Vec<T>,
}

/// One scan's memory, a `thread_local!` in the scan's own module: its last text inside
/// [`remembering`], `None` outside it.
pub type Memory<T> = RefCell<Option<Remembered<T>>>;

/// A memory [`remembering`] empties when its scope ends, whatever the type of its finds.
trait Forget {
    fn forget(&'static self);
}

impl<T: 'static> Forget for LocalKey<Memory<T>> {
    fn forget(&'static self) {
        self.with(|memory| *memory.borrow_mut() = None);
    }
}

thread_local! {
    /// Whether a [`remembering`] scope is open.
    static OPEN: Cell<bool> = const { Cell::new(false) };
    /// The memories that hold a text in the open scope.
    static HELD: RefCell<Vec<&'static dyn Forget>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work` with each scan reusing the finds of its last text on the lines shared with
/// the next (see [`by_line`]); what is found is the same. Scoped to one redaction, so no text
/// is kept once it returns: every session's component would otherwise hold its last reply.
pub fn remembering<T>(work: impl FnOnce() -> T) -> T {
    if OPEN.with(Cell::get) {
        return work();
    }
    /// Closes the scope when `work` returns or unwinds: a panic caught by a test harness
    /// must not leave every later redaction of the thread holding its text.
    struct Close;
    impl Drop for Close {
        fn drop(&mut self) {
            OPEN.with(|open| open.set(false));
            for memory in HELD.with(|held| std::mem::take(&mut *held.borrow_mut())) {
                memory.forget();
            }
        }
    }
    OPEN.with(|open| open.set(true));
    let _close = Close;
    work()
}

/// What a scan finds in `text`: `find` is given the scan's last text and finds when a
/// [`remembering`] scope holds them, and reads `text` in full without them.
pub fn recall<T: Clone + 'static>(
    key: &'static LocalKey<Memory<T>>,
    text: &[u8],
    find: impl FnOnce(Option<(&[u8], &[T])>) -> Vec<T>,
) -> Vec<T> {
    if !OPEN.with(Cell::get) {
        return find(None);
    }
    key.with(|memory| {
        let mut memory = memory.borrow_mut();
        // The same text again (the confirming pass reads the text the last pass left, and
        // the lost-secret search the text the shapes' pass read): its finds are the last
        // ones. Comparing the texts whole is one vectorised compare; pairing their lines
        // and handing the finds over one by one cost 5% of a secret-laden redaction.
        if let Some(last) = memory.as_ref().filter(|last| last.text == text) {
            return last.finds.clone();
        }
        let finds = find(
            memory
                .as_ref()
                .map(|r| (r.text.as_slice(), r.finds.as_slice())),
        );
        // A region read again around a shape's match is a few lines: the whole text stays
        // the one the next view is compared with.
        let keep = memory
            .as_ref()
            .is_none_or(|last| text.len() * 2 >= last.text.len());
        if keep {
            if memory.is_none() {
                HELD.with(|held| held.borrow_mut().push(key));
            }
            let last = memory.get_or_insert_with(|| Remembered {
                text: Vec::new(),
                finds: Vec::new(),
            });
            last.text.clear();
            last.text.extend_from_slice(text);
            last.finds.clone_from(&finds);
        }
        finds
    })
}

/// The finds of `new`, given `old_finds` (those of `old`, in text order, each inside one
/// line and depending on that line's bytes alone): a line `new` shares with `old` (the same
/// bytes, the same line number) keeps its finds, moved by `moved(find, old line start, new
/// line start)`; each run of other lines, `from..to` in `new` (whole lines, with their line
/// breaks), is read by `scan`, which appends its finds in order.
///
/// Lines are paired by number: a view or a replacement keeps the line count, and where one
/// does not (a key block replaced), the lines after it are read again, never misread.
pub fn by_line<T: Copy>(
    old: &[u8],
    old_finds: &[T],
    new: &[u8],
    at: impl Fn(&T) -> usize,
    moved: impl Fn(T, usize, usize) -> T,
    scan: impl FnMut(usize, usize, &mut Vec<T>),
) -> Vec<T> {
    by_runs(
        &shared_runs(old, new),
        old_finds,
        new.len(),
        at,
        moved,
        scan,
    )
}

/// [`by_line`] given the runs of lines `new` (`new_len` bytes) shares with `old`
/// ([`shared_runs`]): a scan that also needs the runs compares the texts once.
pub fn by_runs<T: Copy>(
    runs: &[Shared],
    old_finds: &[T],
    new_len: usize,
    at: impl Fn(&T) -> usize,
    moved: impl Fn(T, usize, usize) -> T,
    mut scan: impl FnMut(usize, usize, &mut Vec<T>),
) -> Vec<T> {
    let mut finds: Vec<T> = Vec::with_capacity(old_finds.len() + 16);
    // Where the lines not read yet start: the run of changed lines before a shared run is
    // read as one piece.
    let mut done = 0;
    let mut k = 0;
    for &Shared { from, to, old: o } in runs {
        if from > done {
            scan(done, from, &mut finds);
        }
        while old_finds.get(k).is_some_and(|f| at(f) < o) {
            k += 1;
        }
        while let Some(&find) = old_finds.get(k).filter(|f| at(f) < o + (to - from)) {
            finds.push(moved(find, o, from));
            k += 1;
        }
        done = to;
    }
    if done < new_len {
        scan(done, new_len, &mut finds);
    }
    finds
}

/// A run of whole lines that `new` shares with `old`: the same bytes at the same line
/// numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shared {
    /// Where the run starts in `new` (a line start).
    pub from: usize,
    /// Where it ends in `new`: past a line break, or `new`'s end when `old` ends there too.
    pub to: usize,
    /// Where the same run starts in `old`.
    pub old: usize,
}

/// The runs of lines `new` shares with `old`, paired by number as [`by_line`] says, in
/// order, each as long as it goes: between two runs lies at least one line that differs.
pub fn shared_runs(old: &[u8], new: &[u8]) -> Vec<Shared> {
    let mut runs = Vec::new();
    let (mut o, mut n) = (0, 0);
    while n < new.len() {
        // Both at a line's start. The shared lines ahead are found by comparing the texts a
        // word at a time, not line by line: agent text's lines are a few dozen bytes, and a
        // byte search per line cost more than the scan it saved.
        let same = common_prefix(old.get(o..).unwrap_or_default(), &new[n..]);
        let whole = if n + same == new.len() && o + same == old.len() {
            same
        } else {
            memchr::memrchr(b'\n', &new[n..n + same]).map_or(0, |i| i + 1)
        };
        if whole > 0 {
            runs.push(Shared {
                from: n,
                to: n + whole,
                old: o,
            });
            o += whole;
            n += whole;
            continue;
        }
        // This line differs: both texts go on at their next lines.
        let line_end = |text: &[u8], from: usize| {
            memchr::memchr(b'\n', text.get(from..).unwrap_or_default())
                .map_or(text.len(), |i| from + i + 1)
        };
        n = line_end(new, n);
        o = line_end(old, o);
    }
    runs
}

/// How many bytes `a` and `b` share at their end.
pub fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let len = a.len().min(b.len());
    let (a, b) = (&a[a.len() - len..], &b[b.len() - len..]);
    let mut i = 0;
    // Eight bytes at a time from the end: a view's line differs from the text's near a
    // delimiter, and the rest of the line after it is mostly a few dozen bytes.
    let word =
        |t: &[u8], end: usize| u64::from_be_bytes(t[end - 8..end].try_into().unwrap_or_default());
    while i + 8 <= len {
        let differ = word(a, len - i) ^ word(b, len - i);
        if differ != 0 {
            return i + (differ.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[..len - i]
        .iter()
        .rev()
        .zip(b[..len - i].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// How many bytes `a` and `b` share at their start.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let len = a.len().min(b.len());
    let mut i = 0;
    let word = |t: &[u8], i: usize| u64::from_le_bytes(t[i..i + 8].try_into().unwrap_or_default());
    // A line that differs mostly differs near its start (a view's dropped delimiter, a
    // replaced value): the first words are compared one at a time. Past them the texts
    // mostly run on alike for many lines, which whole blocks compared as slices (the
    // vectorised compare where there is one) cross faster than words: a word at a time was
    // most of the comparing (cachegrind, 2026-12-07).
    while i + 8 <= len.min(64) {
        let differ = word(a, i) ^ word(b, i);
        if differ != 0 {
            return i + (differ.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i + 64 <= len && a[i..i + 64] == b[i..i + 64] {
        i += 64;
    }
    while i + 8 <= len {
        let differ = word(a, i) ^ word(b, i);
        if differ != 0 {
            return i + (differ.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..len]
        .iter()
        .zip(&b[i..len])
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finds of a toy scan: the position of every `x`.
    fn xs(text: &[u8], from: usize, to: usize, out: &mut Vec<usize>) {
        out.extend((from..to).filter(|&i| text[i] == b'x'));
    }

    #[test]
    fn shared_lines_keep_their_finds_and_the_others_are_read() {
        let old = b"ax\nbb\nx\n";
        let new = b"ax\nbxb\nx\nx";
        let mut read = Vec::new();
        let finds = by_line(
            old,
            &[1, 6],
            new,
            |&f| f,
            |f, o, n| f - o + n,
            |from, to, out| {
                read.push((from, to));
                xs(new, from, to, out);
            },
        );
        assert_eq!(finds, [1, 4, 7, 9]);
        // The changed second line and the new last line, each read once.
        assert_eq!(read, [(3, 7), (9, 10)]);
    }

    proptest::proptest! {
        /// The finds carried over are a full scan's, on texts of `x`, other bytes and line
        /// breaks, the new one the old with lines changed, inserted or removed.
        #[test]
        fn carried_finds_are_a_full_scans(
            old in "[xa\n]{0,60}",
            edits in proptest::collection::vec((0usize..70, 0usize..5, "[xb\n]{0,3}"), 0..5),
        ) {
            let mut new = old.clone();
            for (at, cut, insert) in edits {
                let at = at.min(new.len());
                let end = (at + cut).min(new.len());
                new.replace_range(at..end, &insert);
            }
            let (old, new) = (old.as_bytes(), new.as_bytes());
            let mut old_finds = Vec::new();
            xs(old, 0, old.len(), &mut old_finds);
            let mut full = Vec::new();
            xs(new, 0, new.len(), &mut full);
            let carried = by_line(old, &old_finds, new, |&f| f, |f, o, n| f - o + n, |from, to, out| {
                // Only whole lines are handed out to be read.
                assert!(from == 0 || new[from - 1] == b'\n', "{from}");
                assert!(to == new.len() || new[to - 1] == b'\n', "{to}");
                xs(new, from, to, out);
            });
            proptest::prop_assert_eq!(carried, full);
        }
    }

    #[test]
    fn blocks_and_words_compare_to_the_first_difference() {
        // Texts of several blocks, differing at every position in turn, or of different
        // lengths: the prefix is what a byte-by-byte compare gives.
        let a: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
        for at in 0..a.len() {
            let mut b = a.clone();
            b[at] ^= 1;
            assert_eq!(common_prefix(&a, &b), at, "differing at {at}");
            assert_eq!(common_prefix(&a[..at], &a), at, "one ending at {at}");
        }
        assert_eq!(common_prefix(&a, &a), a.len());
    }

    #[test]
    fn words_compare_to_the_first_difference() {
        assert_eq!(common_prefix(b"abcdefghijk", b"abcdefghiXk"), 9);
        assert_eq!(common_prefix(b"abc", b"abcdef"), 3);
        assert_eq!(common_prefix(b"", b"a"), 0);
        assert_eq!(common_prefix(b"0123456789abcdef", b"0123456789abcdef"), 16);
        assert_eq!(common_prefix(b"01234567x", b"01234567y"), 8);
    }

    proptest::proptest! {
        /// The word-at-a-time suffix agrees with a byte-by-byte count from the end.
        #[test]
        fn common_suffix_is_a_byte_counts(
            a in "[ab]{0,3}[xy\n]{0,30}",
            b in "[ab]{0,3}[xy\n]{0,30}",
        ) {
            let plain = a.bytes().rev().zip(b.bytes().rev()).take_while(|(x, y)| x == y).count();
            proptest::prop_assert_eq!(common_suffix(a.as_bytes(), b.as_bytes()), plain);
        }
    }

    thread_local! {
        static LAST: Memory<usize> = const { RefCell::new(None) };
    }

    #[test]
    fn outside_a_scope_nothing_is_kept() {
        let fresh = |last: Option<(&[u8], &[usize])>| {
            assert!(last.is_none());
            vec![0]
        };
        assert_eq!(recall(&LAST, b"a", fresh), [0]);
        remembering(|| {
            recall(&LAST, b"abc", |_| vec![1]);
            let seen = recall(&LAST, b"abd", |last| {
                assert_eq!(last, Some((&b"abc"[..], &[1][..])));
                vec![]
            });
            assert!(seen.is_empty());
        });
        assert!(LAST.with(|m| m.borrow().is_none()));
    }

    #[test]
    fn the_same_text_again_gets_its_last_finds_without_a_scan() {
        remembering(|| {
            assert_eq!(recall(&LAST, b"a\nb", |_| vec![7, 8]), [7, 8]);
            let again = recall(&LAST, b"a\nb", |_| {
                panic!("the same text was scanned again")
            });
            assert_eq!(again, [7, 8]);
            // A text that differs, even by a byte at its end, is scanned.
            assert_eq!(recall(&LAST, b"a\nc", |_| vec![9]), [9]);
        });
    }
}
