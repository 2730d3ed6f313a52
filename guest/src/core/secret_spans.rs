//! The span stage of redaction: where the catalog's secrets are in a text
//! (docs/security.md#redaction).
//!
//! Two hundred and more provider patterns must not cost two hundred scans. One Aho-Corasick
//! pass finds every keyword of every family (a family's pattern cannot match where none of
//! its keywords occurs: `tests/bridge/secret_families.rs` holds the catalog to that), and
//! only the families whose keywords occur run their pattern, each in the window around its
//! hits that the catalog gives (`hit - max_before_keyword .. hit + max_len`). Windows of one
//! family that touch are merged, so text dense with a keyword (`token token …`) costs that
//! family one scan of the text, not one per hit.
//!
//! A window still costs a scan, and regex-lite's scan is a PikeVM that steps every state of
//! the pattern at every byte: the generic key-name patterns, with their bounded repetitions,
//! ran at a few MB/s, and keywords such as `token` are common in code, so the windows cost
//! about 700 times pulldown-cmark's parse of the same text (64 ms per 64 KiB;
//! docs/architecture.md#performance-budgets).
//! So each family also has the same pattern for regex-automata, whose lazy DFA reads a byte per
//! step and whose backtracker fills the groups over the match alone; a family whose matches
//! begin with a keyword is tried anchored at its hits. The two engines read a pattern alike
//! except for two non-ASCII letters (see [`dfa_pattern`]): a text holding one goes through
//! regex-lite alone, as before. What is found is exactly what it was.
//!
//! The result is spans (byte ranges with the family's label); `redact.rs` replaces each with
//! `[redacted:LABEL]`. Only the secret is a span: a family whose pattern has a `secret`
//! group keeps its context (the key name, `=`, quotes), and nothing after the match is
//! touched, so a closing backtick, quote or full stop stays.

use std::ops::Range;
use std::sync::OnceLock;

use regex_automata::meta::Regex as Dfa;
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input, Match};
use regex_lite::Regex;

use crate::core::line_reuse;
use crate::core::secret_assigned::Assigned;
use crate::core::secret_families::{FAMILIES, Family};
use crate::core::secret_generic::GENERIC;
use crate::core::secret_index::{self, FAMILY_COUNT};
use crate::core::secret_keywords::{Hit, Keywords};
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
    /// The pattern for regex-automata ([`dfa_pattern`]), compiled on first use like `regex`,
    /// and whether its matches have a longest one; `None` when it does not compile, and
    /// regex-lite then searches alone.
    dfa: OnceLock<Option<(Dfa, bool)>>,
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
    /// A generic key-name assignment (`secret_generic.rs`'s `assigned!`): a keyword hit can
    /// be in a match's key only where the key runs on to an assignment sign (see
    /// [`assigned_after`]).
    assignment: bool,
    /// The matcher written for the generic assignment's shape, which finds what the regex
    /// finds without its reverse search (see `secret_assigned.rs`); `None` for every other
    /// rule, and for an assignment pattern of another shape. Made on first use
    /// ([`Rule::assigned`]).
    assigned: OnceLock<Option<Assigned>>,
}

/// Every family the engine knows: the provider catalog, then the generic shapes.
pub fn families() -> impl Iterator<Item = &'static Family> {
    FAMILIES.iter().chain(GENERIC.iter())
}

/// The engine: the catalog's keyword scan and rules, every table of them computed at
/// compile time (`secret_index.rs`), so a new instance (a session's start, a hibernated
/// session's wake) builds none of them. Only a rule's compiled pattern is made, on first use.
struct Engine {
    /// The keyword scan: each keyword is two bytes or more, which the build checks.
    scan: &'static Keywords,
    rules: &'static [Rule],
}

fn engine() -> &'static Engine {
    static ENGINE: Engine = Engine {
        scan: &secret_index::KEYWORDS,
        rules: &RULES,
    };
    &ENGINE
}

