//! The failure budget for pairing codes (docs/security.md#pairing): at most
//! `bridge.pairingMaxFailuresPerHour` wrong codes an hour are judged per host, over all
//! its sessions, transports and identities; past that, pairing is closed until an operator
//! asks for a new code at a terminal (`/connect pair`).
//!
//! The host keeps the one [`FailureBudget`] (the `pairing` import, `wit/pairing.wit`) and
//! the bridge asks it: a broker's sessions share one budget, or a guesser facing a shared
//! bot with ten sessions would get ten budgets' worth of guesses. This module is the
//! budget's arithmetic, used natively by the host and by the tests' fake host.
//!
//! Without it a code was replaced after `pairingMaxAttempts` misses, so every admitted
//! message was a fresh one-in-a-million guess and the only brake was the strangers' rate
//! limit: 4.2 % a day from one account, 35 % a day against a broker of ten sessions. With a
//! budget of 10 an hour a 6-digit code holds against at most 240 judged guesses a day.
//!
//! While closed, a guess is not compared with any code at all, so nothing a stranger sends
//! tells them anything (no oracle). The real user is not locked out: a code the operator
//! asks for at the terminal is judged even while closed (each such code still falls after
//! `pairingMaxAttempts` misses, so that exception is bounded by what the operator does,
//! never by what a stranger sends).
//!
//! Time is the caller's `now` (the host's clock import), never the wall clock, so every rule
//! here is a table test.

use std::collections::VecDeque;

/// The window the budget counts failures in.
pub const HOUR_MS: u64 = 3_600_000;

/// The default and the largest accepted `bridge.pairingMaxFailuresPerHour`: with 6 digits
/// that keeps a year of guessing at every allowed moment near 8 % (see the README's odds).
pub const MAX_FAILURES_PER_HOUR: u32 = 10;

/// Most failure times a kept budget is read with; far above what an hour can hold (the
/// budget plus the terminal-code exception).
pub const MAX_KEPT_FAILURES: usize = 1_000;

/// What one recorded failure did to the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureOutcome {
    /// Counted; pairing stays open.
    Counted,
    /// This failure used the last of the budget: pairing is closed now. Returned once per
    /// closing, so the terminal hears it once.
    JustClosed,
    /// Counted while already closed (a guess at a code issued at the terminal).
    CountedWhileClosed,
}

/// The wrong codes of the last hour and whether pairing is closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureBudget {
    /// Times of the wrong codes judged in the last hour, oldest first; at most the budget
    /// plus the bounded terminal-code exception, since older ones are dropped on each use.
    failures: VecDeque<u64>,
    /// When pairing closed, while it is closed.
    closed_at: Option<u64>,
    /// Messages from unpaired senders refused unjudged since pairing closed.
    unjudged: u64,
}

/// What `doctor` shows about the budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetView {
    /// Wrong codes judged in the last hour.
    pub failures_last_hour: u32,
    /// When pairing closed, if it is closed.
    pub closed_at: Option<u64>,
    /// Messages refused unjudged since it closed.
    pub unjudged: u64,
}

impl FailureBudget {
    /// When pairing closed, if it is closed: guesses are not judged then, except at codes
    /// issued at a terminal.
    pub fn closed_since(&self) -> Option<u64> {
        self.closed_at
    }

    /// Records one wrong code judged at `now` against a budget of `per_hour`.
    pub fn record_failure(&mut self, now: u64, per_hour: u32) -> FailureOutcome {
        self.forget_old(now);
        self.failures.push_back(now);
        if self.closed_at.is_some() {
            return FailureOutcome::CountedWhileClosed;
        }
        if self.failures.len() >= per_hour.max(1) as usize {
            self.closed_at = Some(now);
            self.unjudged = 0;
            return FailureOutcome::JustClosed;
        }
        FailureOutcome::Counted
    }

    /// Counts one message refused unjudged while closed, for `doctor`.
    pub fn refused_unjudged(&mut self) {
        self.unjudged = self.unjudged.saturating_add(1);
    }

    /// The operator asked for a new code at the terminal: pairing opens with a fresh budget.
    /// The failures are forgotten too, or the first wrong code after reopening would close
    /// it again and the real user would be shut out by the stranger who closed it.
    pub fn reopen(&mut self) {
        self.failures.clear();
        self.closed_at = None;
        self.unjudged = 0;
    }

