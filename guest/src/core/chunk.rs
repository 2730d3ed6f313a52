//! Limit-safe chunking (reference-behaviour §3.6, I4, I29).
//!
//! Every cut is a `str` char boundary, so a UTF-8 sequence or a surrogate pair is never split
//! (I4). Cuts prefer the original's break points, avoid the inside of a grapheme cluster
//! (emoji ZWJ sequences, flags) whenever the limit allows, and never split a CRLF when the
//! limit is at least 2 (I29). Rendered Telegram HTML and Slack mrkdwn are cut outside tags,
//! entities and links, with open tags (or a code fence) closed and re-opened across the cut.

use std::ops::Range;
use std::sync::OnceLock;

use memchr::memmem;
use unicode_segmentation::UnicodeSegmentation;

use crate::core::scan::find_byte_of;
use crate::model::{LengthUnit, Markup};

/// The original's break strings, most preferred first; a cut goes after the string.
const BREAKS: [&str; 10] = [
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

/// Position of the first `<` or `&`: only they start a tag or an entity.
fn find_tag_or_entity(bytes: &[u8]) -> Option<usize> {
    find_byte_of(bytes, [b'<', b'&'])
}

fn char_len(c: char, unit: LengthUnit) -> usize {
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

/// Splits `text` into pieces of at most `budget` each; `"" -> []`; the pieces join to `text`.
/// A `budget` of 0 is treated as 1. A single character larger than the budget goes alone.
pub fn chunk_text(text: &str, budget: usize, meter: Meter) -> Vec<&str> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < text.len() {
        let cut = next_cut(text, pos, budget, meter);
        out.push(text.get(pos..cut).unwrap_or_default());
        pos = cut;
    }
    out
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
fn grapheme_floor(text: &str, lo: usize, pos: usize) -> usize {
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

/// Cuts a rendered message into messages within `limit` as the platform counts them;
/// `visible` is the message's length as [`measure_rendered`] counts it (the renderer counts
/// it while writing). A message that fits is passed on as it is, not copied.
/// Pieces that are blank once rendered are dropped: platforms reject empty messages.
pub fn chunk_rendered(
    text: String,
    visible: usize,
    limit: usize,
    unit: LengthUnit,
    markup: Markup,
) -> Vec<String> {
    let pieces = if visible <= limit {
        vec![text]
    } else {
        match markup {
            Markup::Html => chunk_html(&text, limit, unit),
            Markup::Mrkdwn => chunk_mrkdwn(&text, limit, unit),
            Markup::Plain | Markup::Markdown => chunk_text(&text, limit, Meter::new(unit))
                .into_iter()
                .map(str::to_owned)
                .collect(),
        }
    };
    pieces
        .into_iter()
        .filter(|p| !visible_is_blank(p, markup))
        .collect()
}

fn visible_is_blank(text: &str, markup: Markup) -> bool {
    match markup {
        Markup::Html => html_tokens(text).all(|t| match t {
            HtmlToken::Tag { .. } => true,
            HtmlToken::Entity(_) => false,
            HtmlToken::Char(c) => c.is_whitespace(),
        }),
        _ => text.trim().is_empty(),
    }
}

/// One lexical piece of rendered HTML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HtmlToken<'a> {
    /// `<name …>` or `</name>`, the whole tag text.
    Tag {
        text: &'a str,
        name: &'a str,
        closing: bool,
    },
    /// `&…;`.
    Entity(&'a str),
    /// Any other character.
    Char(char),
}

impl HtmlToken<'_> {
    fn len(&self) -> usize {
        match self {
            HtmlToken::Tag { text, .. } | HtmlToken::Entity(text) => text.len(),
            HtmlToken::Char(c) => c.len_utf8(),
        }
    }
}

/// Tokenizes HTML as the renderer writes it; a stray `<` or `&` is read as a character.
fn html_tokens(text: &str) -> impl Iterator<Item = HtmlToken<'_>> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = text.get(pos..)?;
        let token = html_token(rest)?;
        pos += token.len();
        Some(token)
    })
}

fn html_token(rest: &str) -> Option<HtmlToken<'_>> {
    let c = rest.chars().next()?;
    let token = match c {
        '<' => html_tag(rest),
        '&' => rest
            .bytes()
            .take(12)
            .position(|b| b == b';')
            .filter(|end| *end > 1)
            .and_then(|end| rest.get(..=end))
            .map(HtmlToken::Entity),
        _ => None,
    };
    Some(token.unwrap_or(HtmlToken::Char(c)))
}

