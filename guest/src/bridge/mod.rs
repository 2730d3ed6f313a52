//! Orchestration: turns envelopes, agent events and commands into effects on the host.
//!
//! The bridge holds the session's configuration and state and applies the pure rules
//! of `core`; every effect (send, notify, save, prompt) goes through [`Host`].

mod approvals;
mod audience;
mod cards;
mod delivery;
mod digest;
mod files_out;
mod inbound;
mod interrupted;
mod local;
mod outbox;
mod pairing;
mod preview;
mod questions;
mod reactions;
mod scope;
mod tracked;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::core::approvals::Approvals;
use crate::core::config::{self, BridgeConfig, FailedClosed};
use crate::core::explain::DecisionLog;
use crate::core::queue::PromptQueue;
use crate::core::rate_limit::RateLimiter;
use crate::core::scope::Scope;
use crate::core::state;
use crate::core::strangers::{StrangerGate, StrangerNotices};
use crate::host::Host;
use crate::keys::ConversationKey;
use crate::model::{
    self, Capabilities, ConfigSource, Configuration, Diagnostics, Level, Note, Platform,
    SessionInfo, SettingValue, StateChanges, ToolDecision, TransportStatus,
};

/// How old another process's lock on a bot must be before it is reclaimed, when the
/// transport's settings do not say (the original's 15 minutes).
const DEFAULT_LOCK_STALE_MS: u64 = 15 * 60 * 1000;

use cards::Turn;
use tracked::Tracked;

/// Where one transport stands.
#[derive(Debug, Clone)]
enum TransportState {
    /// Listening; sends are adapted to these capabilities.
    Running {
        capabilities: Capabilities,
        lock_name: Option<String>,
        bot: String,
    },
    /// Failed to start; the reason is shown by `doctor` (I16).
    Failed(String),
    /// Stopped by `shutdown`.
    Stopped,
}

/// The bridge of one agent session.
#[derive(Debug)]
pub struct Bridge {
    config: BridgeConfig,
    /// Guards held at their strictest value because a config file or value was broken:
    /// said at start, and again by `/connect config` and `doctor` until fixed.
    fail_closed: Vec<FailedClosed>,
    /// Keys a project file set that only the user's own file may
    /// (docs/security.md#project-files-only-narrow): said at start, and listed by `doctor`.
    project_ignored: Vec<String>,
    /// `transports.<id>.lockStaleMs`, by transport id.
    lock_stale_ms: BTreeMap<String, u64>,
    /// The session state, marked when changed: `save` writes only then.
    state: Tracked,
    /// Prompts taken and not yet started, by chat: saved as entries of their own, so a long
    /// queue costs a save nothing more.
    queue: PromptQueue,
    /// The store holds a document for this session (loaded or saved one): until it does, a
    /// save that changed only the queue writes the document too.
    document_stored: bool,
    /// The agent session, read once in `configure`: it does not change while the session
    /// lives, and asking per envelope would cost a host call on the hot path.
    session: SessionInfo,
    /// Getting messages out: the transports, what waits for them, the card's throttle.
    delivery: Delivery,
    /// Who may talk to this session and how much: input budgets, unpaired senders, and the
    /// pairing codes and chats this instance keeps in memory.
    trust: Trust,
    turn: Option<Turn>,
    /// The audience of the last remote turn: a remote turn the host starts without a
    /// prompt from a chat (a retry after a provider error, a continuation after
    /// compaction) answers the same chats (docs/security.md#who-sees-what).
    last_remote_audience: Vec<state::ConversationTarget>,
    /// Chats that steered while no turn was open: they join the next one.
    pending_steers: Vec<state::ConversationTarget>,
    /// The messages of those steers, owed the next turn's reactions.
    pending_steer_marks: Vec<state::PromptMark>,
    /// Transports whose reaction failed once: said once in the log, not per message.
    reactions_failed: BTreeSet<String>,
    /// What the work digest remembers from agent events.
    work: digest::WorkMemory,
    /// What was done with the last inbound messages, for `/connect explain`.
    decisions: DecisionLog,
    /// Tool calls waiting for a decision, with what each is for and who may decide it.
    pending: PendingApprovals,
    /// The scope remote turns start with, compiled from the config in force; each turn
    /// keeps the one it started with (docs/decisions.md#decision-16-scoped-remote-turns).
    scope: Arc<Scope>,
    /// Saving failed before; the person was told once, and is not told again per message.
    save_failure_reported: bool,
    /// The loaded document had pieces dropped: rewrite it at start (see `start`).
    rewrite_on_start: bool,
    shut_down: bool,
}

