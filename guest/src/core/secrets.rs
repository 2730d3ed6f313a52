//! The one list of secret shapes (I3, I10, I36; docs/security.md#redaction).
//!
//! Redaction (`redact.rs`) replaces these shapes in every outbound text and config
//! (`config.rs`) refuses values that hold one. Two lists drifted apart once: a Discord token
//! of a current 19-digit bot id was refused in a config file but sent in a reply. One list
//! means a shape either place knows, both know.
//!
//! Each shape follows its platform's documented token format:
//! - Discord bot token: base64(bot id) `.` base64(timestamp) `.` HMAC. Ids are 17–20 decimal
//!   digits with no leading zero; base64 of an ASCII digit string starts with `M` (first digit
//!   1–3), `N` (4–7) or `O` (8–9) and, without padding, is 23, 24, 26 or 27 characters long
//!   (25 cannot occur). The timestamp is 6 characters, the HMAC 27 or more.
//! - Telegram bot token: `<bot id>:<secret>`; the documented example has a 6-digit id and a
//!   34-character secret, real tokens 8–10 digits and 35 characters.
//! - Slack: `xoxb-` (bot), `xoxp-` (user), `xoxa-`/`xoxr-`/`xoxs-` (legacy, refresh),
//!   `xoxe-` (rotating refresh), `xoxc-`/`xoxd-` (browser session) and `xapp-` (app-level).
//! - GitHub: `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 36 base62 characters, and fine-grained
//!   `github_pat_` + 82 characters of `[A-Za-z0-9_]`.
//! - OpenAI: `sk-` with `proj-`, `svcacct-`, `admin-`, `None-` or nothing, then base64url
//!   characters; Anthropic: `sk-ant-` (`api03-`, `admin01-`, `oat01-`, …).
//! - AWS access key ids `AKIA`/`ASIA` + 16; Google API keys `AIza` + 35; npm `npm_` + 36;
//!   JWTs (`eyJ` header, three dot-separated base64url parts); PEM and PGP private keys.
//! - Context shapes: credential headers, `Bearer` values, `NAME=value` assignments whose
//!   upper-case name says it holds a secret, and `user:password@` in URLs.
//!
//! Every shape is written twice. [`Shape::pattern`] is the specification as a regex; a
//! reference engine in the tests applies the patterns one after another with regex-lite, as
//! redaction once did. The matchers below are what runs: a regex pass per shape cost 3–6 ms per
//! 64 KiB, while these check a shape only where its trigger byte is. A differential test holds
//! the two equal on generated text.

use crate::core::line_reuse;
use crate::core::scan::positions_of;
/// Shared with the reference engine in the tests, which cuts its matches the same way.
pub use crate::core::secret_values::value_len;

/// How redaction replaces a match of a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacement {
    /// Always this text.
    Fixed(&'static str),
    /// `<header name>: [redacted]`, the name as written; a value starting with `Bearer` is
    /// kept whole, so the bearer shape can redact it and keep the scheme visible.
    Header,
    /// `<NAME>=[redacted]`.
    Assignment,
    /// `<scheme>://[redacted]@`.
    UrlCredentials,
}

/// One secret shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// The rule name redaction reports (I36: the name, never the secret).
    pub name: &'static str,
    /// The shape as a regex-lite pattern: the specification the matcher is tested against.
    /// Group 1 is the part [`Replacement::Header`], [`Replacement::Assignment`] and
    /// [`Replacement::UrlCredentials`] keep, group 2 a header's value. The private key's
    /// pattern covers a key with its END line; one without takes the base64 lines under its
    /// BEGIN line, which regex-lite (no lookahead) cannot say.
    pub pattern: &'static str,
    /// How a match is replaced.
    pub replacement: Replacement,
    find: Finder,
}

/// The match of a shape whose trigger is at `trigger`, starting at or after `from`.
type Finder = fn(text: &[u8], trigger: usize, from: usize) -> Option<Found>;

/// Where a shape matched, in bytes; every offset is a char boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Start of the match.
    pub start: usize,
    /// End of the match.
    pub end: usize,
    /// End of the part the replacement keeps (the header or variable name, the scheme with
    /// `://`); `start` for fixed replacements.
    pub keep: usize,
    /// The match stays as it is (a header whose value is a `Bearer` credential).
    pub keep_whole: bool,
}

/// Index of the private-key shape in [`SHAPES`]: redaction handles it before the others,
/// because a key block spans lines.
pub const PRIVATE_KEY: usize = 0;

