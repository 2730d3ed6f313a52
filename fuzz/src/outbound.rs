//! The outbound pipeline (`guest::core::outbound::prepare`): any text, any limit, any
//! markup, any message cap (I3, I4, I22).
//!
//! Properties: every message is within the limit as the pipeline measures it for that
//! markup and unit; Telegram HTML is well formed (allowed tags only, balanced and nested,
//! every `&` an entity Telegram knows); nothing of a secret shape survives, in a message
//! or in the truncation notice; at most `max_chunks` messages.

use arbitrary::Unstructured;
use guest::core::measure::measure_rendered;
use guest::core::outbound::prepare;
use guest::core::secrets::{SHAPES, candidates, markers};

use crate::secrets::{MARKER, secrets_in, worth_looking_for};
use guest::model::{Capabilities, LengthUnit, Markup};

/// Every markup, in the order the input's first byte picks them.
pub const MARKUPS: [Markup; 4] = [
    Markup::Markdown,
    Markup::Html,
    Markup::Mrkdwn,
    Markup::Plain,
];

/// Every length unit, in the order the input's second byte picks them.
pub const UNITS: [LengthUnit; 3] = [LengthUnit::Chars, LengthUnit::Utf16, LengthUnit::Bytes];

/// Largest limit generated: above every platform's (Telegram's 4096 is the largest).
pub const MAX_LIMIT: u32 = 10_000;

/// One pipeline call, read from the fuzzer's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineInput {
    /// Markup of the transport.
    pub markup: Markup,
    /// Unit of its limit.
    pub unit: LengthUnit,
    /// Its limit, 0 included (read as 1 by the pipeline).
    pub limit: u32,
    /// The message cap, 0 included (read as 1).
    pub max_chunks: u32,
    /// The agent's text.
    pub text: String,
}

impl PipelineInput {
    /// Reads the input: a markup byte, a unit byte, the limit (2 bytes, big-endian, modulo
    /// `MAX_LIMIT + 1`), the cap (1 byte), then the text (invalid UTF-8 replaced).
    pub fn read(data: &[u8]) -> arbitrary::Result<PipelineInput> {
        let mut u = Unstructured::new(data);
        let markup = *u.choose(&MARKUPS)?;
        let unit = *u.choose(&UNITS)?;
        let limit = u.int_in_range(0..=MAX_LIMIT)?;
        let max_chunks = u.int_in_range(0..=u8::MAX)?.into();
        let text = String::from_utf8_lossy(u.take_rest()).into_owned();
        Ok(PipelineInput {
            markup,
            unit,
            limit,
            max_chunks,
            text,
        })
    }

    /// The bytes [`PipelineInput::read`] reads back as this input, for seed files; `None`
    /// when a field is out of the generated range.
    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        let markup = MARKUPS.iter().position(|m| *m == self.markup)?;
        let unit = UNITS.iter().position(|u| *u == self.unit)?;
        let limit = u16::try_from(self.limit)
            .ok()
            .filter(|_| self.limit <= MAX_LIMIT)?;
        let max_chunks = u8::try_from(self.max_chunks).ok()?;
        let mut bytes = vec![u8::try_from(markup).ok()?, u8::try_from(unit).ok()?];
        bytes.extend(limit.to_be_bytes());
        bytes.push(max_chunks);
        bytes.extend(self.text.as_bytes());
        Some(bytes)
    }
}

/// Checks one pipeline call.
pub fn outbound(data: &[u8]) {
    let Ok(input) = PipelineInput::read(data) else {
        return;
    };
    check(&input);
}

