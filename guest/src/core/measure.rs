//! Measuring text as a platform counts it, and how much of a text fits a budget
//! (docs/architecture.md#the-outbound-pipeline, I4, I29).
//!
//! Lengths are code points, UTF-16 code units or bytes; rendered Telegram HTML is counted after
//! entity parsing. [`next_cut`] finds where a piece that fits ends: every cut is a `str` char
//! boundary, so a UTF-8 sequence or a surrogate pair is never split (I4); cuts prefer the
//! original's break points, avoid the inside of a grapheme cluster (emoji ZWJ sequences,
//! flags) whenever the limit allows, and never split a CRLF when the limit is at least 2
//! (I29). The splitter, the renderer and the chunker all measure here, so no stage reaches
//! into a later one to count.

use std::sync::OnceLock;

use memchr::memmem;
use unicode_segmentation::UnicodeSegmentation;

use crate::core::html::{HtmlToken, find_tag_or_entity, html_token};
use crate::model::{LengthUnit, Markup};

/// The original's break strings, most preferred first; a cut goes after the string.
pub(crate) const BREAKS: [&str; 10] = [
    "\r\n\r\n", "\n\n", "\r\n", "\n", ". ", "! ", "? ", "; ", ", ", " ",
];

/// Length of `text` in `unit`: code points, UTF-16 code units or UTF-8 bytes.
pub fn measure(text: &str, unit: LengthUnit) -> usize {
    // ASCII is one unit a byte in every unit; the check stops at the first other byte, and
    // a short text (a heading, a list line) is counted without setting up a count loop.
    if text.is_ascii() {
        return text.len();
    }
    match unit {
        LengthUnit::Chars => text.chars().count(),
        LengthUnit::Utf16 => utf16_len(text),
        LengthUnit::Bytes => text.len(),
    }
}

/// UTF-16 length of valid UTF-8: code points plus one for each 4-byte sequence (lead bytes
/// 0xF0..=0xF4), which needs a surrogate pair.
fn utf16_len(text: &str) -> usize {
    text.chars().count() + count_bytes(text.as_bytes(), |b| b >= 0xF0)
}

/// How many bytes satisfy `pred`. Counted in blocks of 255 with a byte-wide counter so the
/// loop vectorises 16 bytes at a time; a `usize` counter per byte costs ten times more.
fn count_bytes(bytes: &[u8], pred: impl Fn(u8) -> bool) -> usize {
    bytes
        .chunks(255)
        .map(|block| {
            let n = block
                .iter()
                .fold(0u8, |n, &b| n.wrapping_add(u8::from(pred(b))));
            usize::from(n)
        })
        .sum()
}

/// Length of a rendered message as the platform counts it: Telegram counts HTML after entity
/// parsing (tags are free, an entity is the one character it stands for); others count raw.
pub fn measure_rendered(text: &str, unit: LengthUnit, markup: Markup) -> usize {
    if markup != Markup::Html {
        return measure(text, unit);
    }
    // Tags and entities are ASCII: measure the raw text, then take back what the markup
    // adds. Only `<` and `&` start a token, so the text between them is skipped at memchr
    // speed instead of being tokenised character by character.
    let bytes = text.as_bytes();
    let mut markup_len = 0;
    let mut at = 0;
    while let Some(i) = bytes.get(at..).and_then(find_tag_or_entity) {
        let tail = text.get(at + i..).unwrap_or_default();
        at += i + 1;
        match html_token(tail) {
            Some(HtmlToken::Tag { text: tag, .. }) => {
                markup_len += tag.len();
                at += tag.len() - 1;
            }
            Some(HtmlToken::Entity(e)) => {
                markup_len += e.len() - 1;
                at += e.len() - 1;
            }
            _ => {}
        }
    }
    measure(text, unit).saturating_sub(markup_len)
}

pub(crate) fn char_len(c: char, unit: LengthUnit) -> usize {
    match unit {
        LengthUnit::Chars => 1,
        LengthUnit::Utf16 => c.len_utf16(),
        LengthUnit::Bytes => c.len_utf8(),
    }
}

/// How much each character of a text costs against a limit.
///
/// For Slack the source is measured with `&`, `<` and `>` at the size of their escapes, so a
/// piece cut from the markdown still fits once rendered (escaping only grows the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meter {
    unit: LengthUnit,
    slack_escapes: bool,
}

impl Meter {
    /// Plain measurement in `unit`.
    pub fn new(unit: LengthUnit) -> Self {
        Meter {
            unit,
            slack_escapes: false,
        }
    }

    /// Measurement of markdown source that will be rendered as `markup`.
    pub fn for_source(unit: LengthUnit, markup: Markup) -> Self {
        Meter {
            unit,
            slack_escapes: markup == Markup::Mrkdwn,
        }
    }

    /// The unit the meter counts in.
    pub fn unit(self) -> LengthUnit {
        self.unit
    }

    /// Cost of one character.
    pub fn char_cost(self, c: char) -> usize {
        let extra = match (self.slack_escapes, c) {
            (true, '&') => 4,
            (true, '<' | '>') => 3,
            _ => 0,
        };
        char_len(c, self.unit) + extra
    }