/// `<`, optional `/`s, a name of ASCII letters, digits and `-` that ends at whitespace or at
/// the first `>`, then anything up to that `>`. Read byte by byte, and a bare `<name>` needs
/// no search for its `>`: this runs for every tag the renderer wrote, so it must cost a few
/// byte compares, not a string search and a Unicode split.
fn html_tag(rest: &str) -> Option<HtmlToken<'_>> {
    let bytes = rest.as_bytes();
    let slashes = bytes.iter().skip(1).take_while(|b| **b == b'/').count();
    let name_start = 1 + slashes;
    let name_len = bytes
        .iter()
        .skip(name_start)
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
        .count();
    let name_end = name_start + name_len;
    let end = match bytes.get(name_end) {
        _ if name_len == 0 => return None,
        Some(b'>') => name_end,
        _ => {
            let after = rest.get(name_end..)?;
            if !after.chars().next().is_some_and(char::is_whitespace) {
                return None;
            }
            name_end + after.find('>')?
        }
    };
    Some(HtmlToken::Tag {
        text: rest.get(..=end)?,
        name: rest.get(name_start..name_end)?,
        closing: slashes > 0,
    })
}

/// Splits rendered Telegram HTML: cuts only between tokens, closes the open tags at every cut
/// and re-opens them in the next message, so each message parses on its own.
fn chunk_html(text: &str, limit: usize, unit: LengthUnit) -> Vec<String> {
    let mut out = Vec::new();
    let mut open: Vec<(&str, &str)> = Vec::new();
    let mut pos = 0;
    while pos < text.len() {
        let cut = html_cut(text, pos, limit, unit);
        let piece = text.get(pos..cut).unwrap_or_default();
        let reopened: usize = open.iter().map(|(tag, _)| tag.len()).sum();
        let mut msg = String::with_capacity(reopened + piece.len() + reopened + 8);
        msg.extend(open.iter().map(|(tag, _)| *tag));
        msg.push_str(piece);
        for (tag, name, closing) in html_tags(piece) {
            if closing {
                if open.last().is_some_and(|(_, n)| *n == name) {
                    open.pop();
                }
            } else {
                open.push((tag, name));
            }
        }
        for (_, name) in open.iter().rev() {
            msg.push_str("</");
            msg.push_str(name);
            msg.push('>');
        }
        out.push(msg);
        pos = cut;
    }
    out
}

/// The tags of rendered HTML in order, as `(text, name, closing)`, read exactly as
/// [`html_tokens`] reads them but jumping over plain text at word speed: only `<` and `&`
/// can start a token.
fn html_tags(text: &str) -> impl Iterator<Item = (&str, &str, bool)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        loop {
            let i = at + find_tag_or_entity(text.as_bytes().get(at..)?)?;
            let token = html_token(text.get(i..)?)?;
            at = i + token.len();
            if let HtmlToken::Tag {
                text: tag,
                name,
                closing,
            } = token
            {
                return Some((tag, name, closing));
            }
        }
    })
}

/// Each break string as `(bytes, mask)` over the last four visible bytes (newest in the low
/// byte), built at compile time: the check runs at every space and line break of a message.
const BREAK_TAILS: [(u32, u32); BREAKS.len()] = {
    let mut tails = [(0u32, 0u32); BREAKS.len()];
    let mut i = 0;
    while i < BREAKS.len() {
        let bytes = BREAKS[i].as_bytes();
        let mut want = 0u32;
        let mut j = 0;
        while j < bytes.len() {
            want = want << 8 | bytes[j] as u32;
            j += 1;
        }
        let mask = if bytes.len() >= 4 {
            u32::MAX
        } else {
            (1u32 << (8 * bytes.len())) - 1
        };
        tails[i] = (want, mask);
        i += 1;
    }
    tails
};

/// The break string (as its rank in [`BREAKS`]) that the last visible characters end with;
/// `tail` holds them as bytes, the newest in the low byte.
fn break_rank(tail: u32) -> Option<usize> {
    BREAK_TAILS
        .iter()
        .position(|(want, mask)| tail & mask == *want)
}