/// The properties for one input.
pub fn check(input: &PipelineInput) {
    let caps = Capabilities::text_only(input.markup, input.unit, input.limit);
    let prepared = prepare(&input.text, &caps, input.max_chunks);
    // The secrets are those of the text the pipeline reads, controls replaced by U+FFFD
    // first: `Be������` planted after `Authorization: ` is no secret where
    // `xan: Be\0\0\0…` reads the same once replaced (found by fuzzing, 2026-12-01).
    let read = guest::core::controls::replace_rejected_controls(&input.text);
    // Input that already reads as redaction's output (`https://[redacted]@host`) plants no
    // secret: it passes through as it is (found by fuzzing, 2026-12-01).
    let planted: Vec<String> = secrets_in(&read)
        .into_iter()
        .filter(|secret| worth_looking_for(secret))
        .collect();
    let limit = usize::try_from(input.limit.max(1)).unwrap_or(usize::MAX);
    assert!(
        prepared.messages.len() <= usize::try_from(input.max_chunks.max(1)).unwrap_or(usize::MAX)
    );
    for message in &prepared.messages {
        let length = measure_rendered(message, input.unit, input.markup);
        // A limit below one character's length (4 UTF-8 bytes, 2 UTF-16 units) cannot be
        // met: the pipeline then sends that character alone rather than drop it, with its
        // markup (`<b>?</b>` at a 1-byte limit: found by fuzzing, 2026-12-01).
        let visible = if input.markup == Markup::Html {
            without_tags(message)
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&amp;", "&")
        } else {
            message.clone()
        };
        let one_character = visible.chars().count() == 1;
        assert!(
            length <= limit || (limit < 4 && one_character),
            "{length} > {limit} ({:?}, {:?}): {message:?}",
            input.markup,
            input.unit
        );
        // The shapes read what redaction's looks read: a Markdown message's emphasis
        // underscores as the look's own placeholder (a boundary it judges values by), not
        // the NUL the planted values are searched with (a NUL in `e�\0N���` made a value
        // the look judged plain read as a secret: found by fuzzing, 2026-12-08).
        for part in shape_parts(message, input.markup) {
            assert_redacted(&part, &[]);
        }
        for (index, part) in readable_parts(message, input.markup).iter().enumerate() {
            // A code block's class is the renderer's `language-` and the block's language:
            // the prefix is no text of the input, so a planted value starting with its `-`
            // (`-cq���Authorizat` after a header, and a language `cq���Authorization:`) is
            // met there only by coincidence (found by fuzzing, 2026-12-01).
            let searched = match index {
                0 => part.as_str(),
                _ => part.strip_prefix("language-").unwrap_or(part),
            };
            assert_not_planted(searched, message, &planted);
        }
        if input.markup == Markup::Html
            && let Err(why) = telegram_well_formed(message)
        {
            panic!("Telegram would refuse {message:?}: {why}");
        }
    }
    if let Some(notice) = &prepared.truncation_notice {
        // The notice is the bridge's own words and a count: no text of the input is in
        // it, so a planted value that reads like it (`[truncated: 1` after
        // `Authorization:`) is no echo (found by fuzzing, 2026-12-01). It must still hold
        // nothing of a secret shape.
        for part in shape_parts(notice, input.markup) {
            assert_redacted(&part, &[]);
        }
        if input.markup == Markup::Html {
            assert_eq!(telegram_well_formed(notice), Ok(()), "{notice:?}");
        }
    }
}

/// No secret of the input (`planted`) is in `part`, read from `message`.
fn assert_not_planted(part: &str, message: &str, planted: &[String]) {
    // Redaction's own markers are no text of the input: a planted value that reads like a
    // piece of one (`telegram-token]/` after `GITHUB_TOKEN=:`) is found in
    // `/bot[redacted:telegram-token]/` only by coincidence (found by fuzzing, 2026-12-01).
    // Without a planted value there is nothing to look for, and without a `[` no marker to
    // take out (each starts with one): the replacing below was a quarter of this target's
    // time (perf, 2026-12-02).
    if planted.is_empty() {
        return;
    }
    let unmarked = unmarked(part);
    for secret in planted {
        assert!(
            !unmarked.contains(secret.as_str()),
            "a secret of the input survived: {message:?}"
        );
    }
}

