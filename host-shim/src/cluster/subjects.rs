//! Every NATS name the cluster uses, in one place (the table in docs/scaling.md).
//!
//! Why hashes: session keys hold paths and colons, and a credential is secret; a subject,
//! a KV key or a consumer name is visible to every operator of the NATS server. So every
//! name is built from the validated prefix, a transport id checked to be one plain token,
//! or a SHA-256 prefix of what it stands for; never a token, a path or a chat id.

use sha2::Digest as _;
use transport_core::Envelope;

/// The prefix when the operator names none.
pub const DEFAULT_PREFIX: &str = "botconnect";

/// Queue group of the ingress nodes serving outbound requests: NATS hands each request to
/// one member, so a second subscriber on the same node (a restart overlapping) never posts
/// a message twice.
pub const INGRESS_QUEUE_GROUP: &str = "ingress";

/// A name was refused before anything was sent to NATS.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The prefix is empty or holds something other than letters, digits, `-` and `_`.
    #[error(
        "the NATS prefix {prefix:?} is not usable: it must be 1 to 32 ASCII letters, digits, '-' \
         or '_' (it becomes a subject token and part of stream and bucket names); pick another"
    )]
    Prefix {
        /// The refused prefix.
        prefix: String,
    },
    /// A transport id that cannot be one subject token.
    #[error(
        "the transport id {id:?} cannot name a NATS subject: it must be 1 to 64 ASCII letters, \
         digits, '-' or '_'; rename the transport in the config"
    )]
    TransportId {
        /// The refused id.
        id: String,
    },
}

/// A validated prefix: one subject token, also usable in stream and bucket names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix(String);

