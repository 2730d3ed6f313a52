//! What the Discord transport, its gateway and its delivery task share: the REST client and
//! the counters `diagnose` reports. Below the transport and the gateway, so the gateway need
//! not import the transport that starts it.

use std::sync::{Mutex, MutexGuard};

use transport_core::sync::lock;

use crate::client::RestApi;

/// Where the gateway stands, for `diagnose`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum GatewayState {
    #[default]
    NotStarted,
    Connecting,
    Identifying,
    Resuming,
    Ready,
    Reconnecting {
        failures: u32,
        reason: String,
    },
    Halted(String),
    Stopped,
}

/// Counters and the last problems, for `diagnose`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) bot: Option<String>,
    pub(crate) state: GatewayState,
    pub(crate) resumable: bool,
    pub(crate) seq: Option<u64>,
    pub(crate) last_close: Option<(u16, String)>,
    pub(crate) received: u64,
    pub(crate) ignored: u64,
    pub(crate) duplicates: u64,
    pub(crate) queued: u64,
    pub(crate) malformed_frames: u64,
    pub(crate) connections: u64,
    pub(crate) identifies: u64,
    pub(crate) resumes: u64,
    pub(crate) reconnects: u64,
    pub(crate) sent: u64,
    pub(crate) edited: u64,
    pub(crate) typing_failures: u64,
    pub(crate) clicks_taken: u64,
    pub(crate) clicks_refused: u64,
    pub(crate) click_ack_failures: u64,
    pub(crate) last_error: Option<String>,
    pub(crate) last_skip: Option<String>,
}

/// What the transport, its gateway and its delivery task share.
pub(crate) struct Shared {
    pub(crate) api: RestApi,
    pub(crate) stats: Mutex<Stats>,
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
