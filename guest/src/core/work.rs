//! Git and test-runner output parsing, the digest's work sources
//! (docs/architecture.md#the-original-module-by-module).
//!
//! Pure on purpose: these output shapes are messy and vary between tool versions, so every shape
//! is pinned by a table test instead of discovered in a chat. The host runs git and the tests;
//! this module only reads what they printed, and reads anything (arbitrary bytes made text,
//! CRLF line ends, megabytes) without panicking and in one pass per pattern.

use std::sync::OnceLock;

use regex_lite::{Captures, Regex};

use crate::core::text::{collapse_whitespace, one_line};

/// Paths and branch names longer than this are not real ones: a line that long is garbage that
/// would flood the card.
const MAX_PATH_CHARS: usize = 200;
/// The test result is one line of the card.
const MAX_SUMMARY_CHARS: usize = 120;
/// The command in front of the result, so the result itself stays visible.
const MAX_COMMAND_CHARS: usize = 60;

/// One changed file from `git diff --numstat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The path after the change (the rename target for renames), unquoted.
    pub path: String,
    /// Lines added; 0 for binary files, which git counts as `-`.
    pub added: u64,
    /// Lines removed; 0 for binary files.
    pub removed: u64,
}

/// The path a numstat entry ends up at: git's C-style quoting undone (`"caf\303\251.txt"` →
/// `café.txt`), renames resolved to their target (`a => b` → `b`,
/// `src/{core => kernel}/chunk.ts` → `src/kernel/chunk.ts`), spaces around targets trimmed.
///
/// The rename is resolved before unquoting, unlike the original: git quotes each side of a
/// rename separately (`"caf\303\251" => "b"`), so stripping the outer quotes first would mangle
/// both names. A brace rename with an empty target (`src/{old => }/x`) leaves one slash, not
/// two, because that file now lives at `src/x`.
pub fn normalize_git_path(raw: &str) -> String {
    let path = raw.trim();
    if !path.contains(" => ") {
        return unquote(path);
    }
    if let Some(caps) = brace_rename().and_then(|re| re.captures(path)) {
        let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());
        let (before, inner, after) = (group(1), group(2), group(3));
        let target = inner.split_once("=>").map_or(inner, |(_, to)| to).trim();
        let after = match after.strip_prefix('/') {
            Some(rest) if target.is_empty() && before.ends_with('/') => rest,
            _ => after,
        };
        return unquote(&format!("{before}{target}{after}"));
    }
    let target = path.split_once("=>").map_or(path, |(_, to)| to);
    unquote(target.trim())
}

/// Parses `git diff --numstat` output (`added\tremoved\tpath` lines) into changes sorted by
/// churn (added + removed) descending, ties in output order, at most `max` of them (after
/// sorting, so the cap keeps the biggest changes, not the alphabetically first).
///
/// Binary files (`-` counts) are kept with zero counts so the card still lists them. Lines that
/// are blank, have fewer than three fields, counts that are not plain decimal numbers (the
/// original's `Number()` also took `""`, `1e3` and `-5`), or an empty or over-200-character path
/// are skipped: a stray warning line from git must not become a file.
pub fn parse_git_numstat(output: &str, max: Option<usize>) -> Vec<FileChange> {
    let mut changes: Vec<FileChange> = output.split('\n').filter_map(numstat_line).collect();
    changes.sort_by_key(|c| std::cmp::Reverse(c.added.saturating_add(c.removed)));
    if let Some(max) = max {
        changes.truncate(max);
    }
    changes
}

/// The branch from `git rev-parse --abbrev-ref HEAD`: trimmed, at most 200 characters; `None`
/// when empty or `HEAD` (a detached HEAD is not a branch, and showing `HEAD` would claim one).
pub fn parse_git_branch(output: &str) -> Option<String> {
    let branch = output.trim();
    if branch.is_empty() || branch == "HEAD" {
        return None;
    }
    Some(branch.chars().take(MAX_PATH_CHARS).collect())
}

/// True when `command` runs a test suite: npm/pnpm/yarn/bun `[run] test`, vitest, jest, mocha,
/// ava, jasmine, karma, tap, pytest, py.test, tox, nox, `python -m pytest|unittest`, `go test`,
/// `cargo test`, rspec, `rake test`, phpunit, `dotnet test`, gradlew/gradle/mvn/maven with a
/// `test` word later on the line, `make test`. Whole words only, so `cat test.txt` and
/// `npm run testing` are not test runs while `npm run test:unit` is.
pub fn is_test_command(command: &str) -> bool {
    test_command().is_some_and(|re| re.is_match(command))
}

