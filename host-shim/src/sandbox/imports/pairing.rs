//! `pairing`: the pairing failure budget every session of this host shares
//! ([`crate::sandbox::pairing_budget`]). Not taped: its answers follow from the calls and
//! the recorded clock, so a replayed session's fresh budget answers the same.

use guest::core::pairing_budget::FailureOutcome;

use wasmtime::component::HasData;

use super::SessionContext;
use crate::local::logging::{LogLine, LogSink};
use crate::sandbox::pairing_budget::PairingBudget;
use crate::wit::pairing;
use crate::wit::types::Level;

/// What the pairing calls may touch: the host's budget and log, and no tape.
pub struct PairingPart<'a> {
    budget: &'a PairingBudget,
    /// The session's key and log: a wrong code is a line of its own, which the operator's
    /// metrics count (`pairing{outcome="wrong"}`) and which shows a guesser at work.
    key: &'a str,
    log: &'a dyn LogSink,
}

/// The pairing interface's view, for the linker.
pub struct PairingImports;

impl HasData for PairingImports {
    type Data<'a> = PairingPart<'a>;
}

impl SessionContext {
    /// The pairing interface's view of this session.
    pub fn pairing_imports(&mut self) -> PairingPart<'_> {
        PairingPart {
            budget: &self.pairing,
            key: &self.key,
            log: &*self.log,
        }
    }
}

impl pairing::Host for PairingPart<'_> {
    fn closed_since(&mut self) -> wasmtime::Result<Option<u64>> {
        Ok(self.budget.lock().closed_since())
    }

    fn record_failure(
        &mut self,
        now_ms: u64,
        per_hour: u32,
    ) -> wasmtime::Result<pairing::FailureOutcome> {
        let (outcome, name) = match self.budget.update(|b| b.record_failure(now_ms, per_hour)) {
            FailureOutcome::Counted => (pairing::FailureOutcome::Counted, "counted"),
            FailureOutcome::JustClosed => (pairing::FailureOutcome::JustClosed, "just_closed"),
            FailureOutcome::CountedWhileClosed => (
                pairing::FailureOutcome::CountedWhileClosed,
                "counted_while_closed",
            ),
        };
        // Neither the code typed nor who typed it: the guest's own lines name the chat
        // where it decides to.
        self.log.write(
            self.key,
            LogLine::new(
                Level::Warning,
                "wrong pairing code",
                &[("budget", name.to_owned())],
            ),
        );
        Ok(outcome)
    }

    fn refused_unjudged(&mut self) -> wasmtime::Result<()> {
        self.budget.update(|b| b.refused_unjudged());
        Ok(())
    }

    fn reopen(&mut self) -> wasmtime::Result<()> {
        self.budget.update(|b| b.reopen());
        Ok(())
    }

    fn view(&mut self, now_ms: u64) -> wasmtime::Result<pairing::BudgetView> {
        let view = self.budget.lock().view(now_ms);
        Ok(pairing::BudgetView {
            failures_last_hour: view.failures_last_hour,
            closed_since_ms: view.closed_at,
            unjudged: view.unjudged,
        })
    }
}
