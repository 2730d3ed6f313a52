//! The outbound pipeline every send goes through (docs/architecture.md#the-outbound-pipeline, I3,
//! I22, docs/decisions.md#decision-3-the-truncation-notice-is-a-message-of-its-own): controls →
//! redact → split at structure → render per piece → chunk → last look → cap.
//!
//! Each stage is entered once, in that order: the splitter renders while it parses
//! (`blocks.rs` calls `render.rs`), and every stage measures with `measure.rs`, so no stage
//! calls back into an earlier or later one (`pipeline_seams.rs` holds the import graph).

use crate::core::blocks::split;
use crate::core::chunk::chunk_rendered;
use crate::core::controls::replace_rejected_controls;
use crate::core::measure::{Meter, measure_rendered};
use crate::core::readable;
use crate::core::redact::{Redacted, redact, redact_shapes, union};
use crate::core::render::escape;
use crate::core::secrets::markers;
use crate::model::{Capabilities, LengthUnit, Markup};

/// What one send posts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Final texts, each within the limit, at most `max_chunks` of them.
    pub messages: Vec<String>,
    /// `[truncated: N more message(s) were not sent]`, redacted and safe in every markup, when
    /// messages were dropped; it is sent as a message of its own, outside the cap.
    pub truncation_notice: Option<String>,
    /// Rule names that fired (for the log line; never the secret).
    pub redactions: Vec<&'static str>,
}

/// Turns an agent or bridge text into the messages to post on a transport with `caps`.
///
/// Never panics; `""` (or only whitespace) gives no messages. A `max_chunks` of 0 and a
/// `max_message_length` of 0 are read as 1 so a misconfiguration still sends something.
pub fn prepare(text: &str, caps: &Capabilities, max_chunks: u32) -> Prepared {
    // Controls go first, so redaction reads the text that is sent and every later stage
    // measures it: a vertical tab is a blank to the shapes but shows as U+FFFD, so
    // `TOKEN=\x0bghp_…` redacted before the swap was sent as `TOKEN=�ghp_…` with its
    // value whole (found by fuzzing, 2026-12-01).
    let controlled = replace_rejected_controls(text);
    // Telegram HTML and plain text are rendered here, so the last look reads each message
    // exactly as it is shown, renderer joins included: the source needs only the shapes.
    // Markdown and mrkdwn are rendered (again) by the platform, so the source also gets
    // redaction's looks through markup (emphasis, dropped delimiters), which guess at what
    // that renderer joins. (The looks also keep a token that only rendering joins from
    // being cut in two; here that needs a run of the whole limit without a space.)
    let redacted = match caps.markup {
        Markup::Html | Markup::Plain => redact_shapes(&controlled),
        Markup::Markdown | Markup::Mrkdwn => redact(&controlled),
    };
    let clean = redacted.text.as_str();
    let limit = usize::try_from(caps.max_message_length)
        .unwrap_or(usize::MAX)
        .max(1);
    let unit = caps.length_unit;
    let meter = Meter::for_source(unit, caps.markup);
    let mut messages = Vec::new();
    for piece in split(clean, limit, meter, caps.markup) {
        if caps.markup == Markup::Markdown {
            // Markdown is sent as written, and the splitter measures some blocks as they
            // render (a setext heading's underline), so a piece can come out a few units
            // over: measured as sent, such a piece is cut like plain text (found by a
            // random property run: 71 bytes at a 68-byte limit).
            let sent = measure_rendered(&piece.rendered, unit, caps.markup);
            if sent > limit {
                messages.extend(chunk_rendered(
                    piece.rendered.into_owned(),
                    sent,
                    limit,
                    unit,
                    caps.markup,
                ));
            } else if !piece.rendered.trim().is_empty() {
                messages.push(piece.rendered.into_owned());
            }
        } else {
            messages.extend(chunk_rendered(
                piece.rendered.into_owned(),
                piece.visible,
                limit,
                unit,
                caps.markup,
            ));
        }
    }
    let mut rules = redacted.rules;
    let secrets = Secrets::replaced(&controlled, clean);
    let mut messages = messages
        .into_iter()
        .flat_map(|message| {
            last_look(
                message,
                limit,
                unit,
                caps.markup,
                &secrets,
                &mut rules,
                LAST_LOOK_ROUNDS,
            )
        })
        .collect::<Vec<_>>();
    let cap = usize::try_from(max_chunks).unwrap_or(usize::MAX).max(1);
    let dropped = messages.len().saturating_sub(cap);
    messages.truncate(cap);
    let truncation_notice = (dropped > 0).then(|| {
        redact(&format!(
            "[truncated: {dropped} more message(s) were not sent]"
        ))
        .text
    });
    Prepared {
        messages,
        truncation_notice,
        redactions: rules,
    }
}

