//! Structure-aware split of markdown source (docs/architecture.md#the-outbound-pipeline, I26, I27,
//! I28).
//!
//! Block structure comes from pulldown-cmark, so ATX and setext headings, fenced and indented
//! code, lists, quotes, tables and HTML blocks are what CommonMark says they are. Messages
//! break at section starts; a heading never ends a message without its body; a fence is cut
//! only when it alone exceeds the budget, and then every piece is a whole fence again.
//! Every step is linear in the text: block costs are computed once and runs never grow past
//! one budget plus one block.

use std::borrow::Cow;
use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag};

use crate::core::dialect::options;
use crate::core::measure::{Meter, measure, next_cut};
use crate::core::render::{Renderer, render_measured};
use crate::model::Markup;

/// What a top-level block is, as far as splitting cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// An ATX or setext heading.
    Heading,
    /// A fenced code block (closed or running to the end).
    Fence,
    /// Anything else, including blank text.
    Other,
}

/// One top-level block; consecutive blocks tile the source exactly (the text after a block,
/// such as its blank lines, belongs to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Byte offset of the block's first line.
    pub start: usize,
    /// Byte offset where the next block starts.
    pub end: usize,
    /// Kind of block.
    pub kind: BlockKind,
    /// The block's rendering in [`Parsed::rendered`] (empty for markdown), without the
    /// separator before it: blocks' renderings and separators alternate in it.
    pub rendered: Range<usize>,
    /// Bytes of the block's rendering the platform does not count (see [`Renderer::hidden`]).
    pub hidden: usize,
}

/// A document parsed once: its top-level blocks, each already rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Top-level blocks tiling the source.
    pub blocks: Vec<Block>,
    /// The whole text rendered: every block's rendering, with separators between them.
    pub rendered: String,
}

/// One message's worth of markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece<'a> {
    /// The markdown source of the piece.
    pub source: Cow<'a, str>,
    /// The piece rendered for the markup (the source itself for markdown).
    pub rendered: Cow<'a, str>,
    /// Length of `rendered` as the platform counts it. The renderer counts the markup it
    /// writes, so no piece is tokenised again to learn whether it fits.
    pub visible: usize,
}

/// Parses `text` once into top-level blocks tiling it from 0 to `text.len()`, rendering each
/// block for `markup` on the way. Rendering from the same pass halves the pipeline's cost
/// (the parse dominates), and storing no events keeps memory and cache use flat on 1 MiB.
pub fn parse(text: &str, markup: Markup) -> Parsed {
    let mut renderer = (markup != Markup::Markdown).then(|| Renderer::new(markup, text));
    // Reserved for a block per 128 bytes, not per line: 48 bytes a line came to four times
    // the text on bare headings and a fresh mapping, page-faulted in, on every call.
    let mut blocks: Vec<Block> = Vec::with_capacity(text.len() / 128 + 4);
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        let top = depth == 0;
        match &event {
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
        if top && !matches!(event, Event::End(_)) {
            let kind = match &event {
                Event::Start(Tag::Heading { .. }) => BlockKind::Heading,
                Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => BlockKind::Fence,
                _ => BlockKind::Other,
            };
            // Indentation before a block belongs to its first line, or a re-opened fence loses it.
            // Only spaces and tabs are looked at: a block that starts its line costs nothing.
            let head = text.as_bytes().get(..range.start).unwrap_or_default();
            let indent = head
                .iter()
                .rev()
                .take_while(|b| **b == b' ' || **b == b'\t')
                .count();
            let at_line_start =
                head.len() == indent || head.get(head.len() - indent - 1) == Some(&b'\n');
            let start = if at_line_start {
                range.start - indent
            } else {
                range.start
            };
            if blocks.last().is_none_or(|b| start > b.start) {
                let (before, at, hidden) = renderer.as_mut().map_or((0, 0, 0), |r| {
                    let before = r.output().len();
                    (before, r.begin_block(range.start), r.hidden())
                });
                // `end`, `hidden` and the end of `rendered` are set once the next block starts;
                // until then `rendered.end` holds where the output stood before this block's
                // separator, which is where the previous block's rendering ends.
                blocks.push(Block {
                    start,
                    end: 0,
                    kind,
                    rendered: at..before,
                    hidden,
                });
            }
        }
        if let Some(r) = renderer.as_mut() {
            r.event(&event, range);
        }
    }
    let total = renderer.as_ref().map_or(0, Renderer::hidden);
    let rendered = renderer.map(Renderer::finish).unwrap_or_default();
    if blocks.first().is_none_or(|b| b.start > 0) {
        let first = Block {
            start: 0,
            end: 0,
            kind: BlockKind::Other,
            rendered: 0..0,
            hidden: 0,
        };
        blocks.insert(0, first);
    }
    // Each block holds the counts at its start; it ends where the next one's separator
    // starts (separators are line breaks, which every platform counts).
    let mut next = (text.len(), rendered.len(), total);
    for block in blocks.iter_mut().rev() {
        let hidden_at = block.hidden;
        let sep = block.rendered.end;
        block.end = next.0;
        block.rendered.end = next.1.max(block.rendered.start);
        block.hidden = next.2.saturating_sub(hidden_at);
        next = (block.start, sep, hidden_at);
    }
    blocks.retain(|b| b.end > b.start);
    Parsed { blocks, rendered }
}

