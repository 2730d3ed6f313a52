//! The host side of every WIT import, for one session: one file per interface, each
//! saying only what its calls do live and what the transcript notes (`tape` applies both).
//!
//! Each interface is linked with its own view of the session ([`Imports`]: the tape and
//! that interface's part), as wasmtime-wasi links each WASI interface with its own view: an
//! import function can reach only what its interface is for (the agent's calls have no
//! transports, the clock's no state store), and the compiler says so.
//!
//! Imports never panic on guest input: every failure becomes the typed error the WIT
//! function declares. The WASI context grants nothing; stderr is captured in memory so a
//! guest panic message can be reported with the trap.
//!
//! The store owns the session's host state ([`SessionContext`]) outright: calls into one
//! instance never overlap, so nothing here needs a lock. After a trap the session takes
//! the context back out of the dead store (`Store::into_data`) and hands it to the next
//! instance, with its transports, locks and pending tick intact.

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::StoreLimits;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::agent::Agent;
use crate::disk::lock::{LockDir, LockGuard};
use crate::disk::state_store::StateStore;
use crate::local::clock::Clock;
use crate::local::logging::LogSink;
use crate::local::ui::Ui;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::session_transports::SessionTransports;
use crate::transcript::Transcript;
use crate::transcript::script::Script;
use crate::wit::{self, types};
use tape::Tape;

/// How much guest stderr is kept for trap reports.
const STDERR_CAPTURE: usize = 16 * 1024;

/// Everything a session's imports need. It outlives each instance: a trapped instance's
/// store gives it back, and the next instance takes it over.
pub struct SessionContext {
    /// Session key (state scope).
    pub key: String,
    /// Transports created for this session, by id.
    pub transports: SessionTransports,
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
    /// Locks this session holds, by name. A list, not a map: a session holds one or two
    /// (its own lock), and a hash map's first four buckets were 340 bytes that every
    /// hibernated session kept (docs/scaling.md#idle-sessions).
    pub held_locks: Vec<(String, LockGuard)>,
    /// Transports already listening (listen is idempotent across guest restarts).
    pub listening: Vec<String>,
    /// The tick the guest asked for last.
    pub tick_at: Option<u64>,
    /// Tool calls whose verdict is pending (remote approval), by approval id.
    pub parked: HashMap<String, ParkedCall>,
    /// The agent's questions waiting for `agent.answer-question`, by the agent's id.
    pub questions: QuestionReplies,
    /// Where inputs, effects and answers are recorded (opt-in).
    pub transcript: Option<Transcript>,
    /// Replay: the recorded answers the imports give instead of asking the world. Boxed:
    /// two dozen queues inline (about 800 bytes) made every session's context that much
    /// larger, kept by every hibernated session, for what only a replay has.
    pub script: Option<Box<Script>>,
}

/// Where each waiting agent question's answer goes, by the agent's id for it.
pub type QuestionReplies =
    HashMap<String, tokio::sync::oneshot::Sender<crate::wit::agent::QuestionAnswer>>;

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

/// What a session is given from outside; the rest of its context is its own bookkeeping,
/// empty when it starts ([`SessionContext::new`]).
pub struct Given {
    /// Session key (state scope).
    pub key: String,
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
}

impl SessionContext {
    /// A session's context as it starts: what it is `given`, no transports, no locks held,
    /// nothing parked or asked, no transcript and no replay script.
    pub fn new(given: Given) -> SessionContext {
        SessionContext {
            key: given.key,
            transports: SessionTransports::default(),
            inbound: given.inbound,
            agent: given.agent,
            ui: given.ui,
            state: given.state,
            locks: given.locks,
            pairing: given.pairing,
            clock: given.clock,
            log: given.log,
            held_locks: Vec::new(),
            listening: Vec::new(),
            tick_at: None,
            parked: HashMap::new(),
            questions: HashMap::new(),
            transcript: None,
            script: None,
        }
    }

    /// Blocks every parked call: the instance that would have resolved them is gone
    /// (a trap, a shutdown), and an unanswered call fails closed.
    pub fn block_parked(&mut self, reason: &str) {
        for (_, call) in self.parked.drain() {
            call.resolve(types::ToolDecision::Block(reason.to_string()));
        }
        // The agent's questions too: the instance that would have answered them is gone,
        // and the agent must not wait for ever.
        for (_, reply) in self.questions.drain() {
            let _ = reply.send(crate::wit::agent::QuestionAnswer::Cancelled);
        }
    }
}

/// The store's limiter: wasmtime's [`StoreLimits`] (the memory cap), and the size the
/// guest's linear memory has grown to, so a session's memory can be told apart from the
/// host's share (the benchmarks report both).
#[derive(Default)]
pub struct GuestLimits {
    /// The caps.
    pub caps: StoreLimits,
    /// The largest size, in bytes, a linear memory of this instance was allowed to grow to.
    pub memory_bytes: usize,
}

