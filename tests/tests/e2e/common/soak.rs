//! The fault soak (docs/architecture.md#how-it-is-tested): many sessions, each the real component
//! in the real host with its own fake messenger and the demo agent, prompted while faults are
//! injected at random: a platform's 429 with `retry_after`, a 5xx, a dropped connection, a rejected
//! edit, a guest trap, a slow agent, a host restart in the middle of a turn.
//!
//! What it checks, for every prompt: its final reply is delivered exactly once and in
//! order, or the loss is reported (locally, or in the chat as a stopped turn); the agent
//! never gets it twice; no pairing code or token appears in any chat message or log line.
//! It measures resident memory at the start and at the end.
//!
//! Used by `tests/tests/e2e/soak.rs` (a short run in CI) and `tests/examples/soak.rs` (the long
//! run the README describes). Faults are drawn from a seeded generator, so a failing run
//! is repeated with its seed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use host_shim::agent::{Agent, DemoAgent, RecentWork, SignalSender};
use host_shim::disk::lock::LockDir;
use host_shim::disk::state_db::StateDb;
use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::pairing_budget::PairingBudget;
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Limits, Runtime};
use host_shim::sandbox::session::{Built, Session, SessionSpec};
use host_shim::wit::agent::{DeliverAs, PromptImage, SessionInfo};
use host_shim::wit::session::{ConfigContent, ConfigScope, ConfigSource};
use transport_core::{Envelope, OutboundKind, Transport, TransportError};
use transport_testing::fake::{FakeConfig, FakeTransport};

/// A token of a shape the bridge redacts (a GitHub token), put in every prompt: the demo
/// agent quotes the prompt in its reply, so each reply is a chance to leak it.
pub const TOKEN: &str = "ghp_SoakSoakSoakSoakSoakSoakSoakSoak1234";

/// How the bridge tells a chat that work was cut short (its own texts): a card stopped at
/// shutdown or lost to a restart, or prompts taken but never started.
const CUT_SHORT: [&str; 4] = [
    "⊘ stopped: the pi session ended before this turn finished",
    "⊘ interrupted: the pi session restarted before this turn finished",
    "The pi session stopped before it ran",
    "The pi session restarted; ",
];

fn cut_short(text: &str) -> bool {
    CUT_SHORT.iter().any(|line| text.contains(line))
}

/// How long one prompt may take to be answered or reported before it counts as lost.
const PROMPT_WAIT: Duration = Duration::from_secs(30);

/// Remote turns run the demo's tools (so cards move) and nothing limits the pace of a
/// soak's prompts.
const CONFIG: &str = r#"{"bridge":{"remoteToolPolicy":"unrestricted",
    "rateLimit":{"promptsPerMinute":0,"commandsPerMinute":0}}}"#;

/// How big a soak is.
#[derive(Debug, Clone, Copy)]
pub struct SoakConfig {
    /// Sessions, all attached at once.
    pub sessions: usize,
    /// Prompts per session.
    pub prompts: usize,
    /// Chance that a prompt comes with a fault, 0.0–1.0.
    pub fault_rate: f64,
    /// Seed of the fault generator.
    pub seed: u64,
}

/// Kinds of fault, as the figures name them.
pub const FAULTS: [&str; 8] = [
    "429", "5xx", "dropped", "edit", "trap", "slow", "restart", "burst",
];

/// What a soak measured.
#[derive(Debug, Default, Clone)]
pub struct Figures {
    /// Sessions run.
    pub sessions: usize,
    /// Prompts sent.
    pub prompts: usize,
    /// Final replies delivered (once each).
    pub delivered: usize,
    /// Replies not delivered whose loss was reported.
    pub reported: usize,
    /// Replies neither delivered nor reported.
    pub lost: usize,
    /// Replies delivered more than once.
    pub duplicated: usize,
    /// Prompts the agent got more than once.
    pub prompted_twice: usize,
    /// Replies of one session that arrived out of order.
    pub out_of_order: usize,
    /// Chat messages or log lines holding a pairing code or the token.
    pub leaked: usize,
    /// Guest traps the sessions recovered from.
    pub traps_recovered: u32,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, usize>,
    /// Resident memory once every session is attached, KiB.
    pub rss_start_kib: u64,
    /// Resident memory at the end, KiB, every session still attached.
    pub rss_end_kib: u64,
    /// Wall time of the prompting phase.
    pub elapsed: Duration,
    /// What went wrong, for the first few failures (session, prompt, what).
    pub problems: Vec<String>,
}

