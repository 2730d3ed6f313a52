//! The one pairing failure budget for every session this process runs (its import,
//! `wit/pairing.wit`, is served in `imports`).
//!
//! A `serve` broker gives all its sessions the same [`PairingBudget`]; without that, a stranger
//! guessing codes at a shared bot with ten sessions was judged ten budgets' worth of times an hour
//! (docs/security.md#pairing). `run` and `attach` serve one session, so theirs is that session's
//! alone. A cluster's nodes each keep their own (a node is one process).
//!
//! The budget is kept in the state database (`meta`, under a name per host: `serve`'s, or
//! the session's for `run` and `attach`) at every change, and read back at start: a host
//! killed and started again must not hand a guesser a fresh budget. Each change is written
//! with the next commit without waiting for it, so a `kill -9` may lose the last few
//! milliseconds of it. A replay gives each replayed session a fresh, unkept budget; its
//! answers follow from the recorded clock, so a one-session recording replays the same.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use guest::core::pairing_budget::FailureBudget;

use crate::disk::state_db::StateDb;

/// The failure budget the sessions of one host share; clones are the same budget.
#[derive(Clone, Default)]
pub struct PairingBudget {
    budget: Arc<Mutex<FailureBudget>>,
    /// Where each change is kept, and under which name; none in replays and tests.
    keeper: Option<(Arc<StateDb>, String)>,
}

impl std::fmt::Debug for PairingBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairingBudget")
            .field("budget", &*self.lock())
            .field("kept_as", &self.keeper.as_ref().map(|(_, name)| name))
            .finish()
    }
}

impl PairingBudget {
    /// The budget kept in `state` under `pairing-budget:<scope>`, as it was left, with a
    /// warning for the person when what was kept could not be read (the budget then
    /// starts fresh: closing pairing for good would lock the real user out, and
    /// `/connect pair` is the way back either way).
    pub fn kept_in(state: Arc<StateDb>, scope: &str) -> (PairingBudget, Option<String>) {
        let name = format!("pairing-budget:{scope}");
        let (budget, warning) = match state.kept(&name) {
            Ok(None) => (FailureBudget::default(), None),
            Ok(Some(text)) => match FailureBudget::from_stored(&text) {
                Ok(budget) => (budget, None),
                Err(why) => (
                    FailureBudget::default(),
                    Some(format!(
                        "the kept pairing failure budget ({name}) could not be read ({why}); \
                         it starts fresh"
                    )),
                ),
            },
            Err(error) => (
                FailureBudget::default(),
                Some(format!(
                    "the kept pairing failure budget ({name}) could not be read ({error}); it \
                     starts fresh"
                )),
            ),
        };
        (
            PairingBudget {
                budget: Arc::new(Mutex::new(budget)),
                keeper: Some((state, name)),
            },
            warning,
        )
    }

    /// The budget, even after a panic elsewhere while it was held: it is a few counters
    /// that every update leaves consistent, and refusing to judge would lock the real user
    /// out.
    pub fn lock(&self) -> MutexGuard<'_, FailureBudget> {
        self.budget.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the budget with `change` and keeps the result.
    pub fn update<R>(&self, change: impl FnOnce(&mut FailureBudget) -> R) -> R {
        let mut budget = self.lock();
        let result = change(&mut budget);
        if let Some((state, name)) = &self.keeper {
            state.keep(name, budget.to_stored());
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &std::path::Path) -> Arc<StateDb> {
        Arc::new(StateDb::open(&dir.join("state.json"), 0).expect("opens").0)
    }

    #[test]
    fn a_budget_closed_before_a_restart_is_closed_after_it() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (budget, warning) = PairingBudget::kept_in(open(dir.path()), "serve");
            assert_eq!(warning, None);
            for at in [10, 20, 30] {
                budget.update(|b| b.record_failure(at, 3));
            }
            budget.update(FailureBudget::refused_unjudged);
            assert_eq!(budget.lock().closed_since(), Some(30));
            // Dropping the last handle ends the writer after its last commit.
        }
        let (again, warning) = PairingBudget::kept_in(open(dir.path()), "serve");
        assert_eq!(warning, None);
        let view = again.lock().view(40);
        assert_eq!(
            (view.failures_last_hour, view.closed_at, view.unjudged),
            (3, Some(30), 1)
        );
        // Another host's budget is its own.
        let (other, _) = PairingBudget::kept_in(open(dir.path()), "session:k");
        assert_eq!(other.lock().closed_since(), None);
    }

    #[test]
    fn an_unreadable_kept_budget_starts_fresh_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let state = open(dir.path());
        state.keep("pairing-budget:serve", "{\"failures\":\"x\"}".into());
        drop(state);
        let (budget, warning) = PairingBudget::kept_in(open(dir.path()), "serve");
        assert!(
            warning
                .as_deref()
                .is_some_and(|w| w.contains("starts fresh")),
            "{warning:?}"
        );
        assert_eq!(budget.lock().closed_since(), None);
    }
}
