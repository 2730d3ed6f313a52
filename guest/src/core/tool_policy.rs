//! Tool restriction for turns that came from a messenger
//! (docs/security.md#what-a-remote-turn-can-and-cannot-do, invariants I34, I39).
//!
//! A chat message is untrusted text that steers an agent with tools, so a prompt injection in
//! it could run anything. The policy and the per-call approval limit what such a turn may do;
//! turns typed at the terminal are never restricted or asked about.

pub use crate::core::config::READ_ONLY_TOOLS;
use crate::core::config::RemoteToolPolicy;

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

/// The local question, naming the path that made the call need approval when there is
/// one (`'.env' (a protected path)`), so a yes is given knowing what it is for.
pub fn approval_question(tool: &str, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => {
            format!("A messenger-originated turn wants to run '{tool}' on {detail}. Allow it?")
        }
        None => approval_message(tool),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn question_names_the_path_when_there_is_one() {
        assert_eq!(
            approval_question("write", Some("'.env' (a protected path)")),
            "A messenger-originated turn wants to run 'write' on '.env' (a protected path). Allow it?"
        );
        assert_eq!(approval_question("bash", None), approval_message("bash"));
    }
}