impl Figures {
    /// The figures as the soak prints them.
    pub fn report(&self) -> String {
        let faults: Vec<String> = FAULTS
            .iter()
            .map(|kind| format!("{kind} {}", self.faults.get(kind).copied().unwrap_or(0)))
            .collect();
        format!(
            "soak: {} sessions, {} prompts in {:.1} s\n\
             faults: {} (traps recovered: {})\n\
             replies: delivered {}, reported {}, lost {}, duplicated {}, out of order {}\n\
             prompts reaching the agent twice: {}; leaked codes or tokens: {}\n\
             resident memory: {} KiB with all sessions attached, {} KiB at the end ({:+.1} %)",
            self.sessions,
            self.prompts,
            self.elapsed.as_secs_f64(),
            faults.join(", "),
            self.traps_recovered,
            self.delivered,
            self.reported,
            self.lost,
            self.duplicated,
            self.out_of_order,
            self.prompted_twice,
            self.leaked,
            self.rss_start_kib,
            self.rss_end_kib,
            growth_percent(self.rss_start_kib, self.rss_end_kib),
        )
    }

    fn merge(&mut self, other: Figures) {
        self.prompts += other.prompts;
        self.delivered += other.delivered;
        self.reported += other.reported;
        self.lost += other.lost;
        self.duplicated += other.duplicated;
        self.prompted_twice += other.prompted_twice;
        self.out_of_order += other.out_of_order;
        self.leaked += other.leaked;
        self.traps_recovered += other.traps_recovered;
        for (kind, n) in other.faults {
            *self.faults.entry(kind).or_default() += n;
        }
        let room = 20usize.saturating_sub(self.problems.len());
        self.problems.extend(other.problems.into_iter().take(room));
    }
}

fn growth_percent(start: u64, end: u64) -> f64 {
    if start == 0 {
        return 0.0;
    }
    (end as f64 - start as f64) * 100.0 / start as f64
}

/// Resident memory of this process, KiB (0 where `/proc` is missing).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

/// A small seeded generator (xorshift64*): the soak must be repeatable from its seed, and
/// the quality of a fault draw does not matter.
#[derive(Debug, Clone)]
pub struct Draw(u64);