/// The runner's own result line, first match in this order: vitest/jest `Tests[:] <rest>` with
/// parenthesised totals removed, cargo `test result: ok. N passed; M failed` as
/// `N passed, M failed`, pytest `== ... in 0.12s ==` as its counts, go `ok <pkg>` as `ok` and
/// `FAIL <pkg>` as `failed`. Whitespace is collapsed and the result cut to 120 characters
/// with `…`. `None` when no pattern matches.
///
/// Each pattern is tried line by line (CRLF or LF), and only on lines that hold its literal
/// (`Tests` at the start, `test result:`, `=`, `ok`/`FAIL` at the start): regex-lite has no
/// literal prefilter and runs at a few MB/s, so a megabyte of test output scanned whole by four
/// patterns took a third of a second. Every runner prints its result on one line, so matching
/// within a line finds what the original's whole-text patterns found.
pub fn extract_test_summary(output: &str) -> Option<String> {
    summary_patterns().iter().find_map(|(pattern, re)| {
        output
            .lines()
            .filter(|line| (pattern.trigger)(line))
            .find_map(|line| {
                let rendered = collapse_whitespace(&(pattern.render)(&re.captures(line)?));
                (!rendered.is_empty()).then(|| one_line(&rendered, MAX_SUMMARY_CHARS))
            })
    })
}

/// `<command collapsed, ≤60 chars with …> — <summary or "failed"/"ok">`; None for non-test commands.
///
/// The runner's summary wins over the exit status because it says how many failed, and the
/// exit status is only a fallback for runners whose output no pattern knows.
pub fn summarize_test_run(command: &str, failed: bool, output: &str) -> Option<String> {
    if !is_test_command(command) {
        return None;
    }
    let detail = extract_test_summary(output)
        .unwrap_or_else(|| if failed { "failed" } else { "ok" }.to_string());
    Some(format!(
        "{} — {detail}",
        one_line(command, MAX_COMMAND_CHARS)
    ))
}

/// One numstat line, or `None` when it is not one.
fn numstat_line(line: &str) -> Option<FileChange> {
    if line.trim().is_empty() {
        return None;
    }
    let mut fields = line.splitn(3, '\t');
    let added = numstat_count(fields.next()?)?;
    let removed = numstat_count(fields.next()?)?;
    let path = normalize_git_path(fields.next()?);
    if path.is_empty() || path.chars().count() > MAX_PATH_CHARS {
        return None;
    }
    Some(FileChange {
        path,
        added,
        removed,
    })
}

/// A numstat count: `-` (binary) is 0, otherwise ASCII digits only (a leading `+` is not git's).
fn numstat_count(field: &str) -> Option<u64> {
    match field {
        "-" => Some(0),
        _ if !field.is_empty() && field.bytes().all(|b| b.is_ascii_digit()) => field.parse().ok(),
        _ => None,
    }
}

/// Undoes git's C-style quoting of a path in `"..."`: `\\`, `\"`, the letter escapes and
/// three-digit octal bytes (how git writes every non-ASCII byte by default). Bytes that do not
/// form UTF-8 become `�` rather than an error, because the card only shows the name.
fn unquote(path: &str) -> String {
    let Some(inner) = path
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    else {
        return path.to_string();
    };
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        i += 1;
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        let Some(&escape) = bytes.get(i) else {
            out.push(b'\\');
            break;
        };
        i += 1;
        let decoded = match escape {
            b'a' => 0x07,
            b'b' => 0x08,
            b't' => b'\t',
            b'n' => b'\n',
            b'v' => 0x0b,
            b'f' => 0x0c,
            b'r' => b'\r',
            b'"' | b'\\' => escape,
            b'0'..=b'3' => match (bytes.get(i), bytes.get(i + 1)) {
                (Some(&d1 @ b'0'..=b'7'), Some(&d2 @ b'0'..=b'7')) => {
                    i += 2;
                    (escape - b'0') * 64 + (d1 - b'0') * 8 + (d2 - b'0')
                }
                _ => {
                    out.push(b'\\');
                    escape
                }
            },
            _ => {
                out.push(b'\\');
                escape
            }
        };
        out.push(decoded);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `before{old => new}after`, the last brace pair that holds an arrow (git puts the common
/// prefix and suffix outside the braces).
fn brace_rename() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"(?s)^(.*)\{([^{}]*=>[^{}]*)\}(.*)$").ok())
        .as_ref()
}

/// Every test-runner family in one alternation, so a command is scanned once.
fn test_command() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(TEST_COMMAND).ok()).as_ref()
}

