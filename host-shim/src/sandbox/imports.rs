//! The host side of every WIT import, for one session.
//!
//! Imports never panic on guest input: every failure becomes the typed error the WIT
//! function declares. The WASI context grants nothing; stderr is captured in memory so a
//! guest panic message can be reported with the trap.
//!
//! The store owns the session's host state ([`SessionContext`]) outright: calls into one
//! instance never overlap, so nothing here needs a lock. After a trap the session takes
//! the context back out of the dead store (`Store::into_data`) and hands it to the next
//! instance, with its transports, locks and pending tick intact.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use transport_core::{Button, OutboundMessage, Transport, TransportError};
use wasmtime::StoreLimits;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::agent::Agent;
use crate::bindings::{agent, clock, lock, log, pairing, rng, store, transport, types, ui};
use crate::disk::lock::{Claimant, LockDir, LockGuard};
use crate::disk::state_file::StateStore;
use crate::local::clock::Clock;
use crate::local::logging::{LogLine, LogSink};
use crate::local::ui::Ui;
use crate::sandbox::convert;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::transcript::Transcript;
use crate::transcript::line::{Event, FetchedMeta, ImageMeta};
use crate::transcript::script::{Script, hex_encode};
use crate::transcript::scrub::RNG_KEEP_MIN;

/// How much guest stderr is kept for trap reports.
const STDERR_CAPTURE: usize = 16 * 1024;

/// Everything a session's imports need. It outlives each instance: a trapped instance's
/// store gives it back, and the next instance takes it over.
pub struct SessionContext {
    /// Session key (state scope).
    pub key: String,
    /// Transports created for this session, by id.
    pub transports: BTreeMap<String, Arc<dyn Transport>>,
    /// Where listening transports deliver inbound messages.
    pub inbound: transport_core::InboundSink,
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// The local terminal.
    pub ui: Arc<dyn Ui>,
    /// The state file, shared with every other session of this host.
    pub state: Arc<dyn StateStore>,
    /// Where lock files live.
    pub locks: LockDir,
    /// The pairing failure budget, shared with every other session of this host.
    pub pairing: PairingBudget,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Log lines.
    pub log: Arc<dyn LogSink>,
    /// Locks this session holds, by name.
    pub held_locks: HashMap<String, LockGuard>,
    /// Transports already listening (listen is idempotent across guest restarts).
    pub listening: Vec<String>,
    /// The tick the guest asked for last.
    pub tick_at: Option<u64>,
    /// Tool calls whose verdict is pending (remote approval), by approval id.
    pub parked: HashMap<String, ParkedCall>,
    /// Where inputs, effects and answers are recorded (opt-in).
    pub transcript: Option<Transcript>,
    /// Replay: the recorded answers the imports give instead of asking the world.
    pub script: Option<Script>,
}

/// A tool call waiting for `agent.resolve-tool-call` (see `tool-answer` in
/// `wit/session.wit`).
pub struct ParkedCall {
    /// Where the agent waits for the verdict.
    pub reply: tokio::sync::oneshot::Sender<types::ToolDecision>,
    /// The local question, dropped once the call is decided elsewhere.
    pub question: Option<tokio::task::JoinHandle<()>>,
}

impl ParkedCall {
    /// Hands `decision` to the waiting agent and withdraws the local question.
    pub fn resolve(self, decision: types::ToolDecision) {
        if let Some(question) = self.question {
            question.abort();
        }
        // An agent that stopped waiting (its turn was aborted) needs no verdict.
        let _ = self.reply.send(decision);
    }
}

impl SessionContext {
    /// Records `event` in the transcript, if there is one (`event` is only built then).
    /// A transcript that cannot be written says so once in the log and stops; the
    /// session goes on.
    pub fn record(&self, event: impl FnOnce() -> Event) {
        self.record_with(event, Transcript::record);
    }

    /// Records an input about to go into the guest; the clock reads it makes while
    /// handling it are counted from here.
    pub fn record_input(&self, event: impl FnOnce() -> Event) {
        self.record_with(event, Transcript::record_input);
    }

