//! `pairing`: the pairing failure budget every session of this host shares
//! ([`crate::sandbox::pairing_budget`]). Not taped: its answers follow from the calls and
//! the recorded clock, so a replayed session's fresh budget answers the same.

use guest::core::pairing_budget::FailureOutcome;

use super::SessionHost;
use crate::wit::pairing;

impl pairing::Host for SessionHost {
    fn closed_since(&mut self) -> wasmtime::Result<Option<u64>> {
        Ok(self.ctx.pairing.lock().closed_since())
    }

    fn record_failure(
        &mut self,
        now_ms: u64,
        per_hour: u32,
    ) -> wasmtime::Result<pairing::FailureOutcome> {
        Ok(
            match self.ctx.pairing.lock().record_failure(now_ms, per_hour) {
                FailureOutcome::Counted => pairing::FailureOutcome::Counted,
                FailureOutcome::JustClosed => pairing::FailureOutcome::JustClosed,
                FailureOutcome::CountedWhileClosed => pairing::FailureOutcome::CountedWhileClosed,
            },
        )
    }

    fn refused_unjudged(&mut self) -> wasmtime::Result<()> {
        self.ctx.pairing.lock().refused_unjudged();
        Ok(())
    }

    fn reopen(&mut self) -> wasmtime::Result<()> {
        self.ctx.pairing.lock().reopen();
        Ok(())
    }

    fn view(&mut self, now_ms: u64) -> wasmtime::Result<pairing::BudgetView> {
        let view = self.ctx.pairing.lock().view(now_ms);
        Ok(pairing::BudgetView {
            failures_last_hour: view.failures_last_hour,
            closed_since_ms: view.closed_at,
            unjudged: view.unjudged,
        })
    }
}