/// How many times the pieces of a message the last look cut again are looked at again: a
/// piece's look can lengthen it (a cut marker read whole), so the cuts need not settle,
/// and each round is another piece of a rare message (found by fuzzing: one was enough).
const LAST_LOOK_ROUNDS: usize = 4;

/// The last look at a message: what a person reads of it ([`readable::parts`]) is redacted
/// once more. Redaction read the source, and the renderer or a cut can still join text into
/// a shape there (a code span's line break read as a space, an emphasis run's leftover
/// underscores: found by fuzzing). A message where that look finds a secret is sent as its
/// redacted readable text, escaped and without markup, which only such a message pays;
/// cut again when a replacement made it longer than the limit.
///
/// Markdown messages are the redacted source as written, so only a cut can make something
/// new there, on a message's first or last lines: those are looked at, and the whole
/// message only when they show something. The platform still renders them, so they are
/// read through redaction's looks at markup: a cut can part `ghp_||0123…||` (a Discord
/// spoiler, read as part of its word once tapped) from the letter it was glued to, and
/// only the spoiler's view shows the token. Mrkdwn is written by the renderer, which reads
/// entities and code spans as CommonMark does: `ghp&#95;…` in the source is `ghp_…` in
/// the message, anywhere in it (found in review, 2026-12-01), so every mrkdwn message is
/// read whole.
///
/// The shapes need a boundary around a token, and rendering can glue a secret the source
/// held to letters on both sides: `cio…XwW*hc*` then `` `\nioEc…` `` on the next line
/// shows, in Telegram, the crates.io token whole between `h` and `V` (found by fuzzing,
/// 2026-12-07). So each part is also searched for the source's own secrets (`secrets`).
///
/// The pieces of such a message are cut again, and a cut can make a shape of its own (a
/// value parted from the placeholder that made it plain, the rest of a near miss starting
/// a message), so each piece gets the same look, `rounds` more times at most
/// ([`LAST_LOOK_ROUNDS`] for a message).
fn last_look(
    message: String,
    limit: usize,
    unit: LengthUnit,
    markup: Markup,
    secrets: &Secrets,
    rules: &mut Vec<&'static str>,
    rounds: usize,
) -> Vec<String> {
    let Some(pieces) = look_once(&message, limit, unit, markup, secrets, rules) else {
        return vec![message];
    };
    // One piece is the looked-at text itself, whole: nothing new to read.
    if pieces.len() == 1 || rounds == 0 {
        return pieces;
    }
    pieces
        .into_iter()
        .flat_map(|piece| last_look(piece, limit, unit, markup, secrets, rules, rounds - 1))
        .collect()
}

/// One look at `message`: `None` when it stays as it is, else its redacted readable text,
/// escaped and cut to the limit.
fn look_once(
    message: &str,
    limit: usize,
    unit: LengthUnit,
    markup: Markup,
    secrets: &Secrets,
    rules: &mut Vec<&'static str>,
) -> Option<Vec<String>> {
    if markup == Markup::Markdown && !edges_show_a_secret(message) {
        return None;
    }
    let mut hid = false;
    let mut seen = readable::parts(message, markup)
        .iter()
        .map(|part| {
            // Hidden first, then read by the shapes: a marker in place of a secret is a
            // boundary, and the text after it can read as a token it was not before
            // (`…Qwagithub_pat_…` became `[redacted:secret]github_pat_…`: found by fuzzing).
            let hidden = secrets.hide(part);
            hid |= hidden.is_some();
            look_at(hidden.as_deref().unwrap_or(part), markup)
        })
        .collect::<Vec<_>>();
    if !hid && seen.iter().all(|part| part.rules.is_empty()) {
        return None;
    }
    for part in &seen {
        *rules = union(rules, &part.rules);
    }
    // The readable text comes first; attributes (a link's address) are left out with
    // the markup. Telegram's and Slack's parts were read out of the markup (entities and
    // escapes read), so they are escaped again; the others are the message as sent.
    let text = seen.swap_remove(0).text;
    let plain = match markup {
        Markup::Html | Markup::Mrkdwn => escape(&text, markup),
        Markup::Markdown | Markup::Plain => text,
    };
    let sent = measure_rendered(&plain, unit, markup);
    Some(chunk_rendered(plain, sent, limit, unit, markup))
}