/// Every secret shape, in the order redaction applies them: a later shape sees the text the
/// earlier ones left, so order decides what a text becomes. The original's order
/// put the tokens first; the shapes that recognise a secret by its context (a header's or
/// a variable's name, a URL's scheme) now come first, so a token that runs into that
/// context can no longer take it away before they see it (`eyJ….eyJ….xSTHUB_TOKEN=value`
/// left the value bare: found by fuzzing). The tokens still see the names these keep.
pub const SHAPES: [Shape; 17] = [
    Shape {
        name: "private-key",
        pattern: r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        replacement: Replacement::Fixed("[redacted:private-key]"),
        find: private_key_header,
    },
    Shape {
        name: "auth-header",
        pattern: r"(?i)\b(Authorization|X-Api-Key|X-Auth-Token|X-Access-Token)[ \t]*:[ \t]*((?:[^\r\n]*\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*)+[^\r\n]*|[^\r\n]+)",
        replacement: Replacement::Header,
        find: auth_header,
    },
    Shape {
        // A name that is only the word (`TOKEN=`, `PASSWORD=`) counts too: the original's
        // pattern wanted a character before the word and let `PASSWORD=hunter2` through.
        name: "env-secret-assignment",
        pattern: r#"\b((?:[A-Z_][A-Z0-9_]*)?(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|ACCESS_KEY)[A-Z0-9_]*)=("[^"\n]*"|'[^'\n]*'|"[^"]*[=:>][ \t]*"[^\r\n]*|'[^']*[=:>][ \t]*'[^\r\n]*|"[^"]*"[^ \t\r\n][^\r\n]*|'[^']*'[^ \t\r\n][^\r\n]*|"[^"]*"|'[^']*'|[^\s"'`]*=(?:"[^"\n]*"|'[^'\n]*'|"[^"]*[=:>][ \t]*"[^\r\n]*|'[^']*[=:>][ \t]*'[^\r\n]*|"[^"]*"[^ \t\r\n][^\r\n]*|'[^']*'[^ \t\r\n][^\r\n]*|"[^"]*"|'[^']*')|(?:[^\s"'`]*(?:\b(?i:bearer)\s+[A-Za-z0-9._~+/-]{6,}=*|://[^\s/@:]+:[^\s/@]+@))+[^\s"'`]*|[^\s"'`]+)"#,
        replacement: Replacement::Assignment,
        find: assignment,
    },
    Shape {
        name: "bearer-header",
        pattern: r"(?i)\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*",
        replacement: Replacement::Fixed("Bearer [redacted]"),
        find: bearer,
    },
    Shape {
        name: "url-credentials",
        // The scheme may be missing or already replaced: `Bearer abc…https://u:p@`
        // loses `abc…https` to the bearer shape, and `[redacted]://u:p@` must still go
        // (found by fuzzing the pipeline, 2026-12-01).
        pattern: r"(\b[A-Za-z][A-Za-z0-9+.-]*://|://)[^\s/@:]+:[^\s/@]+@",
        replacement: Replacement::UrlCredentials,
        find: url_credentials,
    },
    Shape {
        name: "anthropic-key",
        pattern: r"\bsk-ant-[A-Za-z0-9_-]{16,}",
        replacement: Replacement::Fixed("[redacted:anthropic-key]"),
        find: anthropic,
    },
    Shape {
        // `sk-` then base64url: legacy keys are 48 alphanumerics, project and service keys
        // (`sk-proj-`, `sk-svcacct-`, `sk-admin-`, `sk-None-`) carry `-` and `_`, which an
        // alphanumeric class stopped at, leaving the rest of the key visible.
        name: "openai-key",
        pattern: r"\bsk-[A-Za-z0-9_-]{16,}",
        replacement: Replacement::Fixed("[redacted:openai-key]"),
        find: openai,
    },
    Shape {
        name: "github-token",
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{22,})",
        replacement: Replacement::Fixed("[redacted:github-token]"),
        find: github,
    },
    Shape {
        name: "slack-bot-token",
        pattern: r"\bxox[abcdeprs]-[A-Za-z0-9-]{10,}",
        replacement: Replacement::Fixed("[redacted:slack-token]"),
        find: slack_bot,
    },
    Shape {
        name: "slack-app-token",
        pattern: r"\bxapp-[A-Za-z0-9-]{10,}",
        replacement: Replacement::Fixed("[redacted:slack-token]"),
        find: slack_app,
    },
    Shape {
        name: "npm-token",
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        replacement: Replacement::Fixed("[redacted:npm-token]"),
        find: npm,
    },
    Shape {
        name: "discord-token",
        pattern: r"\b[MNO](?:[A-Za-z0-9]{22}|[A-Za-z0-9]{23}|[A-Za-z0-9]{25}|[A-Za-z0-9]{26})\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",
        replacement: Replacement::Fixed("[redacted:discord-token]"),
        find: discord,
    },
    Shape {
        name: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        replacement: Replacement::Fixed("[redacted:jwt]"),
        find: jwt,
    },
    Shape {
        name: "aws-access-key",
        pattern: r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
        replacement: Replacement::Fixed("[redacted:aws-key]"),
        find: aws,
    },
    Shape {
        name: "google-api-key",
        pattern: r"\bAIza[A-Za-z0-9_-]{35}",
        replacement: Replacement::Fixed("[redacted:google-key]"),
        find: google,
    },
    Shape {
        name: "telegram-bot-token",
        pattern: r"[0-9]{6,12}:[A-Za-z0-9_-]{30,}",
        replacement: Replacement::Fixed("[redacted:telegram-token]"),
        find: telegram,
    },
    Shape {
        // `/bot<id>:<secret>/` has no word boundary before the id, so the shape above misses it.
        name: "telegram-bot-url",
        pattern: r"/bot[0-9]{6,12}:[A-Za-z0-9_-]{20,}",
        replacement: Replacement::Fixed("/bot[redacted:telegram-token]"),
        find: telegram_url,
    },
];

impl Shape {
    /// The match whose trigger (a position [`candidates`] reported for this shape) is at
    /// `trigger`, if it starts at or after `from`; `text` is the whole text, so word
    /// boundaries look at what precedes `from`.
    pub fn find(&self, text: &str, trigger: usize, from: usize) -> Option<Found> {
        (self.find)(text.as_bytes(), trigger, from)
    }

    /// What `found` becomes, as the kept part of the match and the text after it; `None`
    /// when the match stays as it is (a bearer header, or text already redacted).
    pub fn replace<'t>(&self, text: &'t str, found: &Found) -> Option<(&'t str, &'static str)> {
        if found.keep_whole {
            return None;
        }
        let kept = text.get(found.start..found.keep)?;
        let tail = match self.replacement {
            Replacement::Fixed(fixed) => fixed,
            Replacement::Header => ": [redacted]",
            Replacement::Assignment => "=[redacted]",
            Replacement::UrlCredentials => "[redacted]@",
        };
        (text.get(found.keep..found.end) != Some(tail)).then_some((kept, tail))
    }
}

/// Every marker redaction writes in place of a secret (`[redacted]`, `[redacted:jwt]`, …),
/// from its `[` to its `]`.
/// The catalog's markers (`[redacted:stripe]`, …) are in it too: a later look that did not
/// know one would read its brackets as markup and its label as text.
pub fn markers() -> impl Iterator<Item = &'static str> {
    std::iter::once("[redacted]")
        .chain(SHAPES.iter().filter_map(|shape| match shape.replacement {
            Replacement::Fixed(fixed) => fixed.find('[').and_then(|open| fixed.get(open..)),
            _ => None,
        }))
        .chain(crate::core::secret_index::SPAN_MARKERS.iter().copied())
}

/// A position where a shape may match, found by [`candidates`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Candidate {
    /// The trigger's byte offset, as [`Shape::find`] takes it.
    pub at: usize,
    /// Index into [`SHAPES`].
    pub shape: usize,
}

