//! The span stage of redaction: where the catalog's secrets are in a text (issue 32 §1, §6).
//!
//! Two hundred and more provider patterns must not cost two hundred scans. One Aho-Corasick
//! pass finds every keyword of every family (a family's pattern cannot match where none of
//! its keywords occurs: `tests/bridge/secret_families.rs` holds the catalog to that), and
//! only the families whose keywords occur run their pattern, each in the window around its
//! hits that the catalog gives (`hit - max_before_keyword .. hit + max_len`). Windows of one
//! family that touch are merged, so text dense with a keyword (`token token …`) costs that
//! family one scan of the text, not one per hit.
//!
//! The result is spans (byte ranges with the family's label); `redact.rs` replaces each with
//! `[redacted:LABEL]`. Only the secret is a span: a family whose pattern has a `secret`
//! group keeps its context (the key name, `=`, quotes), and nothing after the match is
//! touched, so a closing backtick, quote or full stop stays.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex_lite::Regex;

use crate::core::secret_families::{FAMILIES, Family};
use crate::core::secret_generic::GENERIC;
use crate::core::secret_values::{is_placeholder, is_plain_value, is_secret_like, names_no_secret};

/// A secret found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the secret's first byte (a char boundary).
    pub start: usize,
    /// Byte offset just past the secret (a char boundary).
    pub end: usize,
    /// The family's label, as `[redacted:LABEL]` shows it.
    pub label: &'static str,
}

/// One family as the engine runs it.
struct Rule {
    family: &'static Family,
    /// Compiled on first use: a reply that never mentions a provider never pays for its
    /// pattern, and the component starts without compiling two hundred regexes.
    regex: OnceLock<Option<Regex>>,
    /// The pattern starts with `\b` before a word character at the keyword: a hit glued to a
    /// word before it (`task` for `sk`, `update` for `pat`) cannot start a match, and is
    /// dropped before any regex runs. Common short keywords would otherwise start a regex
    /// search every few hundred bytes of prose.
    word_start: bool,
    /// The family's value is context-found (a `secret` group after a key name): a plain value
    /// (`3600`, `true`, `${VAR}`) there is configuration, not a secret.
    contextual: bool,
    /// Generic shapes (any key name saying it holds a secret) need their value to be judged
    /// by shape: they have no provider format to trust.
    generic: bool,
}

struct Engine {
    keywords: AhoCorasick,
    /// For each keyword (by pattern id), the rules it stands for.
    owners: Vec<Vec<usize>>,
    rules: Vec<Rule>,
}

/// Every family the engine knows: the provider catalog, then the generic shapes.
pub fn families() -> impl Iterator<Item = &'static Family> {
    FAMILIES.iter().chain(GENERIC.iter())
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(build)
}

fn build() -> Engine {
    let mut words: Vec<&'static str> = Vec::new();
    let mut owners: Vec<Vec<usize>> = Vec::new();
    let mut rules = Vec::new();
    for (index, family) in families().enumerate() {
        for keyword in family.keywords {
            match words.iter().position(|w| w == keyword) {
                Some(at) => owners[at].push(index),
                None => {
                    words.push(keyword);
                    owners.push(vec![index]);
                }
            }
        }
        let body = family
            .pattern
            .strip_prefix("(?i)")
            .unwrap_or(family.pattern);
        rules.push(Rule {
            family,
            regex: OnceLock::new(),
            word_start: family.max_before_keyword == 0
                && body.starts_with(r"\b")
                && family
                    .keywords
                    .iter()
                    .all(|k| k.bytes().next().is_some_and(is_word)),
            contextual: family.pattern.contains("(?P<secret>"),
            generic: index >= FAMILIES.len(),
        });
    }
    // A DFA: the keywords are few hundred short literals, and a DFA reads a byte per step
    // whatever their number. The catalog's keywords are lower case and compared without
    // ASCII case, as `Family::keywords` says.
    let keywords = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .kind(Some(AhoCorasickKind::DFA))
        .build(&words)
        .or_else(|_| {
            AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::Standard)
                .build(&words)
        })
        .unwrap_or_else(|_| AhoCorasick::new(std::iter::empty::<&str>()).expect("empty"));
    Engine {
        keywords,
        owners,
        rules,
    }
}

impl Rule {
    fn regex(&self) -> Option<&Regex> {
        self.regex
            .get_or_init(|| Regex::new(self.family.pattern).ok())
            .as_ref()
    }
}

