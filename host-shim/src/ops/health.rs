//! Readiness (`/readyz`): named checks, each passing or failing with a reason a person can act
//! on. The process decides which checks it has (the broker's bots, a node's NATS connection and
//! locks); this file only judges and renders them.

/// One readiness check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What is checked (`bot telegram`, `nats`): no user id, chat id or token.
    pub name: String,
    /// `Err` says why it is not ready.
    pub result: Result<(), String>,
}

impl Check {
    /// A check named `name` with its result.
    pub fn new(name: impl Into<String>, result: Result<(), String>) -> Check {
        Check {
            name: name.into(),
            result,
        }
    }
}

/// Every check passes (no check at all is ready: a process with nothing to wait for).
pub fn all_ok(checks: &[Check]) -> bool {
    checks.iter().all(|check| check.result.is_ok())
}

/// The `/readyz` body: one line per check, `name: ok` or `name: why`, then the verdict.
pub fn render(checks: &[Check]) -> String {
    let mut text = String::new();
    for check in checks {
        match &check.result {
            Ok(()) => text.push_str(&format!("{}: ok\n", check.name)),
            Err(why) => text.push_str(&format!("{}: {why}\n", check.name)),
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
            Check::new("nats", Ok(())),
            Check::new("bot telegram", Err("held by node b".into())),
        ];
        assert!(!all_ok(&checks));
        assert_eq!(
            render(&checks),
            "nats: ok\nbot telegram: held by node b\nnot ready\n"
        );
        assert!(all_ok(&checks[..1]));
    }
}
