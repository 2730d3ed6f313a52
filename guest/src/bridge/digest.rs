//! The work digest (I35): what the bridge
//! remembers of the work in progress, and `/connect digest`, which sends the card to the
//! conversations that follow the terminal (DMs by default, groups after `/follow`) and are
//! not paused.

use super::Bridge;
use super::scope::Verdicts;
use crate::core::digest::{DigestInput, DigestOptions, build_work_digest};
use crate::core::render::render;
use crate::core::todo::{Todo, extract_markdown_todos, strip_markdown_todos};
use crate::core::work::{parse_git_branch, parse_git_numstat, summarize_test_run};
use crate::host::Host;
use crate::model::{AgentEvent, Level, Markup, Note, OutboundKind};

/// Most checklist items remembered from one assistant message, and the longest item.
const MAX_TODOS: usize = 20;
const MAX_TODO_LENGTH: usize = 120;

/// Most changed files read from git (the card shows a few and counts the rest).
const MAX_CHANGES: usize = 50;

/// What the bridge learns of the work from agent events; the host adds git and the last
/// shell command when a digest is asked for.
#[derive(Debug, Default)]
pub(super) struct WorkMemory {
    /// The tool running right now.
    running_tool: Option<String>,
    /// The last visible assistant text. Kept after the turn settles (the original cleared
    /// it), so a digest asked for after a turn still shows what the agent last said.
    last_assistant: Option<String>,
    /// The latest non-empty checklist the agent wrote, across turns.
    todos: Vec<Todo>,
    /// What the scope refused and what was approved or denied in the current (or last)
    /// turn (docs/decisions.md#decision-16-scoped-remote-turns).
    pub(super) verdicts: Verdicts,
}

impl WorkMemory {
    /// Follows one agent event.
    pub(super) fn observe(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::TurnStarted(_) => {
                self.last_assistant = None;
                self.verdicts.clear();
            }
            AgentEvent::ToolStarted(name) => self.running_tool = Some(name.clone()),
            AgentEvent::ToolFinished { .. } | AgentEvent::TurnSettled => self.running_tool = None,
            AgentEvent::Notice(_) | AgentEvent::AssistantDraft(_) => {}
            AgentEvent::AssistantMessage(text) => {
                if text.trim().is_empty() {
                    return;
                }
                let todos = extract_markdown_todos(text, MAX_TODOS, MAX_TODO_LENGTH);
                if !todos.is_empty() {
                    self.todos = todos;
                }
                self.last_assistant = Some(text.clone());
            }
        }
    }
}

impl Bridge {
    /// `/connect digest`: builds the card from what the bridge remembers and what the host
    /// reports, and sends it. An explicit digest goes even when broadcasts are switched off
    /// (I35); paused conversations stay quiet.
    pub(super) fn digest_note(&mut self, host: &mut dyn Host) -> Note {
        let facts = host.work_snapshot();
        let input = DigestInput {
            cwd: self.session.cwd.clone(),
            busy: !host.is_idle(),
            session_name: self.session.name.clone(),
            branch: facts.branch.as_deref().and_then(parse_git_branch),
            running_tool: self.work.running_tool.clone(),
            changes: facts
                .numstat
                .as_deref()
                .map(|out| parse_git_numstat(out, Some(MAX_CHANGES)))
                .unwrap_or_default(),
            todos: self.work.todos.clone(),
            scope_verdicts: self.work.verdicts.lines(),
            test_summary: facts
                .last_shell
                .and_then(|run| summarize_test_run(&run.command, run.failed, &run.output)),
            last_user_prompt: facts.last_prompt,
            // The card quotes the answer on one line: as plain text, a heading's `##` or a
            // fence's backticks would read as noise once the line breaks are gone. The
            // checklist is left out: the Pending section above already shows it.
            last_assistant_summary: self
                .work
                .last_assistant
                .as_deref()
                .map(|text| render(&strip_markdown_todos(text), Markup::Plain).into_owned()),
        };
        let options = DigestOptions {
            max_length: usize::try_from(self.config.digest_max_length).unwrap_or(usize::MAX),
            ..DigestOptions::default()
        };
        let text = build_work_digest(&input, &options);
        // Followers only: the digest shows what every turn did, private prompts included, so
        // a group that never asked for it must not get it (docs/security.md#who-sees-what).
        let followers = self.followers();
        let delivered = self.publish_to(host, &followers, OutboundKind::Digest, &text, &[]);
        if delivered > 0 {
            Note::new(
                Level::Info,
                format!("Digest sent to {delivered} conversation(s)."),
            )
        } else {
            Note::new(
                Level::Warning,
                format!(
                    "No conversation follows this session to send a digest to (a DM follows once paired; a group sends /follow). Preview:\n\n{text}"
                ),
            )
        }
    }
}
