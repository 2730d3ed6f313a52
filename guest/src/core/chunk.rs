//! Limit-safe chunking of rendered messages (docs/architecture.md#the-outbound-pipeline, I4, I29).
//!
//! Where a piece may end comes from `measure.rs`: char boundaries (I4), the original's break
//! points, grapheme clusters and CRLF (I29). Rendered Telegram HTML and Slack mrkdwn are cut
//! outside tags, entities and links, with open tags (or a code fence) closed and re-opened
//! across the cut, so every message parses on its own.

use std::ops::Range;

use crate::core::html::{HtmlToken, entity_char, html_tags, html_token, html_tokens};
#[cfg(doc)]
use crate::core::measure::measure_rendered;
use crate::core::measure::{BREAKS, Meter, char_len, grapheme_floor, next_cut};
use crate::model::{LengthUnit, Markup};

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
        let reopened = in_fence;
        if piece.matches(FENCE).count() % 2 == 1 {
            in_fence = !in_fence;
        }
        let mut msg = String::with_capacity(piece.len() + 8);
        if reopened {
            msg.push_str(FENCE);
            msg.push('\n');
        }
        msg.push_str(piece);
        if in_fence && cut < text.len() {
            if !msg.ends_with('\n') {
                msg.push('\n');
            }
            msg.push_str(FENCE);
        }
        // Below 12 bytes a piece (one character at least) and the fences around it may not
        // fit together: the piece then goes bare rather than over the limit (````\n👨\n````
        // at 11 bytes, found by fuzzing, 2026-12-02). From 12 on, the budget holds any
        // character, and a piece within it fits with its fences.
        if limit < reserve + 4 && meter.cost(&msg) > limit.max(1) {
            msg = piece.to_owned();
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
