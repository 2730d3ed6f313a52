//! The host side of every WIT import, for one session.
//!
//! Imports never panic on guest input: every failure becomes the typed error the WIT
//! function declares. The WASI context grants nothing; stderr is captured in memory so a
//! guest panic message can be reported with the trap.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use transports::{OutboundMessage, Transport, TransportError};
use wasmtime::StoreLimits;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::agent::Agent;
use crate::clock::Clock;
use crate::convert;
use crate::lock::{Claimant, LockDir, LockGuard};
use crate::logging::{LogLine, LogSink};
use crate::runtime::bindings::pi::bot_connect::{
    agent, clock, lock, log, rng, store, transport, types, ui,
};
use crate::state_file::StateFile;
use crate::ui::Ui;

/// How old a lock must be before it is reclaimed when nothing else is configured (the
/// original's default).
pub const DEFAULT_LOCK_STALE_MS: u64 = 15 * 60 * 1000;

/// How much guest stderr is kept for trap reports.
const STDERR_CAPTURE: usize = 16 * 1024;

/// Everything a session's imports need, shared with the session task that owns the
/// store (and survives the instance when it is replaced after a trap).
pub struct SessionContext {
    /// Session key (state scope).
    pub key: String,
    /// Transports created for this session, by id (filled once `configure` has said
    /// which ones the configuration asks for).
    pub transports: RwLock<BTreeMap<String, Arc<dyn Transport>>>,
    /// Where listening transports deliver envelopes.
    pub inbound: transports::InboundSink,
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// The local terminal.
    pub ui: Arc<dyn Ui>,
    /// The shared state file.
    pub state: Arc<Mutex<StateFile>>,
    /// Where lock files live.
    pub locks: LockDir,
    /// How old a transport's lock must be before it is reclaimed, by transport id
    /// (`transports.<id>.lockStaleMs`); a lock of no configured transport uses
    /// [`DEFAULT_LOCK_STALE_MS`].
    pub lock_stale_ms: RwLock<HashMap<String, u64>>,
    /// Which transport each lock name belongs to, learned when the transport identifies.
    pub lock_owners: Mutex<HashMap<String, String>>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Log lines.
    pub log: Arc<dyn LogSink>,
    /// Locks this session holds, by name.
    pub held_locks: Mutex<HashMap<String, LockGuard>>,
    /// Transports already listening (listen is idempotent across guest restarts).
    pub listening: Mutex<Vec<String>>,
    /// The tick the guest asked for last.
    pub tick_at: Mutex<Option<u64>>,
}

impl SessionContext {
    /// The stale limit for the lock `name`: its transport's `lockStaleMs`, else the default.
    pub fn stale_ms_for(&self, name: &str) -> u64 {
        let owner = self
            .lock_owners
            .lock()
            .ok()
            .and_then(|owners| owners.get(name).cloned());
        owner
            .and_then(|id| self.lock_stale_ms.read().ok()?.get(&id).copied())
            .unwrap_or(DEFAULT_LOCK_STALE_MS)
    }
}

/// The per-instance store data: WASI (granting nothing), limits, and the session.
pub struct SessionHost {
    wasi: WasiCtx,
    table: ResourceTable,
    stderr: MemoryOutputPipe,
    /// Memory cap of this instance.
    pub limits: StoreLimits,
    /// Guest CPU budget per export call.
    pub call_budget: Duration,
    call_started: Option<Instant>,
    import_time: Duration,
    /// The session behind the imports.
    pub ctx: Arc<SessionContext>,
}

