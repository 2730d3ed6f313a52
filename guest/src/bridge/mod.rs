//! Orchestration: turns envelopes, agent events and commands into effects on the host.
//!
//! The bridge holds the session's configuration and state and applies the pure rules
//! of `core`; every effect (send, notify, save, prompt) goes through [`Host`].

mod cards;
mod delivery;
mod digest;
mod inbound;
mod local;
mod outbox;

use std::collections::BTreeMap;

use crate::core::config::{self, BridgeConfig};
use crate::core::explain::DecisionLog;
use crate::core::rate_limit::RateLimiter;
use crate::core::state::{self, SessionState};
use crate::core::tool_policy;
use crate::host::Host;
use crate::model::{
    Capabilities, ConfigSource, Configuration, Diagnostics, Level, Note, SessionInfo, ToolDecision,
    TransportStatus, TurnOrigin,
};

use cards::Turn;

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
    state: SessionState,
    /// The agent session, read once in `configure`: it does not change while the session
    /// lives, and asking per envelope would cost a host call on the hot path.
    session: SessionInfo,
    transports: BTreeMap<String, TransportState>,
    rate: RateLimiter,
    turn: Option<Turn>,
    /// What the work digest remembers from agent events.
    work: digest::WorkMemory,
    /// Messages waiting for a platform's rate limit to pass.
    outbox: outbox::Outbox,
    /// What was done with the last inbound messages, for `/connect explain`.
    decisions: DecisionLog,
    /// When the next throttled card update is due.
    card_tick: Option<u64>,
    /// Saving failed before; the person was told once, and is not told again per message.
    save_failure_reported: bool,
    /// The state document as last loaded or saved: shutdown writes only when the state
    /// changed since, so `doctor` on a fresh machine leaves no state file behind.
    persisted: Option<String>,
    shut_down: bool,
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
            state: SessionState::default(),
            session: SessionInfo {
                id: String::new(),
                name: None,
                cwd: String::new(),
                accepts_images: false,
            },
            transports: BTreeMap::new(),
            rate: RateLimiter::default(),
            turn: None,
            work: digest::WorkMemory::default(),
            outbox: outbox::Outbox::default(),
            decisions: DecisionLog::default(),
            card_tick: None,
            save_failure_reported: false,
            persisted: None,
            shut_down: false,
        }
    }

    /// Validates the configuration files and loads this session's saved state. Never
    /// fails: problems become notes and the bad field keeps its default (I16).
    pub fn configure(&mut self, host: &mut dyn Host, sources: &[ConfigSource]) -> Configuration {
        let loaded = config::load_config(sources);
        self.config = loaded.bridge;
        let mut notes = loaded.notes;
        self.session = host.session_info();
        if let Some(document) = host.load_state() {
            let (state, warnings) = state::parse_session_state(&document, &self.session.id);
            self.state = state;
            notes.extend(warnings.into_iter().map(|w| Note::new(Level::Warning, w)));
        }
        self.persisted = Some(state::serialize_session_state(&self.state));
        Configuration {
            notes,
            transports: loaded.transports,
        }
    }

    /// Identifies, locks and starts each transport in order. A transport that fails is
    /// recorded and reported and never stops the others (I15, I16).
    pub fn start(&mut self, host: &mut dyn Host, transports: &[String]) -> Vec<Note> {
        let mut notes = Vec::new();
        for id in transports {
            let state = match Self::start_one(host, id) {
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
            self.transports.insert(id.clone(), state);
        }
        notes
    }

    fn start_one(host: &mut dyn Host, id: &str) -> Result<TransportState, String> {
        let identity = host.identify(id)?;
        if let Some(lock) = &identity.lock_name {
            host.acquire_lock(lock)?;
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

    /// Decides whether a tool call may run: the remote tool policy and approval apply
    /// only to turns that came from a messenger (I34, I39).
    pub fn on_tool_call(&mut self, host: &mut dyn Host, tool: &str) -> ToolDecision {
        // A tool call outside any known turn (say, right after the bridge was restarted)
        // counts as remote: the policy fails closed.
        let remote = self
            .turn
            .as_ref()
            .is_none_or(|t| t.origin == TurnOrigin::Remote);
        let decision = tool_policy::decide_tool_call(
            remote,
            self.config.remote_tool_policy,
            self.config.remote_tool_approval,
            tool,
            &mut |title, message| host.confirm(title, message),
        );
        if let ToolDecision::Block(_) = &decision {
            host.log(
                Level::Info,
                "remote tool call blocked",
                &[("tool", tool.to_string())],
            );
        }
        decision
    }

    /// Health of transports and state, for `doctor`. Never contains a token.
    pub fn diagnostics(&mut self, host: &mut dyn Host) -> Diagnostics {
        let transports = self
            .transports
            .iter()
            .map(|(id, state)| match state {
                TransportState::Running { .. } => TransportStatus {
                    id: id.clone(),
                    status: "running".into(),
                    detail: Some(host.diagnose(id)),
                },
                TransportState::Failed(reason) => TransportStatus {
                    id: id.clone(),
                    status: "error".into(),
                    detail: Some(reason.clone()),
                },
                TransportState::Stopped => TransportStatus {
                    id: id.clone(),
                    status: "stopped".into(),
                    detail: None,
                },
            })
            .collect();
        let now = host.now_ms();
        Diagnostics {
            transports,
            paired: count(self.state.trusted.len()),
            conversations: count(self.state.conversations.len()),
            pending: count(
                self.state
                    .pending
                    .values()
                    .filter(|p| p.expires_at > now)
                    .count(),
            ),
            paused: self.state.paused.iter().cloned().collect(),
            sandbox: Default::default(),
        }
    }

    /// Releases every lock and saves the state. Safe to call twice.
    pub fn shutdown(&mut self, host: &mut dyn Host) {
        if self.shut_down {
            return;
        }
        self.shut_down = true;
        for state in self.transports.values_mut() {
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
        for (key, replies) in self.outbox.drain_replies() {
            host.notify(
                Level::Warning,
                &format!(
                    "{replies} reply message(s) to {key} were still waiting for the platform's rate limit and were not sent."
                ),
            );
        }
        if self.persisted.as_deref() != Some(&state::serialize_session_state(&self.state)) {
            self.save(host);
        }
    }

    /// Persists the state document; a failure is told to the person once.
    fn save(&mut self, host: &mut dyn Host) {
        self.state.updated_at = host.now_ms();
        let document = state::serialize_session_state(&self.state);
        match host.save_state(&document) {
            Ok(()) => {
                self.save_failure_reported = false;
                self.persisted = Some(document);
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
        match self.transports.get(transport) {
            Some(TransportState::Running { capabilities, .. }) => Some(*capabilities),
            _ => None,
        }
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
