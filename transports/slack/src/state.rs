//! What the Slack transport, its listener, its connections and its dispatcher share: the Web
//! API client and the counters `diagnose` reports. Below all of them, so the listener and the
//! sockets need not import the transport that starts them.

use std::sync::{Mutex, MutexGuard};

use transport_core::presses::Presses;
use transport_core::sync::lock;

use crate::client::WebApi;

/// Where Socket Mode stands, for `diagnose`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum SocketState {
    #[default]
    NotStarted,
    Connecting,
    Connected,
    Refreshing,
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
    pub(crate) state: SocketState,
    pub(crate) open_connections: usize,
    pub(crate) connections_opened: u64,
    pub(crate) refreshes: u64,
    pub(crate) last_disconnect: Option<String>,
    pub(crate) acked: u64,
    pub(crate) unreadable_frames: u64,
    pub(crate) received: u64,
    pub(crate) ignored: u64,
    pub(crate) duplicates: u64,
    pub(crate) connect_failures: u64,
    pub(crate) sent: u64,
    pub(crate) edited: u64,
    pub(crate) rate_limited: u64,
    pub(crate) clicks_refused: u64,
    pub(crate) last_error: Option<String>,
    pub(crate) last_skip: Option<String>,
}

impl Stats {
    pub(crate) fn connecting(&mut self) {
        if !matches!(
            self.state,
            SocketState::Retrying { .. } | SocketState::Refreshing
        ) {
            self.state = SocketState::Connecting;
        }
    }

    pub(crate) fn connected(&mut self, open: usize) {
        self.state = SocketState::Connected;
        self.open_connections = open;
    }

    pub(crate) fn refreshing(&mut self) {
        self.state = SocketState::Refreshing;
        self.refreshes += 1;
    }

    pub(crate) fn retrying(&mut self, error: &str, failures: u32) {
        self.state = SocketState::Retrying { failures };
        self.connect_failures += 1;
        self.last_error = Some(error.to_owned());
    }

    pub(crate) fn halted(&mut self, reason: &str) {
        self.state = SocketState::Halted(reason.to_owned());
        self.last_error = Some(reason.to_owned());
    }
}

/// What the transport, its listener, its connections and its dispatcher share.
pub(crate) struct Shared {
    pub(crate) api: WebApi,
    pub(crate) stats: Mutex<Stats>,
    /// Taken clicks the bridge may still answer privately, by the press id their
    /// envelope carries: where (`channel`, thread) and to whom (`chat.postEphemeral`).
    pub(crate) presses: Presses<Clicked>,
}

/// Where a taken click happened and who clicked: what `chat.postEphemeral` needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Clicked {
    pub(crate) channel: String,
    pub(crate) thread_ts: Option<String>,
    pub(crate) user: String,
}

impl Shared {
    pub(crate) fn stats(&self) -> MutexGuard<'_, Stats> {
        // A panic elsewhere must not turn diagnose into a second panic.
        lock(&self.stats)
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut Stats)) {
        change(&mut self.stats());
    }
}