    /// The time the guest is shown: the clock, whose reads a recording transcript notes
    /// (only those that moved on within an input); in replay, what the recorded run
    /// showed at the same read of the same input.
    pub fn guest_now_ms(&mut self) -> u64 {
        let now = self.clock.now_ms();
        if let Some(script) = self.script.as_mut() {
            return script.now(now);
        }
        if let Some(transcript) = &self.transcript {
            let error = transcript.clock_read(now);
            self.stopped(error);
        }
        now
    }

    fn record_with(
        &self,
        event: impl FnOnce() -> Event,
        write: impl FnOnce(&Transcript, u64, Event) -> Option<String>,
    ) {
        let Some(transcript) = &self.transcript else {
            return;
        };
        let error = write(transcript, self.clock.now_ms(), event());
        self.stopped(error);
    }

    /// Says in the log why the transcript stopped, the one time writing it fails.
    fn stopped(&self, error: Option<String>) {
        if let Some(error) = error {
            self.log.write(
                &self.key,
                LogLine {
                    level: types::Level::Warning,
                    event: "transcript stopped".into(),
                    fields: vec![("error".into(), error)],
                },
            );
        }
    }

    /// Blocks every parked call: the instance that would have resolved them is gone
    /// (a trap, a shutdown), and an unanswered call fails closed.
    pub fn block_parked(&mut self, reason: &str) {
        for (_, call) in self.parked.drain() {
            call.resolve(types::ToolDecision::Block(reason.to_string()));
        }
    }
}

/// The per-instance store data: WASI (granting nothing), limits, and the session.
pub struct SessionHost {
    wasi: WasiCtx,
    table: ResourceTable,
    stderr: MemoryOutputPipe,
    /// Memory cap of this instance.
    pub limits: StoreLimits,
    /// Fuel each export call starts with.
    pub call_fuel: u64,
    /// The session behind the imports.
    pub ctx: SessionContext,
}

impl SessionHost {
    /// Store data for a new instance of the session `ctx`.
    pub fn new(ctx: SessionContext) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_CAPTURE);
        // No preopens, no environment, no arguments, no network, no stdin: the guest's
        // only way out is the bridge world's own imports (C1, C3).
        let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build();
        SessionHost {
            wasi,
            table: ResourceTable::new(),
            stderr,
            limits: StoreLimits::default(),
            call_fuel: 0,
            ctx,
        }
    }

    /// What the guest wrote to stderr (a panic message, typically).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents())
            .trim()
            .to_string()
    }

    /// The session context, for the next instance after this one trapped.
    pub fn into_context(self) -> SessionContext {
        self.ctx
    }

    fn transport(&self, id: &str) -> Option<Arc<dyn Transport>> {
        self.ctx.transports.get(id).cloned()
    }
}

impl WasiView for SessionHost {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for SessionHost {}

impl transport::Host for SessionHost {
    async fn identify(&mut self, id: String) -> Result<transport::Identity, String> {
        let result = match self.ctx.script.as_mut() {
            Some(script) => script.identified(&id),
            None => self.identify_live(&id).await,
        };
        self.ctx.record(|| Event::Identified {
            transport: id,
            result: result.clone(),
        });
        result
    }

    async fn listen(&mut self, id: String) -> Result<(), String> {
        self.ctx.record(|| Event::Listen {
            transport: id.clone(),
        });
        let result = match self.ctx.script.as_mut() {
            Some(script) => script.listened(),
            None => self.listen_live(id.clone()).await,
        };
        self.ctx.record(|| Event::Listened {
            transport: id,
            result: result.clone(),
        });
        result
    }

    async fn send(
        &mut self,
        message: transport::Outbound,
    ) -> Result<transport::Receipt, transport::SendError> {
        self.ctx.record(|| Event::Send {
            message: message.clone(),
        });
        let result = match self.ctx.script.as_mut() {
            Some(script) => script.sent(),
            None => self.send_live(message).await,
        };
        self.ctx.record(|| Event::Sent {
            result: result.clone(),
        });
        result
    }