/// Splits markdown `text` into pieces of at most `budget` (as `meter` counts) at structure,
/// each rendered for `markup`. `""` gives no pieces. Sources join to `text` except where an
/// oversized fence was repaired.
///
/// For rendered markups a non-fence block that alone exceeds the budget (with its headings)
/// is left whole: cutting markdown source inside a paragraph or list would split its emphasis
/// and links, so the rendered text is cut instead, where open tags can be closed and
/// re-opened. Markdown is sent as written, so there the source is cut.
pub fn split(text: &str, budget: usize, meter: Meter, markup: Markup) -> Vec<Piece<'_>> {
    let budget = budget.max(1);
    if text.is_empty() {
        return Vec::new();
    }
    if meter.cost(text) <= budget {
        let (rendered, visible) = render_measured(text, markup, meter.unit());
        return vec![Piece {
            source: Cow::Borrowed(text),
            rendered,
            visible,
        }];
    }
    let Parsed { blocks, rendered } = parse(text, markup);
    // Running totals and bareness in one pass: a run's cost is then one subtraction, and no
    // block is measured or trimmed twice (on a megabyte of bare headings, re-reading the
    // blocks was what grew faster than the text).
    let mut costs = Vec::with_capacity(blocks.len() + 1);
    let mut bare = Vec::with_capacity(blocks.len());
    let mut total = 0;
    costs.push(0);
    for b in &blocks {
        let source = text.get(b.start..b.end).unwrap_or_default();
        total += meter.cost(source);
        costs.push(total);
        bare.push(b.kind == BlockKind::Heading || source.trim().is_empty());
    }
    let mut splitter = Splitter {
        text,
        blocks: &blocks,
        costs: &costs,
        bare: &bare,
        budget,
        meter,
        markup,
        rendered: &rendered,
        out: Vec::new(),
    };
    splitter.run();
    splitter.out
}

struct Splitter<'a, 'b> {
    text: &'a str,
    blocks: &'b [Block],
    /// `costs[k]`: the cost of blocks `0..k`.
    costs: &'b [usize],
    /// Whether each block is a heading or blank: it owns no body of its own.
    bare: &'b [bool],
    budget: usize,
    meter: Meter,
    markup: Markup,
    /// Rendering of every block, indexed by [`Block::rendered`].
    rendered: &'b str,
    out: Vec<Piece<'a>>,
}