impl SessionHost {
    /// Store data for a new instance of the session `ctx`.
    pub fn new(ctx: Arc<SessionContext>) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_CAPTURE);
        // No preopens, no environment, no arguments, no network, no stdin: the guest's
        // only way out is the bridge world's own imports (C1, C3).
        let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build();
        SessionHost {
            wasi,
            table: ResourceTable::new(),
            stderr,
            limits: StoreLimits::default(),
            call_budget: Duration::from_secs(5),
            call_started: None,
            import_time: Duration::ZERO,
            ctx,
        }
    }

    /// Marks the start of an export call (the CPU budget restarts).
    pub fn begin_call(&mut self) {
        self.call_started = Some(Instant::now());
        self.import_time = Duration::ZERO;
    }

    /// True when the guest's own time in this call (wall time minus time spent waiting
    /// in host imports) is over the budget.
    pub fn guest_time_exceeded(&self) -> bool {
        match self.call_started {
            Some(started) => started.elapsed().saturating_sub(self.import_time) > self.call_budget,
            None => false,
        }
    }

    /// What the guest wrote to stderr (a panic message, typically).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents())
            .trim()
            .to_string()
    }

    fn transport(&self, id: &str) -> Option<Arc<dyn Transport>> {
        self.ctx
            .transports
            .read()
            .ok()
            .and_then(|t| t.get(id).cloned())
    }

    fn waited(&mut self, since: Instant) {
        self.import_time += since.elapsed();
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
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        let since = Instant::now();
        let result = t.identify().await;
        self.waited(since);
        let identity = result.map_err(|e| e.to_string())?;
        if let (Some(lock), Ok(mut owners)) = (&identity.lock_name, self.ctx.lock_owners.lock()) {
            owners.insert(lock.clone(), id.clone());
        }
        Ok(transport::Identity {
            bot_id: identity.bot_id,
            bot_name: identity.bot_name,
            capabilities: convert::capabilities_to_wit(t.capabilities()),
            lock_name: identity.lock_name,
        })
    }

    async fn listen(&mut self, id: String) -> Result<(), String> {
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        {
            let listening = self
                .ctx
                .listening
                .lock()
                .map_err(|_| "session state is poisoned")?;
            // A restarted guest asks again; the transport is still running.
            if listening.contains(&id) {
                return Ok(());
            }
        }
        let since = Instant::now();
        let result = t.start(self.ctx.inbound.clone()).await;
        self.waited(since);
        result.map_err(|e| e.to_string())?;
        if let Ok(mut listening) = self.ctx.listening.lock() {
            listening.push(id);
        }
        Ok(())
    }

    async fn send(
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
        };
        let since = Instant::now();
        let result = t.send(outbound).await;
        self.waited(since);
        result
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

    fn typing(
        &mut self,
        id: String,
        conversation_id: String,
        thread_id: Option<String>,
    ) -> wasmtime::Result<()> {
        if let Some(t) = self.transport(&id) {
            // Best effort by contract (I24): a failed indicator never fails a turn, so the
            // bridge does not wait for it either. A platform round trip (Telegram's
            // sendChatAction) would otherwise hold up every prompt it accompanies.
            tokio::spawn(async move {
                let _ = t.typing(&conversation_id, thread_id.as_deref()).await;
            });
        }
        Ok(())
    }

    async fn fetch_attachment(
        &mut self,
        id: String,
        reference: String,
        max_bytes: u64,
    ) -> Result<transport::FetchedAttachment, String> {
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        let since = Instant::now();
        let result = t.fetch_attachment(&reference, max_bytes).await;
        self.waited(since);
        let fetched = result.map_err(|e| e.to_string())?;
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

    async fn diagnose(&mut self, id: String) -> String {
        match self.transport(&id) {
            Some(t) => t.diagnose(),
            None => "not created".into(),
        }
    }
}

impl agent::Host for SessionHost {
    async fn send_prompt(
        &mut self,
        text: String,
        deliver_as: agent::DeliverAs,
        images: Vec<agent::PromptImage>,
    ) -> Result<(), String> {
        let since = Instant::now();
        let result = self.ctx.agent.send_prompt(text, deliver_as, images).await;
        self.waited(since);
        result
    }

    fn abort(&mut self) -> wasmtime::Result<()> {
        self.ctx.agent.abort();
        Ok(())
    }

    fn is_idle(&mut self) -> wasmtime::Result<bool> {
        Ok(self.ctx.agent.is_idle())
    }

    fn info(&mut self) -> wasmtime::Result<agent::SessionInfo> {
        Ok(self.ctx.agent.session_info())
    }

    async fn confirm(&mut self, title: String, message: String) -> bool {
        let since = Instant::now();
        let answer = self.ctx.ui.confirm(&title, &message).await;
        self.waited(since);
        answer
    }

    async fn work_snapshot(&mut self) -> agent::WorkFacts {
        let since = Instant::now();
        let cwd = self.ctx.agent.session_info().cwd;
        let (branch, numstat) = crate::work::git_facts(std::path::Path::new(&cwd)).await;
        self.waited(since);
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
        self.ctx.ui.notify(level, &text).await;
    }
}

impl store::Host for SessionHost {
    async fn load(&mut self) -> Option<String> {
        self.ctx
            .state
            .lock()
            .ok()
            .and_then(|state| state.load(&self.ctx.key))
    }