/// Whether `text` starts with `prefix` (`str::starts_with` is no `const fn`).
const fn starts_with(text: &[u8], prefix: &[u8]) -> bool {
    if text.len() < prefix.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if text[i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `text` holds `needle` (`str::contains` is no `const fn`).
const fn contains(text: &str, needle: &str) -> bool {
    let (text, needle) = (text.as_bytes(), needle.as_bytes());
    let mut at = 0;
    while at + needle.len() <= text.len() {
        if starts_with(text.split_at(at).1, needle) {
            return true;
        }
        at += 1;
    }
    false
}

/// Every family's rule, in the engine's order, what it says of itself read by the compiler.
static RULES: [Rule; FAMILY_COUNT] = {
    let mut rules = [const { Rule::unread() }; FAMILY_COUNT];
    let mut index = 0;
    while index < FAMILY_COUNT {
        let family = secret_index::family(index);
        let pattern = family.pattern.as_bytes();
        let body = match starts_with(pattern, b"(?i)") {
            true => pattern.split_at(4).1,
            false => pattern,
        };
        let mut keywords_start_words = true;
        let mut k = 0;
        while k < family.keywords.len() {
            let keyword = family.keywords[k].as_bytes();
            keywords_start_words &= !keyword.is_empty() && is_word(keyword[0]);
            k += 1;
        }
        let generic = index >= FAMILIES.len();
        let rule = &mut rules[index];
        rule.family = family;
        rule.word_start =
            family.max_before_keyword == 0 && starts_with(body, br"\b") && keywords_start_words;
        rule.contextual = contains(family.pattern, "(?P<secret>");
        rule.generic = generic;
        rule.assignment = generic && contains(family.pattern, ASSIGNMENT_SIGNS);
        index += 1;
    }
    rules
};

impl Rule {
    /// A rule not read from its family yet: [`RULES`] fills in each.
    const fn unread() -> Rule {
        Rule {
            family: secret_index::family(0),
            regex: OnceLock::new(),
            dfa: OnceLock::new(),
            word_start: false,
            contextual: false,
            generic: false,
            assignment: false,
            assigned: OnceLock::new(),
        }
    }

    /// The matcher written for the generic assignment's shape, made on first use: a text
    /// with no such key never pays for it, and a new instance (a wake) builds none.
    fn assigned(&self) -> Option<&Assigned> {
        match self.generic {
            true => self
                .assigned
                .get_or_init(|| Assigned::new(self.family.pattern))
                .as_ref(),
            false => None,
        }
    }

    fn regex(&self) -> Option<&Regex> {
        self.regex
            .get_or_init(|| Regex::new(self.family.pattern).ok())
            .as_ref()
    }

    fn dfa(&self) -> Option<&(Dfa, bool)> {
        self.dfa
            .get_or_init(|| {
                let pattern = dfa_pattern(self.family.pattern)?;
                let bounded = regex_automata::util::syntax::parse(&pattern)
                    .ok()?
                    .properties()
                    .maximum_len()
                    .is_some();
                let dfa = Dfa::new(&pattern);
                // A translated pattern that does not compile is a build without a feature
                // it needs (the case-folding table once): regex-lite still runs it, slowly.
                debug_assert!(dfa.is_ok(), "{}: {dfa:?}", self.family.label);
                Some((dfa.ok()?, bounded))
            })
            .as_ref()
    }
}

/// `pattern` (regex-lite's syntax) for regex-automata, matching what regex-lite's reading of
/// it matches, with the same groups: `None` where the translation is not sure of that.
///
/// Both read a `&str` as characters with leftmost-first semantics, so classes, counted
/// repetitions and groups agree; they differ in what Unicode does. regex-lite's `\b`, `\d`,
/// `\s` and `\w` are ASCII only, and regex-automata's are Unicode's, so those are spelt out as
/// ASCII here (an ASCII word boundary sees a non-ASCII character as a non-word one, as
/// regex-lite does). Case-insensitive matching is ASCII in regex-lite and Unicode's simple
/// folding in regex-automata, where `(?i)k` also matches K (U+212A KELVIN SIGN) and `(?i)s`
/// ſ (U+017F), and `(?i)[^a-z]` matches neither. Those two are the only characters outside
/// ASCII that fold to an ASCII letter, so [`find_spans`] gives a text holding one to
/// regex-lite alone.
pub fn dfa_pattern(pattern: &str) -> Option<String> {
    const SPACE: &str = r"\t\n\x0B\x0C\r ";
    const DIGIT: &str = "0-9";
    const WORD: &str = "0-9A-Za-z_";
    let mut out = String::with_capacity(pattern.len() + 32);
    let mut chars = pattern.chars().peekable();
    // Inside `[...]`, and whether the next character is the class's first (where `]` and,
    // after `^`, `]` again are literal).
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        let first = std::mem::take(&mut class_start);
        match c {
            '\\' => {
                let e = chars.next()?;
                match (in_class, e) {
                    (false, 'b') => out.push_str(r"(?-u:\b)"),
                    (false, 'B') => out.push_str(r"(?-u:\B)"),
                    (false, 'd') => out.push_str(&format!("[{DIGIT}]")),
                    (false, 'D') => out.push_str(&format!("[^{DIGIT}]")),
                    (false, 's') => out.push_str(&format!("[{SPACE}]")),
                    (false, 'S') => out.push_str(&format!("[^{SPACE}]")),
                    (false, 'w') => out.push_str(&format!("[{WORD}]")),
                    (false, 'W') => out.push_str(&format!("[^{WORD}]")),
                    (true, 'd') => out.push_str(DIGIT),
                    (true, 's') => out.push_str(SPACE),
                    (true, 'w') => out.push_str(WORD),
                    // A negated Perl class inside a class has no short ASCII spelling, and
                    // the special word boundaries (`\b{start}`) are not worth one: unsure.
                    (true, 'D' | 'S' | 'W') => return None,
                    (_, 'p' | 'P') => return None,
                    (_, 'b') if chars.peek() == Some(&'{') => return None,
                    (_, e) => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push(c);
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
            }
            // A nested class or a POSIX class, and the class set operators (`&&`, `--`,
            // `~~`), which regex-automata reads and regex-lite may not: unsure.
            '[' => return None,
            '&' | '-' | '~' if in_class && chars.peek() == Some(&c) => return None,
            ']' if in_class && !first => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    (!in_class).then_some(out)
}

/// How `secret_generic.rs`'s `assigned!` patterns spell the assignment after a key name.
const ASSIGNMENT_SIGNS: &str = r#"["']?[ \t]{0,8}(?:=>|:=|=|:)"#;

/// Whether the keyword hit at `at` can be in the key of a generic assignment: such a key is
/// letters, digits, `_`, `-` and `.` (the keywords are too), followed by the sign, so from
/// anywhere in it those characters run to its end; then come an optional quote, up to eight
/// blanks, `=>`, `:=`, `=` or `:`, up to eight blanks, and a value that opens with a quote or
/// with a character a bare value may start with. A key name in prose or code
/// (`the token refresh`, `$API_TOKEN"`, `${token}`, `Token::parse`) fails here, before any
/// window is searched: in agent text most `token` hits are such.
fn assigned_after(bytes: &[u8], at: usize) -> bool {
    // Index loops, not iterator chains over `get(..)`: a config dump asks this of every
    // keyword hit (thousands per 64 KiB, each pass), and the chains cost 230 instructions a
    // call.
    let n = bytes.len();
    let is_key = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    let blanks = |from: usize| {
        let mut j = from;
        while j < n && j - from < 9 && matches!(bytes[j], b' ' | b'\t') {
            j += 1;
        }
        j - from
    };
    let mut i = at;
    while i < n && is_key(bytes[i]) {
        i += 1;
    }
    if i < n && matches!(bytes[i], b'"' | b'\'') {
        i += 1;
    }
    let before = blanks(i);
    if before > 8 {
        return false;
    }
    let sign = i + before;
    let value_after = |len: usize| {
        let value = sign + len;
        let after = blanks(value);
        after <= 8
            && bytes.get(value + after).is_some_and(|&b| {
                matches!(b, b'"' | b'\'')
                    || !(b.is_ascii_whitespace() || b"\x0B`<>;,[{(:=".contains(&b))
            })
    };
    // `=>` and `:=` are tried whole, then as `=` and `:` alone, as the signs' order says.
    match (bytes.get(sign), bytes.get(sign + 1)) {
        (Some(b'='), Some(b'>')) | (Some(b':'), Some(b'=')) => value_after(2) || value_after(1),
        (Some(b'=' | b':'), _) => value_after(1),
        _ => false,
    }
}

/// The `key` and `secret` groups of a generic assignment's match `whole` (see
/// `secret_generic.rs`'s `assigned!`), read off the match without a capture engine; `None`
/// when the match is not of that shape.
///
/// The reading is forced at every step, so it is what the engine's leftmost-first groups
/// are: the key is the match's leading run of `[A-Za-z0-9_.-]`, since what must follow it
/// (a quote, a blank, a sign) is none of those; then an optional quote, blanks, the sign
/// (`=>` before `=`, `:=` before `:`: a value never starts with `>` or `=`), blanks; the
/// value is the rest of the match (it ends the pattern), inside its quotes when the match
/// ends with the quote that closes a quoted value (a bare value holds no quote).
fn assignment_groups(text: &str, whole: Range<usize>) -> Option<(Range<usize>, Range<usize>)> {
    let bytes = text.as_bytes().get(whole.clone())?;
    let is_key = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    let blanks = |from: usize| {
        from + bytes
            .get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count()
    };
    let key = bytes.iter().take_while(|b| is_key(b)).count();
    let mut at = key;
    if matches!(bytes.get(at), Some(b'"' | b'\'')) {
        at += 1;
    }
    at = blanks(at);
    let sign = [&b"=>"[..], b":=", b"=", b":"]
        .into_iter()
        .find(|sign| bytes.get(at..).is_some_and(|rest| rest.starts_with(sign)))?;
    at = blanks(at + sign.len());
    let quoted = matches!(bytes.get(at), Some(b'"' | b'\''))
        && bytes.len() >= at + 3
        && matches!(bytes.last(), Some(b'"' | b'\''));
    let value = match quoted {
        true => at + 1..bytes.len() - 1,
        false => at..bytes.len(),
    };
    if value.is_empty() {
        return None;
    }
    Some((
        whole.start..whole.start + key,
        whole.start + value.start..whole.start + value.end,
    ))
}

/// `\w` as regex-lite reads it: ASCII only.
const fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every secret the catalog and the generic shapes find in `text`, sorted by start, none
/// overlapping (overlapping finds are merged into one span, labelled by the longer one).
pub fn find_spans(text: &str) -> Vec<Span> {
    let engine = engine();
    let bytes = text.as_bytes();
    let stage = line_reuse::recall(&STAGE, bytes, |last| {
        let last = last.and_then(|(old, stage)| Some((old, stage.first()?)));
        // The lines shared with the last text, compared once for the keyword scan and the
        // searches.
        let runs = last.map(|(old, _)| line_reuse::shared_runs(old, bytes));
        let hits: Vec<Hit> = match (&runs, last) {
            (Some(runs), Some((old, stage))) => {
                engine.scan.find_all_carried(runs, old, &stage.hits, bytes)
            }
            _ => engine.scan.find_all(bytes),
        };
        let windows = windows_of(text, &hits);
        let found = match windows.is_empty() {
            true => Vec::new(),
            false => {
                let folds = has_folds(bytes);
                let carry = runs
                    .as_deref()
                    .zip(last)
                    .map(|(runs, (_, stage))| (runs, stage.found.as_slice()));
                let found = search_windows(text, &windows, folds, carry);
                // The debug builds (every test) hold what was carried to a search of every
                // window.
                #[cfg(debug_assertions)]
                if carry.is_some() {
                    debug_assert_eq!(
                        found,
                        search_windows(text, &windows, folds, None),
                        "{text:?}"
                    );
                }
                found
            }
        };
        vec![Stage { hits, found }]
    });
    let found = stage
        .first()
        .map(|s| s.found.as_slice())
        .unwrap_or_default();
    merge(
        found
            .iter()
            .filter(|f| !f.window)
            .filter_map(|f| {
                Some(Span {
                    start: f.start,
                    end: f.end,
                    label: engine.rules.get(f.rule)?.family.label,
                })
            })
            .collect(),
    )
}

/// The windows of `text`'s keyword `hits` that can start a match: (rule, start, end),
/// sorted by [`by_rule`].
fn windows_of(text: &str, hits: &[Hit]) -> Vec<(usize, usize, usize)> {
    let engine = engine();
    let bytes = text.as_bytes();
    let mut windows: Vec<(usize, usize, usize)> = Vec::new();
    // Whether the hit at a position can be in an assignment's key: asked once per position,
    // not once per rule (the generic assignments are four rules over the same keywords).
    let mut assigned: Option<(usize, bool)> = None;
    // Asked once for the text, not at each hit: a config dump has thousands of hits, and
    // the look around each was 7% of its redaction (cachegrind, `assignments`).
    let has_markers = memchr::memmem::find(bytes, b"[redacted").is_some();
    for &(keyword, at) in hits {
        // A keyword in one of redaction's own markers (`mysql` in
        // `[redacted:mysql-password]`) is no text the agent wrote: read as text, it let
        // mysql's `-p` rule start in an earlier marker and take the next `-p…` assignment
        // whole, so a second redaction changed the first one's output (found by the
        // idempotency property).
        if has_markers && marker_end(text, at).is_some() {
            continue;
        }
        let before_is_word = at > 0 && bytes.get(at - 1).copied().is_some_and(is_word);
        for r in secret_index::owners(keyword)
            .iter()
            .map(|&r| usize::from(r))
        {
            let Some(rule) = engine.rules.get(r) else {
                continue;
            };
            if rule.word_start && before_is_word {
                continue;
            }
            if rule.assignment {
                let known = assigned
                    .filter(|&(position, _)| position == at)
                    .map(|(_, known)| known);
                let is = known.unwrap_or_else(|| assigned_after(bytes, at));
                assigned = Some((at, is));
                if !is {
                    continue;
                }
            }
            let start = at.saturating_sub(rule.family.max_before_keyword);
            let end = at.saturating_add(rule.family.max_len).min(text.len());
            windows.push((r, start, end));
        }
    }
    match windows.is_empty() {
        true => windows,
        false => by_rule(windows, engine.rules.len()),
    }
}

/// What the span stage found in one text: its keyword hits, and what [`search_windows`]
/// found around them. Kept for the next text within one redaction (see `line_reuse.rs`).
#[derive(Debug, Clone)]
struct Stage {
    hits: Vec<Hit>,
    found: Vec<Found>,
}

thread_local! {
    /// The span stage's last text and finds, within one redaction (see `line_reuse.rs`):
    /// one memory, so the two texts are compared once and the text is kept once.
    static STAGE: line_reuse::Memory<Stage> = const { std::cell::RefCell::new(None) };
}

/// Whether `bytes` holds one of the two characters whose Unicode case folding is an ASCII
/// letter: K (U+212A KELVIN SIGN) and ſ (U+017F LATIN SMALL LETTER LONG S); see
/// `dfa_pattern`.
fn has_folds(bytes: &[u8]) -> bool {
    // `str::contains` with a character of two or three bytes runs the two-way substring
    // search, twice over the whole text per look; memchr's vectorised search answers the
    // same question in fewer steps.
    memchr::memmem::find(bytes, "\u{212A}".as_bytes()).is_some()
        || memchr::memmem::find(bytes, "\u{17F}".as_bytes()).is_some()
}

/// What the span stage found in a text, by rule, in the order [`search_windows`] finds it:
/// each rule's secrets, and the merged windows of the rules whose finds
/// [`carry_assignments`] can carry to the next text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    rule: usize,
    start: usize,
    end: usize,
    /// A merged window searched, not a secret.
    window: bool,
}

/// Searches each rule in its `windows` (sorted by [`by_rule`]), merging the windows of a
/// rule that touch. With `last` (the lines shared with an earlier text, and what this found
/// in it), the generic assignments keep their finds on those lines (see
/// [`carry_assignments`]); what is found is the same.
fn search_windows(
    text: &str,
    windows: &[(usize, usize, usize)],
    folds: bool,
    last: Option<(&[line_reuse::Shared], &[Found])>,
) -> Vec<Found> {
    let engine = engine();
    // A text holding a folding character goes through regex-lite, and carries nothing. One
    // that held one kept no window of the matcher's to carry from.
    let last = last.filter(|_| !folds);
    let mut found = Vec::new();
    let mut spans = Vec::new();
    // The last text's finds of the rule being searched.
    let mut old: Option<OldFinds> = None;
    let mut k = 0;
    while let Some(&(r, start, mut end)) = windows.get(k) {
        let first = k;
        k += 1;
        // Merge this rule's windows that touch: a run of hits is one search.
        while let Some(&(r2, s2, e2)) = windows.get(k) {
            if r2 != r || s2 > end {
                break;
            }
            end = end.max(e2);
            k += 1;
        }
        let Some(rule) = engine.rules.get(r) else {
            continue;
        };
        spans.clear();
        match rule.dfa().filter(|_| !folds && rule.assignment) {
            Some((dfa, _)) if rule.assigned().is_some() => {
                found.push(Found {
                    rule: r,
                    start,
                    end,
                    window: true,
                });
                let hay_end = ceil_char(text, ceil_char(text, end) + 1);
                let Some(hay) = text.get(..hay_end) else {
                    continue;
                };
                let search = Search {
                    rule,
                    dfa,
                    text,
                    hay,
                };
                match last {
                    Some((runs, last_found)) => {
                        let old = match old.take() {
                            Some(kept) if kept.rule == r => old.insert(kept),
                            _ => old.insert(OldFinds::of(last_found, r)),
                        };
                        carry_assignments(&search, runs, old, start..end, &mut spans);
                    }
                    None => search.assignments(floor_char(text, start), end, &mut spans),
                }
            }
            _ => {
                let starts = windows.get(first..k).unwrap_or_default();
                let window = Window { start, end, starts };
                search_rule(rule, text, &window, folds, &mut spans);
            }
        }
        found.extend(spans.iter().map(|s| Found {
            rule: r,
            start: s.start,
            end: s.end,
            window: false,
        }));
    }
    found
}

/// The last text's finds of one generic assignment.
struct OldFinds {
    rule: usize,
    /// The rule's merged windows, in order.
    windows: Vec<(usize, usize)>,
    /// The rule's secrets, in order.
    spans: Vec<(usize, usize)>,
}

impl OldFinds {
    /// `found`'s windows and secrets of rule `r`.
    fn of(found: &[Found], r: usize) -> OldFinds {
        let (mut windows, mut spans) = (Vec::new(), Vec::new());
        for f in found.iter().filter(|f| f.rule == r) {
            match f.window {
                true => windows.push((f.start, f.end)),
                false => spans.push((f.start, f.end)),
            }
        }
        OldFinds {
            rule: r,
            windows,
            spans,
        }
    }
}

/// A generic assignment's search of `window` (merged), its finds on the lines shared with
/// the last text carried over instead of searched again.
///
/// A config dump holds an assignment every few dozen bytes: all four rules' windows merge
/// into one that covers the text, and each of redaction's three or four readings (the text,
/// the confirming pass, the views) searched all of it again, though a reading differs from
/// the last in a few lines (cachegrind, `assignments`: the matcher and the judging of its
/// values were half of redaction).
///
/// Why a line's finds carry: a match of [`Assigned`]'s shape lies inside one line (a key is
/// `[A-Za-z0-9_.-]`, the blanks around the sign are spaces and tabs, a bare value stops at
/// any blank, a quoted one at a line break), and judging it reads its key, its value and the
/// markers on its line (no marker holds a line break). The rule's search of a merged window
/// is a chain of leftmost matches from the window's start, each search starting where the
/// last match ended; since no match crosses a line, the chain enters each line at or before
/// its start and finds there what a search from the line's start finds, the line break
/// before it being no key character, quote or blank. So the finds on a line that lies
/// whole inside the window depend on that line's bytes alone, and a line the last text held
/// at the same line number, whole inside one of the rule's merged windows there, has the
/// same finds, moved. The other lines are searched in pieces (whole lines, or the window's
/// partial first and last ones), each piece reading the window's text to its end as the
/// whole search did. The debug builds hold the result to a search of the whole window.
fn carry_assignments(
    search: &Search<'_>,
    runs: &[line_reuse::Shared],
    carry: &OldFinds,
    window: Range<usize>,
    spans: &mut Vec<Span>,
) {
    let bytes = search.text.as_bytes();
    let label = search.rule.family.label;
    let mut cursor = floor_char(search.text, window.start);
    let first_run = runs.partition_point(|run| run.to <= window.start);
    for run in runs.get(first_run..).unwrap_or_default() {
        if run.from >= window.end {
            break;
        }
        // In this run a position of the last text is this text's plus `run.old`, minus
        // `run.from`.
        let to_new = |old: usize| (old + run.from).saturating_sub(run.old);
        let from_old = run.old + run.from.max(window.start) - run.from;
        let first_window = carry.windows.partition_point(|&(_, end)| end <= from_old);
        for &(old_start, old_end) in carry.windows.get(first_window..).unwrap_or_default() {
            let lo = window.start.max(run.from).max(to_new(old_start));
            if lo >= window.end.min(run.to) {
                break;
            }
            let hi = window.end.min(run.to).min(to_new(old_end));
            let (a, b) = whole_lines(bytes, lo, hi);
            if a >= b {
                continue;
            }
            if a > cursor {
                search.assignments(cursor, a, spans);
            }
            let (old_a, old_b) = (a + run.old - run.from, b + run.old - run.from);
            let first_span = carry.spans.partition_point(|&(start, _)| start < old_a);
            for &(start, end) in carry.spans.get(first_span..).unwrap_or_default() {
                if start >= old_b {
                    break;
                }
                spans.push(Span {
                    start: to_new(start),
                    end: to_new(end),
                    label,
                });
            }
            cursor = b;
        }
    }
    if cursor < window.end {
        search.assignments(cursor, window.end, spans);
    }
}

/// The whole lines of `bytes` inside `lo..hi`: from the first line start at or after `lo`
/// to the last line end (past its line break, or the text's end) at or before `hi`.
fn whole_lines(bytes: &[u8], lo: usize, hi: usize) -> (usize, usize) {
    let a = match lo {
        0 => 0,
        lo if bytes.get(lo - 1) == Some(&b'\n') => lo,
        lo => memchr::memchr(b'\n', bytes.get(lo..).unwrap_or_default())
            .map_or(bytes.len(), |i| lo + i + 1),
    };
    let b = match hi {
        hi if hi >= bytes.len() => bytes.len(),
        hi => memchr::memrchr(b'\n', bytes.get(..hi).unwrap_or_default()).map_or(0, |i| i + 1),
    };
    (a, b)
}

/// `windows` (rule, start, end) sorted, as `sort_unstable` sorts them.
///
/// The keyword hits come in text order, so each rule's windows already do: a counting
/// sort by rule keeps that order, where a comparison sort of every window was a tenth of
/// the span stage on text dense with keywords (a config dump holds ten a line).
fn by_rule(windows: Vec<(usize, usize, usize)>, rules: usize) -> Vec<(usize, usize, usize)> {
    let mut next = vec![0usize; rules + 1];
    for &(rule, _, _) in &windows {
        if let Some(count) = next.get_mut(rule + 1) {
            *count += 1;
        }
    }
    for k in 1..next.len() {
        next[k] += next[k - 1];
    }
    let mut sorted = vec![(0, 0, 0); windows.len()];
    for window in &windows {
        let Some(slot) = next.get_mut(window.0) else {
            // A rule past the list, which `find_spans` never makes: sort them all.
            let mut all = windows;
            all.sort_unstable();
            return all;
        };
        sorted[*slot] = *window;
        *slot += 1;
    }
    // Hits out of text order (an overlapping search such as aho-corasick's gives them so;
    // the gram scan does not) would leave a rule's windows unsorted: checked, not assumed.
    if !sorted.is_sorted() {
        sorted.sort_unstable();
    }
    sorted
}

/// Where one rule is searched: its windows that touch, merged.
struct Window<'w> {
    start: usize,
    end: usize,
    /// The merged windows, as `(rule, start, end)` and in order: where the rule's keyword
    /// hits put a match's start when the rule's matches begin with a keyword.
    starts: &'w [(usize, usize, usize)],
}

/// One rule's search of one merged window: the text, and the part of it the search reads
/// (to one character past the window's end).
struct Search<'s> {
    rule: &'s Rule,
    dfa: &'s Dfa,
    text: &'s str,
    hay: &'s str,
}

impl Search<'_> {
    /// The generic assignment's matches starting in `start..end` (`start` a char boundary),
    /// each judged into `spans`, as the engine's leftmost-first search from `start` finds
    /// them.
    fn assignments(&self, start: usize, end: usize, spans: &mut Vec<Span>) {
        let Search {
            rule,
            dfa,
            text,
            hay,
        } = *self;
        // Only the rare fallback fills groups: an allocation per window was a tenth of a
        // config dump's redaction.
        let mut lazy_caps: Option<Captures> = None;
        let next = |whole: Range<usize>| {
            if whole.end > whole.start {
                whole.end
            } else {
                ceil_char(text, whole.end + 1)
            }
        };
        let mut at = start;
        while at < end {
            let found = match rule.assigned() {
                Some(assigned) => {
                    let found = assigned.find(hay.as_bytes(), at, end);
                    // The debug builds (every test) hold the matcher to the engine.
                    #[cfg(debug_assertions)]
                    {
                        let engine = dfa
                            .search(&Input::new(hay).range(at..))
                            .filter(|m| m.start() < end)
                            .map(|m| m.range());
                        debug_assert_eq!(found, engine, "{}: {hay:?} from {at}", rule.family.label);
                    }
                    found
                }
                None => dfa
                    .search(&Input::new(hay).range(at..))
                    .filter(|m| m.start() < end)
                    .map(|m| m.range()),
            };
            let Some(whole) = found.map(|r| Match::must(0, r)) else {
                break;
            };
            match assignment_groups(text, whole.range()) {
                Some((key, secret)) => {
                    // The debug builds (every test) hold the reading to the engine's.
                    #[cfg(debug_assertions)]
                    {
                        let input = Input::new(hay).span(whole.range()).anchored(Anchored::Yes);
                        let caps = lazy_caps.get_or_insert_with(|| dfa.create_captures());
                        dfa.search_captures(&input, caps);
                        let group = |name| caps.get_group_by_name(name).map(|g| g.range());
                        debug_assert_eq!(
                            (group("key"), group("secret")),
                            (Some(key.clone()), Some(secret.clone())),
                            "{}: {:?}",
                            rule.family.label,
                            text.get(whole.range())
                        );
                    }
                    judge(rule, text, secret, text.get(key), spans);
                    at = next(whole.range());
                }
                // Not the shape the reading knows: the engine fills the groups.
                None => {
                    let input = Input::new(hay).span(whole.range()).anchored(Anchored::Yes);
                    let caps = lazy_caps.get_or_insert_with(|| dfa.create_captures());
                    dfa.search_captures(&input, caps);
                    if let Some(found) = caps.get_match() {
                        let secret = caps.get_group_by_name("secret").unwrap_or(found.span());
                        let key = caps
                            .get_group_by_name("key")
                            .and_then(|k| text.get(k.range()));
                        judge(rule, text, secret.range(), key, spans);
                    }
                    at = next(whole.range());
                }
            }
        }
    }
}