const TEST_COMMAND: &str = concat!(
    r"\b(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test\b",
    r"|\b(?:vitest|jest|mocha|ava|jasmine|karma|tap)\b",
    r"|\b(?:pytest|py\.test|tox|nox)\b",
    r"|\bpython[0-9.]*\s+-m\s+(?:pytest|unittest)\b",
    r"|\bgo\s+test\b",
    r"|\bcargo\s+test\b",
    r"|\b(?:rspec|rake\s+test)\b",
    r"|\bphpunit\b",
    r"|\bdotnet\s+test\b",
    r"|\b(?:gradlew|gradle|mvn|maven)\b[^\n]*\btest\b",
    r"|\bmake\s+test\b",
);

/// A result-line pattern: a cheap test for lines that may match, the regex, and how its
/// captures become the summary.
struct SummaryPattern {
    trigger: fn(&str) -> bool,
    regex: &'static str,
    render: fn(&Captures<'_>) -> String,
}

/// The summary patterns in priority order, compiled. The patterns are literals of this file,
/// not input: `patterns_all_compile` fails if one does not compile (it would be skipped here
/// rather than panic on a user's test output).
fn summary_patterns() -> &'static [(&'static SummaryPattern, Regex)] {
    static PATTERNS: OnceLock<Vec<(&'static SummaryPattern, Regex)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        SUMMARY_PATTERNS
            .iter()
            .filter_map(|pattern| Some((pattern, Regex::new(pattern.regex).ok()?)))
            .collect()
    })
}

static SUMMARY_PATTERNS: [SummaryPattern; 4] = [
    // vitest `Tests  312 passed (312)`, jest `Tests:       2 failed, 10 passed, 12 total`.
    SummaryPattern {
        trigger: |line| line.trim_start().starts_with("Tests"),
        regex: r"^\s*Tests:?\s+(.+?)\s*$",
        render: render_totals,
    },
    // cargo `test result: ok. 12 passed; 0 failed; 0 ignored`.
    SummaryPattern {
        trigger: |line| {
            line.as_bytes()
                .windows(12)
                .any(|w| w.eq_ignore_ascii_case(b"test result:"))
        },
        regex: r"(?i)test result:\s*(?:ok|FAILED)\.\s*(\d+)\s+passed;\s*(\d+)\s+failed",
        render: render_cargo,
    },
    // pytest `===== 5 passed, 1 failed in 0.12s =====`.
    SummaryPattern {
        trigger: |line| line.contains('='),
        regex: r"(?i)=+\s*(\d+ (?:passed|failed|error|errors|skipped)[^=]*?)\s+in\s+[\d.]+s\s*=+",
        render: render_first,
    },
    // go `ok  \tgithub.com/x/y\t0.5s` / `FAIL\tgithub.com/x/y`.
    SummaryPattern {
        trigger: |line| line.starts_with("ok") || line.starts_with("FAIL"),
        regex: r"^(ok|FAIL)\s+\S+",
        render: render_go,
    },
];

fn group<'a>(caps: &Captures<'a>, i: usize) -> &'a str {
    caps.get(i).map_or("", |m| m.as_str())
}

/// Vitest repeats the total in parentheses (`312 passed (312)`); the card shows it once.
fn render_totals(caps: &Captures<'_>) -> String {
    let rest = group(caps, 1);
    match paren_total() {
        Some(re) => re.replace_all(rest, " ").into_owned(),
        None => rest.to_string(),
    }
}

fn paren_total() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\s*\(\d+\)\s*").ok())
        .as_ref()
}

fn render_cargo(caps: &Captures<'_>) -> String {
    format!("{} passed, {} failed", group(caps, 1), group(caps, 2))
}

fn render_first(caps: &Captures<'_>) -> String {
    group(caps, 1).to_string()
}

fn render_go(caps: &Captures<'_>) -> String {
    if group(caps, 1) == "ok" {
        "ok"
    } else {
        "failed"
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_all_compile() {
        assert!(brace_rename().is_some());
        assert!(test_command().is_some());
        assert!(paren_total().is_some());
        assert_eq!(summary_patterns().len(), SUMMARY_PATTERNS.len());
    }

    #[test]
    fn unquote_table() {
        let rows = [
            (r#""src/with space.ts""#, "src/with space.ts"),
            (r#""caf\303\251.txt""#, "café.txt"),
            (r#""a\"b\\c""#, r#"a"b\c"#),
            (r#""tab\there""#, "tab\there"),
            (r#""bad\9""#, r"bad\9"),
            (r#""short\30""#, r"short\30"),
            (r#""end\""#, r"end\"),
            (r#""\377""#, "\u{FFFD}"),
            ("\"", "\""),
            ("plain", "plain"),
        ];
        for (raw, expected) in rows {
            assert_eq!(unquote(raw), expected, "{raw}");
        }
    }
}