/// Whether `text` holds a secret of any shape: what config refuses (I10). A header that
/// only carries a `Bearer` value and text already redacted are not secrets by themselves.
///
/// The catalog's families and the generic shapes (`secret_spans.rs`) count too: a Stripe or
/// Hugging Face key written literally in a config file was accepted, because only the
/// shapes here were asked, while a reply holding it was redacted.
pub fn contains_secret(text: &str) -> bool {
    candidates(text).iter().any(|c| {
        SHAPES.get(c.shape).is_some_and(|shape| {
            shape
                .find(text, c.at, 0)
                .is_some_and(|found| shape.replace(text, &found).is_some())
        })
    }) || crate::core::secret_spans::contains_span(text)
}

/// The bytes where a trigger is recognised: each is in its shapes' literal and rarer in
/// prose than lower-case letters, so most bytes are passed by a block compare.
const TRIGGERS: [u8; 12] = *b"-_:=@JAbBMNO";

/// Every position where a shape may match, sorted by position, in one pass over `text`.
///
/// A superset: every match of a shape has its trigger reported (the differential test
/// checks it against the regexes), while each check is a few byte compares, so prose full
/// of trigger words costs no more than any other prose. Positions come from local bytes
/// only, so the same text always gives the same candidates wherever it is cut from.
///
/// Each candidate lies on its trigger's line and depends on that line's bytes alone, so
/// inside a redaction the lines a text shares with the last one scanned keep their
/// candidates (see `line_reuse.rs`).
pub fn candidates(text: &str) -> Vec<Candidate> {
    let bytes = text.as_bytes();
    line_reuse::recall(&CANDIDATES, bytes, |last| match last {
        Some((old, found)) => line_reuse::by_line(
            old,
            found,
            bytes,
            |c| c.at,
            |c, o, n| Candidate {
                at: c.at - o + n,
                shape: c.shape,
            },
            |from, to, out| candidates_in(bytes, from, to, out),
        ),
        None => {
            let mut out = Vec::new();
            candidates_in(bytes, 0, bytes.len(), &mut out);
            out
        }
    })
}

thread_local! {
    /// The trigger scan's last text and candidates, within one redaction (see
    /// `line_reuse.rs`).
    static CANDIDATES: line_reuse::Memory<Candidate> = const { std::cell::RefCell::new(None) };
}

/// Appends the candidates whose trigger is in `bytes[from..to]` (whole lines), sorted.
fn candidates_in(bytes: &[u8], from: usize, to: usize, out: &mut Vec<Candidate>) {
    let first = out.len();
    // Each trigger byte is checked where the block compare found it: eight table look-ups
    // folded per window, then a look-up and a branch per byte of any window holding a
    // trigger, were a quarter of the Slack pipeline (callgrind, 2026-12-02); aho-corasick on
    // the literal prefixes was six times slower (their first bytes are common letters, so
    // its prefilter cannot skip).
    for at in positions_of(bytes.get(from..to).unwrap_or_default(), TRIGGERS) {
        check(bytes, from + at, out);
    }
    // Look-backs report a start before the trigger (`github_` six bytes back), so a later
    // trigger can report an earlier position; the list is nearly sorted, which sorts fast.
    if let Some(found) = out.get_mut(first..) {
        found.sort();
    }
}

/// Reports the shapes whose trigger is the byte at `i`.
fn check(bytes: &[u8], i: usize, out: &mut Vec<Candidate>) {
    let mut push = |at: usize, shape: usize| out.push(Candidate { at, shape });
    let before = |n: usize| i.checked_sub(n).and_then(|s| bytes.get(s..i));
    let after = |lit: &[u8]| bytes.get(i + 1..i + 1 + lit.len()) == Some(lit);
    match bytes.get(i).copied().unwrap_or_default() {
        b'-' => {
            // `\bsk-`: "ask-me" cannot match.
            if before(2) == Some(b"sk") && !before(3).is_some_and(|b| is_word(b[0])) {
                if after(b"ant-") {
                    push(i - 2, ANTHROPIC);
                }
                push(i - 2, OPENAI);
            }
            match before(4) {
                Some([b'x', b'o', b'x', _]) => push(i - 4, SLACK_BOT),
                Some(b"xapp") => push(i - 4, SLACK_APP),
                _ => {}
            }
            if after(b"----BEGIN ") {
                push(i, PRIVATE_KEY);
            }
        }
        b'_' => match before(3) {
            Some([b'g', b'h', b'p' | b'o' | b'u' | b's' | b'r']) => push(i - 3, GITHUB),
            Some(b"npm") => push(i - 3, NPM),
            _ if before(6) == Some(b"github") => push(i - 6, GITHUB),
            _ => {}
        },
        // A Discord token's first segment: `M`, `N` or `O` at a word start, its dot 23, 24,
        // 26 or 27 bytes on. Anchored on the letter: dots are ten times more common.
        b'M' | b'N' | b'O' => {
            // The id is letters and digits up to the dot: a dot past a line break (or any
            // other byte) is no token's, and a candidate stays on its trigger's line.
            if boundary_before(bytes, i)
                && let Some(dot) = [23, 24, 26, 27]
                    .iter()
                    .map(|n| i + n)
                    .find(|d| bytes.get(*d) == Some(&b'.'))
                && bytes
                    .get(i + 1..dot)
                    .is_some_and(|id| id.iter().all(u8::is_ascii_alphanumeric))
            {
                push(dot, DISCORD);
            }
        }
        b':' => {
            if before(1).is_some_and(|b| b[0].is_ascii_digit()) {
                push(i, TELEGRAM);
            }
            // Every header name ends in one of these (`authorizatION`, `x-api-KEY`,
            // `x-auth-toKEN`); most colons in prose and code follow something else.
            let name_end = i - count_back(bytes, i, |b| b == b' ' || b == b'\t');
            let tail = name_end.checked_sub(3).and_then(|k| bytes.get(k..name_end));
            if tail.is_some_and(|t| {
                [b"ion", b"key", b"ken"]
                    .iter()
                    .any(|w| t.eq_ignore_ascii_case(*w))
            }) {
                push(i, AUTH_HEADER);
            }
        }
        // `scheme://user:password@`, anchored on its `@` (far rarer than `://`): the run
        // back to the `//` holds no blank, `/` or `@`.
        b'@' => {
            let run = count_back(bytes, i, |b| !is_space(b) && b != b'/' && b != b'@');
            if let Some(colon) = (i - run).checked_sub(3)
                && starts_with(bytes, colon, b"://")
            {
                push(colon, URL_CREDENTIALS);
            }
        }
        b'=' if before(1).is_some_and(|b| is_name_byte(b[0])) => push(i, ASSIGNMENT),
        b'J' if before(2) == Some(b"ey") => push(i - 2, JWT),
        b'A' => {
            if after(b"KIA") || after(b"SIA") {
                push(i, AWS);
            } else if after(b"Iza") {
                push(i, GOOGLE);
            }
        }
        b'b' | b'B' => {
            if bytes
                .get(i + 1..i + 6)
                .is_some_and(|s| s.eq_ignore_ascii_case(b"earer"))
            {
                push(i, BEARER);
            }
            // `/bot`, anchored on its `b`: slashes are common in paths and URLs.
            if before(1) == Some(b"/") && after(b"ot") {
                push(i - 1, TELEGRAM_URL);
            }
        }
        _ => {}
    }
}

