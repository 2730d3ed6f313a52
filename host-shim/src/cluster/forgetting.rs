//! Forgetting a session (docs/scaling.md#forgetting-a-session): a session that left for good
//! (its pi will not come back, a demo removed from every node's list) would otherwise stay in
//! the directory, offline, for ever, its topic open and its chats' messages waiting for
//! nobody. An operator forgets it (`host-shim cluster forget`), or the ingress does once it
//! has been offline longer than `--forget-offline-after` (7 days unless set; `0` never).
//!
//! Forgetting replaces the session's entry with a tombstone (only if nobody wrote the entry
//! since it was read: a session whose node is back is not forgotten), drops the messages
//! waiting in its stream and its consumer, so nothing stays routed to it. The ingress then
//! ends its topic (it is no longer listed), tells each chat bound to it once, on the bots it
//! holds, and unbinds them; a later message from a chat still bound is answered, not
//! published. The tombstone goes after [`TOMBSTONE_KEPT`]. The session's saved state
//! (pairings, remembered chats) is kept unless the operator deletes it, so a session that
//! does come back (pi resumed, the demo listed again) is paired as before and listed again.

use std::time::Duration;

use async_nats::jetstream;

use super::directory::{Directory, DirectoryError, ForgetReason, Listed, Presence, state_of};
use super::subjects::{Prefix, session_consumer};
use crate::broker::routing::{self, SessionState};

/// How long a tombstone stays after the session was forgotten: its chats' answer names
/// the session and says why until then; after, a chat still bound hears only that the
/// session is no longer in the cluster.
pub const TOMBSTONE_KEPT: Duration = Duration::from_secs(30 * 24 * 3600);

/// The ingress's default for `--forget-offline-after`: long enough for a holiday's laptop.
pub const DEFAULT_FORGET_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

/// Forgetting did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    /// The entry was written after it was read: its node (or its pi) is back.
    #[error(
        "session {name} was written again while it was being forgotten (its node or its pi \
         is back), so it was left listed; look again with `host-shim cluster sessions`"
    )]
    Changed {
        /// The session's name.
        name: String,
    },
    /// NATS refused a read or write.
    #[error(transparent)]
    Directory(#[from] DirectoryError),
    /// The session's waiting messages or consumer could not be removed.
    #[error(
        "session {name} is forgotten, but the messages waiting for it could not be removed \
         from stream {stream}: {detail}. Run the command again to retry"
    )]
    Waiting {
        /// The session's name.
        name: String,
        /// The inbound stream.
        stream: String,
        /// What NATS said.
        detail: String,
    },
}

/// What forgetting did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forgot {
    /// Messages that were waiting for the session, dropped.
    pub dropped: u64,
}

/// Forgets `listed` (read from `directory` just before): its tombstone, then its waiting
/// messages and consumer.
pub async fn forget(
    jetstream: &jetstream::Context,
    prefix: &Prefix,
    directory: &Directory,
    listed: &Listed,
    why: ForgetReason,
) -> Result<Forgot, ForgetError> {
    // The tombstone first: from then on the ingress answers the session's chats instead of
    // publishing for it, so what is dropped next is not refilled (but for the moment until
    // its next look, which drops again).
    if !directory.forget(listed, why).await? {
        return Err(ForgetError::Changed {
            name: listed.entry.name.clone(),
        });
    }
    let dropped = drop_waiting(jetstream, prefix, &listed.entry.key)
        .await
        .map_err(|detail| ForgetError::Waiting {
            name: listed.entry.name.clone(),
            stream: prefix.inbound_stream(),
            detail,
        })?;
    Ok(Forgot { dropped })
}