    async fn save(&mut self, document: String) -> Result<(), String> {
        let since = Instant::now();
        let result = match self.ctx.state.lock() {
            Ok(mut state) => state
                .save(&self.ctx.key, &document)
                .map_err(|e| e.to_string()),
            Err(_) => Err("the state file is unavailable after an earlier failure".into()),
        };
        self.waited(since);
        result
    }
}

impl clock::Host for SessionHost {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.ctx.clock.now_ms())
    }

    fn request_tick(&mut self, at_ms: u64) -> wasmtime::Result<()> {
        if let Ok(mut tick) = self.ctx.tick_at.lock() {
            *tick = Some(at_ms);
        }
        Ok(())
    }
}

impl rng::Host for SessionHost {
    fn random_bytes(&mut self, len: u32) -> wasmtime::Result<Vec<u8>> {
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
}

impl lock::Host for SessionHost {
    async fn acquire(&mut self, name: String) -> Result<(), String> {
        let mut held = self
            .ctx
            .held_locks
            .lock()
            .map_err(|_| "lock table is poisoned")?;
        if held.contains_key(&name) {
            return Ok(());
        }
        let claimant = Claimant::this_process(self.ctx.clock.now_ms());
        let stale_ms = self.ctx.stale_ms_for(&name);
        let guard = self
            .ctx
            .locks
            .acquire(&name, stale_ms, &claimant)
            .map_err(|e| e.to_string())?;
        held.insert(name, guard);
        Ok(())
    }

    async fn release(&mut self, name: String) {
        if let Ok(mut held) = self.ctx.held_locks.lock() {
            // Dropping the guard releases the file, token-verified.
            held.remove(&name);
        }
    }
}

impl log::Host for SessionHost {
    fn write(
        &mut self,
        level: types::Level,
        event: String,
        fields: Vec<log::Field>,
    ) -> wasmtime::Result<()> {
        let fields = fields.into_iter().map(|f| (f.key, f.value)).collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::logging::MemoryLog;
    use crate::ui::RecordingUi;

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

    #[tokio::test]
    async fn a_transport_lock_is_reclaimed_after_its_configured_stale_limit() {
        use transports::fake::{FakeConfig, FakeTransport};
        let dir = tempfile::tempdir().expect("temp dir");
        let mut host = host(dir.path());
        let fake = FakeTransport::new(FakeConfig::default());
        host.ctx
            .transports
            .write()
            .expect("transports")
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

        let refused = lock::Host::acquire(&mut host, lock.clone()).await;
        assert!(
            refused.is_err(),
            "the 15-minute default keeps a 6 s old lock"
        );

        host.ctx
            .lock_stale_ms
            .write()
            .expect("stale table")
            .insert("fake".into(), 5_000);
        assert_eq!(host.ctx.stale_ms_for(&lock), 5_000);
        lock::Host::acquire(&mut host, lock)
            .await
            .expect("lockStaleMs 5000 reclaims a 6 s old lock");
    }

    fn host(dir: &std::path::Path) -> SessionHost {
        let (state, _) = StateFile::open(&dir.join("state.json"), 0).expect("state file");
        let (inbound, _) = tokio::sync::mpsc::channel(1);
        SessionHost::new(Arc::new(SessionContext {
            key: "t".into(),
            transports: RwLock::default(),
            inbound,
            agent: Arc::new(IdleAgent),
            ui: Arc::new(RecordingUi::default()),
            state: Arc::new(Mutex::new(state)),
            locks: LockDir::new(dir.join("locks")),
            lock_stale_ms: RwLock::default(),
            lock_owners: Mutex::default(),
            clock: Arc::new(ManualClock::new(NOW)),
            log: Arc::new(MemoryLog::default()),
            held_locks: Mutex::default(),
            listening: Mutex::default(),
            tick_at: Mutex::default(),
        }))
    }

    #[test]
    fn the_cpu_budget_counts_guest_time_only_and_restarts_per_call() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut host = host(dir.path());
        host.call_budget = Duration::ZERO;
        assert!(
            !host.guest_time_exceeded(),
            "no call running: nothing to interrupt"
        );
        host.begin_call();
        // Spin until the clock visibly moves (no sleeping): the call is now over a zero budget.
        let started = Instant::now();
        while started.elapsed().is_zero() {}
        assert!(host.guest_time_exceeded());
        // Time spent waiting in imports does not count against the guest.
        host.import_time = Duration::from_secs(3600);
        assert!(!host.guest_time_exceeded());
        // A new call starts with a clean slate.
        host.begin_call();
        assert_eq!(host.import_time, Duration::ZERO);
        host.call_budget = Duration::from_secs(3600);
        assert!(!host.guest_time_exceeded());
    }
}
