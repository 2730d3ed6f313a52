//! What the dashboard shows of the sessions' last decisions and their open approvals
//! (docs/operations.md#dashboard), read from the log lines the bridges already write: why a
//! message was or was not answered (ignored, too long, rate limited, a command turned off,
//! a wrong code, a pairing), and which remote approvals wait for an answer.
//!
//! The lines are the bridge's own account, so the dashboard cannot tell a story the log
//! does not. Values pass through the same redaction and invisible-character filter as the
//! process's log ([`clean`]): a field that quotes a platform error could hold a token.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::{LogLine, clean};

/// Decisions kept: enough to see what just happened to one person's messages, few enough
/// that the page stays one screen.
pub const DECISIONS_KEPT: usize = 25;

/// Open approvals kept: a bridge that asked for this many and heard nothing back is stuck,
/// and the oldest are dropped from the page (never from the bridge, which expires them).
const PENDING_KEPT: usize = 200;

/// The log events that say what a bridge decided about an inbound message.
const DECISION_EVENTS: [&str; 21] = [
    "ignored message",
    "inbound message too long",
    "prompt forwarded",
    "prompt not queued",
    "remote command",
    "remote command turned off",
    "remote input rate limited",
    "paired remote identity",
    "wrong pairing code",
    "pairing closed",
    "pairing reopened",
    "revoked remote pairing",
    "revoked all pairings",
    "button press from an identity that may not answer refused",
    "approval answer from a chat that was not asked refused",
    "approval answer from an untrusted identity refused",
    "question answer from a chat that was not asked refused",
    "question answer from an untrusted identity refused",
    "remote tool call blocked",
    "remote tool call out of scope",
    "message from a transport that is not running",
];

/// One decision as the dashboard lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The session's key (the dashboard shows its name).
    pub session: String,
    /// The event, as the log names it.
    pub event: String,
    /// The line's fields, `key=value`, redacted.
    pub detail: String,
    /// When it was noted, in ms since the epoch (the process's clock): without it an
    /// operator cannot tell a refusal that just happened from one of last night.
    pub at_ms: u64,
}

/// A remote approval asked for and not yet settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    /// The session's key.
    pub session: String,
    /// The tool that waits.
    pub tool: String,
    /// The approval's id, as the chat's buttons name it.
    pub id: String,
}

/// The last decisions and the open approvals, fed line by line.
pub struct Recent {
    book: Mutex<Book>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Recent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recent").field("book", &self.book).finish()
    }
}

impl Default for Recent {
    /// Stamped with the system's clock.
    fn default() -> Recent {
        Recent::new(Arc::new(SystemClock))
    }
}

#[derive(Debug, Default)]
struct Book {
    decisions: VecDeque<Decision>,
    /// By (session, id), with the order they were asked in.
    pending: BTreeMap<(String, String), (u64, String)>,
    asked: u64,
}

impl Recent {
    /// Nothing noted yet; each decision is stamped with `clock`'s time when it is noted.
    pub fn new(clock: Arc<dyn Clock>) -> Recent {
        Recent {
            book: Mutex::default(),
            clock,
        }
    }

