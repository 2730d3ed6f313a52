//! Finds carried from one text to the next, line by line (docs/benchmarks.md#redaction).
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

use crate::core::secret_keywords::Hit;
use crate::core::secrets::Candidate;

/// A text and what a scan found in it.
pub struct Remembered<T> {
    text: Vec<u8>,
    finds: Vec<T>,
}

/// One scan's memory: its last text inside [`remembering`], `None` outside it.
pub type Memory<T> = RefCell<Option<Remembered<T>>>;

thread_local! {
    /// Whether a [`remembering`] scope is open.
    static OPEN: Cell<bool> = const { Cell::new(false) };
    /// The keyword scan's (`secret_spans.rs`).
    pub static KEYWORD_HITS: Memory<Hit> = const { RefCell::new(None) };
    /// The shapes' trigger scan's (`secrets.rs`).
    pub static CANDIDATES: Memory<Candidate> = const { RefCell::new(None) };
}

/// Runs `work` with each scan reusing the finds of its last text on the lines shared with
/// the next (see [`by_line`]); what is found is the same. Scoped to one redaction, so no text
/// is kept once it returns: every session's component would otherwise hold its last reply.
pub fn remembering<T>(work: impl FnOnce() -> T) -> T {
    if OPEN.with(Cell::get) {
        return work();
    }
    OPEN.with(|open| open.set(true));
    let out = work();
    OPEN.with(|open| open.set(false));
    KEYWORD_HITS.with(|memory| *memory.borrow_mut() = None);
    CANDIDATES.with(|memory| *memory.borrow_mut() = None);
    out
}

/// What a scan finds in `text`: `find` is given the scan's last text and finds when a
/// [`remembering`] scope holds them, and reads `text` in full without them.
pub fn recall<T: Clone + 'static>(
    memory: &'static LocalKey<Memory<T>>,
    text: &[u8],
    find: impl FnOnce(Option<(&[u8], &[T])>) -> Vec<T>,
) -> Vec<T> {
    if !OPEN.with(Cell::get) {
        return find(None);
    }
    memory.with(|memory| {
        let mut memory = memory.borrow_mut();
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
    mut scan: impl FnMut(usize, usize, &mut Vec<T>),
) -> Vec<T> {
    let mut finds: Vec<T> = Vec::with_capacity(old_finds.len() + 16);
    // One search per text for all its line breaks: agent text's lines are a few dozen bytes,
    // and a search started per line cost more than the scan it saved.
    let mut old_breaks = memchr::memchr_iter(b'\n', old);
    let mut new_breaks = memchr::memchr_iter(b'\n', new);
    // The run of changed lines not read yet: read as one piece when a shared line (or the
    // end) closes it.
    let mut dirty: Option<usize> = None;
    let (mut o, mut n, mut k) = (0, 0, 0);
    while n < new.len() {
        let n_end = new_breaks.next().map_or(new.len(), |i| i + 1);
        let o_end = old_breaks.next().map_or(old.len(), |i| i + 1);
        // Old finds before this old line belong to lines already passed.
        while old_finds.get(k).is_some_and(|f| at(f) < o) {
            k += 1;
        }
        if o < old.len() && old.get(o..o_end) == new.get(n..n_end) {
            if let Some(from) = dirty.take() {
                scan(from, n, &mut finds);
            }
            while let Some(&find) = old_finds.get(k).filter(|f| at(f) < o_end) {
                finds.push(moved(find, o, n));
                k += 1;
            }
        } else if dirty.is_none() {
            dirty = Some(n);
        }
        n = n_end;
        o = o_end;
    }
    if let Some(from) = dirty {
        scan(from, new.len(), &mut finds);
    }
    finds
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

    #[test]
    fn outside_a_scope_nothing_is_kept() {
        let fresh = |last: Option<(&[u8], &[Hit])>| {
            assert!(last.is_none());
            vec![(0, 0)]
        };
        assert_eq!(recall(&KEYWORD_HITS, b"a", fresh), [(0, 0)]);
        remembering(|| {
            recall(&KEYWORD_HITS, b"abc", |_| vec![(1, 1)]);
            let seen = recall(&KEYWORD_HITS, b"abd", |last| {
                assert_eq!(last, Some((&b"abc"[..], &[(1, 1)][..])));
                vec![]
            });
            assert!(seen.is_empty());
        });
        assert!(KEYWORD_HITS.with(|m| m.borrow().is_none()));
    }
}