/// Runs `rule`'s pattern over `text[window.start..window.end]`, seeing the text around it
/// for `\b`. `folds`: the text holds a character that Unicode's case folding reads as an
/// ASCII letter (see [`dfa_pattern`]).
fn search_rule(rule: &Rule, text: &str, window: &Window<'_>, folds: bool, spans: &mut Vec<Span>) {
    let Window { start, end, .. } = *window;
    let start = floor_char(text, start);
    // One character past the window: a `\b` at a match's end must see what follows it, or
    // a too-long lookalike (`ghp_` and 40 characters) would match its first 36.
    let hay_end = ceil_char(text, ceil_char(text, end) + 1);
    let Some(hay) = text.get(..hay_end) else {
        return;
    };
    let next = |whole: Range<usize>| {
        if whole.end > whole.start {
            whole.end
        } else {
            ceil_char(text, whole.end + 1)
        }
    };
    // Without such a character the two engines read the pattern alike (see `dfa_pattern`),
    // so the DFA's engine gives the match and its groups itself: regex-lite's PikeVM, even
    // from the match's start, was a third of redaction's time.
    if let Some((dfa, bounded)) = rule.dfa().filter(|_| !folds) {
        // A generic assignment's groups follow from its match (see `assignment_groups`):
        // the match alone is found, and the groups read off it. Filling the groups was
        // most of the time on a config dump, whose values mostly stay (`changeme`,
        // `${VAR}`, `3600`): 14-20 ms per 64 KiB for matches the value check then refused.
        if rule.assignment {
            let search = Search {
                rule,
                dfa,
                text,
                hay,
            };
            search.assignments(start, end, spans);
            return;
        }
        let mut caps = dfa.create_captures();
        // Judges the match `caps` holds; gives where the next search starts.
        let mut take = |caps: &Captures, whole: Match| {
            let secret = caps.get_group_by_name("secret").unwrap_or(whole.span());
            let key = caps
                .get_group_by_name("key")
                .and_then(|k| text.get(k.range()));
            judge(rule, text, secret.range(), key, spans);
            next(whole.range())
        };
        // A rule whose matches begin with a keyword is tried at its hits alone, anchored:
        // the DFA then stops where the text stops matching (a few bytes past `token`), where
        // a search reads on to the window's end. The leftmost match from a point is the
        // anchored match at the first hit after it that has one, so the matches are the
        // same; the hay is the merged window's, as for the search. Not for a pattern
        // without a longest match (a private key's body): tried at every BEGIN line of a
        // text without an END, each try read to the window's end, which is quadratic.
        if rule.family.max_before_keyword == 0 && *bounded {
            let mut at = start;
            for &(_, hit, _) in window.starts {
                if hit < at {
                    continue;
                }
                let input = Input::new(hay).range(hit..).anchored(Anchored::Yes);
                dfa.search_captures(&input, &mut caps);
                at = match caps.get_match() {
                    Some(whole) => take(&caps, whole),
                    None => hit + 1,
                };
            }
            return;
        }
        let mut at = start;
        while at < end {
            dfa.search_captures(&Input::new(hay).range(at..), &mut caps);
            let Some(whole) = caps.get_match().filter(|m| m.start() < end) else {
                break;
            };
            // A window opened by a hit before a marker still covers the marker.
            at = match marker_end(text, whole.start()) {
                Some(past) => past,
                None => take(&caps, whole),
            };
        }
        return;
    }
    let Some(regex) = rule.regex() else {
        return;
    };
    // A text holding a folding character, or a pattern the translation was unsure of.
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
        if let Some(past) = marker_end(text, whole.start()) {
            at = past;
            continue;
        }
        let secret = caps.name("secret").unwrap_or(whole);
        let key = caps.name("key").map(|k| k.as_str());
        judge(rule, text, secret.range(), key, spans);
        at = next(whole.range());
    }
}