/// Drops what waits in `session_key`'s stream and its durable consumer, so no message is
/// kept for a session that is gone (and none is delivered, a day late, should it come
/// back). No stream yet is nothing to drop.
pub async fn drop_waiting(
    jetstream: &jetstream::Context,
    prefix: &Prefix,
    session_key: &str,
) -> Result<u64, String> {
    let Ok(stream) = jetstream.get_stream(prefix.inbound_stream()).await else {
        return Ok(0);
    };
    let purged = stream
        .purge()
        .filter(prefix.inbound_subject(session_key))
        .await
        .map_err(|error| error.to_string())?;
    // Gone already (never made, or dropped by an earlier forget): nothing to do.
    let _ = stream.delete_consumer(&session_consumer(session_key)).await;
    Ok(purged.purged)
}

/// Whether the ingress forgets `listed` at `now_ms` (its clock): offline (by presence) for
/// at least `after` since its entry was last written, as the NATS server timed the write.
/// `None` never forgets.
pub fn expired(listed: &Listed, presence: &Presence, now_ms: u64, after: Option<Duration>) -> bool {
    let Some(after) = after else {
        return false;
    };
    listed.entry.forgotten.is_none()
        && state_of(&listed.entry, presence) == SessionState::Offline
        && listed.ago(now_ms, false) >= after
}

/// Whether a tombstone has been kept long enough ([`TOMBSTONE_KEPT`]) at `now_ms`.
pub fn tombstone_spent(listed: &Listed, now_ms: u64) -> bool {
    listed.entry.forgotten.is_some() && listed.ago(now_ms, false) >= TOMBSTONE_KEPT
}

/// `by its operator` or `after 7 days offline`.
pub fn why_text(why: ForgetReason) -> String {
    match why {
        ForgetReason::Operator => "by its operator".to_owned(),
        ForgetReason::Expired { after_secs } => format!("after {} offline", span(after_secs)),
    }
}

/// A whole number of days, hours, minutes or seconds, in words.
pub fn span(secs: u64) -> String {
    let (n, unit) = match secs {
        s if s >= 86_400 && s % 86_400 == 0 => (s / 86_400, "day"),
        s if s >= 3_600 && s % 3_600 == 0 => (s / 3_600, "hour"),
        s if s >= 60 && s % 60 == 0 => (s / 60, "minute"),
        s => (s, "second"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// What each chat bound to a forgotten session is told, once.
pub fn told_notice(name: &str, machine: &str, why: ForgetReason) -> String {
    format!(
        "🗑 The session {name} on {machine} was removed from the cluster ({}), so this chat no \
         longer talks to it and nothing more is delivered to it. Send /sessions to pick another.",
        why_text(why)
    )
}

/// The answer to a message from a chat still bound to a forgotten session (its message
/// is not delivered).
pub fn forgotten_answer(name: &str, machine: &str, why: ForgetReason) -> String {
    format!(
        "The session this chat talked to ({name} on {machine}) was removed from the cluster \
         ({}), so this message was not delivered. Send /sessions to pick another.",
        why_text(why)
    )
}

/// The answer to a message from a chat bound to a session the directory no longer has at
/// all (removed by hand, or its tombstone gone).
pub fn unlisted_answer(name: &str) -> String {
    let name = if name.is_empty() { "unnamed" } else { name };
    format!(
        "The session this chat talked to ({name}) is no longer in the cluster, so this message \
         was not delivered. Send /sessions to pick another."
    )
}

/// A session an operator named could not be picked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unresolved {
    /// Nothing in the directory is called that.
    #[error(
        "no session in the cluster is called {wanted:?}{}. `host-shim cluster sessions` lists them",
        known_names(.known)
    )]
    NotFound {
        /// What was asked for.
        wanted: String,
        /// The names there are.
        known: Vec<String>,
    },
    /// Several sessions have that name.
    #[error(
        "several sessions are called {wanted:?}: {}. Name one as name@machine or by its key",
        .choices.join(", ")
    )]
    Ambiguous {
        /// What was asked for.
        wanted: String,
        /// `name@machine (key)` of each.
        choices: Vec<String>,
    },
}

fn known_names(known: &[String]) -> String {
    if known.is_empty() {
        " (the directory is empty)".to_owned()
    } else {
        format!(" (there are: {})", known.join(", "))
    }
}