/// The bridge's way out: what it knows of each transport, the messages waiting for a
/// platform's rate limit, and when the progress card may next be edited.
#[derive(Debug, Default)]
struct Delivery {
    /// What each started transport can do and how it stands, by transport id.
    transports: BTreeMap<String, TransportState>,
    /// Messages waiting for a platform's rate limit to pass.
    outbox: outbox::Outbox,
    /// When the next throttled card update is due.
    card_tick: Option<u64>,
    /// Chats where the platform streams no drafts (a Telegram group): their card shows the
    /// preview instead. Kept for the instance's life, so a group costs one refused call.
    no_drafts: BTreeSet<ConversationKey>,
}

/// What the bridge keeps in memory about who may talk to it and how much: input budgets,
/// unpaired senders' budgets, the plain codes it issued, and the chats waiting while pairing is closed. The state
/// document keeps the pairings themselves (salted hashes).
#[derive(Debug, Default)]
struct Trust {
    /// Paired users' input budgets, per kind and identity (I37).
    rate: RateLimiter,
    /// Budgets for messages from unpaired senders
    /// (docs/decisions.md#decision-18-unpaired-senders-are-bounded).
    stranger_gate: StrangerGate,
    /// What the terminal still has to hear about unpaired senders this minute.
    stranger_notices: StrangerNotices,
    /// The plain pairing codes this instance made and that may still be live, by conversation.
    /// Memory only: the state document keeps salted hashes (docs/security.md#pairing).
    live_codes: BTreeMap<ConversationKey, String>,
    /// Chats whose code was replaced at start; their next message is told so.
    reissued: BTreeSet<ConversationKey>,
    /// The closing of the host's pairing budget (when it closed) this session's terminal
    /// was told of. The budget itself is the host's (the `pairing` import), shared by
    /// every session it runs; another session's guesser may close it, and this terminal
    /// must still hear it once, or its operator would not know why their chat is refused.
    closing_told: Option<u64>,
    /// Chats whose live code the operator asked for at the terminal while pairing was
    /// closed: judged even while it is closed, so the real user is never locked out.
    terminal_codes: BTreeSet<ConversationKey>,
    /// Chats that wrote while pairing was closed, with when they last did: the operator's
    /// `/connect pair` gives each a code, so the real user need not write again after it.
    waiting_while_closed: BTreeMap<ConversationKey, u64>,
}

/// Tool calls waiting for approval, and for each what it is for, where it was asked and
/// the arguments it runs with once approved.
#[derive(Debug, Default)]
struct PendingApprovals {
    /// Tool calls waiting for approval from the terminal or the phone.
    approvals: Approvals,
    /// Ids handed out when the host's randomness kept repeating pending ones.
    fallback: u64,
    /// What each pending approval is for, as the digest names it.
    subjects: BTreeMap<String, String>,
    /// Where each pending approval was asked: only those chats hear the verdict and may
    /// answer it (a chat that did not start the turn never sees its requests).
    audiences: BTreeMap<String, Vec<state::ConversationTarget>>,
    /// Arguments a pending approval's call runs with once approved (a narrowed search).
    narrowing: BTreeMap<String, Vec<(String, String)>>,
    /// Questions the agent asked that wait for an answer (docs/pi.md#questions-pi-asks).
    questions: crate::core::questions::Questions,
    /// Each approval's request messages and what they asked, so the outcome replaces the
    /// buttons in place once it is decided (kept until then, and for `/details`).
    requests: BTreeMap<String, approvals::Request>,
}

