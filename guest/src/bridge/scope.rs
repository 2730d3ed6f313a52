//! Scoped remote turns (docs/decisions.md#decision-16-scoped-remote-turns): each tool call of a
//! remote turn is judged against the scope frozen when the turn started (see `core::scope`), asked
//! about when its tier says so, and remembered for the digest.

use std::sync::Arc;

use super::Bridge;
use crate::core::scope::{self, AskReason, Scope, Tier};
use crate::core::{outgoing_file, tool_policy};
use crate::host::Host;
use crate::model::{Level, PathAccess, ToolAnswer, ToolCall, ToolDecision, TurnOrigin};

/// Most verdicts the digest remembers from one turn; later ones are counted.
const MAX_VERDICTS: usize = 20;

/// The verdicts of the current (or last) remote turn, for the digest.
#[derive(Debug, Default, Clone)]
pub(super) struct Verdicts {
    lines: Vec<String>,
    more: usize,
}

impl Verdicts {
    pub(super) fn clear(&mut self) {
        self.lines.clear();
        self.more = 0;
    }

    pub(super) fn push(&mut self, line: String) {
        if self.lines.len() < MAX_VERDICTS {
            self.lines.push(line);
        } else {
            self.more += 1;
        }
    }

    /// Lines for the digest's scope section.
    pub(super) fn lines(&self) -> Vec<String> {
        let mut lines = self.lines.clone();
        if self.more > 0 {
            lines.push(format!("…and {} more", self.more));
        }
        lines
    }
}

/// The call as the digest names it: the tool and the first path it touches.
pub(super) fn subject(call: &ToolCall) -> String {
    match call.paths.first() {
        Some(path) if call.paths.len() > 1 => {
            format!("`{}` {} (+{})", call.name, path.path, call.paths.len() - 1)
        }
        Some(path) => format!("`{}` {}", call.name, path.path),
        None => format!("`{}`", call.name),
    }
}

impl Bridge {
    /// The scope remote turns start with now: compiled from the config in force.
    pub(super) fn current_scope(&self) -> Arc<Scope> {
        self.scope.clone()
    }

    /// The running turn's frozen scope, freezing it now for a call outside any known
    /// turn (say, right after a restart): such a call counts as remote (fail closed).
    pub(super) fn frozen_scope(&mut self) -> Arc<Scope> {
        let scope = self.scope.clone();
        let turn = self.turn_or_adopt();
        turn.scope.get_or_insert(scope).clone()
    }

    /// Decides whether a tool call may run. Turns typed at the terminal are never
    /// restricted (I34). A remote turn's call is judged by the turn's frozen scope:
    /// allowed, refused with the reason, or asked about — from the phone and the terminal
    /// with `bridge.remoteApproval` on (pending, see `wit/session.wit`), else at the
    /// terminal alone, where no answer blocks (I39).
    pub fn on_tool_call(&mut self, host: &mut dyn Host, call: &ToolCall) -> ToolAnswer {
        let remote = self
            .turn
            .as_ref()
            .is_none_or(|t| t.origin == TurnOrigin::Remote);
        if !remote {
            self.show_verdict(host, &call.name, &ToolDecision::Allow);
            return ToolAnswer::Decided(ToolDecision::Allow);
        }
        let scope = self.frozen_scope();
        let tool = call.name.as_str();
        if tool == outgoing_file::SEND_FILE_TOOL {
            // Judged as the read it is, and refused outright rather than asked about: the
            // bridge's own `send-file` judges the path again, and never sends a protected
            // file, so an approval here could only be followed by a refusal.
            let paths: Vec<&str> = call
                .paths
                .iter()
                .filter(|p| p.access != PathAccess::Glob)
                .map(|p| p.path.as_str())
                .collect();
            let unjudgeable = call
                .paths
                .iter()
                .any(|p| p.access == PathAccess::Unjudgeable);
            let verdict = if unjudgeable {
                Err(
                    "send_file was refused in a messenger-originated turn: its path could not be \
                     judged (too long or not text). Use a shorter path."
                        .to_string(),
                )
            } else {
                paths.iter().try_for_each(|path| {
                    outgoing_file::judge_path(Some(&scope), path, None, &self.session.cwd)
                })
            };
            let decision = match verdict {
                Ok(()) => ToolDecision::Allow,
                Err(reason) => {
                    self.work
                        .verdicts
                        .push(format!("refused {}", subject(call)));
                    ToolDecision::Block(reason)
                }
            };
            self.show_verdict(host, tool, &decision);
            return ToolAnswer::Decided(decision);
        }
        let narrowing = scope.narrowing(call);
        let allow = || match &narrowing {
            Some(arguments) => ToolDecision::Narrowed(arguments.clone()),
            None => ToolDecision::Allow,
        };
        let decision = match scope.judge(call, &self.session.cwd) {
            Tier::Allowed => allow(),
            Tier::Refused(reason) => {
                host.log(
                    Level::Info,
                    "remote tool call out of scope",
                    &[("tool", tool.to_string())],
                );
                self.work
                    .verdicts
                    .push(format!("refused {}", subject(call)));
                ToolDecision::Block(reason)
            }
            Tier::Approval(reason) => {
                let detail = scope::ask_detail(&reason);
                // Only an ask about the tool itself may be waived for the turn: a protected
                // path or one outside the working directory is asked about every time.
                let turnable = matches!(reason, AskReason::AskTool | AskReason::EachCall);
                if turnable
                    && self
                        .turn
                        .as_ref()
                        .is_some_and(|turn| turn.allowed_for_turn.contains(tool))
                {
                    self.work
                        .verdicts
                        .push(format!("allowed {} for this turn", subject(call)));
                    let decision = allow();
                    self.show_verdict(host, tool, &decision);
                    return ToolAnswer::Decided(decision);
                }
                if self.config.remote_approval.enabled {
                    let answer = self.ask_for_approval(host, call, &reason, turnable);
                    if let (ToolAnswer::Pending(request), Some(arguments)) = (&answer, narrowing) {
                        self.pending.narrowing.insert(request.id.clone(), arguments);
                    }
                    return answer;
                }
                let message = tool_policy::approval_question(tool, detail.as_deref());
                if host.confirm(&tool_policy::approval_title(tool), &message) {
                    self.work
                        .verdicts
                        .push(format!("approved {} at the terminal", subject(call)));
                    allow()
                } else {
                    self.work
                        .verdicts
                        .push(format!("denied {} at the terminal", subject(call)));
                    ToolDecision::Block(tool_policy::declined_reason(tool))
                }
            }
        };
        self.show_verdict(host, tool, &decision);
        ToolAnswer::Decided(decision)
    }

    /// `/scope` and `/connect scope`: the running turn's scope, or the one the next
    /// remote turn starts with.
    pub(super) fn scope_text(&self) -> String {
        match self.turn.as_ref().and_then(|t| t.scope.as_ref()) {
            Some(frozen) => format!(
                "Scope of the running remote turn (frozen when it started):\n{}",
                frozen.describe()
            ),
            None => format!(
                "Scope the next remote turn starts with:\n{}",
                self.scope.describe()
            ),
        }
    }
}