/// Whether the first two or last two lines of a Markdown `message` may hold a secret, as
/// written or through redaction's looks: a cut's neighbours (a fence a cut reopens takes
/// the first line). A gate only: a marker a cut left short passes it, and [`look_at`] then
/// reads that marker whole.
fn edges_show_a_secret(message: &str) -> bool {
    let shows = |text: &str| !redact(text).rules.is_empty();
    let head_end = memchr::memchr_iter(b'\n', message.as_bytes())
        .nth(1)
        .map_or(message.len(), |i| i + 1);
    let tail_start = memchr::memrchr_iter(b'\n', message.as_bytes())
        .nth(2)
        .map_or(0, |i| i + 1);
    if tail_start <= head_end {
        return shows(message);
    }
    shows(message.get(..head_end).unwrap_or_default())
        || shows(message.get(tail_start..).unwrap_or_default())
}

/// `part` redacted by the shapes (through redaction's looks at markup where the platform
/// renders `part` further: Markdown), read with a redaction marker that a cut left short
/// read whole: `PASSWORD=[r` is redaction's own output cut by a small limit, not a value
/// (else its look sent `PASSWORD=[redacted]` and the next message `edacted]` again; found
/// by fuzzing). The cut is where the part ends, before what the chunker adds to close it
/// (a fence, a line break).
fn look_at(part: &str, markup: Markup) -> Redacted {
    let read = match markup {
        Markup::Markdown => redact,
        Markup::Html | Markup::Mrkdwn | Markup::Plain => redact_shapes,
    };
    let cut = part.trim_end_matches("```").trim_end_matches(['\n', '\r']);
    let Some(rest) = cut_marker_rest(cut) else {
        return read(part);
    };
    let after = part.get(cut.len()..).unwrap_or_default();
    let seen = read(&format!("{cut}{rest}{after}"));
    let completed = format!("{rest}{after}");
    match seen.text.strip_suffix(completed.as_str()) {
        Some(text) => Redacted {
            text: format!("{text}{after}"),
            rules: seen.rules,
        },
        None => seen,
    }
}
/// The secrets redaction replaced in a source, each with the marker that took its place,
/// read back by laying the redacted text over the source: what lies between two markers
/// is the source's text as written, so each marker stands for the source's text between
/// its neighbours. Where that does not hold (a reading that dropped invisible characters
/// inside a replacement), the reading stops: a secret missed here is one the last look's
/// shapes still see unless rendering glues it, and a wrong one would hide innocent text.
pub struct Secrets {
    /// Searches a readable part for every secret at once; `None` when there are none.
    finder: Option<aho_corasick::AhoCorasick>,
    /// The marker of each pattern of `finder`, in its order.
    markers: Vec<String>,
}

/// Shorter replaced values (a short password) are left to the shapes: searched for as bare
/// text they would hide common words a message happens to hold. In characters: three
/// replacement characters are nine bytes, and were hidden inside another value that a cut
/// then parted from what made it plain (found by fuzzing, 2026-12-07).
const SECRET_MIN_LEN: usize = 8;

