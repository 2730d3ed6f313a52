//! Tool restriction for turns that came from a messenger (reference-behaviour §3.16,
//! invariants I34, I39).
//!
//! A chat message is untrusted text that steers an agent with tools, so a prompt injection in
//! it could run anything. The policy and the per-call approval limit what such a turn may do;
//! turns typed at the terminal are never restricted or asked about.

use crate::core::config::{RemoteToolApproval, RemoteToolPolicy};
use crate::model::ToolDecision;

/// Tools a read-only remote turn may run: they look, they do not change anything.
pub const READ_ONLY_TOOLS: [&str; 4] = ["read", "grep", "find", "ls"];

/// Whether `policy` lets a remote turn run `tool`; `Err` carries the reason the agent is told.
/// Unknown tools are blocked under read-only: a new tool is not assumed harmless.
pub fn decide_remote_tool_access(policy: RemoteToolPolicy, tool: &str) -> Result<(), String> {
    match policy {
        RemoteToolPolicy::Unrestricted => Ok(()),
        RemoteToolPolicy::NoTools => Err(format!(
            "Tool '{tool}' is blocked because this turn came from a messenger. Ask the operator to run it locally."
        )),
        RemoteToolPolicy::ReadOnly if READ_ONLY_TOOLS.contains(&tool) => Ok(()),
        RemoteToolPolicy::ReadOnly => Err(format!(
            "Tool '{tool}' is not allowed for messenger-originated turns (read-only mode). Ask the operator to run it locally."
        )),
    }
}

/// Title of the local approval prompt.
pub fn approval_title(tool: &str) -> String {
    format!("Remote tool call: {tool}")
}

/// Body of the local approval prompt.
pub fn approval_message(tool: &str) -> String {
    format!("A messenger-originated turn wants to run '{tool}'. Allow it?")
}

/// Reason given to the agent when the operator said no.
pub fn declined_reason(tool: &str) -> String {
    format!("The operator declined '{tool}' for this messenger-originated turn.")
}

/// The verdict on one tool call.
///
/// Local turns are allowed without asking (I34). Remote turns: a policy block wins without
/// asking (no point bothering the operator about a call that cannot run); otherwise, with
/// approval `Each`, the call runs only after `confirm(title, message)` says yes (I39). The
/// caller's `confirm` must return false when the prompt fails or times out, so it fails closed.
pub fn decide_tool_call(
    origin_remote: bool,
    policy: RemoteToolPolicy,
    approval: RemoteToolApproval,
    tool: &str,
    confirm: &mut dyn FnMut(&str, &str) -> bool,
) -> ToolDecision {
    if !origin_remote {
        return ToolDecision::Allow;
    }
    if let Err(reason) = decide_remote_tool_access(policy, tool) {
        return ToolDecision::Block(reason);
    }
    match approval {
        RemoteToolApproval::Off => ToolDecision::Allow,
        RemoteToolApproval::Each if confirm(&approval_title(tool), &approval_message(tool)) => {
            ToolDecision::Allow
        }
        RemoteToolApproval::Each => ToolDecision::Block(declined_reason(tool)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RemoteToolApproval::{Each, Off};
    use RemoteToolPolicy::{NoTools, ReadOnly, Unrestricted};

    const NO_TOOLS_BASH: &str = "Tool 'bash' is blocked because this turn came from a messenger. Ask the operator to run it locally.";
    const READ_ONLY_BASH: &str = "Tool 'bash' is not allowed for messenger-originated turns (read-only mode). Ask the operator to run it locally.";

    #[test]
    fn access_table() {
        let rows: Vec<(RemoteToolPolicy, &str, Result<(), &str>)> = vec![
            (Unrestricted, "bash", Ok(())),
            (
                NoTools,
                "read",
                Err(
                    "Tool 'read' is blocked because this turn came from a messenger. Ask the operator to run it locally.",
                ),
            ),
            (NoTools, "bash", Err(NO_TOOLS_BASH)),
            (ReadOnly, "read", Ok(())),
            (ReadOnly, "grep", Ok(())),
            (ReadOnly, "find", Ok(())),
            (ReadOnly, "ls", Ok(())),
            (ReadOnly, "bash", Err(READ_ONLY_BASH)),
            (
                ReadOnly,
                "mcp_new_tool",
                Err(
                    "Tool 'mcp_new_tool' is not allowed for messenger-originated turns (read-only mode). Ask the operator to run it locally.",
                ),
            ),
            (
                ReadOnly,
                "READ",
                Err(
                    "Tool 'READ' is not allowed for messenger-originated turns (read-only mode). Ask the operator to run it locally.",
                ),
            ),
        ];
        for (policy, tool, expected) in rows {
            assert_eq!(
                decide_remote_tool_access(policy, tool),
                expected.map_err(String::from),
                "{policy:?} {tool}"
            );
        }
    }

    #[test]
    fn prompt_texts() {
        assert_eq!(approval_title("bash"), "Remote tool call: bash");
        assert_eq!(
            approval_message("bash"),
            "A messenger-originated turn wants to run 'bash'. Allow it?"
        );
        assert_eq!(
            declined_reason("bash"),
            "The operator declined 'bash' for this messenger-originated turn."
        );
    }

    #[test]
    fn decide_tool_call_table() {
        let declined = "The operator declined 'bash' for this messenger-originated turn.";
        // (remote, policy, approval, operator answer, expected decision, expected questions asked)
        let rows: Vec<(
            bool,
            RemoteToolPolicy,
            RemoteToolApproval,
            bool,
            ToolDecision,
            usize,
        )> = vec![
            (false, NoTools, Each, false, ToolDecision::Allow, 0),
            (false, ReadOnly, Off, false, ToolDecision::Allow, 0),
            (true, Unrestricted, Off, false, ToolDecision::Allow, 0),
            (
                true,
                NoTools,
                Each,
                true,
                ToolDecision::Block(NO_TOOLS_BASH.into()),
                0,
            ),
            (
                true,
                ReadOnly,
                Each,
                true,
                ToolDecision::Block(READ_ONLY_BASH.into()),
                0,
            ),
            (true, Unrestricted, Each, true, ToolDecision::Allow, 1),
            (
                true,
                Unrestricted,
                Each,
                false,
                ToolDecision::Block(declined.into()),
                1,
            ),
        ];
        for (remote, policy, approval, answer, expected, asked) in rows {
            let mut questions = Vec::new();
            let mut confirm = |title: &str, message: &str| {
                questions.push((title.to_string(), message.to_string()));
                answer
            };
            let decision = decide_tool_call(remote, policy, approval, "bash", &mut confirm);
            assert_eq!(
                decision, expected,
                "{remote} {policy:?} {approval:?} {answer}"
            );
            assert_eq!(questions.len(), asked, "{remote} {policy:?} {approval:?}");
            for (title, message) in questions {
                assert_eq!(title, "Remote tool call: bash");
                assert_eq!(
                    message,
                    "A messenger-originated turn wants to run 'bash'. Allow it?"
                );
            }
        }
    }
}
