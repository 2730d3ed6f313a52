//! Rendering markdown per platform markup (docs/protocols.md#telegram-html,
//! docs/protocols.md#slack-sending).
//!
//! Rendering walks pulldown-cmark events, so code (spans and blocks) is never rewritten and
//! emphasis nests as CommonMark nests it. Each piece is rendered on its own: every tag opened
//! in a piece is closed in it, so a message never depends on its neighbour.

use std::borrow::Cow;
use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

use crate::core::controls::replace_rejected_controls;
use crate::core::dialect::options;
use crate::core::measure::measure;
use crate::core::scan::find_byte_of;
use crate::model::{LengthUnit, Markup};

/// `text` rendered for `markup`, controls the platforms reject replaced with U+FFFD in every
/// markup (see `controls.rs`): markdown otherwise unchanged; `html` in Telegram's tag subset with
/// exactly `&lt; &gt; &amp; &quot;` escaped; `mrkdwn` with `& < >` escaped; `plain` bare text.
pub fn render(text: &str, markup: Markup) -> Cow<'_, str> {
    render_measured(text, markup, LengthUnit::Bytes).0
}

/// [`render`], with the rendering's length in `unit` as the platform counts it (what
/// `measure_rendered` returns). The markup is counted while writing, so the text is only
/// counted at bulk speed, not tokenised again.
pub fn render_measured(text: &str, markup: Markup, unit: LengthUnit) -> (Cow<'_, str>, usize) {
    // NUL and the other controls the platforms reject never reach a message, in any markup:
    // a NUL used to pass through raw while the terminal already replaced it.
    let text = replace_rejected_controls(text);
    if markup == Markup::Markdown {
        let visible = measure(&text, unit);
        return (text, visible);
    }
    let mut r = Renderer::new(markup, &text);
    for (event, range) in Parser::new_ext(&text, options()).into_offset_iter() {
        r.event(&event, range);
    }
    let hidden = r.hidden();
    let out = r.finish();
    let visible = measure(&out, unit).saturating_sub(hidden);
    (Cow::Owned(out), visible)
}

/// An incremental renderer: events in, markup out. The splitter feeds it while it parses, so
/// a document is parsed once and no event list is kept.
pub struct Renderer<'a> {
    w: Writer<'a>,
}

impl<'a> Renderer<'a> {
    /// A renderer for `markup` of the markdown `source`.
    pub fn new(markup: Markup, source: &'a str) -> Self {
        Renderer {
            w: Writer::new(markup, source),
        }
    }

    /// Renders one event; `range` is where it lies in the source.
    pub fn event(&mut self, event: &Event<'_>, range: Range<usize>) {
        self.w.event(event, range);
    }

    /// Writes the separator a top-level block starting at source offset `at` needs (a blank
    /// line, or one line break right under a paragraph line) and returns where the block's
    /// own output starts. Separators thus lie between blocks' outputs, so any run of blocks
    /// is one slice of the output, exactly as if it had been rendered alone.
    pub fn begin_block(&mut self, at: usize) -> usize {
        self.w.tight = self.w.para_end.is_some() && self.w.follows_directly(at);
        self.w.block(2);
        self.w.out.len()
    }

    /// Everything rendered so far.
    pub fn output(&self) -> &str {
        &self.w.out
    }

    /// Bytes of the output so far that the platform does not count: Telegram counts neither
    /// tags nor the attributes inside them, and an entity as the one character it stands for.
    /// They are ASCII, so they are as many units as bytes in every length unit.
    pub fn hidden(&self) -> usize {
        self.w.hidden
    }

    /// The rendered text.
    pub fn finish(self) -> String {
        self.w.out
    }
}

/// Link schemes Telegram accepts in `<a href>`; any other target is shown as text.
const LINK_SCHEMES: [&str; 4] = ["http://", "https://", "tg://", "mailto:"];