const ANTHROPIC: usize = 5;
const OPENAI: usize = 6;
const GITHUB: usize = 7;
const SLACK_BOT: usize = 8;
const SLACK_APP: usize = 9;
const NPM: usize = 10;
const DISCORD: usize = 11;
const JWT: usize = 12;
const AWS: usize = 13;
const GOOGLE: usize = 14;
const TELEGRAM: usize = 15;
const TELEGRAM_URL: usize = 16;
/// Index of the credential-header shape: its value runs to the end of the line.
pub const AUTH_HEADER: usize = 1;
/// Index of the assignment shape: a quoted value may run over several lines. It comes
/// before the bearer shape, whose value class holds `=` and `/`:
/// `Bearer abc////PASSWORD=hunter2` took `PASSWORD=` as its padding and left the password
/// bare (found by fuzzing the pipeline).
pub const ASSIGNMENT: usize = 2;
/// Index of the bearer shape: `Bearer` and its value may be on different lines.
pub const BEARER: usize = 3;
const URL_CREDENTIALS: usize = 4;

// Byte classes, as the patterns spell them. regex-lite's `\b`, `\s` and `\w` are ASCII only:
// a non-ASCII character is not a word character and not whitespace.

/// `\w`.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `[A-Za-z0-9_-]`: base64url.
fn is_b64url(b: u8) -> bool {
    is_word(b) || b == b'-'
}

/// `[A-Z0-9_]`: a character of an upper-case variable name.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'
}

/// `\s`: `[\t\n\v\f\r ]`, which includes the vertical tab that `u8::is_ascii_whitespace` does not.
pub fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

/// `\b` before a match whose first character is a word character.
fn boundary_before(text: &[u8], at: usize) -> bool {
    at == 0 || text.get(at - 1).is_none_or(|b| !is_word(*b))
}

/// Length of the run of bytes in `class` starting at `from`.
fn run(text: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    text.get(from..)
        .map_or(0, |rest| rest.iter().take_while(|b| class(**b)).count())
}

/// Length of the run of bytes in `class` ending right before `end`.
fn count_back(text: &[u8], end: usize, class: impl Fn(u8) -> bool) -> usize {
    text.get(..end).map_or(0, |head| {
        head.iter().rev().take_while(|b| class(**b)).count()
    })
}

/// Length of the run of bytes in `class` ending right before `end`, counting at most `max`.
fn count_back_max(text: &[u8], end: usize, max: usize, class: impl Fn(u8) -> bool) -> usize {
    text.get(end.saturating_sub(max)..end).map_or(0, |head| {
        head.iter().rev().take_while(|b| class(**b)).count()
    })
}

fn starts_with(text: &[u8], at: usize, lit: &[u8]) -> bool {
    text.get(at..at + lit.len()) == Some(lit)
}

/// A fixed-replacement match `start..end`.
fn fixed(start: usize, end: usize) -> Option<Found> {
    Some(Found {
        start,
        end,
        keep: start,
        keep_whole: false,
    })
}

/// `\b<prefix>` then at least `min` bytes of `class`, greedily: most token shapes.
fn prefixed(
    text: &[u8],
    start: usize,
    from: usize,
    prefix: &[u8],
    min: usize,
    class: impl Fn(u8) -> bool,
) -> Option<Found> {
    if start < from || !boundary_before(text, start) || !starts_with(text, start, prefix) {
        return None;
    }
    let body = start + prefix.len();
    let len = run(text, body, class);
    (len >= min).then(|| fixed(start, body + len))?
}

fn anthropic(text: &[u8], at: usize, from: usize) -> Option<Found> {
    prefixed(text, at, from, b"sk-ant-", 16, is_b64url)
}

fn openai(text: &[u8], at: usize, from: usize) -> Option<Found> {
    prefixed(text, at, from, b"sk-", 16, is_b64url)
}

fn github(text: &[u8], at: usize, from: usize) -> Option<Found> {
    let classic = match text.get(at..at + 4) {
        Some([b'g', b'h', b'p' | b'o' | b'u' | b's' | b'r', b'_']) => text.get(at..at + 4),
        _ => None,
    };
    match classic {
        Some(prefix) => prefixed(text, at, from, prefix, 16, |b| b.is_ascii_alphanumeric()),
        None => prefixed(text, at, from, b"github_pat_", 22, is_word),
    }
}

fn slack_bot(text: &[u8], at: usize, from: usize) -> Option<Found> {
    let prefix = match text.get(at..at + 5) {
        Some(p @ [b'x', b'o', b'x', b'a'..=b'e' | b'p' | b'r' | b's', b'-']) => p,
        _ => return None,
    };
    prefixed(text, at, from, prefix, 10, |b| {
        b.is_ascii_alphanumeric() || b == b'-'
    })
}

