//! The one pairing failure budget for every session this process runs (its import,
//! `wit/pairing.wit`, is served in `imports`).
//!
//! A `serve` broker gives all its sessions the same [`PairingBudget`]; without that, a stranger
//! guessing codes at a shared bot with ten sessions was judged ten budgets' worth of times an hour
//! (docs/security.md#pairing). `run` and `attach` serve one session, so theirs is that session's
//! alone. A cluster's nodes each keep their own (a node is one process).
//!
//! The budget lives in memory: a stranger cannot restart the host, and an operator who
//! does is as good as one asking for a fresh code. A replay gives each replayed session a
//! fresh budget; its answers follow from the recorded clock, so a one-session recording
//! replays the same.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use guest::core::pairing_budget::FailureBudget;

/// The failure budget the sessions of one host share; clones are the same budget.
#[derive(Debug, Clone, Default)]
pub struct PairingBudget(Arc<Mutex<FailureBudget>>);

impl PairingBudget {
    /// The budget, even after a panic elsewhere while it was held: it is a few counters
    /// that every update leaves consistent, and refusing to judge would lock the real user
    /// out.
    pub fn lock(&self) -> MutexGuard<'_, FailureBudget> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
