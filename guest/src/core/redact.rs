//! Secret redaction for every outbound body (reference-behaviour §3.9, I3, I36).
//!
//! The original's named rules, in its order and with its replacement texts, plus rules for
//! leaks peers have had: Slack app tokens, Telegram bot URLs and credentials inside URLs.
//! Patterns compile once per process. regex-lite has no literal optimisations, so each rule
//! has a cheap trigger that skips its regex when the text cannot contain a match: ordinary
//! prose then costs a few substring scans instead of a dozen regex passes.

use std::sync::OnceLock;

use regex_lite::{Captures, Regex};

/// The redacted text and the names of the rules that changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    /// The text with every match replaced.
    pub text: String,
    /// Rule names that fired, in rule order, no duplicates; never the matched secret (I36).
    pub rules: Vec<&'static str>,
}

/// How a match is replaced.
enum Replacement {
    /// Always this text.
    Fixed(&'static str),
    /// Built from the captures; `None` keeps the match (regex-lite has no lookahead).
    With(fn(&Captures<'_>) -> Option<String>),
}

/// The text a trigger looks at, with an ASCII-lowercased copy for case-insensitive rules.
struct Haystack<'a> {
    text: &'a str,
    lower: &'a str,
}

/// A rule as written: name, trigger, pattern, replacement.
type Spec = (
    &'static str,
    fn(&Haystack<'_>) -> bool,
    &'static str,
    Replacement,
);

struct Rule {
    name: &'static str,
    trigger: fn(&Haystack<'_>) -> bool,
    regex: Regex,
    replace: Replacement,
}

/// Replaces `text`'s secrets; applying it twice changes nothing more.
pub fn redact(text: &str) -> Redacted {
    let mut rules = Vec::new();
    let mut current = match redact_private_keys(text) {
        Some(replaced) => {
            rules.push("private-key");
            replaced
        }
        None => text.to_owned(),
    };
    let mut lower = current.to_ascii_lowercase();
    for rule in compiled() {
        let hay = Haystack {
            text: &current,
            lower: &lower,
        };
        if !(rule.trigger)(&hay) {
            continue;
        }
        let mut fired = false;
        let replaced = rule.regex.replace_all(&current, |caps: &Captures<'_>| {
            let whole = caps.get(0).map_or("", |m| m.as_str());
            let new = match &rule.replace {
                Replacement::Fixed(text) => Some((*text).to_owned()),
                Replacement::With(build) => build(caps),
            };
            match new {
                Some(new) if new != whole => {
                    fired = true;
                    new
                }
                _ => whole.to_owned(),
            }
        });
        if fired {
            current = replaced.into_owned();
            lower = current.to_ascii_lowercase();
            if !rules.contains(&rule.name) {
                rules.push(rule.name);
            }
        }
    }
    Redacted {
        text: current,
        rules,
    }
}

fn group<'h>(caps: &Captures<'h>, i: usize) -> &'h str {
    caps.get(i).map_or("", |m| m.as_str())
}

const PEM_BEGIN: &str = "-----BEGIN ";
const PEM_END: &str = "-----END ";
const PRIVATE_KEY_REPLACEMENT: &str = "[redacted:private-key]";

/// Length of a `-----BEGIN <LABEL>PRIVATE KEY-----` line (or END with `head`) opening `s`;
/// the label is upper case, digits and spaces.
fn pem_line(s: &str, head: &str) -> Option<usize> {
    let rest = s.strip_prefix(head)?;
    let label = rest
        .bytes()
        .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ')
        .count();
    let ok = rest.get(..label)?.ends_with("PRIVATE KEY") && rest.get(label..)?.starts_with("-----");
    ok.then_some(head.len() + label + 5)
}

/// Replaces PEM private keys: from a BEGIN line to the first END line after it; a BEGIN with
/// no END (a truncated paste still leaks the key) takes the base64 lines right under it.
///
/// Hand-written rather than a lazy `.*?` regex: regex-lite runs that at ~5 MB/s, and the END
/// search only moves forward, so many headers without an END stay linear. `None` when
/// nothing was replaced.
fn redact_private_keys(text: &str) -> Option<String> {
    if !text.contains(PEM_BEGIN) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut pos = 0;
    // The first valid END line at or after `end_from`; `None` once the text has no more.
    let mut end_from = 0;
    let mut next_end: Option<(usize, usize)> = None;
    let mut ends_exhausted = false;
    while let Some(i) = text.get(pos..).and_then(|t| t.find(PEM_BEGIN)) {
        let begin = pos + i;
        let Some(header) = text.get(begin..).and_then(|t| pem_line(t, PEM_BEGIN)) else {
            pos = begin + PEM_BEGIN.len();
            continue;
        };
        let body = begin + header;
        if next_end.is_none_or(|(e, _)| e < body) && !ends_exhausted {
            next_end = None;
            end_from = end_from.max(body);
            while let Some(j) = text.get(end_from..).and_then(|t| t.find(PEM_END)) {
                let at = end_from + j;
                end_from = at + PEM_END.len();
                if let Some(len) = text.get(at..).and_then(|t| pem_line(t, PEM_END)) {
                    next_end = Some((at, len));
                    break;
                }
            }
            ends_exhausted = next_end.is_none();
        }
        let stop = match next_end {
            Some((e, len)) if e >= body => e + len,
            _ => base64_lines_end(text, body),
        };
        out.push_str(text.get(copied..begin).unwrap_or_default());
        out.push_str(PRIVATE_KEY_REPLACEMENT);
        copied = stop;
        pos = stop;
    }
    if copied == 0 && out.is_empty() {
        return None;
    }
    out.push_str(text.get(copied..).unwrap_or_default());
    Some(out)
}

/// End of the run of whole base64 lines that follows `from` (each after a line break).
fn base64_lines_end(text: &str, mut from: usize) -> usize {
    loop {
        let rest = text.get(from..).unwrap_or_default();
        let brk = if rest.starts_with("\r\n") {
            2
        } else if rest.starts_with('\n') {
            1
        } else {
            return from;
        };
        let line = rest.get(brk..).unwrap_or_default();
        let len = line
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
            .count();
        let whole = matches!(line.as_bytes().get(len), None | Some(b'\r' | b'\n'));
        if len == 0 || !whole {
            return from;
        }
        from += brk + len;
    }
}

/// `true` when some `next` byte is preceded by at least `min` bytes of `class`.
/// Searching for `next` first keeps this at memchr speed on ordinary text.
fn run_then(text: &str, min: usize, class: fn(u8) -> bool, next: char) -> bool {
    let bytes = text.as_bytes();
    text.match_indices(next).any(|(i, _)| {
        i >= min
            && bytes
                .get(i - min..i)
                .is_some_and(|run| run.iter().all(|b| class(*b)))
    })
}

const ENV_WORDS: [&str; 8] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "ACCESS_KEY",
];