fn slack_app(text: &[u8], at: usize, from: usize) -> Option<Found> {
    prefixed(text, at, from, b"xapp-", 10, |b| {
        b.is_ascii_alphanumeric() || b == b'-'
    })
}

fn npm(text: &[u8], at: usize, from: usize) -> Option<Found> {
    let found = prefixed(text, at, from, b"npm_", 36, |b| b.is_ascii_alphanumeric())?;
    // Exactly 36, then a word boundary: a longer run or a `_` after it is something else.
    let end = at + 40;
    (found.end == end && text.get(end) != Some(&b'_')).then(|| fixed(at, end))?
}

fn discord(text: &[u8], dot: usize, from: usize) -> Option<Found> {
    let id_len = count_back_max(text, dot, 28, |b| b.is_ascii_alphanumeric());
    let start = dot.checked_sub(id_len)?;
    if !matches!(id_len, 23 | 24 | 26 | 27)
        || !matches!(text.get(start), Some(b'M' | b'N' | b'O'))
        || start < from
        || !boundary_before(text, start)
    {
        return None;
    }
    let stamp = text.get(dot + 1..dot + 7)?;
    if !stamp.iter().all(|b| is_b64url(*b)) || text.get(dot + 7) != Some(&b'.') {
        return None;
    }
    let mac = run(text, dot + 8, is_b64url);
    (mac >= 27).then(|| fixed(start, dot + 8 + mac))?
}

fn jwt(text: &[u8], at: usize, from: usize) -> Option<Found> {
    if at < from || !boundary_before(text, at) || !starts_with(text, at, b"eyJ") {
        return None;
    }
    let mut end = at + 3;
    for part in 0..3 {
        let len = run(text, end, is_b64url);
        if len < 8 {
            return None;
        }
        end += len;
        if part < 2 {
            if text.get(end) != Some(&b'.') {
                return None;
            }
            end += 1;
        }
    }
    fixed(at, end)
}

fn aws(text: &[u8], at: usize, from: usize) -> Option<Found> {
    if !(starts_with(text, at, b"AKIA") || starts_with(text, at, b"ASIA")) {
        return None;
    }
    let found = prefixed(text, at, from, b"A", 19, |b| {
        b.is_ascii_uppercase() || b.is_ascii_digit()
    })?;
    let end = at + 20;
    // Exactly 16 after the prefix, then a word boundary.
    (found.end == end && text.get(end).is_none_or(|b| !is_word(*b))).then(|| fixed(at, end))?
}

fn google(text: &[u8], at: usize, from: usize) -> Option<Found> {
    let found = prefixed(text, at, from, b"AIza", 35, is_b64url)?;
    // Exactly 35: whatever follows is not part of the key.
    fixed(found.start, at + 39)
}

fn telegram(text: &[u8], colon: usize, from: usize) -> Option<Found> {
    // No word boundary before the id: a token glued to letters (`…bot123456:AA…`, how Bot
    // API URLs print) went unredacted, and a message split inside its digits then sent a
    // whole token at the start of the next message (found by fuzzing the pipeline).
    let digits = count_back_max(text, colon, 12, |b| b.is_ascii_digit());
    let start = colon.checked_sub(digits)?.max(from);
    if colon - start < 6 {
        return None;
    }
    let secret = run(text, colon + 1, is_b64url);
    (secret >= 30).then(|| fixed(start, colon + 1 + secret))?
}

fn telegram_url(text: &[u8], at: usize, from: usize) -> Option<Found> {
    if at < from || !starts_with(text, at, b"/bot") {
        return None;
    }
    let digits = run(text, at + 4, |b| b.is_ascii_digit());
    let colon = at + 4 + digits;
    if !(6..=12).contains(&digits) || text.get(colon) != Some(&b':') {
        return None;
    }
    let secret = run(text, colon + 1, is_b64url);
    (secret >= 20).then(|| fixed(at, colon + 1 + secret))?
}

/// Credential header names, matched without case.
const HEADER_NAMES: [&[u8]; 4] = [
    b"authorization",
    b"x-api-key",
    b"x-auth-token",
    b"x-access-token",
];

fn auth_header(text: &[u8], colon: usize, from: usize) -> Option<Found> {
    if text.get(colon) != Some(&b':') {
        return None;
    }
    let name_end = colon - count_back(text, colon, |b| b == b' ' || b == b'\t');
    let start = HEADER_NAMES.iter().find_map(|name| {
        let start = name_end.checked_sub(name.len())?;
        text.get(start..name_end)
            .is_some_and(|s| s.eq_ignore_ascii_case(name))
            .then_some(start)
    })?;
    if start < from || !boundary_before(text, start) {
        return None;
    }
    let blank = run(text, colon + 1, |b| b == b' ' || b == b'\t');
    let value = colon + 1 + blank;
    // Every credential header in agent text (`-H "Authorization: Bearer $API_TOKEN"`) reads
    // its value to the line's end several times per redaction: a byte search, not a loop.
    let len = line_len(text.get(value..).unwrap_or_default());
    // The value needs one character: with none left on the line, the last blank is it.
    let (value, end) = match (len, blank) {
        (0, 0) => return None,
        (0, _) => (value - 1, value),
        _ => (value, value + len),
    };
    let bearer = header_value_is_bearer(text.get(value..end).unwrap_or_default());
    let quoted = value + quoted_header_value_len(text, start, value, end);
    Some(Found {
        start,
        end: if quoted < end {
            quoted
        } else {
            bearer_past_the_line(text, value, end).unwrap_or(end)
        },
        keep: name_end,
        keep_whole: bearer,
    })
}

/// Length of `text`'s first line, without its line break (`\r` or `\n`).
fn line_len(text: &[u8]) -> usize {
    memchr::memchr2(b'\r', b'\n', text).unwrap_or(text.len())
}

/// Whether a header's value is a `Bearer` credential, quoted or not: the bearer shape then
/// redacts the token and leaves the word, which says what kind of credential went.
pub fn header_value_is_bearer(value: &[u8]) -> bool {
    let value = match value.first() {
        Some(b'"' | b'\'' | b'`') => &value[1..],
        _ => value,
    };
    value
        .get(..6)
        .is_some_and(|word| word.eq_ignore_ascii_case(b"bearer"))
}

