//! `agent`: the live coding-agent session this bridge serves.

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::HasData;

use super::{Imports, ParkedCall, QuestionReplies, SessionContext};
use crate::agent::Agent;
use crate::transcript::line::{Event, FileReadMeta, ImageMeta};
use crate::transcript::script::Script;
use crate::wit::{agent, types};

/// What the agent calls may touch: the agent, and the tool calls parked for a verdict.
pub struct AgentPart<'a> {
    agent: &'a Arc<dyn Agent>,
    parked: &'a mut HashMap<String, ParkedCall>,
    questions: &'a mut QuestionReplies,
}

/// The agent interface's view, for the linker.
pub struct AgentImports;

impl HasData for AgentImports {
    type Data<'a> = Imports<'a, AgentPart<'a>>;
}

impl SessionContext {
    /// The agent interface's view of this session.
    pub fn agent_imports(&mut self) -> Imports<'_, AgentPart<'_>> {
        imports!(
            self,
            AgentPart {
                agent: &self.agent,
                parked: &mut self.parked,
                questions: &mut self.questions,
            }
        )
    }
}

impl agent::Host for Imports<'_, AgentPart<'_>> {
    async fn send_prompt(
        &mut self,
        text: String,
        deliver_as: agent::DeliverAs,
        images: Vec<agent::PromptImage>,
    ) -> Result<(), String> {
        // Image bytes (megabytes) stay out of the transcript; their type and size are kept.
        self.tape.record(|| Event::Prompt {
            text: text.clone(),
            deliver_as,
            images: images
                .iter()
                .map(|i| ImageMeta {
                    media_type: i.media_type.clone(),
                    bytes: i.data.len(),
                })
                .collect(),
        });
        self.tape
            .answer(
                Script::prompted,
                self.part.agent.send_prompt(text, deliver_as, images),
                |result| Event::Prompted {
                    result: result.clone(),
                },
            )
            .await
    }

    async fn save_to_inbox(
        &mut self,
        dir: String,
        name: String,
        data: Vec<u8>,
    ) -> Result<String, agent::InboxError> {
        self.tape.record(|| Event::SaveToInbox {
            dir: dir.clone(),
            name: name.clone(),
            bytes: data.len(),
        });
        let cwd = self.part.agent.session_info().cwd;
        self.tape
            .answer(
                Script::inbox_saved,
                save_to_inbox(cwd, dir, name, data),
                |result| Event::InboxSaved {
                    result: result.clone(),
                },
            )
            .await
    }

    async fn read_file(
        &mut self,
        path: String,
        max_bytes: u64,
    ) -> Result<agent::OutgoingFile, agent::FileReadError> {
        self.tape.record(|| Event::ReadFile {
            path: path.clone(),
            max_bytes,
        });
        let cwd = self.part.agent.session_info().cwd;
        self.tape
            .answer(
                Script::file_read,
                read_file(cwd, path, max_bytes),
                // The bytes stay out of the transcript; where they came from and how many
                // are kept.
                |result| Event::FileRead {
                    result: result
                        .as_ref()
                        .map(|file| FileReadMeta {
                            resolved_path: file.resolved_path.clone(),
                            bytes: file.size_bytes,
                        })
                        .map_err(Clone::clone),
                },
            )
            .await
    }

    fn resolve_tool_call(
        &mut self,
        id: String,
        decision: types::ToolDecision,
    ) -> wasmtime::Result<()> {
        self.tape.record(|| Event::Verdict {
            id: id.clone(),
            decision: decision.clone(),
        });
        // An id the host does not hold was resolved already (or never parked): ignored,
        // so a guest can never give one call two verdicts.
        if let Some(call) = self.part.parked.remove(&id) {
            call.resolve(decision);
        }
        Ok(())
    }

    fn answer_question(
        &mut self,
        id: String,
        answer: agent::QuestionAnswer,
    ) -> wasmtime::Result<()> {
        self.tape.record(|| Event::QuestionAnswered {
            id: id.clone(),
            answer: answer.clone(),
        });
        // An id the host does not hold was answered already: ignored, so the agent never
        // gets two answers to one question.
        if let Some(reply) = self.part.questions.remove(&id) {
            // An agent that stopped waiting (pi's own timeout) needs no answer.
            let _ = reply.send(answer);
        }
        Ok(())
    }

    fn abort(&mut self) -> wasmtime::Result<()> {
        self.tape.record(|| Event::Abort);
        if !self.tape.replaying() {
            self.part.agent.abort();
        }
        Ok(())
    }

    async fn run_session_command(
        &mut self,
        command: agent::SessionCommand,
    ) -> Result<agent::SessionReply, String> {
        self.tape.record(|| Event::SessionCommand {
            command: command.clone(),
        });
        self.tape
            .answer(
                Script::session_replied,
                self.part.agent.session_command(command),
                |result| Event::SessionReplied {
                    result: result.clone(),
                },
            )
            .await
    }

    fn is_idle(&mut self) -> wasmtime::Result<bool> {
        Ok(self.tape.answer_now(
            Script::idle,
            || self.part.agent.is_idle(),
            |idle| Event::Idle { idle: *idle },
        ))
    }

    fn info(&mut self) -> wasmtime::Result<agent::SessionInfo> {
        Ok(self.tape.answer_now(
            Script::info,
            || self.part.agent.session_info(),
            |info| Event::Info { info: info.clone() },
        ))
    }