/// `\w` as regex-lite reads it: ASCII only.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every secret the catalog and the generic shapes find in `text`, sorted by start, none
/// overlapping (overlapping finds are merged into one span, labelled by the longer one).
pub fn find_spans(text: &str) -> Vec<Span> {
    let engine = engine();
    let bytes = text.as_bytes();
    // (rule, window start, window end) for every hit that can start a match.
    let mut windows: Vec<(usize, usize, usize)> = Vec::new();
    for hit in engine.keywords.find_overlapping_iter(text) {
        let at = hit.start();
        let before_is_word = at > 0 && bytes.get(at - 1).copied().is_some_and(is_word);
        for &r in engine
            .owners
            .get(hit.pattern().as_usize())
            .into_iter()
            .flatten()
        {
            let Some(rule) = engine.rules.get(r) else {
                continue;
            };
            if rule.word_start && before_is_word {
                continue;
            }
            let start = at.saturating_sub(rule.family.max_before_keyword);
            let end = at.saturating_add(rule.family.max_len).min(text.len());
            windows.push((r, start, end));
        }
    }
    if windows.is_empty() {
        return Vec::new();
    }
    windows.sort_unstable();
    let mut spans = Vec::new();
    let mut k = 0;
    while let Some(&(r, start, mut end)) = windows.get(k) {
        k += 1;
        // Merge this rule's windows that touch: a run of hits is one search.
        while let Some(&(r2, s2, e2)) = windows.get(k) {
            if r2 != r || s2 > end {
                break;
            }
            end = end.max(e2);
            k += 1;
        }
        if let Some(rule) = engine.rules.get(r) {
            search(rule, text, start, end, &mut spans);
        }
    }
    merge(spans)
}

/// Runs `rule`'s pattern over `text[start..end]`, seeing the text around it for `\b`.
fn search(rule: &Rule, text: &str, start: usize, end: usize, spans: &mut Vec<Span>) {
    let Some(regex) = rule.regex() else {
        return;
    };
    let start = floor_char(text, start);
    // One character past the window: a `\b` at a match's end must see what follows it, or
    // a too-long lookalike (`ghp_` and 40 characters) would match its first 36.
    let hay_end = ceil_char(text, ceil_char(text, end) + 1);
    let Some(hay) = text.get(..hay_end) else {
        return;
    };
    let mut at = start;
    while at < end {
        let Some(caps) = regex.captures_at(hay, at) else {
            break;
        };
        let Some(whole) = caps.get(0) else {
            break;
        };
        if whole.start() >= end {
            break;
        }
        let secret = caps.name("secret").unwrap_or(whole);
        // A generic value ends before the sentence's punctuation (`token: abc.`): only the
        // secret is replaced, the full stop stays (issue 32 §5).
        let secret_end = if rule.generic {
            secret.start() + crate::core::secret_values::value_len(secret.as_str().as_bytes())
        } else {
            secret.end()
        };
        let value = text.get(secret.start()..secret_end).unwrap_or_default();
        let keep = secret.start() < secret.end()
            && !is_placeholder(value)
            && !((rule.contextual || rule.generic) && is_plain_value(value))
            && (!rule.generic || is_secret_like(rule.family.label, value))
            && !caps
                .name("key")
                .is_some_and(|k| names_no_secret(k.as_str()));
        if keep {
            spans.push(Span {
                start: secret.start(),
                end: secret_end,
                label: rule.family.label,
            });
        }
        at = if whole.end() > whole.start() {
            whole.end()
        } else {
            ceil_char(text, whole.end() + 1)
        };
    }
}

/// Spans sorted, overlapping ones joined: one marker for one secret that two families see
/// (a provider's key name and a generic key name), labelled by the longer find.
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    // Stable: spans come in rule order, so of two finds of one secret the catalog's (a
    // provider's label) is kept over a generic one of the same length.
    spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for span in spans {
        match out.last_mut() {
            Some(last) if span.start < last.end => {
                if span.end > last.end {
                    if span.end - span.start > last.end - last.start {
                        last.label = span.label;
                    }
                    last.end = span.end;
                }
            }
            _ => out.push(span),
        }
    }
    out
}

/// `text` with every span replaced by `[redacted:LABEL]`; `None` when there is none.
pub fn replace_spans(text: &str, spans: &[Span]) -> Option<String> {
    if spans.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + spans.len() * 16);
    let mut copied = 0;
    for span in spans {
        out.push_str(text.get(copied..span.start)?);
        out.push_str("[redacted:");
        out.push_str(span.label);
        out.push(']');
        copied = span.end;
    }
    out.push_str(text.get(copied..)?);
    Some(out)
}

/// Whether `text` holds a secret the catalog or the generic shapes know: what config
/// refuses besides the shapes of `secrets.rs`.
pub fn contains_span(text: &str) -> bool {
    !find_spans(text).is_empty()
}

/// The largest char boundary at or before `at`.
fn floor_char(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest char boundary at or after `at` (the text's end at most).
fn ceil_char(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyword_glued_to_a_word_runs_no_pattern_that_needs_a_word_start() {
        // `SK` + 32 hex is a Twilio key; inside `TASK…` it is not.
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(find_spans(&format!("TASK{hex}")), []);
        let spans = find_spans(&format!("key SK{hex} here"));
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].label, "twilio-api-key");
    }

    #[test]
    fn overlapping_finds_become_one_span() {
        let spans = merge(vec![
            Span {
                start: 5,
                end: 9,
                label: "a",
            },
            Span {
                start: 0,
                end: 6,
                label: "b",
            },
            Span {
                start: 10,
                end: 12,
                label: "c",
            },
        ]);
        assert_eq!(
            spans,
            [
                Span {
                    start: 0,
                    end: 9,
                    label: "b"
                },
                Span {
                    start: 10,
                    end: 12,
                    label: "c"
                }
            ]
        );
    }
}
