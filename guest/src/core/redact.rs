//! Secret redaction for every outbound body (reference-behaviour §3.9, I3, I36).
//!
//! The original's named rules, in its order and with its replacement texts, plus rules for
//! leaks peers have had: Slack app tokens, Telegram bot URLs and credentials inside URLs.
//! Patterns compile once per process. regex-lite has no literal optimisations, so each rule
//! has a trigger, a short literal every match contains, and one pass over the text finds
//! which triggers occur: ordinary prose then costs one scan instead of a dozen regex passes.

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

/// A rule as written: name, pattern, replacement. Its trigger is found by [`triggers`],
/// by the rule's position in the list.
type Spec = (&'static str, &'static str, Replacement);

struct Rule {
    name: &'static str,
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
    let mut found = triggers(&current);
    for (i, rule) in compiled().iter().enumerate() {
        if found & (1 << i) == 0 {
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
            found = triggers(&current);
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

/// Rule positions in [`build`]'s list; bit `1 << n` in [`triggers`] stands for rule `n`.
const ANTHROPIC: u32 = 1 << 0;
const OPENAI: u32 = 1 << 1;
const GITHUB: u32 = 1 << 2;
const SLACK_BOT: u32 = 1 << 3;
const SLACK_APP: u32 = 1 << 4;
const NPM: u32 = 1 << 5;
const DISCORD: u32 = 1 << 6;
const JWT: u32 = 1 << 7;
const AWS: u32 = 1 << 8;
const GOOGLE: u32 = 1 << 9;
const TELEGRAM_TOKEN: u32 = 1 << 10;
const TELEGRAM_URL: u32 = 1 << 11;
const AUTH_HEADER: u32 = 1 << 12;
const BEARER: u32 = 1 << 13;
const ENV_SECRET: u32 = 1 << 14;
const URL_CREDENTIALS: u32 = 1 << 15;

/// Bytes at which a trigger can be recognised: each is in its trigger's literal and rare in
/// prose (lower-case letters are not), so most bytes cost one table look-up.
const KEY_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let keys = b"-_.:=@/JAzZbB";
    let mut i = 0;
    while i < keys.len() {
        t[keys[i] as usize] = true;
        i += 1;
    }
    t
};

/// Which rules' triggers occur in `text`, as a bit set by rule position: one pass over the
/// text. Every match of a rule contains its trigger, so a rule whose bit is clear cannot
/// match; triggers are specific enough that ordinary words ("through") set none.
fn triggers(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let before = |i: usize, n: usize| bytes.get(i.saturating_sub(n)..i).filter(|s| s.len() == n);
    let after = |i: usize, lit: &[u8]| {
        bytes
            .get(i + 1..i + 1 + lit.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(lit))
    };
    let mut found = 0;
    let mut at_sign = false;
    let mut scheme = false;
    let key = |b: &u8| KEY_BYTES[usize::from(*b)];
    let mut pos = 0;
    while pos < bytes.len() {
        // Eight bytes per step without a branch each: most windows hold no key byte.
        if let Some(w) = bytes.get(pos..pos + 8)
            && !w.iter().fold(false, |any, b| any | key(b))
        {
            pos += 8;
            continue;
        }
        // Jump straight to the window's first key byte: stepping one byte and testing the
        // whole window again would read a window up to eight times.
        let mut window = bytes.get(pos..).unwrap_or_default().iter().take(8);
        let Some(i) = window.position(key).map(|k| pos + k) else {
            pos += 8;
            continue;
        };
        pos = i + 1;
        let b = bytes.get(i).copied().unwrap_or_default();
        found |= match b {
            b'-' => match before(i, 4) {
                // The patterns start `\bsk-`: "ask-me" cannot match.
                _ if before(i, 2) == Some(b"sk")
                    && !before(i, 3)
                        .and_then(<[u8]>::first)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') =>
                {
                    OPENAI | if after(i, b"ant-") { ANTHROPIC } else { 0 }
                }
                Some([b'x', b'o', b'x', _]) => SLACK_BOT,
                Some(b"xapp") => SLACK_APP,
                _ if matches!(before(i, 1), Some([b'x' | b'X']))
                    && (after(i, b"api-key")
                        || after(i, b"auth-token")
                        || after(i, b"access-token")) =>
                {
                    AUTH_HEADER
                }
                _ => 0,
            },
            b'_' => match before(i, 3) {
                Some([b'g', b'h', b'p' | b'o' | b'u' | b's' | b'r']) => GITHUB,
                Some(b"npm") => NPM,
                _ => 0,
            },
            // Read back from the dot: prose words end within a few bytes, a token's segment never.
            b'.' if before(i, 24)
                .is_some_and(|r| r.iter().rev().all(u8::is_ascii_alphanumeric)) =>
            {
                DISCORD
            }
            b':' => {
                scheme |= after(i, b"//");
                if before(i, 8).is_some_and(|r| r.iter().all(u8::is_ascii_digit)) {
                    TELEGRAM_TOKEN
                } else {
                    0
                }
            }
            b'=' if env_name_before(bytes, i) => ENV_SECRET,
            b'@' => {
                at_sign = true;
                0
            }
            b'/' if after(i, b"bot") => TELEGRAM_URL,
            b'J' if before(i, 2) == Some(b"ey") => JWT,
            b'A' if after(i, b"KIA") || after(i, b"SIA") => AWS,
            b'A' if bytes.get(i + 1..i + 4) == Some(b"Iza") => GOOGLE,
            b'z' | b'Z'
                if bytes
                    .get(i.saturating_sub(7)..i + 6)
                    .is_some_and(|s| i >= 7 && s.eq_ignore_ascii_case(b"authorization")) =>
            {
                AUTH_HEADER
            }
            b'b' | b'B' if after(i, b"earer") => BEARER,
            _ => 0,
        };
    }
    if at_sign && scheme {
        found |= URL_CREDENTIALS;
    }
    found
}

/// Whether the run of `[A-Z0-9_]` ending at `eq` (an `=`) names a secret.
fn env_name_before(bytes: &[u8], eq: usize) -> bool {
    let head = bytes.get(..eq).unwrap_or_default();
    let len = head
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || **b == b'_')
        .count();
    let name = head.get(eq - len..).unwrap_or_default();
    ENV_WORDS
        .iter()
        .any(|w| name.windows(w.len()).any(|x| x == w.as_bytes()))
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
            r"\bsk-ant-[A-Za-z0-9_-]{16,}",
            Replacement::Fixed("[redacted:anthropic-key]"),
        ),
        (
            // Current OpenAI keys carry a `proj-`, `svcacct-` or `admin-` prefix after `sk-`.
            "openai-key",
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9]{20,}",
            Replacement::Fixed("[redacted:openai-key]"),
        ),
        (
            "github-token",
            r"\bgh[pousr]_[A-Za-z0-9]{16,}",
            Replacement::Fixed("[redacted:github-token]"),
        ),
        (
            "slack-bot-token",
            r"\bxox[baprs]-[A-Za-z0-9-]{10,}",
            Replacement::Fixed("[redacted:slack-token]"),
        ),
        (
            "slack-app-token",
            r"\bxapp-[A-Za-z0-9-]{10,}",
            Replacement::Fixed("[redacted:slack-token]"),
        ),
        (
            "npm-token",
            r"\bnpm_[A-Za-z0-9]{36}\b",
            Replacement::Fixed("[redacted:npm-token]"),
        ),
        (
            "discord-token",
            r"\b[MN][A-Za-z0-9]{23}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",
            Replacement::Fixed("[redacted:discord-token]"),
        ),
        (
            "jwt",
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            Replacement::Fixed("[redacted:jwt]"),
        ),
        (
            "aws-access-key",
            r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
            Replacement::Fixed("[redacted:aws-key]"),
        ),
        (
            "google-api-key",
            r"\bAIza[A-Za-z0-9_-]{35}",
            Replacement::Fixed("[redacted:google-key]"),
        ),
        (
            "telegram-bot-token",
            r"\b[0-9]{8,12}:[A-Za-z0-9_-]{35}",
            Replacement::Fixed("[redacted:telegram-token]"),
        ),
        (
            // `/bot<id>:<secret>/` has no word boundary before the id, so the rule above misses it.
            "telegram-bot-url",
            r"/bot[0-9]{6,12}:[A-Za-z0-9_-]{20,}",
            Replacement::Fixed("/bot[redacted:telegram-token]"),
        ),
        (
            "auth-header",
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
            r"(?i)\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*",
            Replacement::Fixed("Bearer [redacted]"),
        ),
        (
            "env-secret-assignment",
            r#"\b([A-Z_][A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|ACCESS_KEY)[A-Z0-9_]*)=("[^"]*"|'[^']*'|[^\s"']+)"#,
            Replacement::With(|c| Some(format!("{}=[redacted]", group(c, 1)))),
        ),
        (
            "url-credentials",
            r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@",
            Replacement::With(|c| Some(format!("{}[redacted]@", group(c, 1)))),
        ),
    ];
    specs
        .into_iter()
        .filter_map(|(name, pattern, replace)| {
            Regex::new(pattern).ok().map(|regex| Rule {
                name,
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

    /// A trigger bit that names the wrong rule would skip a rule whose secret is present.
    #[test]
    fn trigger_bits_name_their_rules() {
        let bits = [
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
            (TELEGRAM_TOKEN, "telegram-bot-token"),
            (TELEGRAM_URL, "telegram-bot-url"),
            (AUTH_HEADER, "auth-header"),
            (BEARER, "bearer-header"),
            (ENV_SECRET, "env-secret-assignment"),
            (URL_CREDENTIALS, "url-credentials"),
        ];
        for (bit, name) in bits {
            let rule = compiled().get(bit.trailing_zeros() as usize);
            assert_eq!(rule.map(|r| r.name), Some(name));
        }
    }

    /// Ordinary words that contain a trigger's letters ("through", "right", "a-b") must not
    /// send the text through any regex.
    #[test]
    fn ordinary_prose_triggers_nothing() {
        let prose = "We went through the right path: ask-me, a_b, e.g. 3.14 and x-y, \
                     x = 1, mailto:me@example.com, abc/def, AI, Zebra, bee.";
        assert_eq!(triggers(prose), 0);
    }
}
