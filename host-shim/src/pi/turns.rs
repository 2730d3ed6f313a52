//! Turns pi's RPC events into the bridge's agent events, and remembers what the work
//! digest needs. Pure: events in, events out.
//!
//! One pi *run* (`agent_start` … `agent_end`) is one bridge turn: follow-ups and steers that arrive
//! while pi works join the running run, so their answer is the run's last assistant text, which the
//! bridge publishes when the turn settles (docs/architecture.md#the-original-module-by-module).

use std::collections::HashMap;

use crate::agent::RecentWork;
use crate::pi::rpc::PiEvent;
use crate::wit::agent::ShellRun;
use crate::wit::session::{AgentEvent, ToolResult, TurnOrigin};

/// Follows one pi process's runs.
#[derive(Debug)]
pub struct PiTurns {
    origin: TurnOrigin,
    running: bool,
    retrying: bool,
    /// `bash` commands by tool call id, until their end arrives.
    commands: HashMap<String, String>,
    work: RecentWork,
}

impl PiTurns {
    /// A tracker whose runs all come from `origin`. Under `host-shim run --agent pi`
    /// nobody types into pi but the bridge, so every run is remote.
    pub fn new(origin: TurnOrigin) -> PiTurns {
        PiTurns {
            origin,
            running: false,
            retrying: false,
            commands: HashMap::new(),
            work: RecentWork::default(),
        }
    }

    /// True while a run is going or an automatic retry is waiting to start one.
    pub fn busy(&self) -> bool {
        self.running || self.retrying
    }

    /// What the digest shows of this session's recent work.
    pub fn recent_work(&self) -> RecentWork {
        self.work.clone()
    }