impl<'a> Splitter<'a, '_> {
    fn is_bare(&self, i: usize) -> bool {
        self.bare.get(i).copied().unwrap_or(false)
    }

    fn slice(&self, from: usize, to: usize) -> &'a str {
        let start = self.blocks.get(from).map_or(self.text.len(), |b| b.start);
        let end = to
            .checked_sub(1)
            .and_then(|i| self.blocks.get(i))
            .map_or(start, |b| b.end);
        self.text.get(start..end).unwrap_or_default()
    }

    fn cost(&self, from: usize, to: usize) -> usize {
        let at = |k: usize| self.costs.get(k).copied().unwrap_or(0);
        at(to).saturating_sub(at(from))
    }

    /// Groups: a heading starts a section; sections of only headings and blank lines are glued
    /// onto the next one, so headings travel with the body they own. Whole groups are packed
    /// greedily; a group larger than the budget is packed block by block.
    fn run(&mut self) {
        let n = self.blocks.len();
        let mut pending: Option<(usize, usize)> = None;
        let mut pending_cost = 0;
        let mut group_start = 0;
        let mut i = 0;
        while i < n {
            // A section: a heading (or the document start), then non-heading blocks.
            let mut j = i + 1;
            while j < n
                && self
                    .blocks
                    .get(j)
                    .is_some_and(|b| b.kind != BlockKind::Heading)
            {
                j += 1;
            }
            let bare = (i..j).all(|k| self.is_bare(k));
            i = j;
            if bare && i < n {
                continue;
            }
            let group = (group_start, i);
            group_start = i;
            let group_cost = self.cost(group.0, group.1);
            if group_cost > self.budget {
                self.flush(pending.take());
                self.pack_blocks(group.0, group.1);
                continue;
            }
            pending = match pending {
                Some((a, _)) if pending_cost + group_cost <= self.budget => {
                    pending_cost += group_cost;
                    Some((a, group.1))
                }
                other => {
                    self.flush(other);
                    pending_cost = group_cost;
                    Some(group)
                }
            };
        }
        self.flush(pending);
    }

    fn flush(&mut self, run: Option<(usize, usize)>) {
        if let Some((a, b)) = run
            && b > a
        {
            let source = self.slice(a, b);
            let (rendered, visible) = if self.markup == Markup::Markdown {
                (Cow::Borrowed(source), self.cost(a, b))
            } else {
                let (joined, visible) = self.join_rendered(a, b);
                (Cow::Owned(joined), visible)
            };
            self.out.push(Piece {
                source: Cow::Borrowed(source),
                rendered,
                visible,
            });
        }
    }

    /// Packs blocks `from..to` greedily; trailing headings of a full run move to the next run
    /// with the body they own, and a run of headings that owns nothing fills messages alone.
    fn pack_blocks(&mut self, from: usize, to: usize) {
        let mut run_start = from;
        let mut run_cost = 0;
        for i in from..to {
            let c = self.cost(i, i + 1);
            if run_cost + c <= self.budget {
                run_cost += c;
                continue;
            }
            let mut keep_end = i;
            while keep_end > run_start && self.is_bare(keep_end - 1) {
                keep_end -= 1;
            }
            if keep_end > run_start {
                self.flush(Some((run_start, keep_end)));
                run_start = keep_end;
            }
            // Only headings (and blank lines) are left before block `i`.
            if self.is_bare(i) {
                // Another heading follows them, so they own no body: they fill this message
                // on their own. Carrying them on made a run of bare headings alternate full
                // messages with three-character ones.
                self.flush(Some((run_start, i)));
                run_start = i;
                run_cost = c;
            } else {
                // The headings right before `i` own it: they go with it, into the oversized
                // path (which cuts the body, never the tie) when together they are over.
                // They are never more than a budget: a longer run was sent at a heading.
                run_cost = self.cost(run_start, i + 1);
            }
            if run_cost > self.budget {
                self.oversized(run_start, i);
                run_start = i + 1;
                run_cost = 0;
            }
        }
        self.flush(Some((run_start, to)));
    }

    /// Blocks `from..to` rendered as one message: the slice of the whole rendering from the
    /// first block that rendered anything to the last, with the separators between them, so
    /// one copy per message. Returns the text and its length as the platform counts it.
    fn join_rendered(&self, from: usize, to: usize) -> (String, usize) {
        let blocks = self.blocks.get(from..to).unwrap_or_default();
        let mut written = blocks.iter().filter(|b| !b.rendered.is_empty());
        let first = written.next();
        let start = first.map_or(0, |b| b.rendered.start);
        let end = written.next_back().or(first).map_or(0, |b| b.rendered.end);
        let out = self.rendered.get(start..end).unwrap_or_default().to_owned();
        let hidden: usize = blocks.iter().map(|b| b.hidden).sum();
        let visible = measure(&out, self.meter.unit()).saturating_sub(hidden);
        (out, visible)
    }

    /// A piece that is not made of whole blocks: rendered on its own.
    fn push_owned(&mut self, source: Cow<'a, str>) {
        let (rendered, visible) = render_measured(&source, self.markup, self.meter.unit());
        let rendered = Cow::Owned(rendered.into_owned());
        self.out.push(Piece {
            source,
            rendered,
            visible,
        });
    }

    /// Emits `heads..=last`: bare blocks (headings) then one block, together over budget.
    fn oversized(&mut self, heads: usize, last: usize) {
        let prefix = self.slice(heads, last);
        let Some(block) = self.blocks.get(last) else {
            return;
        };
        let body = self.text.get(block.start..block.end).unwrap_or_default();
        if block.kind == BlockKind::Fence
            && let Some(pieces) = repair_fence(prefix, body, self.budget, self.meter)
        {
            for piece in pieces {
                self.push_owned(Cow::Owned(piece));
            }
            return;
        }
        let whole = self.slice(heads, last + 1);
        if self.markup != Markup::Markdown {
            self.flush(Some((heads, last + 1)));
            return;
        }
        let prefix_cost = self.meter.cost(prefix);
        let mut pos = 0;
        if !prefix.is_empty() && prefix_cost < self.budget {
            // The heading opens the first piece; its body starts right after it.
            let cut = prefix.len() + next_cut(body, 0, self.budget - prefix_cost, self.meter);
            self.push_owned(Cow::Borrowed(whole.get(..cut).unwrap_or_default()));
            pos = cut;
        }
        while pos < whole.len() {
            let cut = next_cut(whole, pos, self.budget, self.meter);
            self.push_owned(Cow::Borrowed(whole.get(pos..cut).unwrap_or_default()));
            pos = cut;
        }
    }
}