/// What closes a link or image.
enum LinkEnd {
    /// Markup (or nothing).
    Mark(&'static str),
    /// ` (url)` for a target shown as text.
    Url(String),
}

struct Writer<'a> {
    markup: Markup,
    /// Bytes of `out` the platform does not count (see [`Renderer::hidden`]).
    hidden: usize,
    source: &'a str,
    out: String,
    /// Source offset where the paragraph that the last event closed ends.
    para_end: Option<usize>,
    /// The block starting with the current event sits directly under a paragraph line.
    tight: bool,
    /// Nothing written since a container opened: the next block needs no separator.
    fresh: bool,
    /// At the start of an output line (Slack quotes prefix each line).
    line_start: bool,
    quote_depth: usize,
    bold_depth: usize,
    /// Next number per open list (`None` for bullets).
    lists: Vec<Option<u64>>,
    /// What closes each open link or image.
    link_ends: Vec<LinkEnd>,
    /// Closing text of the open code block.
    code: Option<&'static str>,
    cell: usize,
}

impl<'a> Writer<'a> {
    fn new(markup: Markup, source: &'a str) -> Self {
        let capacity = source.len();
        Writer {
            markup,
            hidden: 0,
            source,
            out: String::with_capacity(capacity + capacity / 8),
            para_end: None,
            tight: false,
            fresh: true,
            line_start: true,
            quote_depth: 0,
            bold_depth: 0,
            lists: Vec::new(),
            link_ends: Vec::new(),
            code: None,
            cell: 0,
        }
    }

    /// Whether a block starting at source offset `at` goes on the line right after the
    /// paragraph that just ended: a blank line added there would show in Telegram and Slack.
    fn follows_directly(&self, at: usize) -> bool {
        let Some(end) = self.para_end else {
            return false;
        };
        let head = self.source.get(..end).unwrap_or_default();
        let end = head.trim_end_matches('\n').trim_end_matches('\r').len();
        let gap = self.source.get(end..at).unwrap_or_default();
        // Only a blank line (in a quote, a bare `>`) can lie between a paragraph and the next
        // block, so a second line break in the gap means a blank line.
        gap.bytes().filter(|b| *b == b'\n').count() == 1
    }