    /// The bridge events one pi event means (often none).
    pub fn on_event(&mut self, event: PiEvent) -> Vec<AgentEvent> {
        match event {
            PiEvent::AgentStart => {
                self.running = true;
                self.retrying = false;
                vec![AgentEvent::TurnStarted(self.origin)]
            }
            PiEvent::AgentEnd => {
                self.running = false;
                self.commands.clear();
                vec![AgentEvent::TurnSettled]
            }
            PiEvent::MessageStart { role, text } => {
                if role == "user" && !text.trim().is_empty() {
                    self.work.last_prompt = Some(text);
                }
                Vec::new()
            }
            PiEvent::MessageEnd {
                role,
                text,
                stop_reason,
                error_message,
                ..
            } => {
                if role != "assistant" {
                    return Vec::new();
                }
                if !text.trim().is_empty() {
                    return vec![AgentEvent::AssistantMessage(text)];
                }
                // A failed model call has no text; without this the chat would hear
                // nothing at all about the turn it started.
                if stop_reason.as_deref() == Some("error") {
                    let why = error_message.unwrap_or_else(|| "no reason given".into());
                    return vec![AgentEvent::AssistantMessage(format!(
                        "The model call failed: {why}"
                    ))];
                }
                Vec::new()
            }
            PiEvent::ToolStart {
                call_id,
                name,
                command,
            } => {
                if let Some(command) = command.filter(|_| name == "bash") {
                    self.commands.insert(call_id, command);
                }
                vec![AgentEvent::ToolStarted(name)]
            }
            PiEvent::ToolEnd {
                call_id,
                name,
                is_error,
                output,
            } => {
                if let Some(command) = self.commands.remove(&call_id) {
                    self.work.last_shell = Some(ShellRun {
                        command,
                        failed: is_error,
                        output,
                    });
                }
                vec![AgentEvent::ToolFinished(ToolResult {
                    name,
                    ok: !is_error,
                })]
            }
            PiEvent::AutoRetryStart => {
                self.retrying = true;
                Vec::new()
            }
            PiEvent::AutoRetryEnd { .. } => {
                self.retrying = false;
                Vec::new()
            }
            // Drafts go out from the reader, throttled by time (`rpc_agent`).
            PiEvent::ExtensionError { .. } | PiEvent::MessageUpdate { .. } => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(turns: &mut PiTurns, events: Vec<PiEvent>) -> Vec<AgentEvent> {
        events.into_iter().flat_map(|e| turns.on_event(e)).collect()
    }

    fn assistant(text: &str, stop: &str) -> PiEvent {
        PiEvent::MessageEnd {
            role: "assistant".into(),
            text: text.into(),
            stop_reason: Some(stop.into()),
            error_message: None,
            usage: None,
        }
    }

    #[test]
    fn a_tool_run_becomes_one_turn_with_its_card_lines_and_reply() {
        let mut turns = PiTurns::new(TurnOrigin::Remote);
        let events = feed(
            &mut turns,
            vec![
                PiEvent::AgentStart,
                PiEvent::MessageStart {
                    role: "user".into(),
                    text: "please TOOL".into(),
                },
                assistant("", "toolUse"),
                PiEvent::ToolStart {
                    call_id: "c1".into(),
                    name: "bash".into(),
                    command: Some("echo hi".into()),
                },
                PiEvent::ToolEnd {
                    call_id: "c1".into(),
                    name: "bash".into(),
                    is_error: false,
                    output: "hi\n".into(),
                },
                assistant("tool said: hi", "stop"),
            ],
        );
        assert!(turns.busy());
        assert_eq!(
            events,
            vec![
                AgentEvent::TurnStarted(TurnOrigin::Remote),
                AgentEvent::ToolStarted("bash".into()),
                AgentEvent::ToolFinished(ToolResult {
                    name: "bash".into(),
                    ok: true
                }),
                AgentEvent::AssistantMessage("tool said: hi".into()),
            ]
        );
        assert_eq!(
            turns.on_event(PiEvent::AgentEnd),
            vec![AgentEvent::TurnSettled]
        );
        assert!(!turns.busy());
        let work = turns.recent_work();
        assert_eq!(work.last_prompt.as_deref(), Some("please TOOL"));
        assert_eq!(
            work.last_shell,
            Some(ShellRun {
                command: "echo hi".into(),
                failed: false,
                output: "hi\n".into()
            })
        );
    }

    #[test]
    fn a_blocked_tool_is_a_failed_one_and_other_tools_are_not_shell_runs() {
        let mut turns = PiTurns::new(TurnOrigin::Remote);
        let events = feed(
            &mut turns,
            vec![
                PiEvent::ToolStart {
                    call_id: "r".into(),
                    name: "read".into(),
                    command: Some("not a shell".into()),
                },
                PiEvent::ToolEnd {
                    call_id: "r".into(),
                    name: "read".into(),
                    is_error: true,
                    output: "blocked".into(),
                },
            ],
        );
        assert_eq!(
            events[1],
            AgentEvent::ToolFinished(ToolResult {
                name: "read".into(),
                ok: false
            })
        );
        assert_eq!(turns.recent_work().last_shell, None);
    }

    #[test]
    fn a_failed_model_call_is_said_and_a_retry_keeps_pi_busy() {
        let mut turns = PiTurns::new(TurnOrigin::Local);
        let mut failed = assistant("", "error");
        if let PiEvent::MessageEnd { error_message, .. } = &mut failed {
            *error_message = Some("Connection error.".into());
        }
        let events = feed(
            &mut turns,
            vec![PiEvent::AgentStart, failed, PiEvent::AgentEnd],
        );
        assert_eq!(
            events,
            vec![
                AgentEvent::TurnStarted(TurnOrigin::Local),
                AgentEvent::AssistantMessage("The model call failed: Connection error.".into()),
                AgentEvent::TurnSettled,
            ]
        );
        turns.on_event(PiEvent::AutoRetryStart);
        assert!(turns.busy(), "waiting for a retry is not idle");
        turns.on_event(PiEvent::AutoRetryEnd { success: false });
        assert!(!turns.busy());
    }

    #[test]
    fn an_aborted_message_without_text_says_nothing() {
        let mut turns = PiTurns::new(TurnOrigin::Remote);
        assert!(turns.on_event(assistant(" ", "aborted")).is_empty());
        assert_eq!(
            turns.on_event(assistant("slow0 ", "aborted")),
            vec![AgentEvent::AssistantMessage("slow0 ".into())]
        );
    }
}