/// End of the HTML message starting at `pos`: the latest preferred break point in the fitting
/// prefix, else the last fitting token (grapheme-aware), then any closing tags that follow.
fn html_cut(text: &str, pos: usize, limit: usize, unit: LengthUnit) -> usize {
    let limit = limit.max(1);
    let bytes = text.as_bytes();
    let mut used = 0;
    let mut end = text.len();
    let mut best: [Option<(usize, usize)>; BREAKS.len()] = [None; BREAKS.len()];
    // The last four visible characters as bytes (non-ASCII as `_`), entities decoded: break
    // strings are matched on what the reader sees, so the `;` of `&amp;` is not a "; " break.
    let mut tail = 0u32;
    // Tags and entities read so far: a cut may never fall inside one.
    let mut atoms: Vec<Range<usize>> = Vec::new();
    let mut i = pos;
    while let Some(&b) = bytes.get(i) {
        let (len, cost, visible) = if b.is_ascii() && b != b'<' && b != b'&' {
            // Plain ASCII, the bulk of any reply: one unit, no tokenising.
            (1, 1, Some(b))
        } else {
            let Some(token) = text.get(i..).and_then(html_token) else {
                break;
            };
            let len = token.len();
            match token {
                HtmlToken::Tag { .. } => {
                    atoms.push(i..i + len);
                    (len, 0, None)
                }
                HtmlToken::Entity(e) => {
                    atoms.push(i..i + len);
                    (len, 1, Some(entity_char(e) as u8))
                }
                HtmlToken::Char(c) => (
                    len,
                    char_len(c, unit),
                    Some(u8::try_from(c).ok().filter(u8::is_ascii).unwrap_or(b'_')),
                ),
            }
        };
        if used + cost > limit && used > 0 {
            end = i;
            break;
        }
        used += cost;
        i += len;
        if let Some(visible) = visible {
            tail = tail << 8 | u32::from(visible);
            if (visible == b' ' || visible == b'\n')
                && let Some(rank) = break_rank(tail)
                && let Some(slot) = best.get_mut(rank)
            {
                *slot = Some((i, used));
            }
        }
    }
    if end >= text.len() {
        return text.len();
    }
    let min_used = (used / 2).max(1);
    let cut = best
        .iter()
        .flatten()
        .find(|(_, u)| *u >= min_used)
        .map(|(at, _)| *at)
        .unwrap_or_else(|| {
            let g = grapheme_floor(text, pos, end);
            // The grapheme floor may only move back within plain text, never into a token.
            if atoms.iter().rev().any(|a| a.start < g && g < a.end) {
                end
            } else {
                g
            }
        });
    let mut cut = cut;
    while let Some(HtmlToken::Tag {
        closing: true,
        text: tag,
        ..
    }) = text.get(cut..).and_then(html_token)
    {
        cut += tag.len();
    }
    cut
}

/// The character one of the renderer's entities stands for.
fn entity_char(entity: &str) -> char {
    match entity {
        "&lt;" => '<',
        "&gt;" => '>',
        "&quot;" => '"',
        _ => '&',
    }
}

/// Splits rendered Slack mrkdwn: never inside an escape (`&amp;`) or a `<url|text>` link, and a
/// ```` ``` ```` block cut in two is closed and re-opened so code stays code.
fn chunk_mrkdwn(text: &str, limit: usize, unit: LengthUnit) -> Vec<String> {
    const FENCE: &str = "```";
    let meter = Meter::new(unit);
    // Room for a closing "\n```" and an opening "```\n" around any cut.
    let reserve = if text.contains(FENCE) { 8 } else { 0 };
    let budget = limit.saturating_sub(reserve).max(1);
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut pos = 0;
    while pos < text.len() {
        let mut cut = next_cut(text, pos, budget, meter);
        if cut < text.len()
            && let Some(atom) = enclosing_atom(text, pos, cut)
        {
            cut = atom;
        }
        let piece = text.get(pos..cut).unwrap_or_default();
        let mut msg = String::with_capacity(piece.len() + 8);
        if in_fence {
            msg.push_str(FENCE);
            msg.push('\n');
        }
        msg.push_str(piece);
        if piece.matches(FENCE).count() % 2 == 1 {
            in_fence = !in_fence;
        }
        if in_fence && cut < text.len() {
            if !msg.ends_with('\n') {
                msg.push('\n');
            }
            msg.push_str(FENCE);
        }
        out.push(msg);
        pos = cut;
    }
    out
}

/// Start of the escape or link that a cut at `cut` would split, if it lies after `pos`.
fn enclosing_atom(text: &str, pos: usize, cut: usize) -> Option<usize> {
    let head = text.get(pos..cut)?;
    let amp = head
        .rfind('&')
        .filter(|&i| !head[i..].contains(';') && head.len() - i < 8);
    let lt = head.rfind('<').filter(|&i| !head[i..].contains('>'));
    let start = pos + amp.max(lt)?;
    (start > pos).then_some(start)
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