impl Default for Prefix {
    fn default() -> Self {
        Prefix(DEFAULT_PREFIX.to_owned())
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Letters, digits, `-` and `_`, 1 to `max` of them: safe as a subject token (no `.`,
/// `*`, `>` or whitespace) and in JetStream stream, consumer and bucket names.
fn is_plain_token(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.len() <= max
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// 16 hex digits of SHA-256 over `parts`, each followed by a NUL so `("ab", "c")` and
/// `("a", "bc")` differ.
pub(crate) fn short_hash(parts: &[&str]) -> String {
    let mut hasher = sha2::Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Prefix {
    /// Checks `prefix` (see [`NameError::Prefix`]).
    pub fn new(prefix: &str) -> Result<Prefix, NameError> {
        if is_plain_token(prefix, 32) {
            Ok(Prefix(prefix.to_owned()))
        } else {
            Err(NameError::Prefix {
                prefix: prefix.to_owned(),
            })
        }
    }

    /// The prefix itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// KV bucket of the bot locks.
    pub fn lock_bucket(&self) -> String {
        format!("{}-bot-locks", self.0)
    }

    /// KV bucket of the session state documents.
    pub fn state_bucket(&self) -> String {
        format!("{}-session-state", self.0)
    }

    /// KV bucket of the session leases: which node runs which session now.
    pub fn lease_bucket(&self) -> String {
        format!("{}-session-leases", self.0)
    }

    /// KV bucket of the live session nodes (one key each, aged out when not renewed).
    pub fn node_bucket(&self) -> String {
        format!("{}-nodes", self.0)
    }

    /// KV bucket of the sessions the cluster runs: name and directory, for `/sessions`.
    pub fn session_bucket(&self) -> String {
        format!("{}-sessions", self.0)
    }

    /// KV bucket of the conversation bindings (`/switch`).
    pub fn binding_bucket(&self) -> String {
        format!("{}-bindings", self.0)
    }

    /// KV bucket of the topics the ingress made for the sessions (`topics.rs`), so a
    /// failover ingress reopens them instead of making duplicates.
    pub fn topic_bucket(&self) -> String {
        format!("{}-topics", self.0)
    }

    /// KV bucket of the chats told that a session is offline, per offline period
    /// (`offline_told.rs`), so a failover ingress does not tell them again.
    pub fn offline_told_bucket(&self) -> String {
        format!("{}-offline-told", self.0)
    }

    /// KV bucket of the messages handed to their session (at most once, `handed.rs`).
    pub fn handed_bucket(&self) -> String {
        format!("{}-handed", self.0)
    }

    /// KV bucket of the sends posted to their platform (at most once, `posted.rs`).
    pub fn posted_bucket(&self) -> String {
        format!("{}-posted", self.0)
    }

    /// The stream of replies made while no ingress held their bot (`outbox.rs`).
    pub fn outbox_stream(&self) -> String {
        format!("{}-outbox", self.0)
    }

    /// Where replies for `transport_id` wait while no ingress holds its bot.
    pub fn outbox_subject(&self, transport_id: &str) -> Result<String, NameError> {
        if is_plain_token(transport_id, 64) {
            Ok(format!("{}.outbox.{transport_id}", self.0))
        } else {
            Err(NameError::TransportId {
                id: transport_id.to_owned(),
            })
        }
    }

    /// The stream holding every session's inbound envelopes.
    pub fn inbound_stream(&self) -> String {
        format!("{}-inbound", self.0)
    }

    /// The subjects of [`Prefix::inbound_stream`].
    pub fn inbound_wildcard(&self) -> String {
        format!("{}.in.*", self.0)
    }

    /// Where the envelopes of `session_key` are published.
    pub fn inbound_subject(&self, session_key: &str) -> String {
        format!("{}.in.{}", self.0, session_token(session_key))
    }

    /// Where a session node sends `send` and `typing` for `transport_id`.
    pub fn outbound_subject(&self, transport_id: &str) -> Result<String, NameError> {
        if is_plain_token(transport_id, 64) {
            Ok(format!("{}.out.{transport_id}", self.0))
        } else {
            Err(NameError::TransportId {
                id: transport_id.to_owned(),
            })
        }
    }
}

/// The one-token stand-in for a session key in subjects, KV keys and consumer names:
/// `s` and 16 hex digits of its hash.
pub fn session_token(session_key: &str) -> String {
    format!("s{}", short_hash(&["session", session_key]))
}

/// The durable consumer of `session_key`'s inbound subject.
pub fn session_consumer(session_key: &str) -> String {
    format!("session-{}", session_token(session_key))
}

/// The bot lock's KV key for the credential named by `env_name` (the *name* of the
/// environment variable, never its value) on `platform`: two ingress nodes configured with
/// the same variable for the same platform contend for one key.
pub fn bot_lock_key(platform: &str, env_name: &str) -> String {
    format!("bot-{}", short_hash(&["bot", platform, env_name]))
}

/// The `Nats-Msg-Id` of an envelope: `<transport>:<platform message id>`, or `None` when the
/// platform gave no id (then a redelivery cannot be told from a new message).
pub fn message_dedup_id(envelope: &Envelope) -> Option<String> {
    envelope
        .message_id
        .as_deref()
        .filter(|id| !id.is_empty())
        .map(|id| format!("{}:{id}", envelope.transport))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_single_plain_tokens() {
        assert!(Prefix::new("botconnect").is_ok());
        assert!(Prefix::new("team-a_2").is_ok());
        for bad in ["", "a.b", "a*", ">", "a b", "ä", &"x".repeat(33)] {
            let err = Prefix::new(bad).expect_err(bad);
            assert!(err.to_string().contains("pick another"), "{err}");
        }
    }

    #[test]
    fn names_hold_no_session_key_or_credential_name() {
        let prefix = Prefix::default();
        let key = "/home/me/project:main";
        let subject = prefix.inbound_subject(key);
        assert!(subject.starts_with("botconnect.in.s"), "{subject}");
        assert_eq!(subject.split('.').count(), 3, "{subject}");
        assert!(!subject.contains("home"));
        let consumer = session_consumer(key);
        assert!(is_plain_token(&consumer, 64), "{consumer}");
        let lock = bot_lock_key("telegram", "TELEGRAM_BOT_TOKEN");
        assert!(!lock.contains("TELEGRAM"), "{lock}");
        assert_eq!(lock.len(), "bot-".len() + 16);
    }

    #[test]
    fn hashes_separate_their_parts() {
        assert_ne!(bot_lock_key("ab", "c"), bot_lock_key("a", "bc"));
        assert_ne!(session_token("a"), session_token("b"));
        assert_eq!(session_token("a"), session_token("a"));
    }

    #[test]
    fn transport_ids_must_be_one_token() {
        let prefix = Prefix::new("p").unwrap();
        assert_eq!(
            prefix.outbound_subject("telegram").as_deref(),
            Ok("p.out.telegram")
        );
        for bad in ["", "a.b", "a>", "a b"] {
            assert!(matches!(
                prefix.outbound_subject(bad),
                Err(NameError::TransportId { .. })
            ));
        }
    }

    #[test]
    fn dedup_ids_carry_the_transport() {
        let mut envelope = Envelope {
            transport: "slack".into(),
            ..Envelope::default()
        };
        assert_eq!(message_dedup_id(&envelope), None);
        envelope.message_id = Some(String::new());
        assert_eq!(message_dedup_id(&envelope), None);
        envelope.message_id = Some("C1:1.5".into());
        assert_eq!(message_dedup_id(&envelope).as_deref(), Some("slack:C1:1.5"));
    }
}