impl Default for Bridge {
    fn default() -> Self {
        Bridge::new()
    }
}

impl Bridge {
    /// A bridge with default configuration and empty state; `configure` loads both.
    pub fn new() -> Self {
        Bridge {
            config: BridgeConfig::default(),
            fail_closed: Vec::new(),
            project_ignored: Vec::new(),
            lock_stale_ms: BTreeMap::new(),
            state: Tracked::default(),
            queue: PromptQueue::default(),
            document_stored: false,
            session: SessionInfo {
                id: String::new(),
                name: None,
                cwd: String::new(),
                accepts_images: false,
            },
            delivery: Delivery::default(),
            trust: Trust::default(),
            turn: None,
            last_remote_audience: Vec::new(),
            pending_steers: Vec::new(),
            pending_steer_marks: Vec::new(),
            reactions_failed: BTreeSet::new(),
            work: digest::WorkMemory::default(),
            decisions: DecisionLog::default(),
            pending: PendingApprovals::default(),
            scope: Arc::new(Scope::new(
                BridgeConfig::default().remote_tool_policy,
                BridgeConfig::default().remote_tool_approval,
                None,
            )),
            save_failure_reported: false,
            rewrite_on_start: false,
            shut_down: false,
        }
    }

    /// Validates the configuration files and loads this session's saved state. Never
    /// fails: problems become notes and the bad field keeps its default (I16).
    pub fn configure(
        &mut self,
        host: &mut dyn Host,
        sources: &[ConfigSource],
        platforms: &[Platform],
    ) -> Configuration {
        let loaded = config::load_config(sources, platforms);
        self.config = loaded.bridge;
        let scope = Scope::new(
            self.config.remote_tool_policy,
            self.config.remote_tool_approval,
            self.config.remote_scope.as_ref(),
        );
        self.scope = Arc::new(if self.config.inbox.enabled {
            scope.with_readable_inbox(&self.config.inbox.dir)
        } else {
            scope
        });
        self.fail_closed = loaded.fail_closed;
        self.project_ignored = loaded.project_ignored;
        self.lock_stale_ms = loaded
            .transports
            .iter()
            .filter_map(|request| match request.setting("lockStaleMs")? {
                SettingValue::Integer(ms) => Some((request.id.clone(), u64::try_from(*ms).ok()?)),
                _ => None,
            })
            .collect();
        let mut notes = loaded.notes;
        self.session = host.session_info();
        let mut cleaned = false;
        if let Some(saved) = host.load_state() {
            let (state, mut warnings) =
                state::parse_session_state(&saved.document, &self.session.id);
            self.state = Tracked::clean(state);
            self.document_stored = true;
            let (mut queue, queue_warnings) =
                PromptQueue::load(&saved.queued, &format!("sessions.{}", self.session.id));
            warnings.extend(queue_warnings);
            let (legacy, legacy_warnings) =
                state::parse_legacy_queue(&saved.document, &self.session.id);
            warnings.extend(legacy_warnings);
            // A queue kept inside the document by an older version becomes entries; the
            // document is rewritten without it at start.
            // Both go in one save, so the entries are never adopted twice.
            if !legacy.is_empty() {
                queue.adopt(legacy);
                Tracked::mark_changed(&mut self.state);
                cleaned = true;
            }
            self.queue = queue;
            cleaned |= !warnings.is_empty();
            notes.extend(warnings.into_iter().map(|w| Note::new(Level::Warning, w)));
        }
        self.rewrite_on_start = cleaned;
        Configuration {
            notes,
            transports: loaded.transports,
            local_command: self.config.local_command.clone(),
        }
    }

