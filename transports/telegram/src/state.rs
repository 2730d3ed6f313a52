//! What the Telegram transport and its long poll share: the Bot API client, the counters
//! `diagnose` reports, and the offset kept across a stop and start. Below both, so the
//! listener need not import the transport that starts it.

use std::sync::{Mutex, MutexGuard};

use transport_core::presses::Presses;
use transport_core::sync::lock;

use crate::client::BotApi;
use crate::offset::Offset;

/// Where the long poll stands, for `diagnose`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum PollState {
    #[default]
    NotStarted,
    Polling,
    Retrying {
        failures: u32,
    },
    Halted(String),
    Stopped,
}

/// Counters and the last problems, for `diagnose`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) bot: Option<String>,
    pub(crate) state: PollState,
    pub(crate) offset: Option<i64>,
    pub(crate) received: u64,
    pub(crate) ignored: u64,
    pub(crate) sent: u64,
    pub(crate) edited: u64,
    pub(crate) plain_resends: u64,
    pub(crate) poll_failures: u64,
    pub(crate) typing_failures: u64,
    pub(crate) last_error: Option<String>,
    pub(crate) last_skip: Option<String>,
}

impl Stats {
    pub(crate) fn polling(&mut self, offset: Option<i64>) {
        self.state = PollState::Polling;
        self.offset = offset;
    }

    pub(crate) fn retrying(&mut self, error: &str, failures: u32) {
        self.state = PollState::Retrying { failures };
        self.poll_failures += 1;
        self.last_error = Some(error.to_owned());
    }

    pub(crate) fn halted(&mut self, reason: &str) {
        self.state = PollState::Halted(reason.to_owned());
        self.last_error = Some(reason.to_owned());
    }
}

/// What the transport and its listener share.
pub(crate) struct Shared {
    pub(crate) api: BotApi,
    pub(crate) stats: Mutex<Stats>,
    /// The listener's offset, kept across a stop and start in the same process.
    pub(crate) offset: Mutex<Option<Offset>>,
    /// Presses handed to the bridge and not answered yet: press id → `callback_query.id`.
    /// A query is answered once, so the bridge's private answer must come before the
    /// listener's plain one (which follows once the bridge is done with the press).
    pub(crate) presses: Presses<String>,
}

impl Shared {
    pub(crate) fn stats(&self) -> MutexGuard<'_, Stats> {
        // A panic elsewhere must not turn diagnose into a second panic.
        lock(&self.stats)
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut Stats)) {
        change(&mut self.stats());
    }

    pub(crate) fn remember_offset(&self, offset: Offset) {
        *lock(&self.offset) = Some(offset);
    }
}
