//! What the Discord transport, its gateway and its delivery task share: the REST client and
//! the counters `diagnose` reports. Below the transport and the gateway, so the gateway need
//! not import the transport that starts it.

use std::sync::{Mutex, MutexGuard};

use transport_core::presses::Presses;
use transport_core::sync::lock;

use crate::client::RestApi;

/// What answers one taken click privately: its application and interaction token.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PressToken {
    /// `application_id` of the interaction (the follow-up's webhook id).
    pub(crate) application_id: String,
    /// The interaction's id (the follow-up's rate-limit resource; never the token).
    pub(crate) interaction_id: String,
    /// The interaction token: a credential for 15 minutes, never logged.
    pub(crate) token: String,
}

impl std::fmt::Debug for PressToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PressToken")
            .field("application_id", &self.application_id)
            .field("interaction_id", &self.interaction_id)
            .field("token", &"<hidden>")
            .finish()
    }
}

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
    /// Taken clicks the bridge may still answer privately (a follow-up within the
    /// token's 15 minutes), by the press id their envelope carries.
    pub(crate) presses: Presses<PressToken>,
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