    fn event(&mut self, event: &Event<'_>, range: Range<usize>) {
        self.tight = self.para_end.is_some() && self.follows_directly(range.start);
        self.para_end = match event {
            Event::End(TagEnd::Paragraph) => Some(range.end),
            _ => None,
        };
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(*tag),
            Event::Text(t) => self.text(t),
            Event::Code(t) => {
                let (open, close) = match self.markup {
                    Markup::Html => ("<code>", "</code>"),
                    Markup::Mrkdwn => ("`", "`"),
                    Markup::Plain | Markup::Markdown => ("", ""),
                };
                self.mark(open);
                self.text(t);
                self.mark(close);
            }
            Event::Html(t)
            | Event::InlineHtml(t)
            | Event::InlineMath(t)
            | Event::DisplayMath(t) => self.text(t),
            Event::FootnoteReference(t) => self.text(&format!("[^{t}]")),
            Event::SoftBreak | Event::HardBreak => self.newline(),
            Event::Rule => {
                self.block(2);
                self.raw("---");
            }
            Event::TaskListMarker(done) => self.raw(if *done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: &Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock | Tag::Table(_) | Tag::MetadataBlock(_) => {
                self.block(2)
            }
            Tag::FootnoteDefinition(_) | Tag::DefinitionList | Tag::DefinitionListTitle => {
                self.block(2)
            }
            Tag::DefinitionListDefinition => self.block(1),
            Tag::Heading { .. } => {
                self.block(2);
                self.bold_open();
            }
            Tag::BlockQuote(_) => {
                self.block(2);
                self.quote_depth += 1;
                if self.markup == Markup::Html && self.quote_depth == 1 {
                    // Telegram has no nested quotes: inner quotes flow into the outer one.
                    self.mark("<blockquote>");
                    self.fresh = true;
                }
            }
            Tag::CodeBlock(kind) => {
                self.block(2);
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or_default()
                    }
                    CodeBlockKind::Indented => "",
                };
                let close = match self.markup {
                    Markup::Html if lang.is_empty() => {
                        self.mark("<pre>");
                        "</pre>"
                    }
                    Markup::Html => {
                        self.mark("<pre><code class=\"language-");
                        self.attr(lang);
                        self.mark("\">");
                        "</code></pre>"
                    }
                    Markup::Mrkdwn => {
                        self.mark("```");
                        "```"
                    }
                    Markup::Plain | Markup::Markdown => "",
                };
                // The original's form: a line break after the opening, the body as written.
                // The body is written as it arrives: collecting it first cost a copy and a
                // growing buffer per block.
                self.raw("\n");
                self.line_start = false;
                self.code = Some(close);
            }
            Tag::List(first) => {
                self.block(if self.lists.is_empty() { 2 } else { 1 });
                self.lists.push(*first);
            }
            Tag::Item => {
                self.block(1);
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_owned(),
                };
                self.raw(&"  ".repeat(depth));
                self.raw(&marker);
                self.fresh = true;
            }
            Tag::TableHead | Tag::TableRow => {
                self.block(1);
                self.cell = 0;
            }
            Tag::TableCell => {
                if self.cell > 0 {
                    self.raw(" | ");
                }
                self.cell += 1;
            }
            Tag::Emphasis => self.mark(match self.markup {
                Markup::Html => "<i>",
                Markup::Mrkdwn => "_",
                Markup::Plain | Markup::Markdown => "",
            }),
            Tag::Strong => self.bold_open(),
            Tag::Strikethrough => self.mark(match self.markup {
                Markup::Html => "<s>",
                Markup::Mrkdwn => "~",
                Markup::Plain | Markup::Markdown => "",
            }),
            Tag::Superscript | Tag::Subscript => {}
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => self.link_open(dest_url),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) | TagEnd::Strong => self.bold_close(),
            TagEnd::BlockQuote(_) => {
                self.quote_depth = self.quote_depth.saturating_sub(1);
                if self.markup == Markup::Html && self.quote_depth == 0 {
                    self.mark("</blockquote>");
                }
            }
            TagEnd::CodeBlock => {
                if let Some(close) = self.code.take() {
                    self.mark(close);
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Emphasis => self.mark(match self.markup {
                Markup::Html => "</i>",
                Markup::Mrkdwn => "_",
                Markup::Plain | Markup::Markdown => "",
            }),
            TagEnd::Strikethrough => self.mark(match self.markup {
                Markup::Html => "</s>",
                Markup::Mrkdwn => "~",
                Markup::Plain | Markup::Markdown => "",
            }),
            TagEnd::Link | TagEnd::Image => match self.link_ends.pop() {
                Some(LinkEnd::Mark(end)) => self.mark(end),
                Some(LinkEnd::Url(url)) => {
                    self.raw(" (");
                    self.text(&url);
                    self.raw(")");
                }
                None => {}
            },
            _ => {}
        }
    }

    fn bold_open(&mut self) {
        if self.bold_depth == 0 {
            self.mark(match self.markup {
                Markup::Html => "<b>",
                Markup::Mrkdwn => "*",
                Markup::Plain | Markup::Markdown => "",
            });
        }
        self.bold_depth += 1;
    }

    fn bold_close(&mut self) {
        self.bold_depth = self.bold_depth.saturating_sub(1);
        if self.bold_depth == 0 {
            self.mark(match self.markup {
                Markup::Html => "</b>",
                Markup::Mrkdwn => "*",
                Markup::Plain | Markup::Markdown => "",
            });
        }
    }

    fn link_open(&mut self, url: &str) {
        let linkable = LINK_SCHEMES.iter().any(|s| {
            url.get(..s.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(s))
        });
        let end = match self.markup {
            Markup::Html if linkable && self.link_ends.is_empty() => {
                self.mark("<a href=\"");
                self.attr(url);
                self.mark("\">");
                LinkEnd::Mark("</a>")
            }
            Markup::Mrkdwn if !url.is_empty() && self.link_ends.is_empty() => {
                self.mark("<");
                self.text(&url.replace('|', "%7C"));
                self.mark("|");
                LinkEnd::Mark(">")
            }
            _ if url.is_empty() => LinkEnd::Mark(""),
            _ => LinkEnd::Url(url.to_owned()),
        };
        self.link_ends.push(end);
    }

    /// Ensures `n` line breaks before the next block (none at the start of a container).
    fn block(&mut self, n: usize) {
        if self.fresh {
            return;
        }
        let n = if self.tight { n.min(1) } else { n.min(2) };
        // Only the last `n` bytes matter: a long run of line breaks is never re-read.
        let have = self
            .out
            .as_bytes()
            .iter()
            .rev()
            .take(n)
            .take_while(|b| **b == b'\n')
            .count();
        if have < n {
            self.out
                .push_str("\n\n".get(..n - have).unwrap_or_default());
            self.line_start = true;
        }
    }

    fn newline(&mut self) {
        self.out.push('\n');
        self.line_start = true;
    }

    /// Starts writing non-empty output: the Slack quote prefix when a quoted line begins.
    fn begin_write(&mut self) {
        if self.line_start
            && self.quote_depth > 0
            && self.markup == Markup::Mrkdwn
            && self.code.is_none()
        {
            self.out.push_str("> ");
        }
        self.line_start = false;
        self.fresh = false;
    }

    /// Writes visible text that needs no escaping.
    fn raw(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        self.begin_write();
        self.out.push_str(s);
    }

    /// Writes markup: a tag Telegram does not count, or a character Slack does.
    #[inline]
    fn mark(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        self.begin_write();
        self.out.push_str(s);
        if self.markup == Markup::Html {
            self.hidden += s.len();
        }
    }

    /// Writes an attribute value inside a Telegram tag: escaped, and not counted.
    fn attr(&mut self, s: &str) {
        self.begin_write();
        let before = self.out.len();
        escape_into(&mut self.out, s, self.markup);
        self.hidden += self.out.len() - before;
    }

    /// Writes text, escaped for the markup straight into the output (no copy per event).
    /// Telegram counts an entity as the one character it stands for; Slack counts it whole.
    fn text(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        self.begin_write();
        let before = self.out.len();
        escape_into(&mut self.out, s, self.markup);
        if self.markup == Markup::Html {
            self.hidden += self.out.len() - before - s.len();
        }
    }
}