/// How much of a header's value (`value..end`) is the value when the header or the value is
/// quoted. The value ran to the end of the line, and the redaction took what followed:
/// - curl's `-H "X-Api-Key: …" https://…`: the value ends at the quote (or backtick) that
///   closes the one right before the header's name; the closing quote and the URL were
///   redacted with it;
/// - prose's ``Authorization: `Bearer ${token}` on each call``: the value is the quoted
///   span, quotes included, so both go or both stay; the closing backtick and the rest of
///   the sentence went, and the chat then paired the code spans wrongly.
///
/// The closing quote is looked for on the value's first line only; without one the value is
/// all of `value..end`. A value that is the bare marker an earlier pass wrote for a quoted
/// value (`X-Api-Key: [redacted] with it`) is the marker alone: the next pass took the rest
/// of the sentence as the value.
pub fn quoted_header_value_len(text: &[u8], start: usize, value: usize, end: usize) -> usize {
    const MARKER: &[u8] = b"[redacted]";
    let whole = end.saturating_sub(value);
    let line = text.get(value..end).unwrap_or_default();
    let line = &line[..line_len(line)];
    if line.starts_with(MARKER) {
        return MARKER.len();
    }
    let is_quote = |b: u8| matches!(b, b'"' | b'\'' | b'`');
    if let Some(&quote) = start
        .checked_sub(1)
        .and_then(|i| text.get(i))
        .filter(|b| is_quote(**b))
    {
        return memchr::memchr(quote, line)
            .filter(|at| *at > 0)
            .unwrap_or(whole);
    }
    match line.first() {
        Some(&quote) if is_quote(quote) => memchr::memchr(quote, &line[1..])
            .filter(|at| *at > 0)
            .map_or(whole, |at| at + 2),
        _ => whole,
    }
}

/// Where a header's value (`value..end`, one line) goes on when its last word is `Bearer`
/// and the bearer value is on a later line (the blank after the word may hold line
/// breaks): to the end of that line, and on again while that line ends the same way.
/// Replaced with the line alone, the header took the word and left the value (`X-Api-Key:
/// a Bearer` then `4f9a…` on the next line: found in review, 2026-12-02); taken one line on
/// only, it took the next `Bearer` ending that line and left its value (found by fuzzing
/// the pipeline). The pattern's `(?:[^\r\n]*\bbearer\s+…=*)+[^\r\n]*` says the same.
fn bearer_past_the_line(text: &[u8], value: usize, end: usize) -> Option<usize> {
    let (mut from, mut end) = (value, end);
    let mut reached = None;
    loop {
        let word_end = end - count_back(text, end, |b| is_space(b) && b != b'\r' && b != b'\n');
        let Some(found) = word_end
            .checked_sub(6)
            .filter(|&word| word >= from)
            .and_then(|word| bearer(text, word, from))
            .filter(|found| found.end > end)
        else {
            return reached;
        };
        from = found.end;
        end = found.end + run(text, found.end, |b| b != b'\r' && b != b'\n');
        reached = Some(end);
    }
}

fn bearer(text: &[u8], at: usize, from: usize) -> Option<Found> {
    bearer_at_least(text, at, from, 20)
}

/// The shortest `Bearer` value an assignment's unquoted value runs on into: the generic
/// bearer rule's (`secret_generic.rs`), which redacts values from six characters. With the
/// bearer shape's twenty, `AUTH_TOKEN=Bearer 4f9a8c7e2b1d6f3` took `Bearer` as its value,
/// and the token, no longer after the word, was sent (found by fuzzing the pipeline,
/// 2026-12-07).
const ASSIGNED_BEARER_MIN: usize = 6;

/// A `Bearer` word at `at` and a value of at least `min` characters after its blank.
fn bearer_at_least(text: &[u8], at: usize, from: usize, min: usize) -> Option<Found> {
    let word = text.get(at..at + 6)?;
    if at < from || !word.eq_ignore_ascii_case(b"bearer") || !boundary_before(text, at) {
        return None;
    }
    let blank = run(text, at + 6, is_space);
    let value = at + 6 + blank;
    let len = run(text, value, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'+' | b'/' | b'-')
    });
    if blank == 0 || len < min {
        return None;
    }
    let padding = run(text, value + len, |b| b == b'=');
    fixed(at, value + len + padding)
}

/// Words that make an upper-case variable name a credential's.
const SECRET_WORDS: [&[u8]; 8] = [
    b"TOKEN",
    b"SECRET",
    b"PASSWORD",
    b"PASSWD",
    b"API_KEY",
    b"APIKEY",
    b"PRIVATE_KEY",
    b"ACCESS_KEY",
];

fn assignment(text: &[u8], eq: usize, from: usize) -> Option<Found> {
    if text.get(eq) != Some(&b'=') {
        return None;
    }
    let start = eq - count_back(text, eq, is_name_byte);
    let name = text.get(start..eq)?;
    if start < from
        || !matches!(name.first(), Some(b'A'..=b'Z' | b'_'))
        || !boundary_before(text, start)
        || !SECRET_WORDS
            .iter()
            .any(|w| name.windows(w.len()).any(|x| x == *w))
    {
        return None;
    }
    let value = eq + 1;
    let end = match assignment_quote(text, eq) {
        Some(Quote { open, byte }) => {
            match text
                .get(open + 1..)
                .and_then(|rest| memchr::memchr(byte, rest))
            {
                Some(close) => quoted_value_end(text, open, open + 2 + close),
                // A quote right after `=` that nothing closes is no value; after another
                // assignment, the part before the quote still is, read as unquoted.
                None if open == value => return None,
                None => unquoted_value_end(text, value),
            }
        }
        None => match unquoted_value_end(text, value) {
            end if end == value => return None,
            end => end,
        },
    };
    let end = value + value_len(text.get(value..end)?);
    let value = std::str::from_utf8(text.get(value..end)?).ok()?;
    if assignment_is_plain(std::str::from_utf8(name).ok()?, value) {
        return None;
    }
    Some(Found {
        start,
        end,
        keep: eq,
        keep_whole: false,
    })
}