    /// The budget as `doctor` shows it at `now`.
    pub fn view(&self, now: u64) -> BudgetView {
        let recent = self
            .failures
            .iter()
            .filter(|at| now.saturating_sub(**at) < HOUR_MS)
            .count();
        BudgetView {
            failures_last_hour: u32::try_from(recent).unwrap_or(u32::MAX),
            closed_at: self.closed_at,
            unjudged: self.unjudged,
        }
    }

    /// The budget in the shape the host keeps it across restarts (`{"failures": [ms…],
    /// "closedAt": ms|null, "unjudged": n}`): a host killed and started again must not
    /// hand a guesser a fresh budget.
    pub fn to_stored(&self) -> String {
        serde_json::json!({
            "failures": self.failures,
            "closedAt": self.closed_at,
            "unjudged": self.unjudged,
        })
        .to_string()
    }

    /// A budget kept by [`FailureBudget::to_stored`]; a reason for a person when the text is
    /// not one. At most [`MAX_KEPT_FAILURES`] failures are kept (a damaged or forged store
    /// must not make the host allocate without bound).
    pub fn from_stored(text: &str) -> Result<FailureBudget, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|error| format!("not JSON ({error})"))?;
        let failures = value
            .get("failures")
            .and_then(serde_json::Value::as_array)
            .ok_or("no failures list")?;
        let mut kept = VecDeque::with_capacity(failures.len().min(MAX_KEPT_FAILURES));
        for at in failures.iter().take(MAX_KEPT_FAILURES) {
            kept.push_back(at.as_u64().ok_or("a failure time is not a number")?);
        }
        let closed_at = match value.get("closedAt") {
            None | Some(serde_json::Value::Null) => None,
            Some(at) => Some(at.as_u64().ok_or("closedAt is not a number")?),
        };
        let unjudged = value
            .get("unjudged")
            .map_or(Some(0), serde_json::Value::as_u64)
            .ok_or("unjudged is not a number")?;
        Ok(FailureBudget {
            failures: kept,
            closed_at,
            unjudged,
        })
    }

    fn forget_old(&mut self, now: u64) {
        while self
            .failures
            .front()
            .is_some_and(|at| now.saturating_sub(*at) >= HOUR_MS)
        {
            self.failures.pop_front();
        }
    }
}

/// The terminal notice when pairing closes, said once per closing in each session's
/// terminal (the budget is the host's: a guesser at another session of a shared bot may
/// have closed it).
pub fn closed_terminal_notice(per_hour: u32, local_command: &str) -> String {
    format!(
        "Pairing is closed: {per_hour} wrong pairing codes in the last hour, counted over every session this host runs (bridge.pairingMaxFailuresPerHour). \
         Codes sent from chats are no longer checked, so guessing cannot pair anyone. \
         If you are pairing a chat yourself, run /{local_command} pair here for a fresh code; it works at once."
    )
}

/// What an unpaired chat is told while pairing is closed. The same whatever was sent, so it
/// says nothing about any code.
pub fn closed_chat_text(local_command: &str) -> String {
    format!(
        "Pairing is closed after too many wrong codes. The person at the local pi terminal can run /{local_command} pair for a fresh code."
    )
}