fn compiled() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(build)
}

/// The patterns are literals of this file, not input: `rules_all_compile` fails if one of them
/// does not compile (it would be dropped here rather than panic inside a send).
fn build() -> Vec<Rule> {
    let specs: Vec<Spec> = vec![
        (
            "anthropic-key",
            |t| t.text.contains("sk-ant-"),
            r"\bsk-ant-[A-Za-z0-9_-]{16,}",
            Replacement::Fixed("[redacted:anthropic-key]"),
        ),
        (
            // Current OpenAI keys carry a `proj-`, `svcacct-` or `admin-` prefix after `sk-`.
            "openai-key",
            |t| t.text.contains("sk-"),
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9]{20,}",
            Replacement::Fixed("[redacted:openai-key]"),
        ),
        (
            "github-token",
            |t| t.text.contains("gh"),
            r"\bgh[pousr]_[A-Za-z0-9]{16,}",
            Replacement::Fixed("[redacted:github-token]"),
        ),
        (
            "slack-bot-token",
            |t| t.text.contains("xox"),
            r"\bxox[baprs]-[A-Za-z0-9-]{10,}",
            Replacement::Fixed("[redacted:slack-token]"),
        ),
        (
            "slack-app-token",
            |t| t.text.contains("xapp-"),
            r"\bxapp-[A-Za-z0-9-]{10,}",
            Replacement::Fixed("[redacted:slack-token]"),
        ),
        (
            "npm-token",
            |t| t.text.contains("npm_"),
            r"\bnpm_[A-Za-z0-9]{36}\b",
            Replacement::Fixed("[redacted:npm-token]"),
        ),
        (
            "discord-token",
            |t| run_then(t.text, 24, |b| b.is_ascii_alphanumeric(), '.'),
            r"\b[MN][A-Za-z0-9]{23}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",
            Replacement::Fixed("[redacted:discord-token]"),
        ),
        (
            "jwt",
            |t| t.text.contains("eyJ"),
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            Replacement::Fixed("[redacted:jwt]"),
        ),
        (
            "aws-access-key",
            |t| t.text.contains("AKIA") || t.text.contains("ASIA"),
            r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
            Replacement::Fixed("[redacted:aws-key]"),
        ),
        (
            "google-api-key",
            |t| t.text.contains("AIza"),
            r"\bAIza[A-Za-z0-9_-]{35}",
            Replacement::Fixed("[redacted:google-key]"),
        ),
        (
            "telegram-bot-token",
            |t| run_then(t.text, 8, |b| b.is_ascii_digit(), ':'),
            r"\b[0-9]{8,12}:[A-Za-z0-9_-]{35}",
            Replacement::Fixed("[redacted:telegram-token]"),
        ),
        (
            // `/bot<id>:<secret>/` has no word boundary before the id, so the rule above misses it.
            "telegram-bot-url",
            |t| t.text.contains("/bot"),
            r"/bot[0-9]{6,12}:[A-Za-z0-9_-]{20,}",
            Replacement::Fixed("/bot[redacted:telegram-token]"),
        ),
        (
            "auth-header",
            |t| {
                [
                    "authorization",
                    "x-api-key",
                    "x-auth-token",
                    "x-access-token",
                ]
                .iter()
                .any(|n| t.lower.contains(n))
            },
            r"(?i)\b(Authorization|X-Api-Key|X-Auth-Token|X-Access-Token)[ \t]*:[ \t]*([^\r\n]+)",
            Replacement::With(|c| {
                // A bearer value is left to `bearer-header`, which keeps the scheme visible.
                let value = group(c, 2);
                let is_bearer = value
                    .get(..6)
                    .is_some_and(|p| p.eq_ignore_ascii_case("bearer"));
                (!is_bearer).then(|| format!("{}: [redacted]", group(c, 1)))
            }),
        ),
        (
            "bearer-header",
            |t| t.lower.contains("bearer"),
            r"(?i)\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*",
            Replacement::Fixed("Bearer [redacted]"),
        ),
        (
            "env-secret-assignment",
            |t| t.text.contains('=') && ENV_WORDS.iter().any(|w| t.text.contains(w)),
            r#"\b([A-Z_][A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|ACCESS_KEY)[A-Z0-9_]*)=("[^"]*"|'[^']*'|[^\s"']+)"#,
            Replacement::With(|c| Some(format!("{}=[redacted]", group(c, 1)))),
        ),
        (
            "url-credentials",
            |t| t.text.contains("://") && t.text.contains('@'),
            r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@",
            Replacement::With(|c| Some(format!("{}[redacted]@", group(c, 1)))),
        ),
    ];
    specs
        .into_iter()
        .filter_map(|(name, trigger, pattern, replace)| {
            Regex::new(pattern).ok().map(|regex| Rule {
                name,
                trigger,
                regex,
                replace,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_all_compile() {
        assert_eq!(compiled().len(), 16);
    }
}