    /// Takes note of one line of `session`'s log, if it is a decision or an approval.
    pub fn note(&self, session: &str, line: &LogLine) {
        let field = |name: &str| {
            line.fields
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| clean(value))
        };
        // A poisoned book lost at most the line being noted; the page goes on.
        let mut book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        match line.event.as_str() {
            "remote approval requested" => {
                let (Some(id), Some(tool)) = (field("id"), field("tool")) else {
                    return;
                };
                book.asked += 1;
                let order = book.asked;
                book.pending.insert((session.to_owned(), id), (order, tool));
                if book.pending.len() > PENDING_KEPT
                    && let Some(oldest) = book
                        .pending
                        .iter()
                        .min_by_key(|(_, (order, _))| *order)
                        .map(|(key, _)| key.clone())
                {
                    book.pending.remove(&oldest);
                }
            }
            "remote approval settled" => {
                if let Some(id) = field("id") {
                    book.pending.remove(&(session.to_owned(), id));
                }
            }
            event if DECISION_EVENTS.contains(&event) => {
                let detail = line
                    .fields
                    .iter()
                    .map(|(key, value)| format!("{}={}", clean(key), clean(value)))
                    .collect::<Vec<_>>()
                    .join(" ");
                book.decisions.push_back(Decision {
                    session: session.to_owned(),
                    event: event.to_owned(),
                    detail,
                    at_ms: self.clock.now_ms(),
                });
                while book.decisions.len() > DECISIONS_KEPT {
                    book.decisions.pop_front();
                }
            }
            _ => {}
        }
    }

    /// The last decisions, newest first.
    pub fn decisions(&self) -> Vec<Decision> {
        let book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        book.decisions.iter().rev().cloned().collect()
    }

    /// The open approvals, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        let book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        let mut open: Vec<(u64, PendingApproval)> = book
            .pending
            .iter()
            .map(|((session, id), (order, tool))| {
                (
                    *order,
                    PendingApproval {
                        session: session.clone(),
                        tool: tool.clone(),
                        id: id.clone(),
                    },
                )
            })
            .collect();
        open.sort_by_key(|(order, _)| *order);
        open.into_iter().map(|(_, pending)| pending).collect()
    }

    /// Forgets what a session that went away left open: its approvals died with it.
    pub fn forget_session(&self, session: &str) {
        let mut book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        book.pending.retain(|(key, _), _| key != session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::clock::ManualClock;
    use crate::wit::types::Level;

    fn line(event: &str, fields: &[(&str, &str)]) -> LogLine {
        let fields: Vec<(&str, String)> = fields.iter().map(|(k, v)| (*k, v.to_string())).collect();
        LogLine::new(Level::Info, event, &fields)
    }

    #[test]
    fn decisions_are_kept_newest_first_up_to_their_cap_and_other_lines_are_not() {
        let recent = Recent::default();
        recent.note(
            "s",
            &line("transport started", &[("transport", "telegram")]),
        );
        for n in 0..DECISIONS_KEPT + 3 {
            recent.note(
                "s",
                &line("ignored message", &[("reason", &format!("empty {n}"))]),
            );
        }
        let decisions = recent.decisions();
        assert_eq!(decisions.len(), DECISIONS_KEPT);
        assert_eq!(
            decisions[0].detail,
            format!("reason=empty {}", DECISIONS_KEPT + 2)
        );
        assert!(decisions.iter().all(|d| d.event == "ignored message"));
    }

    #[test]
    fn a_secret_in_a_field_is_redacted_before_the_page_sees_it() {
        let recent = Recent::default();
        recent.note(
            "s",
            &line(
                "remote command turned off",
                &[(
                    "command",
                    "/model ghp_PLANTEDa1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6",
                )],
            ),
        );
        let detail = &recent.decisions()[0].detail;
        assert!(!detail.contains("PLANTED"), "{detail}");
        assert!(detail.contains("[redacted"), "{detail}");
    }

    #[test]
    fn an_approval_is_open_from_its_request_until_it_is_settled_or_its_session_goes() {
        let recent = Recent::default();
        recent.note(
            "a",
            &line(
                "remote approval requested",
                &[("tool", "bash"), ("id", "qd4k")],
            ),
        );
        recent.note(
            "a",
            &line(
                "remote approval requested",
                &[("tool", "write"), ("id", "x7p2")],
            ),
        );
        recent.note(
            "b",
            &line(
                "remote approval requested",
                &[("tool", "edit"), ("id", "qd4k")],
            ),
        );
        let open: Vec<(String, String)> = recent
            .pending()
            .into_iter()
            .map(|p| (p.session, p.tool))
            .collect();
        assert_eq!(
            open,
            [
                ("a".to_owned(), "bash".to_owned()),
                ("a".to_owned(), "write".to_owned()),
                ("b".to_owned(), "edit".to_owned())
            ]
        );
        // The same id in another session is another approval.
        recent.note(
            "a",
            &line(
                "remote approval settled",
                &[("id", "qd4k"), ("tool", "bash"), ("approved", "true")],
            ),
        );
        recent.forget_session("b");
        let open: Vec<String> = recent.pending().into_iter().map(|p| p.id).collect();
        assert_eq!(open, ["x7p2"]);
    }

    #[test]
    fn each_decision_carries_the_time_it_was_noted_at() {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let recent = Recent::new(clock.clone());
        recent.note("s", &line("wrong pairing code", &[]));
        clock.advance(5_000);
        recent.note("s", &line("paired remote identity", &[]));
        let at: Vec<u64> = recent.decisions().iter().map(|d| d.at_ms).collect();
        assert_eq!(at, [1_700_000_005_000, 1_700_000_000_000]);
    }
}