    fn typing(
        &mut self,
        id: String,
        conversation_id: String,
        thread_id: Option<String>,
    ) -> wasmtime::Result<()> {
        self.ctx.record(|| Event::Typing {
            transport: id.clone(),
            conversation_id: conversation_id.clone(),
            thread_id: thread_id.clone(),
        });
        self.typing_live(id, conversation_id, thread_id);
        Ok(())
    }

    async fn fetch_attachment(
        &mut self,
        id: String,
        reference: String,
        max_bytes: u64,
    ) -> Result<transport::FetchedAttachment, String> {
        let result = match self.ctx.script.as_mut() {
            Some(script) => script.fetched(),
            None => self.fetch_live(id, reference, max_bytes).await,
        };
        self.ctx.record(|| Event::Fetched {
            result: result
                .as_ref()
                .map(|f| FetchedMeta {
                    media_type: f.media_type.clone(),
                    bytes: f.data.len(),
                })
                .map_err(Clone::clone),
        });
        result
    }

    async fn diagnose(&mut self, id: String) -> String {
        let text = match self.ctx.script.as_mut() {
            Some(script) => script.diagnosed(),
            None => match self.transport(&id) {
                Some(t) => t.diagnose(),
                None => "not created".into(),
            },
        };
        self.ctx.record(|| Event::Diagnosed {
            transport: id,
            text: text.clone(),
        });
        text
    }
}

/// The live side of the transport imports: the transports themselves.
impl SessionHost {
    async fn identify_live(&mut self, id: &str) -> Result<transport::Identity, String> {
        let Some(t) = self.transport(id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        let identity = t.identify().await.map_err(|e| e.to_string())?;
        Ok(transport::Identity {
            bot_id: identity.bot_id,
            bot_name: identity.bot_name,
            capabilities: convert::capabilities_to_wit(t.capabilities()),
            lock_name: identity.lock_name,
        })
    }

    async fn listen_live(&mut self, id: String) -> Result<(), String> {
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        // A restarted guest asks again; the transport is still running.
        if self.ctx.listening.contains(&id) {
            return Ok(());
        }
        t.start(self.ctx.inbound.clone())
            .await
            .map_err(|e| e.to_string())?;
        self.ctx.listening.push(id);
        Ok(())
    }

    async fn send_live(
        &mut self,
        message: transport::Outbound,
    ) -> Result<transport::Receipt, transport::SendError> {
        let Some(t) = self.transport(&message.transport) else {
            return Err(transport::SendError::NotRunning);
        };
        let outbound = OutboundMessage {
            conversation_id: message.conversation_id,
            thread_id: message.thread_id,
            kind: convert::kind_from_wit(message.kind),
            text: message.text,
            edit_key: message.edit_key,
            buttons: message
                .buttons
                .into_iter()
                .map(|b| Button {
                    label: b.label,
                    command: b.command,
                })
                .collect(),
        };
        t.send(outbound)
            .await
            .map(|r| transport::Receipt {
                message_id: r.message_id,
                edit_key: r.edit_key,
            })
            .map_err(|e| match e {
                TransportError::NotStarted(_) => transport::SendError::NotRunning,
                TransportError::EditRejected(m) => transport::SendError::EditRejected(m),
                TransportError::RateLimited { retry_after_ms } => {
                    transport::SendError::RateLimited(retry_after_ms)
                }
                other => transport::SendError::Failed(other.to_string()),
            })
    }

    fn typing_live(&mut self, id: String, conversation_id: String, thread_id: Option<String>) {
        if let Some(t) = self.transport(&id) {
            // Best effort by contract (I24): a failed indicator never fails a turn, so the
            // bridge does not wait for it either. A platform round trip (Telegram's
            // sendChatAction) would otherwise hold up every prompt it accompanies.
            tokio::spawn(async move {
                let _ = t.typing(&conversation_id, thread_id.as_deref()).await;
            });
        }
    }

    async fn fetch_live(
        &mut self,
        id: String,
        reference: String,
        max_bytes: u64,
    ) -> Result<transport::FetchedAttachment, String> {
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        let fetched = t
            .fetch_attachment(&reference, max_bytes)
            .await
            .map_err(|e| e.to_string())?;
        // The transport enforces the cap; checking again here keeps a buggy transport
        // from handing the guest more than it asked for (I19).
        if fetched.data.len() as u64 > max_bytes {
            return Err(format!(
                "attachment is {} bytes, over the {max_bytes} byte limit",
                fetched.data.len()
            ));
        }
        Ok(transport::FetchedAttachment {
            media_type: fetched.media_type,
            data: fetched.data,
        })
    }
}

impl agent::Host for SessionHost {
    async fn send_prompt(
        &mut self,
        text: String,
        deliver_as: agent::DeliverAs,
        images: Vec<agent::PromptImage>,
    ) -> Result<(), String> {
        self.ctx.record(|| Event::Prompt {
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
        let result = match self.ctx.script.as_mut() {
            Some(script) => script.prompted(),
            None => self.ctx.agent.send_prompt(text, deliver_as, images).await,
        };
        self.ctx.record(|| Event::Prompted {
            result: result.clone(),
        });
        result
    }

    fn resolve_tool_call(
        &mut self,
        id: String,
        decision: types::ToolDecision,
    ) -> wasmtime::Result<()> {
        self.ctx.record(|| Event::Verdict {
            id: id.clone(),
            decision: decision.clone(),
        });
        // An id the host does not hold was resolved already (or never parked): ignored,
        // so a guest can never give one call two verdicts.
        if let Some(call) = self.ctx.parked.remove(&id) {
            call.resolve(decision);
        }
        Ok(())
    }

    fn abort(&mut self) -> wasmtime::Result<()> {
        self.ctx.record(|| Event::Abort);
        if self.ctx.script.is_none() {
            self.ctx.agent.abort();
        }
        Ok(())
    }

    fn is_idle(&mut self) -> wasmtime::Result<bool> {
        let idle = match self.ctx.script.as_mut() {
            Some(script) => script.idle(),
            None => self.ctx.agent.is_idle(),
        };
        self.ctx.record(|| Event::Idle { idle });
        Ok(idle)
    }

    fn info(&mut self) -> wasmtime::Result<agent::SessionInfo> {
        let info = match self.ctx.script.as_mut() {
            Some(script) => script.info(),
            None => self.ctx.agent.session_info(),
        };
        self.ctx.record(|| Event::Info { info: info.clone() });
        Ok(info)
    }

    async fn work_snapshot(&mut self) -> agent::WorkFacts {
        let facts = match self.ctx.script.as_mut() {
            Some(script) => script.work(),
            None => self.work_live().await,
        };
        self.ctx.record(|| Event::Work {
            facts: facts.clone(),
        });
        facts
    }
}

impl SessionHost {
    /// The agent's recent work and the working tree's git facts.
    async fn work_live(&mut self) -> agent::WorkFacts {
        let cwd = self.ctx.agent.session_info().cwd;
        let (branch, numstat) = crate::local::work::git_facts(std::path::Path::new(&cwd)).await;
        let facts = self.ctx.agent.recent_work();
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

impl ui::Host for SessionHost {
    async fn notify(&mut self, level: types::Level, text: String) {
        self.ctx.record(|| Event::Notify {
            level,
            text: text.clone(),
        });
        // Notices quote platform ids and names (a robo_claw room, a sender); whatever a
        // normaliser missed must still not reach a terminal, stderr or pi's TUI as an
        // escape, a bidi override or an invisible character.
        let text = transport_core::printable::strip_invisible_keep_lines(&text);
        self.ctx.ui.notify(level, &text).await;
    }

    async fn confirm(&mut self, title: String, message: String) -> bool {
        self.ctx.record(|| Event::Confirm {
            title: title.clone(),
            message: message.clone(),
        });
        let yes = match self.ctx.script.as_mut() {
            Some(script) => script.confirmed(),
            None => self.ctx.ui.confirm(&title, &message).await,
        };
        self.ctx.record(|| Event::Confirmed { yes });
        yes
    }
}

impl store::Host for SessionHost {
    async fn load(&mut self) -> Option<String> {
        let document = match self.ctx.script.as_mut() {
            Some(script) => script.loaded(),
            None => match self.ctx.state.load(&self.ctx.key).await {
                Ok(document) => document,
                Err(error) => {
                    // Starting empty is safe: the store refuses a save over the document
                    // it could not read (no revision known), so nothing is overwritten.
                    self.ctx.log.write(
                        &self.ctx.key,
                        LogLine::new(
                            types::Level::Error,
                            "state not loaded",
                            &[("error", error.to_string())],
                        ),
                    );
                    None
                }
            },
        };
        self.ctx.record(|| Event::Loaded {
            document: document.clone(),
        });
        document
    }

    async fn save(&mut self, document: String) -> Result<(), String> {
        self.ctx.record(|| Event::Save {
            bytes: document.len(),
        });
        let result = match self.ctx.script.as_mut() {
            Some(script) => script.saved(),
            None => self
                .ctx
                .state
                .save(&self.ctx.key, &document)
                .await
                .map_err(|e| e.to_string()),
        };
        self.ctx.record(|| Event::Saved {
            result: result.clone(),
        });
        result
    }
}

impl clock::Host for SessionHost {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.ctx.guest_now_ms())
    }

    fn request_tick(&mut self, at_ms: u64) -> wasmtime::Result<()> {
        self.ctx.record(|| Event::RequestTick { at_ms });
        self.ctx.tick_at = Some(at_ms);
        Ok(())
    }
}

impl rng::Host for SessionHost {
    fn random_bytes(&mut self, len: u32) -> wasmtime::Result<Vec<u8>> {
        let bytes = match self.ctx.script.as_mut() {
            Some(script) => script.rng(len.min(4096)),
            None => random_bytes_live(len)?,
        };
        // A code is made from short draws: those bytes never reach a transcript, or the
        // code could be rebuilt from it.
        self.ctx.record(|| Event::Rng {
            len,
            bytes: (len >= RNG_KEEP_MIN).then(|| hex_encode(&bytes)),
        });
        Ok(bytes)
    }
}

/// Bytes from the operating system's secure source.
fn random_bytes_live(len: u32) -> wasmtime::Result<Vec<u8>> {
    // Pairing codes need at most a few dozen bytes; a larger request is a guest bug
    // and must not become a host allocation the guest controls.
    let mut bytes = vec![0u8; len.min(4096) as usize];
    // Without an OS random source no code would be safe: trap the call rather than
    // hand out a predictable code.
    getrandom::fill(&mut bytes).map_err(|e| {
        wasmtime::Error::msg(format!("the operating system's random source failed: {e}"))
    })?;
    Ok(bytes)
}

impl lock::Host for SessionHost {
    async fn acquire(&mut self, name: String, stale_after_ms: u64) -> Result<(), String> {
        self.ctx.record(|| Event::Acquire {
            name: name.clone(),
            stale_after_ms,
        });
        let result = match self.ctx.script.as_mut() {
            Some(script) => script.acquired(),
            None => self.acquire_live(name, stale_after_ms).await,
        };
        self.ctx.record(|| Event::Acquired {
            result: result.clone(),
        });
        result
    }

    async fn release(&mut self, name: String) {
        self.ctx.record(|| Event::Release { name: name.clone() });
        // Dropping the guard releases the file, token-verified.
        self.ctx.held_locks.remove(&name);
    }
}

impl SessionHost {
    async fn acquire_live(&mut self, name: String, stale_after_ms: u64) -> Result<(), String> {
        if self.ctx.held_locks.contains_key(&name) {
            return Ok(());
        }
        let claimant = Claimant::this_process(self.ctx.clock.now_ms());
        let guard = self
            .ctx
            .locks
            .acquire(&name, stale_after_ms, &claimant)
            .map_err(|e| e.to_string())?;
        self.ctx.held_locks.insert(name, guard);
        Ok(())
    }
}

impl log::Host for SessionHost {
    fn write(
        &mut self,
        level: types::Level,
        event: String,
        fields: Vec<log::Field>,
    ) -> wasmtime::Result<()> {
        let fields: Vec<(String, String)> = fields.into_iter().map(|f| (f.key, f.value)).collect();
        self.ctx.record(|| Event::Log {
            level,
            event: event.clone(),
            fields: fields.clone(),
        });
        self.ctx.log.write(
            &self.ctx.key,
            LogLine {
                level,
                event,
                fields,
            },
        );
        Ok(())
    }
}

impl pairing::Host for SessionHost {
    fn closed_since(&mut self) -> wasmtime::Result<Option<u64>> {
        Ok(self.ctx.pairing.lock().closed_since())
    }

    fn record_failure(
        &mut self,
        now_ms: u64,
        per_hour: u32,
    ) -> wasmtime::Result<pairing::FailureOutcome> {
        Ok(
            match self.ctx.pairing.lock().record_failure(now_ms, per_hour) {
                guest::core::pairing_budget::FailureOutcome::Counted => {
                    pairing::FailureOutcome::Counted
                }
                guest::core::pairing_budget::FailureOutcome::JustClosed => {
                    pairing::FailureOutcome::JustClosed
                }
                guest::core::pairing_budget::FailureOutcome::CountedWhileClosed => {
                    pairing::FailureOutcome::CountedWhileClosed
                }
            },
        )
    }

    fn refused_unjudged(&mut self) -> wasmtime::Result<()> {
        self.ctx.pairing.lock().refused_unjudged();
        Ok(())
    }

    fn reopen(&mut self) -> wasmtime::Result<()> {
        self.ctx.pairing.lock().reopen();
        Ok(())
    }

    fn view(&mut self, now_ms: u64) -> wasmtime::Result<pairing::BudgetView> {
        let view = self.ctx.pairing.lock().view(now_ms);
        Ok(pairing::BudgetView {
            failures_last_hour: view.failures_last_hour,
            closed_since_ms: view.closed_at,
            unjudged: view.unjudged,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::clock::ManualClock;
    use crate::local::logging::MemoryLog;
    use crate::local::ui::RecordingUi;

    struct IdleAgent;

    #[async_trait::async_trait]
    impl Agent for IdleAgent {
        fn attach(&self, _: tokio::sync::mpsc::Sender<crate::agent::AgentSignal>) {}
        async fn send_prompt(
            &self,
            _: String,
            _: agent::DeliverAs,
            _: Vec<agent::PromptImage>,
        ) -> Result<(), String> {
            Ok(())
        }
        fn abort(&self) {}
        fn is_idle(&self) -> bool {
            true
        }
        fn session_info(&self) -> agent::SessionInfo {
            agent::SessionInfo {
                id: "t".into(),
                name: None,
                cwd: "/".into(),
                accepts_images: false,
            }
        }
        fn recent_work(&self) -> crate::agent::RecentWork {
            crate::agent::RecentWork::default()
        }
    }

    #[test]
    fn output_tail_keeps_the_end_on_a_char_boundary() {
        let long = format!("{}é{}", "a".repeat(10), "b".repeat(64 * 1024 - 1));
        let tail = output_tail(long.clone());
        // The cut would fall inside `é`: it moves forward to the next character.
        assert_eq!(tail, "b".repeat(64 * 1024 - 1));
        assert_eq!(output_tail("short".into()), "short");
    }

    const NOW: u64 = 1_700_000_000_000;

    /// A recorded run shows the guest the live clock, as an unrecorded one does, and
    /// replay shows it the same time at the same read: a read that moved on by 1 ms
    /// under load (a tick asked for 1 ms later) once made replay differ.
    #[test]
    fn replay_shows_the_guest_each_time_the_recorded_run_showed_read_by_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut host = host(dir.path());
        let clock = Arc::new(ManualClock::new(NOW));
        host.ctx.clock = clock.clone();
        let transcript = Transcript::in_memory("t", "", NOW);
        host.ctx.transcript = Some(transcript.clone());
        let shown = |host: &mut SessionHost| clock::Host::now_ms(host).expect("now_ms");

        let mut live = Vec::new();
        for moves in [[0, 1, 0], [2, 0, 3]] {
            host.ctx.record_input(|| Event::Tick);
            for ms in moves {
                clock.advance(ms);
                live.push(shown(&mut host));
            }
        }
        assert_eq!(live, [NOW, NOW + 1, NOW + 1, NOW + 3, NOW + 3, NOW + 6]);

        let lines = transcript.lines();
        let inputs: Vec<u64> = lines
            .iter()
            .filter(|line| line.dir == crate::transcript::line::Dir::In)
            .map(|line| line.at)
            .collect();
        host.ctx.transcript = None;
        host.ctx.script = Some(Script::new(lines.iter().map(|line| &line.event)));
        let mut replayed = Vec::new();
        for at in inputs {
            // The replay clock stands at each input's recorded time.
            clock.set(at);
            host.ctx.script.as_mut().expect("script").next_input();
            for _ in 0..3 {
                replayed.push(shown(&mut host));
            }
        }
        assert_eq!(replayed, live);
    }

    #[tokio::test]
    async fn a_transport_lock_is_reclaimed_after_the_stale_time_the_guest_gives() {
        use transport_testing::fake::{FakeConfig, FakeTransport};
        let dir = tempfile::tempdir().expect("temp dir");
        let mut host = host(dir.path());
        let fake = FakeTransport::new(FakeConfig::default());
        host.ctx
            .transports
            .insert("fake".into(), Arc::new(fake.handle()));
        let identity = transport::Host::identify(&mut host, "fake".into())
            .await
            .expect("identifies");
        let lock = identity.lock_name.expect("the fake names its lock");
        // Another host took the lock 6 s ago: it cannot be probed, only outlived.
        std::fs::create_dir_all(dir.path().join("locks")).expect("lock dir");
        let holder = format!(
            "{{\"pid\":1,\"startedAt\":{},\"host\":\"elsewhere\",\"token\":\"x\"}}\n",
            NOW - 6_000
        );
        std::fs::write(
            dir.path().join("locks").join(format!("{lock}.lock")),
            holder,
        )
        .expect("plant lock");

        let refused = lock::Host::acquire(&mut host, lock.clone(), 900_000).await;
        assert!(refused.is_err(), "a 15-minute limit keeps a 6 s old lock");
        lock::Host::acquire(&mut host, lock, 5_000)
            .await
            .expect("a 5 s limit reclaims a 6 s old lock");
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
        agent::Host::resolve_tool_call(&mut host, "zzzz".into(), types::ToolDecision::Allow)
            .expect("an unknown id is ignored");
        assert!(verdict.try_recv().is_err(), "not resolved by another id");
        agent::Host::resolve_tool_call(&mut host, "ab3k".into(), types::ToolDecision::Allow)
            .expect("resolves");
        // A second verdict for the same id has nobody to reach.
        agent::Host::resolve_tool_call(
            &mut host,
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

    fn host(dir: &std::path::Path) -> SessionHost {
        let (state, _) = crate::disk::state_file::StateFile::open(&dir.join("state.json"), 0)
            .expect("state file");
        let (inbound, _) = transport_core::inbound::channel(1);
        SessionHost::new(SessionContext {
            key: "t".into(),
            transports: BTreeMap::new(),
            inbound,
            agent: Arc::new(IdleAgent),
            ui: Arc::new(RecordingUi::default()),
            state: Arc::new(std::sync::Mutex::new(state)),
            locks: LockDir::new(dir.join("locks")),
            pairing: crate::sandbox::pairing_budget::PairingBudget::default(),
            clock: Arc::new(ManualClock::new(NOW)),
            log: Arc::new(MemoryLog::default()),
            held_locks: HashMap::new(),
            listening: Vec::new(),
            tick_at: None,
            parked: HashMap::new(),
            transcript: None,
            script: None,
        })
    }
}