/// End of a quoted value that opens at `open` and whose closing quote ends at `close`.
///
/// A value that closes on a later line closes at a quote that may as well open the value of
/// an assignment or a flag there (`TOKEN='` on one line, `password: 'hunter2'` or
/// `tOKEN='hunter2` on the next): that value was left bare after the marker, with no name
/// before it for any shape to know it by (found by fuzzing the pipeline, 2026-12-07). Such a
/// closing quote, one after an assignment sign or one that a value goes on from, takes the
/// rest of its line. One that ends a word (`…still secret' ok`) ends the value there, and a
/// value on one line always ends at its quote: what follows stays.
fn quoted_value_end(text: &[u8], open: usize, close: usize) -> usize {
    let quote = close - 1;
    if text
        .get(open..quote)
        .is_none_or(|v| memchr::memchr(b'\n', v).is_none())
    {
        return close;
    }
    let blanks = count_back(text, quote, |b| matches!(b, b' ' | b'\t'));
    let after_sign = quote - blanks > open + 1
        && matches!(text.get(quote - blanks - 1), Some(b'=' | b':' | b'>'));
    let value_goes_on = text
        .get(close)
        .is_some_and(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
    match after_sign || value_goes_on {
        true => close + run(text, close, |b| b != b'\r' && b != b'\n'),
        false => close,
    }
}

/// Whether the assignment `name=value` holds no secret although its name holds a secret's
/// word: the value is configuration (`TOKEN_TTL_SECONDS=3600`, `PASSWORD=${DB_PASSWORD}`,
/// `API_KEY=<your-key>`) or the name's last word says it is about a secret, not one
/// (`SECRET_NAME=prod-db`, `TOKEN_URL=…`). Redacting `TOKEN_TTL_SECONDS=3600` was a false
/// positive that hid configuration a person needs to read (docs/security.md#redaction).
pub fn assignment_is_plain(name: &str, value: &str) -> bool {
    crate::core::secret_values::names_no_secret(name)
        || crate::core::secret_values::is_plain_value(value)
}

/// End of an assignment's value written without quotes, starting at `at`: bytes up to a
/// blank or a quote, except that a secret the value runs into goes with it, and the value
/// runs on after it. A value ending inside one took the context that shape knows it by, and
/// with that gone no shape saw the rest again:
/// - URL credentials, quotes and all: at a quote in them (`TOKEN=xhttps://'u:password@host`)
///   the value took the scheme and `://` and left `'u:password@host` (found by fuzzing the
///   pipeline, 2026-12-02);
/// - a `Bearer` value: at the blank after the word (`AUTH_TOKEN=Bearer 4f9a…`, as a `.env`
///   file writes it) the value was `Bearer` and the token was sent (found in review; values
///   shorter than the bearer shape's, found by fuzzing: [`ASSIGNED_BEARER_MIN`]).
///
/// The pattern's `(?:[^\s"']*(?:\b(?i:bearer)\s+…|://…@))+[^\s"']*` says the same: each
/// round takes the one of them that starts last in the run.
fn unquoted_value_end(text: &[u8], mut at: usize) -> usize {
    loop {
        let end = at + run(text, at, is_unquoted_value_byte);
        // A bearer value needs a blank after the word, so only a run's last word can start
        // one; credentials start at a `://`, the last whole ones first.
        let bearer = end
            .checked_sub(6)
            .filter(|&word| word >= at)
            .and_then(|word| {
                bearer_at_least(text, word, at, ASSIGNED_BEARER_MIN).map(|found| (word, found.end))
            });
        let credentials = text.get(at..end).and_then(|value| {
            memchr::memmem::rfind_iter(value, b"://")
                .find_map(|i| credentials_end(text, at + i).map(|after| (at + i, after)))
        });
        match [bearer, credentials]
            .into_iter()
            .flatten()
            .max_by_key(|(start, _)| *start)
        {
            Some((_, after)) => at = after,
            None => return end,
        }
    }
}

/// A byte of an assignment's value written without quotes.
fn is_unquoted_value_byte(b: u8) -> bool {
    // A backtick ends the value: `TOKEN=x` in a code span took the closing backtick with the
    // value, and Telegram then paired the code spans wrongly (docs/security.md#redaction).
    !is_space(b) && b != b'"' && b != b'\'' && b != b'`'
}

/// The quoted part of an assignment's value, as [`assignment_quote`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    /// Byte offset of the opening quote.
    pub open: usize,
    /// The quote byte itself (`"` or `'`): the value runs to the next one.
    pub byte: u8,
}

/// Where the quoted part of the value of the assignment whose `=` is at `eq` opens, if it
/// has one: right after the `=` (`TOKEN='x y'`), or after a value that ends in `=`
/// (`A_TOKEN=B_PASSWORD='x y'`: another assignment, whose quoted value goes too; found by
/// fuzzing the config). Redaction reads it to know how far the match may reach: a quoted
/// value may run over line breaks.
pub fn assignment_quote(text: &[u8], eq: usize) -> Option<Quote> {
    let quote_at = |open: usize| {
        text.get(open)
            .filter(|b| matches!(b, b'"' | b'\''))
            .map(|&byte| Quote { open, byte })
    };
    let value = eq + 1;
    if let Some(quote) = quote_at(value) {
        return Some(quote);
    }
    let end = value + run(text, value, is_unquoted_value_byte);
    if end > value && text.get(end - 1) == Some(&b'=') {
        return quote_at(end);
    }
    None
}

fn url_credentials(text: &[u8], colon: usize, from: usize) -> Option<Found> {
    if !starts_with(text, colon, b"://") {
        return None;
    }
    let scheme = count_back(text, colon, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-')
    });
    // The leftmost place a scheme can start (a letter after a non-word byte), else the
    // `://` itself: credentials after a missing or replaced scheme are still credentials.
    let start = (colon - scheme..colon)
        .find(|&p| {
            p >= from
                && text.get(p).is_some_and(u8::is_ascii_alphabetic)
                && boundary_before(text, p)
        })
        .unwrap_or(colon);
    if start < from {
        return None;
    }
    Some(Found {
        start,
        end: credentials_end(text, colon)?,
        keep: colon + 3,
        keep_whole: false,
    })
}