    async fn work_snapshot(&mut self) -> agent::WorkFacts {
        self.tape
            .answer(Script::work, self.part.work(), |facts| Event::Work {
                facts: facts.clone(),
            })
            .await
    }
}

impl AgentPart<'_> {
    /// The agent's recent work and the working tree's git facts.
    async fn work(&mut self) -> agent::WorkFacts {
        let cwd = self.agent.session_info().cwd;
        let (branch, numstat) = crate::local::work::git_facts(std::path::Path::new(&cwd)).await;
        let facts = self.agent.recent_work();
        agent::WorkFacts {
            branch,
            numstat,
            last_shell: facts.last_shell.map(|mut run| {
                run.output = output_tail(run.output);
                run
            }),
            last_prompt: facts.last_prompt,
        }
    }
}

/// Writes one inbox file off the async threads (a file of megabytes, a slow disk).
async fn save_to_inbox(
    cwd: String,
    dir: String,
    name: String,
    data: Vec<u8>,
) -> Result<String, agent::InboxError> {
    use crate::disk::inbox::{InboxFailure, save};
    let written =
        tokio::task::spawn_blocking(move || save(std::path::Path::new(&cwd), &dir, &name, &data))
            .await;
    match written {
        Ok(Ok(path)) => Ok(path),
        Ok(Err(InboxFailure::Exists)) => Err(agent::InboxError::Exists),
        Ok(Err(failure)) => Err(agent::InboxError::Failed(failure.to_string())),
        Err(error) => Err(agent::InboxError::Failed(format!(
            "the write stopped before it finished: {error}"
        ))),
    }
}

/// Reads a file the agent asked to send, off the async threads (megabytes, a slow disk).
async fn read_file(
    cwd: String,
    path: String,
    max_bytes: u64,
) -> Result<agent::OutgoingFile, agent::FileReadError> {
    use crate::disk::outgoing::{ReadFailure, read};
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let read_back = tokio::task::spawn_blocking(move || {
        read(
            std::path::Path::new(&cwd),
            home.as_deref(),
            &path,
            max_bytes,
        )
    })
    .await;
    match read_back {
        Ok(Ok(file)) => Ok(agent::OutgoingFile {
            resolved_path: file.resolved.to_string_lossy().into_owned(),
            size_bytes: file.size,
            data: file.data,
        }),
        Ok(Err(ReadFailure::TooLarge(size))) => Err(agent::FileReadError::TooLarge(size)),
        Ok(Err(failure)) => Err(agent::FileReadError::Failed(failure.to_string())),
        Err(error) => Err(agent::FileReadError::Failed(format!(
            "the read stopped before it finished: {error}"
        ))),
    }
}

/// The end of a command's output, at most 64 KiB on a char boundary: test runners print their
/// summary last, and a build log of megabytes must not be copied into the guest.
fn output_tail(mut output: String) -> String {
    const KEEP: usize = 64 * 1024;
    let mut cut = output.len().saturating_sub(KEEP);
    while !output.is_char_boundary(cut) {
        cut += 1;
    }
    output.split_off(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::imports::SessionHost;
    use crate::sandbox::imports::fixture::host;

    #[test]
    fn output_tail_keeps_the_end_on_a_char_boundary() {
        let long = format!("{}é{}", "a".repeat(10), "b".repeat(64 * 1024 - 1));
        let tail = output_tail(long.clone());
        // The cut would fall inside `é`: it moves forward to the next character.
        assert_eq!(tail, "b".repeat(64 * 1024 - 1));
        assert_eq!(output_tail("short".into()), "short");
    }

    fn park(
        host: &mut SessionHost,
        id: &str,
    ) -> tokio::sync::oneshot::Receiver<types::ToolDecision> {
        let (reply, verdict) = tokio::sync::oneshot::channel();
        host.ctx.parked.insert(
            id.to_string(),
            ParkedCall {
                reply,
                question: None,
            },
        );
        verdict
    }

    #[test]
    fn a_parked_call_gets_exactly_one_verdict() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut host = host(dir.path());
        let mut verdict = park(&mut host, "ab3k");
        agent::Host::resolve_tool_call(
            &mut host.ctx.agent_imports(),
            "zzzz".into(),
            types::ToolDecision::Allow,
        )
        .expect("an unknown id is ignored");
        assert!(verdict.try_recv().is_err(), "not resolved by another id");
        agent::Host::resolve_tool_call(
            &mut host.ctx.agent_imports(),
            "ab3k".into(),
            types::ToolDecision::Allow,
        )
        .expect("resolves");
        // A second verdict for the same id has nobody to reach.
        agent::Host::resolve_tool_call(
            &mut host.ctx.agent_imports(),
            "ab3k".into(),
            types::ToolDecision::Block("late".into()),
        )
        .expect("ignored");
        assert_eq!(verdict.try_recv(), Ok(types::ToolDecision::Allow));
        assert!(host.ctx.parked.is_empty());
    }

    #[test]
    fn parked_calls_are_blocked_when_their_instance_goes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut host = host(dir.path());
        let mut first = park(&mut host, "ab3k");
        let mut second = park(&mut host, "cd4m");
        host.ctx.block_parked("the bridge failed");
        for verdict in [&mut first, &mut second] {
            assert_eq!(
                verdict.try_recv(),
                Ok(types::ToolDecision::Block("the bridge failed".into()))
            );
        }
    }
}