/// The session `wanted` names among `entries`: its key, its token (`s…`), `name@machine`,
/// or a name only one of them has.
pub fn resolve<'a>(wanted: &str, entries: &'a [Listed]) -> Result<&'a Listed, Unresolved> {
    let token = super::subjects::session_token;
    let exact: Vec<&Listed> = entries
        .iter()
        .filter(|l| {
            l.entry.key == wanted
                || token(&l.entry.key) == wanted
                || format!("{}@{}", l.entry.name, machine(l)) == wanted
        })
        .collect();
    let matches = if exact.is_empty() {
        entries.iter().filter(|l| l.entry.name == wanted).collect()
    } else {
        exact
    };
    match matches.as_slice() {
        [one] => Ok(one),
        [] => {
            let mut known: Vec<String> = entries.iter().map(label).collect();
            known.sort();
            known.dedup();
            Err(Unresolved::NotFound {
                wanted: wanted.to_owned(),
                known,
            })
        }
        several => Err(Unresolved::Ambiguous {
            wanted: wanted.to_owned(),
            choices: several
                .iter()
                .map(|l| format!("{} ({})", label(l), l.entry.key))
                .collect(),
        }),
    }
}

/// The machine an entry names (older entries only describe their node).
pub fn machine(listed: &Listed) -> String {
    if listed.entry.machine.is_empty() {
        super::directory::machine_in(&listed.entry.node)
    } else {
        listed.entry.machine.clone()
    }
}

/// `name@machine`.
pub fn label(listed: &Listed) -> String {
    format!("{}@{}", listed.entry.name, machine(listed))
}