/// `part` with each of redaction's markers replaced by a NUL, which no secret holds.
///
/// One walk over the `[`s: every marker starts with one and holds no other, so no two
/// markers overlap and each `[` starts at most one (a `str::replace` per marker, two
/// hundred of them, was most of this target's time with the catalog: perf, 2026-12-06).
fn unmarked(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    let mut rest = part;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        rest = &rest[open..];
        match marker_at(rest) {
            Some(len) => {
                out.push('\u{0}');
                rest = &rest[len..];
            }
            None => {
                out.push('[');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The length of the marker `text` starts with, if it starts with one.
fn marker_at(text: &str) -> Option<usize> {
    if !text.starts_with('[') {
        return None;
    }
    // A marker runs to its first `]`: the one whole candidate is that far.
    let close = text.find(']')?;
    let candidate = &text[..=close];
    markers()
        .any(|marker| marker == candidate)
        .then_some(candidate.len())
}

/// Nothing of a secret shape is in `message`, and no secret of the input (`planted`).
///
/// A shape match whose secret part starts with redaction's own marker is redaction's
/// output followed by markup (`TOKEN=[redacted]</pre>`: the assignment's value runs to the
/// next space), not a secret; nor is a piece of the marker (`TOKEN=[r` where a small limit
/// cut the marker) or an empty one (`Authorization: ` ending a message, its redacted value
/// starting the next).
///
/// A match a cut made (the rest of a near miss glued to a letter, `?bghp_…`, starting the
/// next message) is no exception: the pipeline's last look reads every message as sent
/// and redacts it there. Until that look, this check carried exceptions for such cut
/// artefacts, which also let through a real join the renderer made at a message's start.
pub fn assert_redacted(message: &str, planted: &[String]) {
    assert_not_planted(message, message, planted);
    for candidate in candidates(message) {
        let shape = &SHAPES[candidate.shape];
        let Some(found) = shape.find(message, candidate.at, 0) else {
            continue;
        };
        if shape.replace(message, &found).is_none() {
            continue;
        }
        let secret = message
            .get(found.keep..found.end)
            .unwrap_or_default()
            .trim_start_matches(['=', ':', ' ', '\t']);
        // The renderer closes what a cut leaves open: `TOKEN=[r</blockquote>` is a marker
        // cut by a small limit, then a closing tag (found by fuzzing, 2026-12-01).
        let secret = without_tags(secret);
        // A value that is only markup delimiters is the renderer's own: `TOKEN=*` ends
        // a heading the mrkdwn renderer wrote in bold, and Slack shows no `*` there
        // (found by fuzzing, 2026-12-01).
        let markup_only = secret.chars().all(|c| matches!(c, '*' | '_' | '~' | '`'));
        assert!(
            markup_only || MARKER.starts_with(secret.as_str()) || secret.starts_with(MARKER),
            "text of the {} shape survived: {secret:?} in {message:?}",
            shape.name
        );
    }
}

/// [`readable_parts`], but a Markdown message's emphasis placeholders kept as redaction's
/// emphasis look writes them: the parts the shapes are asked about.
fn shape_parts(message: &str, markup: Markup) -> Vec<String> {
    match markup {
        Markup::Markdown => markdown_parts(message, false),
        _ => readable_parts(message, markup),
    }
}

/// What a person can read of `message`: for Telegram HTML, the text between the tags with
/// its entities read, and each attribute's value (a link's address, a code block's
/// language) on its own; other markups as sent. A shape match running from an attribute
/// across the renderer's `">` into the text (`language-https://u:p">[redacted:jwt]@`) is
/// in no part a person reads as one (found by fuzzing, 2026-12-01), while a secret split by
/// tags (`ghp_<b>…</b>`) is whole again in the text.
fn readable_parts(message: &str, markup: Markup) -> Vec<String> {
    match markup {
        Markup::Mrkdwn => return mrkdwn_parts(message),
        Markup::Markdown => return markdown_parts(message, true),
        Markup::Plain => return vec![message.to_owned()],
        Markup::Html => {}
    }
    let decode = |text: &str| {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
    };
    let mut parts = vec![decode(&without_tags(message))];
    let mut rest = message;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let tag = &rest[open..open + close];
        let mut attributes = tag;
        while let Some(start) = attributes.find("=\"") {
            let value = &attributes[start + 2..];
            let end = value.find('"').unwrap_or(value.len());
            parts.push(decode(&value[..end]));
            attributes = &value[end.min(value.len())..];
            attributes = attributes.strip_prefix('"').unwrap_or(attributes);
        }
        rest = &rest[open + close + 1..];
    }
    parts
}

/// What a person may read of a Markdown message (Discord renders it): the message as
/// sent, and the message without the delimiters a renderer drops from between two pieces
/// of text: emphasis stars, strikethrough, code ticks, escapes, a link's brackets and a
/// spoiler's bars, which a tap reads as part of its word (`ghp_||0123…||`: found in
/// review, 2026-12-02). Underscores are read as redaction's emphasis look reads them (per
/// line, paired runs are emphasis, shown as a boundary): read as literal text, `d*___…`
/// after `sk-ant-d~` was a key no renderer shows, since that run is emphasis there and the
/// lone `~` and `*` are shown (found by fuzzing, 2026-12-02). Redaction's markers stay,
/// whole or cut at the end of the message or of its line (`PASSWORD=[redac`, and
/// `TOKEN=[r` before the fence the renderer adds to close a code block a cut left open:
/// found by fuzzing, 2026-12-02): they are its output, not text of the input; only those it
/// writes, as redaction's look keeps only those.
///
/// With `nul`, the emphasis placeholders read as NULs, for the search for planted values.
fn markdown_parts(message: &str, nul: bool) -> Vec<String> {
    let dropped = ['*', '~', '`', '\\', '[', ']', '|'];
    // The view shows an emphasis underscore as a placeholder the message does not hold;
    // read as a NUL (which no secret holds) where planted values are searched for: the
    // placeholder is no text of the input, and an input holding that character planted it
    // in a value the message redacted (`PASSWD=\u{E000}it\u{E000} _it_`, found by fuzzing,
    // 2026-12-07).
    let emphasised = guest::core::emphasis::view(message).map(|(view, placeholder)| match nul {
        true => view.replace(placeholder, "\0"),
        false => view,
    });
    let base = emphasised.as_deref().unwrap_or(message);
    let mut rendered = String::with_capacity(message.len());
    // The rest of a marker the last message's cut ended (`y]` of `[redacted:anthropic-ke`)
    // starts this one: it is redaction's output too, and without its `]` it joined the text
    // after it into a value planted elsewhere (`y]:AAHd…` read as `y:AAHd…`, found by
    // fuzzing, 2026-12-07).
    // Also past the fence that opens this message again when the cut fell in a code block
    // (`[redacte` ending one, `d]@��xX` the first line of the block the next opens again:
    // `d@��xX` was planted; found by fuzzing, 2026-12-07).
    let fence = reopened_fence(base);
    let lead = fence + marker_tail_at_start(&base[fence..]);
    rendered.push_str(&base[..lead]);
    let mut rest = &base[lead..];
    while let Some(c) = rest.chars().next() {
        // Every marker starts with `[`: asking each of the catalog's two hundred markers at
        // every character was most of this target's time (22 ms an input, perf 2026-12-06).
        let marker_end = (c == '[')
            .then(|| {
                marker_at(rest).or_else(|| {
                    let line = rest.split('\n').next().unwrap_or(rest);
                    markers().any(|m| m.starts_with(line)).then_some(line.len())
                })
            })
            .flatten();
        let taken = match marker_end {
            Some(end) => {
                rendered.push_str(&rest[..end]);
                end
            }
            None => {
                if !dropped.contains(&c) {
                    rendered.push(c);
                }
                c.len_utf8()
            }
        };
        rest = &rest[taken..];
    }
    if rendered == message {
        return vec![message.to_owned()];
    }
    vec![message.to_owned(), rendered]
}

/// The length of the fence line `text` starts with (a code block a cut split, opened again),
/// 0 when it starts with none.
fn reopened_fence(text: &str) -> usize {
    let line = text.split_inclusive('\n').next().unwrap_or(text);
    match line.starts_with("```") || line.starts_with("~~~") {
        true => line.len(),
        false => 0,
    }
}

/// The length of the piece of a marker `text` starts with when a cut took the marker's
/// head into the message before (`y]`, `key]`): from the start to the first `]` of the
/// first line, holding no `[`, and ending one of redaction's markers; 0 when there is none.
fn marker_tail_at_start(text: &str) -> usize {
    let line = text.split('\n').next().unwrap_or(text);
    let Some(close) = line.find(']') else {
        return 0;
    };
    let piece = &line[..=close];
    match !piece.contains('[') && markers().any(|marker| marker.ends_with(piece)) {
        true => piece.len(),
        false => 0,
    }
}

/// What a person reads of a Slack mrkdwn message: the text with each link `<url|text>`
/// shown as its text and the escapes read, then each address on its own. Read whole, `<https://x|user:p@…>`
/// runs a URL-credentials shape across the `|` that Slack never shows as one (found by
/// fuzzing, 2026-12-01).
fn mrkdwn_parts(message: &str) -> Vec<String> {
    let mut text = String::with_capacity(message.len());
    let mut addresses = Vec::new();
    let mut rest = message;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        let link = &rest[open + 1..];
        let Some(close) = link.find('>') else {
            text.push('<');
            rest = link;
            continue;
        };
        match link[..close].split_once('|') {
            Some((address, shown)) => {
                addresses.push(address.to_owned());
                text.push_str(shown);
            }
            None => addresses.push(link[..close].to_owned()),
        }
        rest = &link[close + 1..];
    }
    text.push_str(rest);
    // Slack shows its three escapes as the characters they stand for: the planted
    // `t; 2 &amp;&amp; true;?` is not in `&lt; 2 &amp;&amp; true;?`, which reads
    // `< 2 && true;?` (found by fuzzing, 2026-12-01).
    let decode = |text: &str| {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    };
    let mut parts = vec![decode(&text)];
    parts.extend(addresses.iter().map(|address| decode(address)));
    parts
}

/// `text` without `<…>` tags.
fn without_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// The tags Telegram's HTML parse mode accepts that the renderer writes.
pub const ALLOWED_TAGS: [&str; 8] = ["b", "i", "s", "u", "a", "code", "pre", "blockquote"];

/// Telegram accepts the message: only allowed tags, balanced and nested; every `<` and `&`
/// begins a tag or one of the four named entities. (The same check as the guest's
/// `pipeline_props` test, which keeps it private to that test.)
pub fn telegram_well_formed(message: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = message;
    while let Some(i) = rest.find(['<', '&']) {
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix('&') {
            let known = ["lt;", "gt;", "amp;", "quot;"]
                .iter()
                .any(|entity| after.starts_with(entity));
            if !known {
                return Err(format!(
                    "bare & before {:?}",
                    after.chars().take(20).collect::<String>()
                ));
            }
            rest = after;
            continue;
        }
        let end = tail.find('>').ok_or("unterminated tag")?;
        let inner = &tail[1..end];
        if let Some(name) = inner.strip_prefix('/') {
            if stack.pop() != Some(name) {
                return Err(format!("unbalanced </{name}>"));
            }
        } else {
            let name = inner.split(' ').next().unwrap_or_default();
            if !ALLOWED_TAGS.contains(&name) {
                return Err(format!("tag {name:?} not allowed"));
            }
            stack.push(name);
        }
        rest = &tail[end + 1..];
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(format!("unclosed {stack:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_marker_is_one_bracketed_run_so_one_walk_finds_them_all() {
        // `unmarked` and `marker_at` read a marker as the text from a `[` to the next `]`;
        // a marker with a second bracket would be missed and its label read as planted
        // text.
        for marker in markers() {
            assert!(marker.starts_with('[') && marker.ends_with(']'), "{marker}");
            assert_eq!(marker.matches(['[', ']']).count(), 2, "{marker}");
        }
        assert_eq!(
            unmarked("a [redacted] b [redacted:github-token]] [x] [redacted"),
            "a \u{0} b \u{0}] [x] [redacted"
        );
        assert_eq!(marker_at("[redacted:jwt] z"), Some(14));
        assert_eq!(marker_at("[redacted:nope] z"), None);
    }
}