impl Secrets {
    /// The secrets of `source` that `redacted` (its redaction) replaced.
    pub fn replaced(source: &str, redacted: &str) -> Secrets {
        let mut values = Vec::new();
        let mut markers = Vec::new();
        let mut source_at = 0;
        let mut pending: Option<&str> = None;
        // (marker start, marker end) in `redacted`, then the literal after it.
        let mut found = marker_spans(redacted).peekable();
        // The source starts with the redacted text's first literal.
        let first_end = found.peek().map_or(redacted.len(), |&(start, _)| start);
        let Some(first) = redacted.get(..first_end) else {
            return Secrets::none();
        };
        if !source.starts_with(first) {
            return Secrets::none();
        }
        source_at += first.len();
        while let Some((start, end)) = found.next() {
            let marker = redacted.get(start..end).unwrap_or_default();
            pending.get_or_insert(marker);
            let literal_end = found.peek().map_or(redacted.len(), |&(next, _)| next);
            let literal = redacted.get(end..literal_end).unwrap_or_default();
            let rest = source.get(source_at..).unwrap_or_default();
            let secret_len = if found.peek().is_none() {
                // The last marker: the source ends with the last literal.
                if !rest.ends_with(literal) {
                    break;
                }
                rest.len() - literal.len()
            } else if literal.is_empty() {
                // Two markers side by side: one value stands for both.
                continue;
            } else {
                let Some(at) = literal_after_value(rest, literal) else {
                    break;
                };
                at
            };
            let value = rest.get(..secret_len).unwrap_or_default();
            if let Some(marker) = pending.take()
                && value.chars().nth(SECRET_MIN_LEN - 1).is_some()
            {
                values.push(value);
                markers.push(marker.to_owned());
            }
            source_at += secret_len + literal.len();
        }
        if values.is_empty() {
            return Secrets::none();
        }
        // A text repeats its secrets (an agent quotes the same key many times).
        let mut seen = std::collections::HashSet::new();
        let (values, markers): (Vec<&str>, Vec<String>) = values
            .into_iter()
            .zip(markers)
            .filter(|(value, _)| seen.insert(*value))
            .unzip();
        // The contiguous NFA: built in one pass; a DFA's build costs more than the few
        // messages of one send take to search.
        let finder = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
            .build(&values)
            .ok();
        Secrets { finder, markers }
    }

    fn none() -> Secrets {
        Secrets {
            finder: None,
            markers: Vec::new(),
        }
    }

    /// `text` with each of the secrets replaced by its marker, when it shows one.
    fn hide(&self, text: &str) -> Option<String> {
        let finder = self.finder.as_ref()?;
        let mut out = String::new();
        let mut at = 0;
        for found in finder.find_iter(text) {
            out.push_str(text.get(at..found.start()).unwrap_or_default());
            out.push_str(
                self.markers
                    .get(found.pattern().as_usize())
                    .map_or("[redacted]", String::as_str),
            );
            at = found.end();
        }
        if at == 0 {
            return None;
        }
        out.push_str(text.get(at..).unwrap_or_default());
        Some(out)
    }
}

/// Where `literal` (the text after a marker) starts in `rest` (the source from the value
/// the marker stands for): its first place past the first byte, since a marker always
/// replaced something. By its first byte and then whole: a searcher built for each literal
/// (they run to kilobytes) cost more than the rest of the last look.
fn literal_after_value(rest: &str, literal: &str) -> Option<usize> {
    let first = *literal.as_bytes().first()?;
    let bytes = rest.as_bytes();
    memchr::memchr_iter(first, bytes.get(1..)?)
        .map(|at| at + 1)
        .find(|&at| {
            bytes
                .get(at..)
                .is_some_and(|tail| tail.starts_with(literal.as_bytes()))
        })
}

/// Where the redaction markers of `text` are, in order.
fn marker_spans(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    memchr::memmem::find_iter(text.as_bytes(), b"[redacted").filter_map(move |start| {
        let tail = text.get(start..)?;
        markers()
            .filter(|marker| tail.starts_with(marker))
            .map(str::len)
            .max()
            .map(|len| (start, start + len))
    })
}