/// The entity for a byte `markup` escapes, `None` for bytes it keeps.
fn entity(b: u8, markup: Markup) -> Option<&'static str> {
    match (b, markup) {
        (b'&', Markup::Html | Markup::Mrkdwn) => Some("&amp;"),
        (b'<', Markup::Html | Markup::Mrkdwn) => Some("&lt;"),
        (b'>', Markup::Html | Markup::Mrkdwn) => Some("&gt;"),
        (b'"', Markup::Html) => Some("&quot;"),
        _ => None,
    }
}

/// `s` escaped for `markup`: plain text that reads as itself once sent.
pub fn escape(s: &str, markup: Markup) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    escape_into(&mut out, s, markup);
    out
}

/// Appends `s` escaped for `markup`. The escaped characters are ASCII, so the text between
/// them is found word by word and copied in runs rather than character by character.
#[inline]
fn escape_into(out: &mut String, s: &str, markup: Markup) {
    let bytes = s.as_bytes();
    let mut copied = 0;
    loop {
        let rest = bytes.get(copied..).unwrap_or_default();
        let next = match markup {
            Markup::Html => find_byte_of(rest, [b'&', b'<', b'>', b'"']),
            Markup::Mrkdwn => find_byte_of(rest, [b'&', b'<', b'>']),
            Markup::Plain | Markup::Markdown => None,
        };
        let Some(i) = next.map(|i| copied + i) else {
            break;
        };
        out.push_str(s.get(copied..i).unwrap_or_default());
        out.push_str(
            bytes
                .get(i)
                .and_then(|b| entity(*b, markup))
                .unwrap_or_default(),
        );
        copied = i + 1;
    }
    out.push_str(s.get(copied..).unwrap_or_default());
}