    /// Identifies, locks and starts each transport in order. A transport that fails is
    /// recorded and reported and never stops the others (I15, I16).
    pub fn start(&mut self, host: &mut dyn Host, transports: &[String]) -> Vec<Note> {
        let mut notes = Vec::new();
        for id in transports {
            let stale_after_ms = self
                .lock_stale_ms
                .get(id)
                .copied()
                .unwrap_or(DEFAULT_LOCK_STALE_MS);
            let state = match Self::start_one(host, id, stale_after_ms) {
                Ok(running) => {
                    if let TransportState::Running { bot, .. } = &running {
                        host.log(
                            Level::Info,
                            "transport started",
                            &[("transport", id.clone()), ("bot", bot.clone())],
                        );
                    }
                    running
                }
                Err(reason) => {
                    notes.push(Note::new(
                        Level::Error,
                        format!("{id} failed to start: {reason}"),
                    ));
                    host.log(
                        Level::Error,
                        "transport failed to start",
                        &[("transport", id.clone())],
                    );
                    TransportState::Failed(reason)
                }
            };
            self.delivery.transports.insert(id.clone(), state);
        }
        self.reissue_live_codes(host);
        self.tell_what_was_lost(host);
        // A document that loaded with pieces dropped (say, a plain-text code from an older
        // version) is rewritten once a transport runs, so what was dropped leaves the disk.
        // A session that starts none (`doctor`) writes nothing.
        if self.rewrite_on_start
            && self
                .delivery
                .transports
                .values()
                .any(|t| matches!(t, TransportState::Running { .. }))
        {
            self.rewrite_on_start = false;
            Tracked::mark_changed(&mut self.state);
            self.save(host);
        }
        notes
    }

    fn start_one(
        host: &mut dyn Host,
        id: &str,
        stale_after_ms: u64,
    ) -> Result<TransportState, String> {
        let identity = host.identify(id)?;
        if let Some(lock) = &identity.lock_name {
            host.acquire_lock(lock, stale_after_ms)?;
        }
        if let Err(reason) = host.listen(id) {
            // A failed start must not leave the credential locked (I15).
            if let Some(lock) = &identity.lock_name {
                host.release_lock(lock);
            }
            return Err(reason);
        }
        Ok(TransportState::Running {
            capabilities: identity.capabilities,
            lock_name: identity.lock_name,
            bot: identity.bot_name,
        })
    }

    /// The card says what happened: a blocked call is shown blocked, never as run.
    pub(super) fn show_verdict(
        &mut self,
        host: &mut dyn Host,
        tool: &str,
        decision: &ToolDecision,
    ) {
        let turn = self.turn_or_adopt();
        match decision {
            ToolDecision::Block(_) => {
                turn.block_tool(tool);
                host.log(
                    Level::Info,
                    "remote tool call blocked",
                    &[("tool", tool.to_string())],
                );
                self.refresh_cards(host, false);
            }
            ToolDecision::Allow | ToolDecision::Narrowed(_) => turn.allow_tool(tool),
        }
    }

    /// Health of transports and state, for `doctor`. Never contains a token.
    pub fn diagnostics(&mut self, host: &mut dyn Host) -> Diagnostics {
        let transports = self
            .delivery
            .transports
            .iter()
            .map(|(id, state)| match state {
                TransportState::Running { .. } => TransportStatus {
                    id: id.clone(),
                    state: model::TransportState::Running,
                    detail: Some(host.diagnose(id)),
                },
                TransportState::Failed(reason) => TransportStatus {
                    id: id.clone(),
                    state: model::TransportState::Failed,
                    detail: Some(reason.clone()),
                },
                TransportState::Stopped => TransportStatus {
                    id: id.clone(),
                    state: model::TransportState::Stopped,
                    detail: None,
                },
            })
            .collect();
        let now = host.now_ms();
        Diagnostics {
            transports,
            paired: count(self.state.trusted.len()),
            conversations: count(self.state.conversations.len()),
            // Codes that can still be typed: not expired and not locked.
            pending: count(self.live_code_list(now).len()),
            paused: self.state.paused.iter().map(ToString::to_string).collect(),
            sandbox: Default::default(),
        }
    }