/// What completes the redaction marker `text` ends inside of, if it does. A header name
/// and its blank at the very end is a cut right before the marker: the source's own
/// `Authorization: ` would have had its blank replaced, so only a cut leaves it bare.
fn cut_marker_rest(text: &str) -> Option<&'static str> {
    let before_blank = text.trim_end_matches([' ', '\t']);
    if before_blank.len() < text.len() && before_blank.ends_with(':') {
        return Some("[redacted]");
    }
    let open = text.rfind('[')?;
    let tail = text.get(open..)?;
    markers()
        .find(|marker| marker.len() > tail.len() && marker.starts_with(tail))
        .and_then(|marker| marker.get(tail.len()..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_that_rendering_glues_back_together_is_hidden_in_what_a_person_reads() {
        // The fuzz finding of 2026-12-07: the emphasis ends in the token's first letter,
        // the code span's dropped line break joins the rest of it.
        let token = "cioEcWd7iiWk1uD5mKtMMeYEAvT9d3JQXwW";
        let text = format!("{token}*hc*`\n{}V\n`s", &token[1..]);
        let sent = prepare(&text, &Capabilities::TELEGRAM_TEXT, 10).messages;
        assert!(!sent.is_empty());
        for message in &sent {
            for part in readable::parts(message, Markup::Html) {
                assert!(!part.contains(token), "{part:?} in {sent:?}");
            }
        }
    }

    #[test]
    fn the_pieces_of_a_message_the_last_look_cut_again_are_looked_at_too() {
        // Telegram HTML at 42 units: the value `E…****` is plain, and stays; the last look
        // hid a secret (here three replacement characters, as the fuzzer's input had them
        // read) inside it three times, which made the message longer than the limit, and cut
        // it between `E[redacted][redacted][redacted]***` and the `*` that made it plain.
        // That piece was sent unread: a value of the assignment shape (found by fuzzing,
        // 2026-12-07).
        let f = "\u{FFFD}";
        let message = format!("*{f}TOKEN=E{}****TOKEN=[redacted]", f.repeat(9));
        let secrets = Secrets {
            finder: aho_corasick::AhoCorasick::new([f.repeat(3)]).ok(),
            markers: vec!["[redacted]".to_owned()],
        };
        let mut rules = Vec::new();
        let sent = last_look(
            message,
            42,
            LengthUnit::Utf16,
            Markup::Html,
            &secrets,
            &mut rules,
            LAST_LOOK_ROUNDS,
        );
        assert!(sent.len() > 1, "the look cut it again: {sent:?}");
        for piece in &sent {
            for part in readable::parts(piece, Markup::Html) {
                let again = crate::core::redact::redact_shapes(&part);
                assert_eq!(again.text, part, "in {sent:?}");
            }
        }
    }

    #[test]
    fn a_replaced_value_of_few_characters_is_left_to_the_shapes_however_many_bytes() {
        // Three replacement characters are nine bytes: taken as long enough, they were
        // hidden wherever they occurred, inside another value (the fuzz finding above).
        let f = "\u{FFFD}";
        let source = format!("TOKEN={} and {}", f.repeat(3), f.repeat(4));
        let redacted = crate::core::redact::redact_shapes(&source).text;
        assert_eq!(redacted, format!("TOKEN=[redacted] and {}", f.repeat(4)));
        assert!(
            Secrets::replaced(&source, &redacted)
                .hide(&source)
                .is_none()
        );
        // Eight characters are enough.
        let source = "TOKEN=Zq8vLw3R and Zq8vLw3R";
        let redacted = crate::core::redact::redact_shapes(source).text;
        assert_eq!(redacted, "TOKEN=[redacted] and Zq8vLw3R");
        let hidden = Secrets::replaced(source, &redacted).hide(source);
        assert_eq!(hidden.as_deref(), Some("TOKEN=[redacted] and [redacted]"));
    }

    #[test]
    fn the_replaced_secrets_are_read_back_from_between_the_markers() {
        let source = "key ghp_Tq7Wm2Xc9Lr4Vb8Nz3Hs6Kd1Pf5Jy0Ga2Ue7 and PASSWORD=Hq7Rt2Wz9Lm4Xv8N.";
        let redacted = crate::core::redact::redact_shapes(source).text;
        let secrets = Secrets::replaced(source, &redacted);
        let glued = "xghp_Tq7Wm2Xc9Lr4Vb8Nz3Hs6Kd1Pf5Jy0Ga2Ue7y Hq7Rt2Wz9Lm4Xv8Nz";
        let hidden = secrets.hide(glued).expect("both are found");
        assert!(!hidden.contains("Tq7Wm2"), "{hidden}");
        assert!(!hidden.contains("Hq7Rt2"), "{hidden}");
        // Text with nothing replaced, or a redaction that is not the source's, gives none.
        assert!(Secrets::replaced(source, source).hide(glued).is_none());
        assert!(
            Secrets::replaced(source, "other [redacted] text")
                .hide(glued)
                .is_none()
        );
    }
}
