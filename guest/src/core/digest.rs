//! The work digest card: "what is the agent doing right now", for a phone
//! (docs/architecture.md#the-original-module-by-module,
//! docs/decisions.md#decision-2-the-digests-section-order).
//!
//! Built from a plain snapshot so it can be produced on demand, on a timer or from a chat, and
//! tested without a session. When the card is over budget, whole sections are dropped from the
//! least important up and the card says which, because a half-cut section reads as complete.

use crate::core::redact::redact;
use crate::core::text::{collapse_whitespace, one_line};
use crate::core::todo::Todo;
use crate::core::work::FileChange;

/// Everything the card shows. Empty or whitespace-only optional texts count as absent, so a
/// host that reports `Some("")` gets no empty section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DigestInput {
    /// The session's working directory.
    pub cwd: String,
    /// The agent is in a turn (`busy`) rather than waiting (`idle`).
    pub busy: bool,
    /// The session's name; `pi session` when absent.
    pub session_name: Option<String>,
    /// The git branch, absent outside a repository or on a detached HEAD.
    pub branch: Option<String>,
    /// The tool running now.
    pub running_tool: Option<String>,
    /// Changed files, biggest first (as [`crate::core::work::parse_git_numstat`] returns them).
    pub changes: Vec<FileChange>,
    /// The latest checklist the agent wrote.
    pub todos: Vec<Todo>,
    /// What the remote scope refused, and what was approved or denied, this turn.
    pub scope_verdicts: Vec<String>,
    /// The last test run's line (as [`crate::core::work::summarize_test_run`] returns it).
    pub test_summary: Option<String>,
    /// The last prompt the agent was given; redacted when the options say so.
    pub last_user_prompt: Option<String>,
    /// The agent's last answer, summarized; redacted when the options say so.
    pub last_assistant_summary: Option<String>,
}

/// How big the card may get and whether free text is redacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestOptions {
    /// Character budget for the header and the kept sections (see [`build_work_digest`]).
    pub max_length: usize,
    /// Files listed by name; the rest are counted in an `…and <k> more` line.
    pub max_files: usize,
    /// Redact the last request and the summary (the only free text a person or model wrote).
    pub redact: bool,
}

impl Default for DigestOptions {
    /// The original's defaults: 1500 characters, 6 files, redaction on.
    fn default() -> Self {
        DigestOptions {
            max_length: 1500,
            max_files: 6,
            redact: true,
        }
    }
}

/// A section of the card and the id the truncation line names it by.
struct Section {
    id: &'static str,
    block: String,
}

/// The digest card in markdown.
///
/// Header (always): `### <session name or "pi session"> — busy|idle`, then `` `<cwd>` `` and
/// `` · branch `<branch>` `` when there is one. Header values have whitespace collapsed so the
/// header is always two lines, whatever the host reports.
///
/// Sections, most important first: `now` (`**Now:** <tool ≤80>`), `scope` (`**Scope this
/// turn**`, one `- <verdict ≤120>` line per refused, approved or denied call), `changes`
/// (`**Changes (<n> files, +<Σadded>/-<Σremoved>)**`, up to `max_files` lines
/// `` - `<path>` +a/-r ``, then `- …and <k> more`), `tests` (`**Tests:** <summary ≤120>`),
/// `todos` (`**Pending (<open>/<total>)**`, `- [x] text` / `- [ ] text` ≤100 each), `request`
/// (`**Last request**`, `> <prompt ≤200>`), `summary` (`**Summary**`, `<text ≤300>`). Every value
/// has whitespace collapsed and is cut with `…` to its limit in characters (code points). Blank
/// todos are left out of the list and its counts. Redaction runs before the cut, so a secret cut
/// in half (which no rule would recognise any more) never reaches the card.
///
/// Budget: starting from the header's length, each section costs its length plus 2 (the blank
/// line before it); a section that would take the total past `max_length` is dropped, except
/// the first present one, which is always kept so the card never shows only a header. Dropped
/// ids are listed, in order, in a last line `_digest truncated (<ids joined ", ">)_` that is
/// outside the budget (as in the original), so the card can exceed `max_length` by that line,
/// and by the first section or the header when those alone are too long.
pub fn build_work_digest(input: &DigestInput, options: &DigestOptions) -> String {
    let header = header(input);
    let mut length = header.chars().count();
    let mut parts = vec![header];
    let mut dropped = Vec::new();
    for section in sections(input, options) {
        let cost = 2 + section.block.chars().count();
        if parts.len() > 1 && length + cost > options.max_length {
            dropped.push(section.id);
            continue;
        }
        length += cost;
        parts.push(section.block);
    }
    if !dropped.is_empty() {
        parts.push(format!("_digest truncated ({})_", dropped.join(", ")));
    }
    parts.join("\n\n")
}