/// `doctor`'s line about the budget, with this session's `per_hour`.
pub fn doctor_line(view: &BudgetView, per_hour: u32, now: u64, local_command: &str) -> String {
    match view.closed_at {
        None => format!(
            "- pairing: open, {} wrong code(s) in the last hour over this host's sessions (closes at {per_hour}, bridge.pairingMaxFailuresPerHour)",
            view.failures_last_hour
        ),
        Some(at) => format!(
            "- pairing: CLOSED {} ago after {} wrong codes in an hour; {} message(s) since were not checked. Run /{local_command} pair for a fresh code",
            crate::core::text::format_duration(
                i64::try_from(now.saturating_sub(at)).unwrap_or(i64::MAX)
            ),
            per_hour,
            view.unjudged
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_kept_budget_reads_back_as_it_was_and_damage_is_a_reason() {
        let mut budget = super::FailureBudget::default();
        budget.record_failure(1_000, 2);
        budget.record_failure(2_000, 2);
        budget.refused_unjudged();
        let kept = super::FailureBudget::from_stored(&budget.to_stored()).expect("kept");
        assert_eq!(kept, budget);
        assert_eq!(kept.closed_since(), Some(2_000));
        for bad in [
            "",
            "{}",
            r#"{"failures":["x"]}"#,
            r#"{"failures":[],"closedAt":"y"}"#,
        ] {
            assert!(super::FailureBudget::from_stored(bad).is_err(), "{bad:?}");
        }
        let many = format!(r#"{{"failures":[{}]}}"#, vec!["1"; 5_000].join(","));
        let capped = super::FailureBudget::from_stored(&many).expect("read");
        assert_eq!(
            capped.view(2).failures_last_hour,
            super::MAX_KEPT_FAILURES as u32
        );
    }

    use super::*;

    #[test]
    fn closes_at_the_budget_and_says_so_once() {
        let mut budget = FailureBudget::default();
        for i in 0..9 {
            assert_eq!(budget.record_failure(i, 10), FailureOutcome::Counted, "{i}");
        }
        assert_eq!(budget.closed_since(), None);
        assert_eq!(budget.record_failure(9, 10), FailureOutcome::JustClosed);
        assert!(budget.closed_since().is_some());
        assert_eq!(
            budget.record_failure(10, 10),
            FailureOutcome::CountedWhileClosed
        );
        assert!(budget.closed_since().is_some());
    }

    #[test]
    fn failures_older_than_an_hour_do_not_count() {
        let mut budget = FailureBudget::default();
        for i in 0..9 {
            budget.record_failure(i * 1000, 10);
        }
        // An hour after the first failure it has left the window: nine again, not ten.
        assert_eq!(budget.record_failure(HOUR_MS, 10), FailureOutcome::Counted);
        assert_eq!(budget.view(HOUR_MS).failures_last_hour, 9);
        // One millisecond earlier it would still have counted.
        let mut edge = FailureBudget::default();
        for i in 0..9 {
            edge.record_failure(i * 1000, 10);
        }
        assert_eq!(
            edge.record_failure(HOUR_MS - 1, 10),
            FailureOutcome::JustClosed
        );
    }

    #[test]
    fn staying_closed_does_not_depend_on_time() {
        let mut budget = FailureBudget::default();
        budget.record_failure(0, 1);
        assert!(budget.closed_since().is_some());
        // A day later, still closed: only the operator reopens it.
        assert_eq!(budget.view(86_400_000).failures_last_hour, 0);
        assert!(budget.closed_since().is_some());
    }

    #[test]
    fn reopen_forgets_failures() {
        let mut budget = FailureBudget::default();
        for i in 0..10 {
            budget.record_failure(i, 10);
        }
        budget.refused_unjudged();
        budget.reopen();
        assert_eq!(budget.closed_since(), None);
        assert_eq!(
            budget.view(20),
            BudgetView {
                failures_last_hour: 0,
                closed_at: None,
                unjudged: 0
            }
        );
        assert_eq!(budget.record_failure(21, 10), FailureOutcome::Counted);
    }

    #[test]
    fn a_budget_of_zero_is_treated_as_one() {
        // Config refuses 0; should one slip through, the first failure closes rather than
        // none ever doing so.
        let mut budget = FailureBudget::default();
        assert_eq!(budget.record_failure(0, 0), FailureOutcome::JustClosed);
    }

    #[test]
    fn texts() {
        assert_eq!(
            closed_chat_text("connect"),
            "Pairing is closed after too many wrong codes. The person at the local pi terminal can run /connect pair for a fresh code."
        );
        assert_eq!(
            closed_terminal_notice(10, "connect"),
            "Pairing is closed: 10 wrong pairing codes in the last hour, counted over every session this host runs (bridge.pairingMaxFailuresPerHour). Codes sent from chats are no longer checked, so guessing cannot pair anyone. If you are pairing a chat yourself, run /connect pair here for a fresh code; it works at once."
        );
        let open = BudgetView {
            failures_last_hour: 3,
            closed_at: None,
            unjudged: 0,
        };
        assert_eq!(
            doctor_line(&open, 10, 0, "connect"),
            "- pairing: open, 3 wrong code(s) in the last hour over this host's sessions (closes at 10, bridge.pairingMaxFailuresPerHour)"
        );
        let closed = BudgetView {
            closed_at: Some(1_000),
            unjudged: 9_990,
            ..open
        };
        assert_eq!(
            doctor_line(&closed, 10, 121_000, "connect"),
            "- pairing: CLOSED 2m ago after 10 wrong codes in an hour; 9990 message(s) since were not checked. Run /connect pair for a fresh code"
        );
    }
}