/// Adds a span for `rule`'s match whose secret is `text[secret]` (the `key` group, where the
/// pattern has one, naming it), unless the value or its key says it is no secret.
fn judge(rule: &Rule, text: &str, secret: Range<usize>, key: Option<&str>, spans: &mut Vec<Span>) {
    // A generic value ends before the sentence's punctuation (`token: abc.`): only the
    // secret is replaced, the full stop stays (docs/security.md#redaction).
    let secret_end = if rule.generic {
        let matched = text.get(secret.clone()).unwrap_or_default();
        secret.start + crate::core::secret_values::value_len(matched.as_bytes())
    } else {
        secret.end
    };
    let bare = without_markers(text, secret.start..secret_end);
    let value: &str = &bare;
    let keep = secret.start < secret.end
        && !is_placeholder(value)
        && !((rule.contextual || rule.generic) && is_plain_value(value))
        && (!rule.generic || is_secret_like(rule.family.label, value))
        && !key.is_some_and(names_no_secret);
    if keep {
        spans.push(Span {
            start: secret.start,
            end: secret_end,
            label: rule.family.label,
        });
    }
}

/// `text[range]` without redaction's markers: a value is judged by what is left beside one.
/// That is what an earlier reading judged and kept (the path `//` of
/// `token ://[redacted:aws-mws-key]`); read with the marker's letters, the same value became
/// a secret on a second redaction, and redaction was not idempotent (found by the
/// idempotency property).
fn without_markers(text: &str, range: Range<usize>) -> std::borrow::Cow<'_, str> {
    let value = text.get(range.clone()).unwrap_or_default();
    // A byte search first: a config dump judges thousands of values, and building a
    // substring search for each was 7% of its redaction (cachegrind, `assignments`).
    if memchr::memchr(b'[', value.as_bytes()).is_none()
        || memchr::memmem::find(value.as_bytes(), b"[redacted").is_none()
    {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut bare = String::with_capacity(value.len());
    let mut at = range.start;
    while at < range.end {
        let rest = text.get(at..range.end).unwrap_or_default();
        let Some(open) = memchr::memmem::find(rest.as_bytes(), b"[redacted") else {
            bare.push_str(rest);
            break;
        };
        let open = at + open;
        bare.push_str(text.get(at..open).unwrap_or_default());
        match marker_end(text, open + 1) {
            Some(end) => at = end.min(range.end),
            None => {
                bare.push('[');
                at = open + 1;
            }
        }
    }
    std::borrow::Cow::Owned(bare)
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

/// The longest marker redaction writes, in bytes, with room to spare (a test holds every
/// marker to it).
const MARKER_MAX: usize = 64;

/// The labels of the markers `secrets.rs`'s shapes write (`[redacted:github-token]`), besides
/// the families' own. Listed here because `secrets.rs` reads this module (its marker list
/// holds the families'), and reading that list back would be an import circle;
/// `tests/bridge/redact_props.rs` holds this list to it.
const SHAPE_LABELS: &[&str] = &[
    "private-key",
    "anthropic-key",
    "openai-key",
    "github-token",
    "slack-token",
    "npm-token",
    "discord-token",
    "jwt",
    "aws-key",
    "google-key",
    "telegram-token",
];

/// Where redaction's marker around byte `at` of `text` ends, when `at` is inside one (past
/// its `[`, before its `]`); `None` elsewhere. Only a marker redaction writes counts:
/// `[redacted:mysql -pS3cret]` is text that merely looks like one, and its secret goes.
pub fn marker_end(text: &str, at: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    // Back over the label's bytes to the `[`: at most a few steps, and one at a hit after
    // a blank or a line break (nearly all), where a search back for `[` was 7% of a config
    // dump's redaction.
    let from = at.saturating_sub(MARKER_MAX);
    let label_start = from
        + 1
        + bytes
            .get(from..at)?
            .iter()
            .rposition(|&b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))?;
    let open = match bytes.get(..label_start)? {
        before if before.ends_with(b"[redacted:") => label_start - b"[redacted:".len(),
        // Inside the word `redacted` itself.
        before if before.ends_with(b"[") && bytes.get(label_start..)?.starts_with(b"redacted") => {
            label_start - 1
        }
        _ => return None,
    };
    let to = open.saturating_add(MARKER_MAX).min(bytes.len());
    let close = at + memchr::memchr(b']', bytes.get(at..to)?)?;
    let known = match text.get(open..=close)? {
        "[redacted]" => true,
        marker => marker
            .strip_prefix("[redacted:")
            .and_then(|m| m.strip_suffix(']'))
            .is_some_and(|label| {
                SHAPE_LABELS.contains(&label) || families().any(|f| f.label == label)
            }),
    };
    known.then_some(close + 1)
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

    /// The generic assignments the written matcher takes, each with the engine's regex.
    fn assigned_rules() -> Vec<(Assigned, Dfa)> {
        GENERIC
            .iter()
            .filter_map(|family| {
                let assigned = Assigned::new(family.pattern)?;
                let pattern = dfa_pattern(family.pattern)?;
                Some((assigned, Dfa::new(&pattern).expect("compiles")))
            })
            .collect()
    }

    #[test]
    fn a_word_ending_the_key_may_take_its_optional_letter() {
        // `credentials` and 40 key characters match through `credentials?` taking its `s`:
        // the matcher must know the longer spelling, not only the keyword `credential`.
        let (secret_bare, regex) = assigned_rules().remove(3);
        let text = format!("credentials{} = abcdef123456", "x".repeat(40));
        let expected = regex.search(&Input::new(&text)).map(|m| m.range());
        assert!(expected.is_some());
        assert_eq!(secret_bare.find(text.as_bytes(), 0, text.len()), expected);
    }

    #[test]
    fn the_matcher_holds_the_patterns_limits() {
        // Random texts seldom line up a key, a sign and exactly eight or nine blanks, or a
        // word with exactly forty key characters on a side: each limit is asked here, on
        // both sides of it, of all four rules.
        let pad = |n: usize| "x".repeat(n);
        let mut texts = Vec::new();
        for value in ["hunter2x", "\"hunter2x\""] {
            for blanks in [8, 9] {
                texts.push(format!("password{}={}{value}", " ".repeat(blanks), ""));
                texts.push(format!("token={}{value}", "\t".repeat(blanks)));
            }
            for side in [40, 41] {
                texts.push(format!("{}password{}: {value}", pad(side), pad(side)));
                texts.push(format!("a {}api_key: {value}", pad(side)));
            }
        }
        texts.push(format!("token: \"{}\"", "é".repeat(200)));
        texts.push(format!("token: \"{}\"", "é".repeat(201)));
        texts.push(format!("token: {}", "é".repeat(300)));
        let mut matched = 0;
        for text in &texts {
            for (assigned, regex) in assigned_rules() {
                let expected = regex.search(&Input::new(text)).map(|m| m.range());
                matched += usize::from(expected.is_some());
                assert_eq!(
                    assigned.find(text.as_bytes(), 0, text.len()),
                    expected,
                    "{text:?} ({assigned:?})"
                );
            }
        }
        // Both sides of each limit were asked: some texts match, some do not.
        assert!(
            matched > 5 && matched < texts.len() * 2,
            "{matched} of {}",
            texts.len()
        );
    }

    proptest::proptest! {
        /// The matcher's leftmost match is the regex's, from every start, with the window cut
        /// anywhere: keys with words at either end of their 40 characters, quotes, blanks,
        /// every sign, values short, long and multibyte, line ends.
        #[test]
        fn the_matcher_finds_what_the_regex_finds(
            text in "(token|TOKEN|password|PWD|credentials|api.key|access_key|x{40}|xy|_|-|\\.|\"|'| |\t|        |         |=>|:=|=|:|>|\\$|`|<|;|,|\\[|\\{|\\(|hunter2|a{199}|é|\n|\r|\u{B}){0,14}",
            cut in 0usize..64,
        ) {
            for (assigned, regex) in assigned_rules() {
                let hay = text.as_bytes();
                for from in (0..=text.len()).filter(|&f| text.is_char_boundary(f)) {
                    let before = (from + cut).min(text.len());
                    let expected = regex
                        .search(&Input::new(&text).range(from..))
                        .filter(|m| m.start() < before)
                        .map(|m| m.range());
                    proptest::prop_assert_eq!(
                        assigned.find(hay, from, before),
                        expected,
                        "{:?} from {} before {} ({:?})", text, from, before, assigned
                    );
                }
            }
        }
    }

    /// A line for [`spans_carried_from_the_last_text_are_a_full_searchs`]: assignments whose
    /// values go or stay, keys long and short, quotes, and runs of prose long enough to part
    /// one window from the next.
    const CARRY_LINE: &str = "(((db_|a{0,50})?(password|token|api_key|pwd)|name)[ ]{0,2}(=|: |:=)[ ]?['\"]?(hunter2x|Hq7Rt2Wz9Lm4Xv8Nc3Ks6Pd1|3600|changeme|[A-Za-z0-9]{8,24})['\"]?[ ]?|[a-z ]{0,320}){0,3}";

    proptest::proptest! {
        /// What the span stage carries from the last text (the generic assignments' finds on
        /// the lines the texts share) is what a search of the new text finds: texts of
        /// assignment lines and prose, the new one the old with lines changed, added or
        /// removed, so that windows grow, shrink, split and join around shared lines.
        #[test]
        fn spans_carried_from_the_last_text_are_a_full_searchs(
            old in proptest::collection::vec(CARRY_LINE, 0..10),
            edits in proptest::collection::vec((0usize..12, proptest::option::of(CARRY_LINE)), 1..4),
        ) {
            let mut lines = old.clone();
            for (at, line) in edits {
                let at = at % (lines.len() + 1);
                match (line, at < lines.len()) {
                    (Some(line), true) => lines[at] = line,
                    (Some(line), false) => lines.push(line),
                    (None, true) => {
                        lines.remove(at);
                    }
                    (None, false) => {}
                }
            }
            let (old, new) = (old.join("\n"), lines.join("\n"));
            // Outside a redaction nothing is carried: every window is searched.
            let full = find_spans(&new);
            let carried = line_reuse::remembering(|| {
                find_spans(&old);
                find_spans(&new)
            });
            proptest::prop_assert_eq!(carried, full, "{:?} then {:?}", old, new);
        }
    }

    /// `assigned_after` as first written (iterator chains): the reference the index loops are
    /// held to.
    fn assigned_after_reference(bytes: &[u8], at: usize) -> bool {
        let rest = |at: usize| bytes.get(at..).unwrap_or_default();
        let blanks = |at: usize| {
            rest(at)
                .iter()
                .take(9)
                .take_while(|&&b| b == b' ' || b == b'\t')
                .count()
        };
        let key = rest(at)
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            .count();
        let mut at = at + key;
        if matches!(bytes.get(at), Some(b'"' | b'\'')) {
            at += 1;
        }
        let before = blanks(at);
        if before > 8 {
            return false;
        }
        let sign = at + before;
        ["=>", ":=", "=", ":"].iter().any(|op| {
            if !rest(sign).starts_with(op.as_bytes()) {
                return false;
            }
            let value = sign + op.len();
            let after = blanks(value);
            after <= 8
                && bytes.get(value + after).is_some_and(|&b| {
                    matches!(b, b'"' | b'\'')
                        || !(b.is_ascii_whitespace() || b"\x0B`<>;,[{(:=".contains(&b))
                })
        })
    }

    proptest::proptest! {
        /// The index loops answer as the iterator chains did, on keys, quotes, blanks, signs
        /// and values of every kind the check reads, and at the text's end.
        #[test]
        fn assigned_after_answers_as_first_written(
            text in "(token|api-key|x\\.y|\"|'|  |\t|         |=>|:=|=|:|>|\\$|`|<|;|,|\\[|\\{|\\(|a|9|é| |\n|\u{B}){0,10}",
        ) {
            for at in 0..=text.len() {
                proptest::prop_assert_eq!(
                    assigned_after(text.as_bytes(), at),
                    assigned_after_reference(text.as_bytes(), at),
                    "{:?} at {}", text, at
                );
            }
        }
    }

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
    fn a_key_spelt_without_a_separator_is_searched_on_its_own() {
        // `accesskey` had no keyword: its value was found only inside another keyword's
        // window (`SECRET=U` above it), and sent when the shapes had replaced that line
        // (found by fuzzing the pipeline, 2026-12-06).
        for text in [
            "accesskey=0jVOenF/w5sA",
            "SECRET=U\naccesskey=0jVOenF/w5sA",
            "SECRET=[redacted]\naccesskey=0jVOenF/w5sA",
            "privatekey: 0jVOenF/w5sA",
            "AuthKey = 0jVOenF/w5sA",
        ] {
            let found: Vec<&str> = find_spans(text)
                .iter()
                .map(|s| &text[s.start..s.end])
                .collect();
            assert_eq!(found.last(), Some(&"0jVOenF/w5sA"), "{text:?}");
        }
    }

    #[test]
    fn an_assignments_groups_read_off_its_match_are_the_engines() {
        // Each text through the DFA's path (groups read off the match, checked against
        // the capture engine in debug builds) and through regex-lite's (a Kelvin sign on a
        // line of its own after it): the same spans.
        let texts = [
            "password=hunter2x9Q",
            "db_password = \"hunter2 x9Q\" rest",
            "\"api_key\":\"q8Zp2vR7kW3mN9xT4c\",",
            "'client_secret'\t:\t'q8Zp2vR7kW3mN9xT4c'",
            "apiKey := q8Zp2vR7kW3mN9xT4c;",
            "token => q8Zp2vR7kW3mN9xT4c",
            "token=>q8Zp2vR7kW3mN9xT4c",
            "token:=q8Z=p2v:R7kW3mN9xT4c",
            "x.token-name.v2:q8Zp2vR7kW3mN9xT4c.",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaapassword=q8Zp2vR7kW3m",
            "password=changeme secret: ${APP_SECRET} api_key: <your-api-key> token=3600",
            "PASSWORD='' token=\"\" secret='q8Zp2vR7kW3mN9xT4c' pwd=\"x'",
            "token:   'q8Zp2vR7kW3mN9xT4c\nnext' and secret=a\"b",
            "é token=q8Zp2vR7kW3mN9xT4cé and password=ü9Zp2vR7kW3m",
        ];
        for text in texts {
            let reference: Vec<Span> = find_spans(&format!("{text}\n\u{212A}"))
                .into_iter()
                .filter(|s| s.end <= text.len())
                .collect();
            assert_eq!(find_spans(text), reference, "{text:?}");
        }
        // And the reading itself, where it is plain to see.
        let text = "x db_password = 'hunter2 x' y";
        let whole = 2..text.len() - 2;
        assert_eq!(assignment_groups(text, whole), Some((2..13, 17..26)));
        assert_eq!(assignment_groups("token", 0..5), None);
    }

    #[test]
    fn windows_come_out_sorted_as_a_sort_would_sort_them() {
        let rows = [
            vec![],
            vec![(1, 5, 9)],
            vec![(2, 0, 4), (0, 3, 8), (2, 1, 5), (0, 7, 9), (1, 2, 2)],
            // Out of text order within a rule, as aho-corasick's overlapping search gives.
            vec![(0, 9, 12), (0, 3, 6), (1, 0, 1), (0, 3, 5)],
            vec![(0, 1, 2), (0, 1, 2)],
        ];
        for windows in rows {
            let mut expected = windows.clone();
            expected.sort_unstable();
            assert_eq!(by_rule(windows.clone(), 3), expected, "{windows:?}");
        }
        // A rule past the count is sorted with the rest rather than dropped.
        assert_eq!(
            by_rule(vec![(5, 0, 1), (0, 2, 3)], 3),
            [(0, 2, 3), (5, 0, 1)]
        );
    }

    #[test]
    fn the_dfa_finds_what_regex_lite_finds() {
        // A Kelvin sign anywhere in a text sends every search through regex-lite alone, so
        // the same text with one on a line of its own after it is the reference.
        let contexts = [
            "{}",
            "prose before {} and after.",
            "```\n{}\n```",
            "- item `{}`, next",
        ];
        for family in families() {
            let pattern = dfa_pattern(family.pattern);
            assert!(
                pattern.as_deref().is_some_and(|p| Dfa::new(p).is_ok()),
                "{}: {pattern:?}",
                family.label
            );
            for sample in family.positives.iter().chain(family.near_misses) {
                for context in contexts {
                    let text = context.replace("{}", sample);
                    let reference: Vec<Span> = find_spans(&format!("{text}\n\u{212A}"))
                        .into_iter()
                        .filter(|s| s.end <= text.len())
                        .collect();
                    assert_eq!(find_spans(&text), reference, "{}: {text:?}", family.label);
                }
            }
        }
    }

    #[test]
    fn the_generic_assignments_are_known_by_their_signs() {
        // The prefilter for key-name assignments relies on their patterns' shape: a key of
        // `[A-Za-z0-9_.-]` around the keyword, then these signs. A change to `assigned!`
        // must show here.
        let assignments: Vec<&str> = GENERIC
            .iter()
            .filter(|f| f.pattern.contains(ASSIGNMENT_SIGNS))
            .map(|f| f.label)
            .collect();
        assert_eq!(assignments, ["password", "password", "secret", "secret"]);
        for f in GENERIC
            .iter()
            .filter(|f| f.pattern.contains(ASSIGNMENT_SIGNS))
        {
            let key = r"[A-Za-z0-9_.-]{0,40}";
            assert!(
                f.pattern.starts_with(&format!("(?P<key>{key}(?i:"))
                    && f.pattern.contains(&format!("){key})")),
                "{}",
                f.pattern
            );
            for keyword in f.keywords {
                assert!(
                    keyword
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
                );
            }
        }
        for (text, assigned) in [
            ("token = x", true),
            ("\"api_key\":\"x\"", true),
            ("db.password\t\t: x", true),
            ("token         = x", false),
            ("the token refresh", false),
            ("${token}", false),
            ("$API_TOKEN\" -H", false),
            ("Token::parse", false),
            ("token := 'x'", true),
            ("token => x", true),
            ("token: [x]", false),
            ("token =         x", false),
        ] {
            let lower = text.to_ascii_lowercase();
            let at = ["token", "api_key", "password"]
                .iter()
                .find_map(|k| lower.find(k))
                .expect("a keyword");
            assert_eq!(assigned_after(text.as_bytes(), at), assigned, "{text}");
        }
    }

    #[test]
    fn only_two_characters_outside_ascii_fold_to_an_ascii_letter() {
        let all: String = ('\u{80}'..=char::MAX).collect();
        let letters = Dfa::new("(?i)[a-z]").expect("compiles");
        let folded: Vec<&str> = letters
            .find_iter(&all)
            .filter_map(|m| all.get(m.range()))
            .collect();
        assert_eq!(folded, ["\u{17F}", "\u{212A}"]);
    }

    #[test]
    fn regex_lite_escapes_become_ascii_for_the_dfa() {
        let rows = [
            (
                r"\bghp_\w{3}\b",
                Some(r"(?-u:\b)ghp_[0-9A-Za-z_]{3}(?-u:\b)"),
            ),
            (r#"[^\s"']\d"#, Some(r#"[^\t\n\x0B\x0C\r "'][0-9]"#)),
            (r"[]a]\S", Some(r"[]a][^\t\n\x0B\x0C\r ]")),
            (r"[a\S]", None),
            (r"[[:alpha:]]", None),
            (r"[a--b]", None),
            (r"[abc", None),
        ];
        for (pattern, expected) in rows {
            assert_eq!(dfa_pattern(pattern).as_deref(), expected, "{pattern}");
        }
    }

    #[test]
    fn a_marker_is_known_by_its_brackets_and_label() {
        for label in SHAPE_LABELS.iter().chain(families().map(|f| &f.label)) {
            let marker = format!("[redacted:{label}]");
            assert!(
                marker.len() < MARKER_MAX,
                "{marker} is longer than MARKER_MAX"
            );
        }
        let text = "a [redacted:mysql-password] b";
        let inside = text.find("mysql").expect("the label");
        assert_eq!(
            marker_end(text, inside),
            Some(text.find(" b").expect("after"))
        );
        assert_eq!(marker_end(text, 0), None);
        assert_eq!(marker_end(text, text.len()), None);
        // Not one of redaction's markers: read as text.
        let lookalike = "[redacted:mysql -phunter2x]";
        assert_eq!(marker_end(lookalike, 10), None);
        assert_eq!(marker_end("[redacted:nonesuch]", 10), None);
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
