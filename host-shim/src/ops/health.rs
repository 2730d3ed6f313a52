//! Readiness (`/readyz`): named checks, each ready or not with a detail a person can act on.
//! The process decides which checks it has (the broker's bots, a node's NATS connection and
//! locks); this file only judges and renders them.

/// One readiness check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What is checked (`bot telegram`, `nats`): no user id, chat id or token.
    pub name: String,
    /// Whether it lets the process serve.
    pub ready: bool,
    /// Why, in a few words (`held here`, `standing by`, `disconnected`).
    pub detail: String,
}

impl Check {
    /// A passing check.
    pub fn ready(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            ready: true,
            detail: detail.into(),
        }
    }

    /// A failing check; `why` says what to look at.
    pub fn not_ready(name: impl Into<String>, why: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            ready: false,
            detail: why.into(),
        }
    }
}

/// Every check passes (no check at all is ready: a process with nothing to wait for).
pub fn all_ok(checks: &[Check]) -> bool {
    checks.iter().all(|check| check.ready)
}

/// The `/readyz` body: one line per check, `name: ok (detail)` or `name: NOT READY: why`,
/// then the verdict.
pub fn render(checks: &[Check]) -> String {
    let mut text = String::new();
    for check in checks {
        if check.ready {
            text.push_str(&format!("{}: ok ({})\n", check.name, check.detail));
        } else {
            text.push_str(&format!("{}: NOT READY: {}\n", check.name, check.detail));
        }
    }
    text.push_str(if all_ok(checks) {
        "ready\n"
    } else {
        "not ready\n"
    });
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_failing_check_makes_the_process_not_ready() {
        let checks = vec![
            Check::ready("nats", "connected"),
            Check::not_ready("bot telegram", "cannot reach its lock"),
        ];
        assert!(!all_ok(&checks));
        assert_eq!(
            render(&checks),
            "nats: ok (connected)\nbot telegram: NOT READY: cannot reach its lock\nnot ready\n"
        );
        assert!(all_ok(&checks[..1]));
    }
}