    /// Cost of a text; additive over concatenation.
    pub fn cost(self, text: &str) -> usize {
        let base = measure(text, self.unit);
        if !self.slack_escapes {
            return base;
        }
        let bytes = text.as_bytes();
        base + 4 * count_bytes(bytes, |b| b == b'&')
            + 3 * count_bytes(bytes, |b| b == b'<' || b == b'>')
    }
}

/// End of the piece of `text` that starts at byte `start` (a char boundary below `text.len()`)
/// and costs at most `budget` (at least one character). Always greater than `start`.
pub fn next_cut(text: &str, start: usize, budget: usize, meter: Meter) -> usize {
    let end = start + fitting_len(text.get(start..).unwrap_or_default(), budget.max(1), meter);
    if end >= text.len() {
        return text.len();
    }
    let min_cut = floor_char(text, start + ((end - start) / 2).max(1));
    let bytes = text.as_bytes();
    // Most replies have no CR at all: one fast look spares two full searches per cut.
    let has_cr = bytes
        .get(start..end)
        .is_some_and(|w| memchr::memchr(b'\r', w).is_some());
    let cut = break_finders()
        .iter()
        .filter(|(brk, _)| has_cr || !brk.starts_with('\r'))
        .find_map(|(brk, finder)| {
            let lo = floor_char(text, min_cut.saturating_sub(brk.len()).max(start));
            let found = finder.rfind(bytes.get(lo..end)?)? + lo + brk.len();
            (found >= min_cut).then_some(found)
        })
        .unwrap_or(end);
    let cut = grapheme_floor(text, start, cut);
    if cut > start + 1 && bytes.get(cut - 1) == Some(&b'\r') && bytes.get(cut) == Some(&b'\n') {
        cut - 1
    } else {
        cut
    }
}

/// Byte length of the longest prefix of `rest` that costs at most `budget` (at least one
/// character, so a character larger than the whole budget goes alone and a cut advances).
fn fitting_len(rest: &str, budget: usize, meter: Meter) -> usize {
    // ASCII costs one unit a byte in every unit, so when the first `budget` bytes are ASCII
    // (and, for Slack, hold nothing that escapes) the answer needs no per-character loop.
    // Long replies are mostly ASCII: this is what keeps a 1 MiB line cheap to cut.
    let window = rest
        .as_bytes()
        .get(..budget.min(rest.len()))
        .unwrap_or_default();
    if window.is_ascii()
        && !(meter.slack_escapes && window.iter().any(|b| matches!(b, b'&' | b'<' | b'>')))
    {
        return window.len();
    }
    let mut used = 0;
    for (i, c) in rest.char_indices() {
        used += meter.char_cost(c);
        if used > budget {
            return if i == 0 { c.len_utf8() } else { i };
        }
    }
    rest.len()
}

/// The break strings as reverse searchers, built once: `str::rfind` sets up a general
/// two-way search on every call, which cost more than the rest of a cut on long replies.
fn break_finders() -> &'static [(&'static str, memmem::FinderRev<'static>); BREAKS.len()] {
    static FINDERS: OnceLock<[(&str, memmem::FinderRev<'static>); BREAKS.len()]> = OnceLock::new();
    FINDERS.get_or_init(|| BREAKS.map(|b| (b, memmem::FinderRev::new(b.as_bytes()))))
}

fn floor_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn is_regional_indicator(c: char) -> bool {
    ('\u{1F1E6}'..='\u{1F1FF}').contains(&c)
}

/// The last grapheme boundary at or before `pos` and after `lo`, or `pos` when the cluster
/// around `pos` starts at or before `lo` (one cluster larger than the budget).
///
/// Only a short window around `pos` is segmented, so a cut costs O(window), not O(text):
/// segmenting from the chunk start would make 10k flags quadratic.
pub(crate) fn grapheme_floor(text: &str, lo: usize, pos: usize) -> usize {
    let bytes = text.as_bytes();
    let (before, after) = (bytes.get(pos.wrapping_sub(1)), bytes.get(pos));
    if let (Some(b), Some(a)) = (before, after)
        && b.is_ascii()
        && a.is_ascii()
        && !(*b == b'\r' && *a == b'\n')
    {
        return pos;
    }
    let mut ws = floor_char(text, pos.saturating_sub(128).max(lo));
    // Flags pair regional indicators from the start of their run: fix the window's parity.
    let mut preceding = 0;
    let mut k = ws;
    while k >= lo + 4
        && text
            .get(k - 4..k)
            .and_then(|s| s.chars().next())
            .is_some_and(is_regional_indicator)
    {
        preceding += 1;
        k -= 4;
    }
    let window_starts_in_run = text
        .get(ws..)
        .and_then(|s| s.chars().next())
        .is_some_and(is_regional_indicator);
    if window_starts_in_run && preceding % 2 == 1 {
        ws -= 4;
    }
    let we = ceil_char(text, pos + 64);
    let window = text.get(ws..we).unwrap_or_default();
    let mut best = None;
    for (i, _) in window.grapheme_indices(true) {
        let b = ws + i;
        if b > pos {
            break;
        }
        if b > lo {
            best = Some(b);
        }
    }
    best.unwrap_or(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_counts_each_unit() {
        assert_eq!(measure("a😀é", LengthUnit::Chars), 3);
        assert_eq!(measure("a😀é", LengthUnit::Utf16), 4);
        assert_eq!(measure("a😀é", LengthUnit::Bytes), 7);
    }
}