/// Just past the `@` of the credentials (`user:password@`) after the `://` at `colon`, if
/// they are whole.
fn credentials_end(text: &[u8], colon: usize) -> Option<usize> {
    let user_at = colon + 3;
    let user = run(text, user_at, |b| {
        !is_space(b) && !matches!(b, b'/' | b'@' | b':')
    });
    let colon2 = user_at + user;
    if user == 0 || text.get(colon2) != Some(&b':') {
        return None;
    }
    let password = run(text, colon2 + 1, |b| {
        !is_space(b) && !matches!(b, b'/' | b'@')
    });
    let at_sign = colon2 + 1 + password;
    (password > 0 && text.get(at_sign) == Some(&b'@')).then_some(at_sign + 1)
}

const PEM_BEGIN: &[u8] = b"-----BEGIN ";

/// Length of a `<head><LABEL>PRIVATE KEY[ BLOCK]-----` line opening `text` at `at`, `head`
/// being `-----BEGIN ` or `-----END `; the label is upper case, digits and spaces.
pub fn pem_line(text: &[u8], at: usize, head: &[u8]) -> Option<usize> {
    if !starts_with(text, at, head) {
        return None;
    }
    let from = at + head.len();
    let label = run(text, from, |b| {
        b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' '
    });
    let name = text.get(from..from + label)?;
    let ok = (name.ends_with(b"PRIVATE KEY") || name.ends_with(b"PRIVATE KEY BLOCK"))
        && starts_with(text, from + label, b"-----");
    ok.then_some(head.len() + label + 5)
}

/// A private key's BEGIN line at `at`: enough to know a text holds a key. Redaction takes
/// the whole block (`redact.rs`).
///
/// A BEGIN line with nothing under it (no base64 line right after it, no END line later)
/// names a format and holds no key: redaction keeps it (`redact.rs`), and so this shape
/// does not report it, or the config would refuse a note that quotes the format.
fn private_key_header(text: &[u8], at: usize, from: usize) -> Option<Found> {
    let len = pem_line(text, at, PEM_BEGIN)?;
    let body = at + len;
    let holds_key = base64_line_under(text, body)
        || memchr::memmem::find_iter(text.get(body..)?, PEM_END)
            .any(|i| pem_line(text, body + i, PEM_END).is_some());
    (at >= from && holds_key).then(|| fixed(at, body))?
}

const PEM_END: &[u8] = b"-----END ";

/// Whether a whole line of base64 (`[A-Za-z0-9+/=]`) follows the line break at `at`, as
/// the body of a key block does.
fn base64_line_under(text: &[u8], at: usize) -> bool {
    let brk = match text.get(at..at + 2) {
        Some([b'\r', b'\n']) => 2,
        _ if text.get(at) == Some(&b'\n') => 1,
        _ => return false,
    };
    let line = at + brk;
    let len = run(text, line, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
    });
    len > 0 && matches!(text.get(line + len), None | Some(b'\r' | b'\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index constants are how the scanner tags candidates: one naming the wrong shape
    /// would send a trigger to a matcher that can never match it.
    #[test]
    fn shape_indexes_name_their_shapes() {
        let named = [
            (PRIVATE_KEY, "private-key"),
            (ANTHROPIC, "anthropic-key"),
            (OPENAI, "openai-key"),
            (GITHUB, "github-token"),
            (SLACK_BOT, "slack-bot-token"),
            (SLACK_APP, "slack-app-token"),
            (NPM, "npm-token"),
            (DISCORD, "discord-token"),
            (JWT, "jwt"),
            (AWS, "aws-access-key"),
            (GOOGLE, "google-api-key"),
            (TELEGRAM, "telegram-bot-token"),
            (TELEGRAM_URL, "telegram-bot-url"),
            (AUTH_HEADER, "auth-header"),
            (BEARER, "bearer-header"),
            (ASSIGNMENT, "env-secret-assignment"),
            (URL_CREDENTIALS, "url-credentials"),
        ];
        for (index, name) in named {
            assert_eq!(SHAPES[index].name, name);
        }
    }

    proptest::proptest! {
        /// The candidates a redaction carries over from the last text it scanned are those
        /// a full scan of the new text finds: texts of triggers and line breaks, the new one
        /// the old with lines changed, inserted or removed.
        #[test]
        fn reused_candidates_are_a_full_scans(
            old in "(ghp_|github_|sk-|ant-|xoxb-|xapp-|npm_|Authorization|X-Api-Key|: |Bearer |bearer|TOKEN=|://|u:p@|/bot|12345678:|eyJ|AKIA|AIza|M|MTIzNDU2Nzg5MDEyMzQ1Njc4OQ|\\.|-----BEGIN |\n|a|0| ){0,40}",
            edits in proptest::collection::vec((0usize..400, 0usize..20, "(\n|x|=|:|Bearer |ghp_|\\.|M){0,3}"), 0..6),
        ) {
            let mut new = old.clone();
            for (at, cut, insert) in edits {
                let at = at.min(new.len());
                let end = (at + cut).min(new.len());
                new.replace_range(at..end, &insert);
            }
            let fresh = candidates(&new);
            let reused = line_reuse::remembering(|| {
                candidates(&old);
                candidates(&new)
            });
            proptest::prop_assert_eq!(reused, fresh);
        }
    }

    /// Ordinary words holding a trigger's letters must not reach a matcher.
    #[test]
    fn ordinary_prose_has_no_candidates() {
        let prose = "We went through the right path, ask-me, a_b, e.g. 3.14 and x-y, \
                     x = 1, abc/def, AI, Zebra, bee. Then: done";
        assert_eq!(candidates(prose), []);
    }

    #[test]
    fn a_header_with_a_bearer_value_is_kept_for_the_bearer_shape() {
        let text = "Authorization: Bearer abcdefghijklmnopqrstuvwxyz";
        let header = &SHAPES[AUTH_HEADER];
        let found = header.find(text, 13, 0);
        assert!(found.is_some_and(|f| f.keep_whole && f.end == text.len()));
        assert!(contains_secret(text));
        assert!(!contains_secret("Authorization: Bearer $TOKEN"));
    }
}