/// One line of `host-shim cluster sessions`, at `now_ms` by this machine's clock.
pub fn line(listed: &Listed, presence: &Presence, now_ms: u64) -> String {
    let state = match &listed.entry.forgotten {
        Some(forgotten) => format!(
            "forgotten {} {}, its chats {}",
            why_text(forgotten.why),
            routing::ago(listed.ago(now_ms, false)),
            if forgotten.told.is_empty() {
                "not told yet"
            } else {
                "told"
            },
        ),
        None => {
            let state = state_of(&listed.entry, presence);
            let online = state != SessionState::Offline;
            let ago = routing::ago(listed.ago(now_ms, online));
            match state {
                SessionState::Offline => format!("offline, last seen {ago}"),
                SessionState::Busy => format!("busy, active {ago}"),
                SessionState::Idle => format!("idle, active {ago}"),
            }
        }
    };
    format!(
        "{} — {} · {state} · key {}",
        label(listed),
        listed.entry.cwd,
        listed.entry.key
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::directory::{Forgotten, SessionEntry};
    use crate::cluster::subjects::session_token;

    fn listed(key: &str, name: &str, machine: &str, written_ms: u64) -> Listed {
        Listed {
            entry: SessionEntry {
                key: key.into(),
                name: name.into(),
                cwd: format!("/srv/{name}"),
                machine: machine.into(),
                node_id: "n1".into(),
                ..SessionEntry::default()
            },
            written_ms,
            revision: 3,
        }
    }

    fn online(key: &str) -> Presence {
        Presence {
            nodes: ["n1".to_owned()].into(),
            leases: [(session_token(key), "n1".to_owned())].into(),
        }
    }

    #[test]
    fn a_session_expires_only_offline_and_only_past_the_limit() {
        let day = 86_400_000;
        let week = Some(Duration::from_secs(7 * 86_400));
        let entry = listed("k", "api", "build", 10 * day);
        // (presence, now, limit, forgotten already, expired)
        let table = [
            (Presence::default(), 17 * day, week, false, true),
            (Presence::default(), 17 * day - 1, week, false, false),
            // Online, however old its last write: a live node holds its lease.
            (online("k"), 30 * day, week, false, false),
            // `0`: never.
            (Presence::default(), 300 * day, None, false, false),
            // A tombstone is not forgotten twice.
            (Presence::default(), 30 * day, week, true, false),
            // This machine's clock behind the server's: not a day early.
            (Presence::default(), 9 * day, week, false, false),
        ];
        for (presence, now, limit, forgotten, expect) in table {
            let mut entry = entry.clone();
            if forgotten {
                entry.entry.forgotten = Some(Forgotten {
                    why: ForgetReason::Operator,
                    told: Default::default(),
                });
            }
            assert_eq!(
                expired(&entry, &presence, now, limit),
                expect,
                "{presence:?} {now} {limit:?} {forgotten}"
            );
        }
    }

    #[test]
    fn a_tombstone_is_spent_after_thirty_days() {
        let day = 86_400_000;
        let mut entry = listed("k", "api", "build", day);
        assert!(!tombstone_spent(&entry, 100 * day), "not a tombstone");
        entry.entry.forgotten = Some(Forgotten {
            why: ForgetReason::Operator,
            told: Default::default(),
        });
        assert!(!tombstone_spent(&entry, 31 * day - 1));
        assert!(tombstone_spent(&entry, 31 * day));
    }

    #[test]
    fn the_chats_hear_which_session_went_and_why() {
        let expired = ForgetReason::Expired {
            after_secs: 7 * 86_400,
        };
        assert_eq!(
            told_notice("api", "build", expired),
            "🗑 The session api on build was removed from the cluster (after 7 days offline), \
             so this chat no longer talks to it and nothing more is delivered to it. Send \
             /sessions to pick another."
        );
        assert_eq!(
            forgotten_answer("api", "build", ForgetReason::Operator),
            "The session this chat talked to (api on build) was removed from the cluster (by \
             its operator), so this message was not delivered. Send /sessions to pick another."
        );
        assert!(unlisted_answer("").contains("(unnamed) is no longer in the cluster"));
        let table = [
            (1, "1 second"),
            (90, "90 seconds"),
            (120, "2 minutes"),
            (3_600, "1 hour"),
            (36 * 3_600, "36 hours"),
            (86_400, "1 day"),
            (14 * 86_400, "14 days"),
        ];
        for (secs, words) in table {
            assert_eq!(span(secs), words);
        }
    }

    #[test]
    fn an_operator_names_a_session_by_key_token_name_at_machine_or_a_name_of_its_own() {
        let entries = [
            listed("pi:1", "api", "laptop", 0),
            listed("pi:2", "api", "build", 0),
            listed("serve:web", "web", "build", 0),
        ];
        let token = session_token("pi:2");
        let table = [
            ("pi:1", Some("pi:1")),
            (token.as_str(), Some("pi:2")),
            ("api@build", Some("pi:2")),
            ("web", Some("serve:web")),
            ("web@laptop", None),
        ];
        for (wanted, expect) in table {
            assert_eq!(
                resolve(wanted, &entries).ok().map(|l| l.entry.key.as_str()),
                expect,
                "{wanted}"
            );
        }
        let Err(Unresolved::Ambiguous { choices, .. }) = resolve("api", &entries) else {
            panic!("api is two sessions");
        };
        assert_eq!(choices, ["api@laptop (pi:1)", "api@build (pi:2)"]);
        let missing = resolve("docs", &entries).expect_err("no docs").to_string();
        assert!(
            missing.contains("there are: api@build, api@laptop, web@build"),
            "{missing}"
        );
    }

    #[test]
    fn the_operators_list_says_each_sessions_state() {
        let minute = 60_000;
        let mut entry = listed("k", "api", "build", 100 * minute);
        assert_eq!(
            line(&entry, &Presence::default(), 103 * minute),
            "api@build — /srv/api · offline, last seen 3 min ago · key k"
        );
        assert!(line(&entry, &online("k"), 100 * minute).contains("· idle, active just now ·"));
        entry.entry.forgotten = Some(Forgotten {
            why: ForgetReason::Operator,
            told: ["telegram".to_owned()].into(),
        });
        assert_eq!(
            line(&entry, &Presence::default(), 103 * minute),
            "api@build — /srv/api · forgotten by its operator 3 min ago, its chats told · key k"
        );
    }
}
