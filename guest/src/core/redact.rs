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
    let mut current = text.to_owned();
    let mut lower = current.to_ascii_lowercase();
    let mut rules = Vec::new();
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
            "private-key",
            |t| t.text.contains("-----BEGIN "),
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
            Replacement::Fixed("[redacted:private-key]"),
        ),
        (
            // A header whose END line never came (a truncated paste) still leaks the key body:
            // the header and the base64 lines under it go.
            "private-key",
            |t| t.text.contains("-----BEGIN "),
            r"(?m)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:\r?\n[A-Za-z0-9+/=]+\r?$)*",
            Replacement::Fixed("[redacted:private-key]"),
        ),
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
        assert_eq!(compiled().len(), 18);
    }
}