    /// What only this bridge's memory holds now (the WIT `hibernation-holds`): each would
    /// be lost if the instance were dropped and the next booted from the saved state, so a
    /// host hibernates the session only when this is empty.
    pub fn hibernation_holds(&self, host: &mut dyn Host) -> Vec<model::Hold> {
        use model::Hold;
        let now = host.now_ms();
        let ttl_ms = crate::core::pairing::PairingOptions::from_config(&self.config).ttl_ms;
        let waiting_for_code = self
            .trust
            .waiting_while_closed
            .values()
            .any(|at| now.saturating_sub(*at) < ttl_ms);
        [
            (self.turn.is_some(), Hold::Turn),
            (!self.queue.is_empty(), Hold::QueuedPrompts),
            (
                self.pending.approvals.next_deadline().is_some(),
                Hold::Approvals,
            ),
            (
                self.pending.questions.next_deadline().is_some(),
                Hold::Questions,
            ),
            (self.delivery.outbox.next_due().is_some(), Hold::Outbox),
            (self.delivery.card_tick.is_some(), Hold::CardEdit),
            (
                !self.live_code_list(now).is_empty() || waiting_for_code,
                Hold::Pairing,
            ),
            (!self.pending_steers.is_empty(), Hold::Steers),
            (
                Tracked::changed(&self.state) || self.queue.changed(),
                Hold::Unsaved,
            ),
        ]
        .into_iter()
        .filter_map(|(held, hold)| held.then_some(hold))
        .collect()
    }

    /// Releases every lock and saves the state. Safe to call twice.
    pub fn shutdown(&mut self, host: &mut dyn Host) {
        if self.shut_down {
            return;
        }
        self.shut_down = true;
        // Before the transports stop: the chats still hear what will not be done.
        self.tell_what_was_not_done(host);
        for state in self.delivery.transports.values_mut() {
            if let TransportState::Running {
                lock_name: Some(lock),
                ..
            } = state
            {
                host.release_lock(lock);
            }
            if matches!(state, TransportState::Running { .. }) {
                *state = TransportState::Stopped;
            }
        }
        // Replies still waiting out a rate limit cannot go now; the terminal hears of them
        // rather than losing them in silence.
        for (key, replies) in self.delivery.outbox.drain_replies() {
            host.notify(
                Level::Warning,
                &format!(
                    "{replies} reply message(s) to {key} were still waiting for the platform's rate limit and were not sent."
                ),
            );
        }
        self.save(host);
    }

    /// Persists the state document; a failure is told to the person once.
    fn save(&mut self, host: &mut dyn Host) {
        // Unchanged since loaded or saved: nothing to write, and nothing serialised to find
        // that out (docs/decisions.md#decision-18-unpaired-senders-are-bounded — every
        // stranger's message used to rewrite the whole document; comparing serialised copies
        // instead cost a whole serialisation per envelope).
        let document_changed = Tracked::changed(&self.state);
        if !document_changed && !self.queue.changed() {
            return;
        }
        let document = (document_changed || !self.document_stored).then(|| {
            self.state.updated_at = host.now_ms();
            state::serialize_session_state(&self.state)
        });
        let queue = self.queue.changes();
        let changes = StateChanges {
            document,
            dequeued: queue.dequeued,
            enqueued: queue.enqueued,
        };
        match host.save_state(&changes) {
            Ok(()) => {
                self.save_failure_reported = false;
                self.document_stored |= changes.document.is_some();
                Tracked::saved(&mut self.state);
                self.queue.saved();
            }
            Err(reason) => {
                host.log(Level::Error, "state not saved", &[]);
                if !self.save_failure_reported {
                    self.save_failure_reported = true;
                    host.notify(
                        Level::Error,
                        &format!("could not save the bridge state: {reason}. Pairing will not survive a restart."),
                    );
                }
            }
        }
    }

    fn capabilities(&self, transport: &str) -> Option<Capabilities> {
        match self.delivery.transports.get(transport) {
            Some(TransportState::Running { capabilities, .. }) => Some(*capabilities),
            _ => None,
        }
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