fn header(input: &DigestInput) -> String {
    let name =
        present(&input.session_name).map_or_else(|| "pi session".into(), collapse_whitespace);
    let state = if input.busy { "busy" } else { "idle" };
    let branch = present(&input.branch)
        .map(|branch| format!(" · branch `{}`", collapse_whitespace(branch)))
        .unwrap_or_default();
    format!(
        "### {name} — {state}\n`{}`{branch}",
        collapse_whitespace(&input.cwd)
    )
}

/// The present sections in priority order (Now, Changes, Tests, Pending, Last request, Summary:
/// docs/decisions.md#decision-2-the-digests-section-order; the original's README showed Pending
/// first).
fn sections(input: &DigestInput, options: &DigestOptions) -> Vec<Section> {
    // Redaction sees the text as written: a PEM block or an `Authorization:` line is recognised
    // by its line breaks, which collapsing would remove.
    let clean = |value: &str, max: usize| {
        if options.redact {
            one_line(&redact(value).text, max)
        } else {
            one_line(value, max)
        }
    };
    let candidates = [
        present(&input.running_tool)
            .map(|tool| ("now", format!("**Now:** {}", one_line(tool, 80)))),
        // Right after "now": what a remote turn was kept from doing is what a person checking from
        // the phone most needs to see (docs/decisions.md#decision-16-scoped-remote-turns).
        scope_block(&input.scope_verdicts, &clean).map(|block| ("scope", block)),
        changes_block(&input.changes, options.max_files).map(|block| ("changes", block)),
        present(&input.test_summary)
            .map(|tests| ("tests", format!("**Tests:** {}", one_line(tests, 120)))),
        todos_block(&input.todos).map(|block| ("todos", block)),
        present(&input.last_user_prompt).map(|prompt| {
            (
                "request",
                format!("**Last request**\n> {}", clean(prompt, 200)),
            )
        }),
        present(&input.last_assistant_summary)
            .map(|summary| ("summary", format!("**Summary**\n{}", clean(summary, 300)))),
    ];
    candidates
        .into_iter()
        .flatten()
        .map(|(id, block)| Section { id, block })
        .collect()
}

fn changes_block(changes: &[FileChange], max_files: usize) -> Option<String> {
    if changes.is_empty() {
        return None;
    }
    let added = changes
        .iter()
        .fold(0u64, |sum, c| sum.saturating_add(c.added));
    let removed = changes
        .iter()
        .fold(0u64, |sum, c| sum.saturating_add(c.removed));
    let mut lines = vec![format!(
        "**Changes ({} files, +{added}/-{removed})**",
        changes.len()
    )];
    for change in changes.iter().take(max_files) {
        lines.push(format!(
            "- `{}` +{}/-{}",
            collapse_whitespace(&change.path),
            change.added,
            change.removed
        ));
    }
    if changes.len() > max_files {
        lines.push(format!("- …and {} more", changes.len() - max_files));
    }
    Some(lines.join("\n"))
}

fn scope_block(verdicts: &[String], clean: &dyn Fn(&str, usize) -> String) -> Option<String> {
    if verdicts.is_empty() {
        return None;
    }
    let mut lines = vec!["**Scope this turn**".to_string()];
    lines.extend(verdicts.iter().map(|v| format!("- {}", clean(v, 120))));
    Some(lines.join("\n"))
}

fn todos_block(todos: &[Todo]) -> Option<String> {
    let shown: Vec<&Todo> = todos.iter().filter(|t| !t.text.trim().is_empty()).collect();
    if shown.is_empty() {
        return None;
    }
    let open = shown.iter().filter(|t| !t.done).count();
    let mut lines = vec![format!("**Pending ({open}/{})**", shown.len())];
    for todo in shown {
        let mark = if todo.done { 'x' } else { ' ' };
        lines.push(format!("- [{mark}] {}", one_line(&todo.text, 100)));
    }
    Some(lines.join("\n"))
}

/// The value when it has something besides whitespace.
fn present(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|value| !value.trim().is_empty())
}