/// A fence line: up to 3 spaces of indent, then 3+ backticks or tildes.
fn fence_marker(line: &str) -> Option<(char, usize, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = line.get(indent..)?;
    let ch = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = rest.len() - rest.trim_start_matches(ch).len();
    (indent <= 3 && run >= 3).then_some((ch, run, indent))
}

/// Splits an oversized fence so each piece is a whole fence with the original opening line
/// (language kept, I28): `prefix` (carried headings) opens the first piece, the text after the
/// closing line ends the last. Only fence lines are added; code content is kept in order, a
/// cut inside a line ends that piece's last line. `None` when the budget leaves no room.
pub fn repair_fence(prefix: &str, block: &str, budget: usize, meter: Meter) -> Option<Vec<String>> {
    let open_len = block.find('\n')? + 1;
    let open = block.get(..open_len)?;
    let eol = if open.ends_with("\r\n") { "\r\n" } else { "\n" };
    let (ch, run, indent) = fence_marker(open)?;
    let rest = block.get(open_len..)?;
    let mut close_at = None;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        let content = line.trim_end();
        if let Some((c, r, _)) = fence_marker(content)
            && c == ch
            && r >= run
            && content.trim_start().chars().all(|x| x == ch)
        {
            close_at = Some((at, at + line.len()));
            break;
        }
        at += line.len();
    }
    let synthetic;
    let (body, close, suffix) = match close_at {
        Some((s, e)) => (rest.get(..s)?, rest.get(s..e)?, rest.get(e..)?),
        None => {
            synthetic = format!(
                "{}{}{}",
                " ".repeat(indent),
                ch.to_string().repeat(run),
                eol
            );
            (rest, synthetic.as_str(), "")
        }
    };
    if body.is_empty() {
        return None;
    }
    let frame = meter.cost(open) + meter.cost(close) + meter.cost(eol) + meter.cost(suffix);
    let first_budget = budget
        .checked_sub(frame + meter.cost(prefix))
        .filter(|b| *b > 0)?;
    let rest_budget = budget - frame;
    let mut pieces = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let b = if pos == 0 { first_budget } else { rest_budget };
        let cut = next_cut(body, pos, b, meter);
        let code = body.get(pos..cut)?;
        let mut piece =
            String::with_capacity(prefix.len() + open.len() + code.len() + close.len() + 2);
        if pos == 0 {
            piece.push_str(prefix);
        }
        piece.push_str(open);
        piece.push_str(code);
        if !code.ends_with('\n') {
            piece.push_str(eol);
        }
        piece.push_str(close);
        pieces.push(piece);
        pos = cut;
    }
    if let Some(last) = pieces.last_mut() {
        last.push_str(suffix);
    }
    Some(pieces)
}