impl wasmtime::ResourceLimiter for GuestLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.caps.memory_growing(current, desired, maximum)?;
        if allowed {
            self.memory_bytes = self.memory_bytes.max(desired);
        }
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.caps.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.caps.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.caps.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.caps.instances()
    }

    fn tables(&self) -> usize {
        self.caps.tables()
    }

    fn memories(&self) -> usize {
        self.caps.memories()
    }
}

/// The per-instance store data: WASI (granting nothing), limits, and the session.
pub struct SessionHost {
    wasi: WasiCtx,
    table: ResourceTable,
    stderr: MemoryOutputPipe,
    /// Memory cap of this instance, and how far its memory grew.
    pub limits: GuestLimits,
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
            limits: GuestLimits::default(),
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
}

/// One interface's view of the session: the tape every call is noted through, and `part`,
/// the fields that interface's calls may touch.
pub struct Imports<'a, P> {
    tape: Tape<'a>,
    part: P,
}

/// [`Imports`] over the session context `$ctx` with `$part`. A macro, not a method: the
/// tape and the part borrow different fields of the context at once, which a method
/// borrowing the whole context could not give.
macro_rules! imports {
    ($ctx:ident, $part:expr) => {
        crate::sandbox::imports::Imports {
            tape: crate::sandbox::imports::tape::Tape {
                key: &$ctx.key,
                clock: &*$ctx.clock,
                log: &*$ctx.log,
                transcript: $ctx.transcript.as_ref(),
                script: $ctx.script.as_deref_mut(),
            },
            part: $part,
        }
    };
}

/// Links every interface of the bridge world, each with its own view of the session.
pub fn add_to_linker(linker: &mut Linker<SessionHost>) -> wasmtime::Result<()> {
    wit::types::add_to_linker::<SessionHost, HasSelf<SessionHost>>(linker, |host| host)?;
    wit::transport::add_to_linker::<SessionHost, transport::TransportImports>(linker, |host| {
        host.ctx.transport_imports()
    })?;
    wit::agent::add_to_linker::<SessionHost, agent::AgentImports>(linker, |host| {
        host.ctx.agent_imports()
    })?;
    wit::ui::add_to_linker::<SessionHost, ui::UiImports>(linker, |host| host.ctx.ui_imports())?;
    wit::store::add_to_linker::<SessionHost, store::StoreImports>(linker, |host| {
        host.ctx.store_imports()
    })?;
    wit::lock::add_to_linker::<SessionHost, lock::LockImports>(linker, |host| {
        host.ctx.lock_imports()
    })?;
    wit::clock::add_to_linker::<SessionHost, clock::ClockImports>(linker, |host| {
        host.ctx.clock_imports()
    })?;
    wit::rng::add_to_linker::<SessionHost, rng::RngImports>(linker, |host| host.ctx.rng_imports())?;
    wit::log::add_to_linker::<SessionHost, log::LogImports>(linker, |host| host.ctx.log_imports())?;
    wit::pairing::add_to_linker::<SessionHost, pairing::PairingImports>(linker, |host| {
        host.ctx.pairing_imports()
    })?;
    wit::speech::add_to_linker::<SessionHost, speech::SpeechImports>(linker, |host| {
        host.ctx.speech_imports()
    })?;
    Ok(())
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

mod agent;
mod clock;
mod lock;
mod log;
mod pairing;
mod rng;
mod speech;
mod store;
mod tape;
mod transport;
mod ui;

/// A session context over a temporary directory, for the imports' own tests.
#[cfg(test)]
mod fixture {
    use std::sync::Arc;

    use super::{Given, SessionContext, SessionHost};
    use crate::agent::IdleAgent;
    use crate::disk::lock::LockDir;
    use crate::local::clock::ManualClock;
    use crate::local::logging::MemoryLog;
    use crate::local::ui::RecordingUi;
    use crate::sandbox::pairing_budget::PairingBudget;

    pub const NOW: u64 = 1_700_000_000_000;

    pub fn host(dir: &std::path::Path) -> SessionHost {
        let (state, _) = crate::disk::state_file::StateFile::open(&dir.join("state.json"), 0)
            .expect("state file");
        let (inbound, _) = transport_core::inbound::channel(1);
        SessionHost::new(SessionContext::new(Given {
            key: "t".into(),
            inbound,
            agent: Arc::new(IdleAgent),
            ui: Arc::new(RecordingUi::default()),
            state: Arc::new(std::sync::Mutex::new(state)),
            locks: LockDir::new(dir.join("locks")),
            pairing: PairingBudget::default(),
            clock: Arc::new(ManualClock::new(NOW)),
            log: Arc::new(MemoryLog::default()),
        }))
    }
}
