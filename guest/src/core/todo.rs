//! Checklist extraction for the digest's Pending section
//! (docs/architecture.md#the-original-module-by-module).
//!
//! The agent routinely ends a turn with a markdown task list; that list is the one deterministic
//! source of "what is left" the bridge already has, so it is parsed here instead of guessed.

use crate::core::text::one_line;

/// One checklist item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Todo {
    /// The item's text, whitespace collapsed, at most the extraction's `max_length` characters.
    pub text: String,
    /// Checked (`[x]` or `[X]`).
    pub done: bool,
}

/// The first `max` task-list items of `text`: lines of optional indentation, a `-`, `*` or `+`
/// bullet, whitespace, `[ ]`, `[x]` or `[X]`, whitespace and a non-blank text. The text has its
/// whitespace collapsed and, when longer than `max_length` characters, is cut to
/// `max_length - 1` characters plus `…` (a `max_length` of 0 leaves no room even for `…`, so
/// the text is empty).
///
/// Lines inside `` ``` `` or `~~~` fences are ignored, because a checklist in a code sample is
/// not the agent's plan. A fence closes only with the character that opened it, so a `~~~` line
/// inside a `` ``` `` block does not flip the rest of the message into "code". Headings, prose and plain
/// bullets are ignored. CRLF line ends are fine (the `\r` is trailing whitespace).
pub fn extract_markdown_todos(text: &str, max: usize, max_length: usize) -> Vec<Todo> {
    let mut todos = Vec::new();
    let mut fence: Option<char> = None;
    for line in text.split('\n') {
        if let Some(marker) = fence_marker(line) {
            fence = match fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                Some(open) => Some(open),
            };
            continue;
        }
        if fence.is_some() {
            continue;
        }
        if todos.len() >= max {
            break;
        }
        if let Some((done, item)) = task_item(line) {
            todos.push(Todo {
                text: one_line(item, max_length),
                done,
            });
        }
    }
    todos
}

/// `text` without the task-list lines [`extract_markdown_todos`] reads (fenced code kept as
/// it is). The digest shows the checklist in its own section; its summary of the same message
/// would otherwise repeat every item right below it.
pub fn strip_markdown_todos(text: &str) -> String {
    let mut kept = Vec::new();
    let mut fence: Option<char> = None;
    for line in text.split('\n') {
        if let Some(marker) = fence_marker(line) {
            fence = match fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                Some(open) => Some(open),
            };
        } else if fence.is_none() && task_item(line).is_some() {
            continue;
        }
        kept.push(line);
    }
    kept.join("\n")
}

/// The fence character when `line` opens or closes a fenced block.
fn fence_marker(line: &str) -> Option<char> {
    let rest = line.trim_start();
    if rest.starts_with("```") {
        Some('`')
    } else if rest.starts_with("~~~") {
        Some('~')
    } else {
        None
    }
}

/// `(done, text)` when `line` is a task-list item with a non-blank text.
fn task_item(line: &str) -> Option<(bool, &str)> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix(['-', '*', '+'])?;
    let rest = strip_required_whitespace(rest)?;
    let (done, rest) = if let Some(rest) = rest.strip_prefix("[ ]") {
        (false, rest)
    } else {
        (
            true,
            rest.strip_prefix("[x]")
                .or_else(|| rest.strip_prefix("[X]"))?,
        )
    };
    let item = strip_required_whitespace(rest)?.trim_end();
    (!item.is_empty()).then_some((done, item))
}

/// `text` after its leading whitespace, or `None` when it has none (`-[ ]` is not a bullet).
fn strip_required_whitespace(text: &str) -> Option<&str> {
    let rest = text.trim_start();
    (rest.len() < text.len()).then_some(rest)
}