impl Draw {
    /// A generator for `seed` (0 is moved off the fixed point).
    pub fn new(seed: u64) -> Self {
        Draw(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// The demo agent, counting what it was given: a prompt that reaches it twice is a bug.
pub(crate) struct CountingAgent {
    /// The agent that runs the turns.
    pub(crate) inner: DemoAgent,
    /// Every prompt handed to it, in order.
    pub(crate) prompts: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Agent for CountingAgent {
    fn attach(&self, signals: SignalSender) {
        self.inner.attach(signals);
    }
    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        if let Ok(mut prompts) = self.prompts.lock() {
            prompts.push(text.clone());
        }
        self.inner.send_prompt(text, deliver_as, images).await
    }
    fn abort(&self) {
        self.inner.abort();
    }
    fn is_idle(&self) -> bool {
        self.inner.is_idle()
    }
    fn session_info(&self) -> SessionInfo {
        self.inner.session_info()
    }
    fn recent_work(&self) -> RecentWork {
        self.inner.recent_work()
    }
}

/// One session under soak: what survives a host restart (its directory, messenger,
/// agent, terminal and log) and the live session.
struct Soaked {
    key: String,
    dir: tempfile::TempDir,
    fake: FakeTransport,
    agent: Arc<CountingAgent>,
    prompts: Arc<Mutex<Vec<String>>>,
    ui: Arc<RecordingUi>,
    log: Arc<MemoryLog>,
    session: Option<Session>,
    /// Pairing codes the terminal showed.
    codes: Vec<String>,
    traps: u32,
    /// The highest prompt number answered, and given to the agent, so far.
    last_reply: Option<usize>,
    last_prompt: Option<usize>,
}

impl Soaked {
    async fn new(index: usize, slow: bool) -> anyhow::Result<Soaked> {
        let key = format!("soak-{index}");
        let mut fake_config = FakeConfig::default();
        fake_config.capabilities.edit = true;
        let prompts = Arc::new(Mutex::new(Vec::new()));
        // A slow agent takes a while per step, so a restart lands in the middle of a turn.
        let pace = if slow {
            Duration::from_millis(40)
        } else {
            Duration::ZERO
        };
        let info = SessionInfo {
            id: key.clone(),
            name: Some(key.clone()),
            cwd: "/work/soak".into(),
            accepts_images: false,
        };
        Ok(Soaked {
            dir: tempfile::tempdir()?,
            fake: FakeTransport::new(fake_config),
            agent: Arc::new(CountingAgent {
                inner: DemoAgent::new(pace, info),
                prompts: prompts.clone(),
            }),
            prompts,
            ui: Arc::new(RecordingUi::default()),
            log: Arc::new(MemoryLog::default()),
            session: None,
            codes: Vec::new(),
            traps: 0,
            last_reply: None,
            last_prompt: None,
            key,
        })
    }

    /// Starts (or restarts, as a new host process would) the session on its state file.
    async fn start(&mut self, runtime: &Arc<Runtime>) -> anyhow::Result<()> {
        let (state, _warnings) = StateDb::open(&self.dir.path().join("state.json"), 1_000)?;
        let transport: Arc<dyn Transport> = Arc::new(self.fake.handle());
        let spec = SessionSpec {
            key: self.key.clone(),
            config_sources: vec![ConfigSource {
                scope: ConfigScope::Global,
                path: "/home/soak/.pi/agent/bot-connect.json".into(),
                content: ConfigContent::Text(CONFIG.into()),
            }],
            platforms: host_shim::factory::declarations(),
            transports: Box::new(move |_requests| Built {
                transports: vec![transport],
                notes: Vec::new(),
            }),
            agent: self.agent.clone(),
            ui: self.ui.clone(),
            state: Arc::new(state),
            locks: LockDir::new(self.dir.path().join("locks")),
            pairing: PairingBudget::default(),
            clock: Arc::new(SystemClock),
            log: self.log.clone(),
            exclusive: true,
            transcript: None,
        };
        self.session = Some(Session::spawn(runtime.clone(), spec).await?);
        Ok(())
    }

    async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(session) = self.session.take() {
            self.traps += session.health().await.map(|h| h.restarts).unwrap_or(0);
            session.shutdown().await?;
        }
        Ok(())
    }

    fn dm(&self, text: &str) -> Envelope {
        let mut envelope = self.fake.envelope(text);
        envelope.conversation_id = "dm-soak".into();
        envelope.user_id = "soaker".into();
        envelope
    }

    async fn say_and_wait(&self, text: &str, expect: &str) -> bool {
        let before = self.fake.sent().len();
        if self.fake.inject(self.dm(text)).await.is_err() {
            return false;
        }
        self.fake
            .wait_for(PROMPT_WAIT, |sent, _| {
                sent[before.min(sent.len())..]
                    .iter()
                    .any(|m| m.message.text.contains(expect))
            })
            .await
    }

    async fn pair(&mut self) -> anyhow::Result<()> {
        if !self.say_and_wait("hello", "not paired").await {
            anyhow::bail!("{}: no pairing answer", self.key);
        }
        let notes = self.ui.notes();
        let code: String = notes
            .iter()
            .rev()
            .find_map(|(_, text)| text.strip_prefix("Messenger pairing code:"))
            .and_then(|rest| rest.split('(').next())
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        if code.is_empty() {
            anyhow::bail!("{}: no pairing code shown locally", self.key);
        }
        self.codes.push(code.clone());
        if !self.say_and_wait(&code, "Paired as").await {
            anyhow::bail!("{}: pairing did not complete", self.key);
        }
        Ok(())
    }

    /// Takes what the session posted, logged and prompted since the last sweep and
    /// checks it at once, so a long soak keeps no history (its memory figure is then the
    /// host's): replies and prompts must come with strictly rising prompt numbers (a
    /// repeat is a duplicate, a smaller one out of order), and no post, edit or log line
    /// may hold the token or a pairing code.
    fn sweep(&mut self, figures: &mut Figures) {
        let (sent, edits) = self.fake.take_records();
        let logs = self.log.take();
        self.ui.take_notes();
        let prompts = self
            .prompts
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        let head = format!("check {}p", self.key);
        let number = |text: &str| -> Option<usize> {
            let rest = &text[text.find(&head)? + head.len()..];
            rest.split(' ').next()?.parse().ok()
        };
        for reply in sent
            .iter()
            .filter(|m| m.message.kind == OutboundKind::Reply)
        {
            let Some(n) = number(&reply.message.text) else {
                continue;
            };
            match self.last_reply {
                Some(last) if n == last => {
                    figures.duplicated += 1;
                    note(figures, &self.key, format!("reply to p{n} delivered again"));
                }
                Some(last) if n < last => {
                    figures.out_of_order += 1;
                    note(figures, &self.key, format!("reply to p{n} after p{last}"));
                }
                _ => self.last_reply = Some(n),
            }
        }
        for prompt in &prompts {
            let Some(n) = number(prompt) else {
                continue;
            };
            if self.last_prompt.is_some_and(|last| n <= last) {
                figures.prompted_twice += 1;
                note(figures, &self.key, format!("the agent got p{n} again"));
            }
            self.last_prompt = Some(self.last_prompt.map_or(n, |last| last.max(n)));
        }
        let chat = sent
            .iter()
            .map(|m| m.message.text.clone())
            .chain(edits.iter().map(|m| m.text.clone()));
        let lines = logs.iter().map(|(_, line)| format!("{line:?}"));
        for text in chat.chain(lines) {
            let leaked = std::iter::once(TOKEN)
                .chain(self.codes.iter().map(String::as_str))
                .find(|secret| text.contains(secret));
            if let Some(secret) = leaked {
                figures.leaked += 1;
                let what = if secret == TOKEN {
                    "the token"
                } else {
                    "a pairing code"
                };
                let shown: String = text.chars().take(160).collect();
                note(figures, &self.key, format!("{what} in {shown:?}"));
            }
        }
    }

    fn local_losses(&self) -> usize {
        self.ui
            .notes()
            .iter()
            .filter(|(_, text)| text.contains("could not be delivered"))
            .count()
    }

    fn stopped_cards(&self) -> usize {
        let sent = self.fake.sent();
        let edits = self.fake.edits();
        sent.iter()
            .map(|m| &m.message.text)
            .chain(edits.iter().map(|m| &m.text))
            .filter(|t| cut_short(t))
            .count()
    }
}

/// Where a prompt ended.
enum Fate {
    Delivered,
    Reported,
    Lost,
}

/// What was reported before a prompt was sent, so its settling counts only what came after.
#[derive(Clone, Copy)]
struct Before {
    losses: usize,
    stopped: usize,
}

/// Sends the prompt numbered by `marker` (holding the token) without waiting.
async fn send(s: &Soaked, marker: &str) -> Before {
    let before = Before {
        losses: s.local_losses(),
        stopped: s.stopped_cards(),
    };
    let _ = s
        .fake
        .inject(s.dm(&format!("check {marker} holding {TOKEN}")))
        .await;
    before
}

/// Sends one prompt and waits until its reply came or its loss was reported.
async fn prompt(s: &Soaked, marker: &str) -> Fate {
    let before = send(s, marker).await;
    settle(s, marker, before).await
}

async fn settle(s: &Soaked, marker: &str, before: Before) -> Fate {
    let Before { losses, stopped } = before;
    let deadline = Instant::now() + PROMPT_WAIT;
    let reported = || s.local_losses() > losses;
    // `soak-1p1 ` must not match `soak-1p10 `.
    let needle = format!("{marker} ");
    loop {
        // The condition sees posts and edits as they land; a local report is a note, not
        // a post, so the wait is cut into short slices that look at the notes too.
        let left = deadline.saturating_duration_since(Instant::now());
        let delivered = std::sync::atomic::AtomicBool::new(false);
        let settled = s
            .fake
            .wait_for(left.min(Duration::from_millis(50)), |sent, edits| {
                delivered.store(
                    sent.iter().any(|m| {
                        m.message.kind == OutboundKind::Reply && m.message.text.contains(&needle)
                    }),
                    std::sync::atomic::Ordering::Relaxed,
                );
                let stopped_now = sent
                    .iter()
                    .map(|m| &m.message.text)
                    .chain(edits.iter().map(|m| &m.text))
                    .filter(|t| cut_short(t))
                    .count();
                delivered.load(std::sync::atomic::Ordering::Relaxed)
                    || stopped_now > stopped
                    || reported()
            })
            .await;
        if settled {
            return if delivered.load(std::sync::atomic::Ordering::Relaxed) {
                Fate::Delivered
            } else {
                Fate::Reported
            };
        }
        if left.is_zero() {
            return Fate::Lost;
        }
    }
}

/// Runs one session's prompts with its faults and checks what happened.
async fn soak_one(
    runtime: Arc<Runtime>,
    mut s: Soaked,
    config: SoakConfig,
    mut draw: Draw,
) -> (Figures, Soaked) {
    let mut figures = Figures::default();
    let mut i = 0;
    while i < config.prompts {
        s.sweep(&mut figures);
        let marker = format!("{}p{i}", s.key);
        let fault = if draw.chance(config.fault_rate) {
            Some(FAULTS[draw.below(FAULTS.len() as u64) as usize])
                // A burst is two prompts: not past the last one.
                .filter(|kind| *kind != "burst" || i + 1 < config.prompts)
        } else {
            None
        };
        if let Some(kind) = fault {
            *figures.faults.entry(kind).or_default() += 1;
        }
        figures.prompts += 1;
        let fate = match fault {
            Some("429") => {
                s.fake.queue_faults([TransportError::RateLimited {
                    retry_after_ms: 20 + draw.below(180),
                }]);
                prompt(&s, &marker).await
            }
            Some("5xx") => {
                s.fake
                    .queue_faults([TransportError::Failed("HTTP 502 Bad Gateway".into())]);
                prompt(&s, &marker).await
            }
            Some("dropped") => {
                s.fake
                    .queue_faults([TransportError::Failed("connection reset by peer".into())]);
                prompt(&s, &marker).await
            }
            Some("edit") => {
                s.fake.queue_faults([TransportError::EditRejected(
                    "message can't be edited".into(),
                )]);
                prompt(&s, &marker).await
            }
            Some("trap") => {
                // Far over the instance's memory cap: lowering it into the guest traps.
                let huge = "x".repeat(40 << 20);
                let _ = s.fake.inject(s.dm(&huge)).await;
                prompt(&s, &marker).await
            }
            Some("slow") => {
                s.agent
                    .inner
                    .set_pace(Duration::from_millis(20 + draw.below(80)));
                let fate = prompt(&s, &marker).await;
                s.agent.inner.set_pace(Duration::ZERO);
                fate
            }
            Some("restart") => {
                // Stop the host while the agent works on the prompt, start it again.
                s.agent.inner.set_pace(Duration::from_millis(40));
                let seen = s.prompts.lock().map(|p| p.len()).unwrap_or(0);
                let before = send(&s, &marker).await;
                let deadline = Instant::now() + PROMPT_WAIT;
                while s.prompts.lock().map(|p| p.len()).unwrap_or(0) == seen
                    && Instant::now() < deadline
                {
                    tokio::task::yield_now().await;
                }
                if let Err(error) = s.stop().await {
                    note(&mut figures, &s.key, format!("shutdown failed: {error}"));
                }
                if let Err(error) = s.start(&runtime).await {
                    note(&mut figures, &s.key, format!("restart failed: {error}"));
                    figures.lost += config.prompts - i;
                    break;
                }
                let fate = settle(&s, &marker, before).await;
                s.agent.inner.set_pace(Duration::ZERO);
                fate
            }
            Some("burst") => {
                // Two prompts back to back: the second queues as a follow-up and its
                // reply must come after the first's.
                let second = format!("{}p{}", s.key, i + 1);
                let before = send(&s, &marker).await;
                let fate = prompt(&s, &second).await;
                let first = settle(&s, &marker, before).await;
                account(&mut figures, &s, &marker, first);
                i += 1;
                figures.prompts += 1;
                account(&mut figures, &s, &second, fate);
                i += 1;
                continue;
            }
            _ => prompt(&s, &marker).await,
        };
        let what = format!("{marker} after {}", fault.unwrap_or("no fault"));
        account(&mut figures, &s, &what, fate);
        i += 1;
    }
    // Still attached: memory is measured with every session alive, then `finish` stops
    // it and judges what it sent.
    (figures, s)
}

/// Stops a soaked session, so its last sends have landed, and sweeps them.
async fn finish(mut figures: Figures, mut s: Soaked) -> Figures {
    if let Err(error) = s.stop().await {
        note(&mut figures, &s.key, format!("shutdown failed: {error}"));
    }
    figures.traps_recovered = s.traps;
    s.sweep(&mut figures);
    figures
}

fn account(figures: &mut Figures, s: &Soaked, marker: &str, fate: Fate) {
    match fate {
        Fate::Delivered => figures.delivered += 1,
        Fate::Reported => figures.reported += 1,
        Fate::Lost => {
            figures.lost += 1;
            note(
                figures,
                &s.key,
                format!(
                    "{marker}: no reply and no report; agent got {} prompt(s); sent {:?}",
                    s.prompts.lock().map(|p| p.len()).unwrap_or(0),
                    texts(s)
                ),
            );
        }
    }
}

fn texts(s: &Soaked) -> Vec<String> {
    s.fake
        .sent()
        .into_iter()
        .rev()
        .take(6)
        .map(|m| m.message.text.chars().take(120).collect())
        .collect()
}

fn note(figures: &mut Figures, key: &str, what: String) {
    if figures.problems.len() < 5 {
        figures.problems.push(format!("{key}: {what}"));
    }
}

/// Runs a soak and returns its figures.
pub async fn run(config: SoakConfig) -> anyhow::Result<Figures> {
    let limits = Limits {
        // Small, so a trap costs a 40 MiB message, not hundreds.
        memory_bytes: 24 << 20,
        // Every session, plus room for replacements after traps.
        max_instances: u32::try_from(config.sessions * 2 + 8).unwrap_or(u32::MAX),
        ..Limits::default()
    };
    let runtime = Arc::new(Runtime::new(EMBEDDED_COMPONENT, limits)?);
    let mut draw = Draw::new(config.seed);
    let mut sessions = Vec::with_capacity(config.sessions);
    for index in 0..config.sessions {
        let mut s = Soaked::new(index, false).await?;
        s.start(&runtime).await?;
        s.pair().await?;
        sessions.push(s);
    }
    let mut figures = Figures {
        sessions: config.sessions,
        rss_start_kib: rss_kib(),
        ..Figures::default()
    };
    let started = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|s| {
            let own = Draw::new(draw.next());
            tokio::spawn(soak_one(runtime.clone(), s, config, own))
        })
        .collect();
    let mut done = Vec::with_capacity(tasks.len());
    for task in tasks {
        done.push(task.await?);
    }
    figures.elapsed = started.elapsed();
    figures.rss_end_kib = rss_kib();
    for (one, s) in done {
        figures.merge(finish(one, s).await);
    }
    Ok(figures)
}
