//! At most once to the agent per platform message (docs/scaling.md#the-flow, step 4): a KV
//! bucket that remembers, per session and `Nats-Msg-Id`, that a message was handed to the
//! session, checked before the session sees it again.
//!
//! Why: JetStream delivers at least once. A copy comes again whenever a consumer did not
//! ack in time: its node died mid-turn, a stall outlived `ack_wait`, or nats-server
//! restarted between the delivery and the ack. Without this ledger each copy was a new
//! prompt (one kill test handed the agent 712 prompts for 200 sent, some run
//! six times); an agent that edits files or runs commands must never do a prompt twice.
//!
//! Two marks, so the crash window is never silent:
//! - [`Mark::Handing`] is written *before* the message is handed to the session;
//! - [`Mark::Handed`] once the session has handled it (the bridge has saved what it did
//!   with it: a running turn, a queued follow-up).
//!
//! A copy that finds `Handed` is acked and logged as a redelivery: the session's saved
//! state speaks for it (the bridge tells the chat an interrupted turn stopped, or that
//! queued messages were not run). A copy that finds `Handing` is the crash window (the
//! node died between the two marks, so nobody knows whether the agent got it): the chat is
//! told the message may not have run and should be sent again, and it is not run, since
//! running it could run it twice. Values are sealed like every other bucket's
//! ([`sealed_kv`]); keys are keyed hashes, because a Telegram message id holds the chat id.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::seal::Gate;
use super::sealed_kv;
use super::subjects::Prefix;

/// How long a mark is kept. Longer than any copy can come: the inbound stream drops
/// messages after its `max_age` (24 h), so no JetStream redelivery outlives that, and a
/// platform's own redelivery (minutes) is far inside it. Shorter, a copy redelivered after
/// its mark aged out would run again; much longer only costs space.
pub const MARK_MAX_AGE: Duration = Duration::from_secs(48 * 60 * 60);

/// What the ledger knows of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mark {
    /// About to be handed to the session; the node may have died before it did.
    Handing,
    /// The session handled it and saved what it did with it.
    Handed,
}

/// What to do with a delivered message, given what the ledger holds for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handover {
    /// Never handed: mark it `Handing`, hand it over, mark it `Handed`.
    Deliver,
    /// Handed already: ack the copy, log it, run nothing.
    AlreadyHanded,
    /// A node died while handing it over: tell the chat it may not have run, run nothing.
    MayNotHaveRun,
}

/// The decision for a message whose mark is `mark`.
pub fn decide(mark: Option<Mark>) -> Handover {
    match mark {
        None => Handover::Deliver,
        Some(Mark::Handed) => Handover::AlreadyHanded,
        Some(Mark::Handing) => Handover::MayNotHaveRun,
    }
}

/// The chat's notice for a message caught in the crash window.
pub fn may_not_have_run_notice(text: &str) -> String {
    let mut quoted: String = text.chars().take(60).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    format!(
        "⚠ Your message \"{quoted}\" may not have reached the agent: the node running this \
         session stopped while handing it over. It was not run again (it might have run \
         once); if no answer to it comes, send it again."
    )
}

/// The ledger could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "NATS could not {action} in bucket {bucket}: {detail}. The message is not handed to the \
     session until the ledger answers (it could otherwise run twice); check that nats-server \
     runs with JetStream (-js) and that this node can reach it"
)]
pub struct HandedError {
    /// What was being done.
    pub action: &'static str,
    /// The bucket.
    pub bucket: String,
    /// What the client said.
    pub detail: String,
}

/// The handed-over ledger of one prefix.
#[derive(Debug, Clone)]
pub struct HandedLedger {
    store: kv::Store,
    gate: Gate,
}

impl HandedLedger {
    /// Opens (creating if need be) the bucket `<prefix>-handed`.
    pub async fn open(
        jetstream: &jetstream::Context,
        prefix: &Prefix,
        gate: &Gate,
    ) -> Result<HandedLedger, HandedError> {
        let bucket = prefix.handed_bucket();
        let store = jetstream
            .create_or_update_key_value(kv::Config {
                bucket: bucket.clone(),
                description: "bot-connect: messages handed to their session (at most once)".into(),
                history: 1,
                max_age: MARK_MAX_AGE,
                storage: jetstream::stream::StorageType::File,
                ..kv::Config::default()
            })
            .await
            .map_err(|error| HandedError {
                action: "open the bucket",
                bucket,
                detail: error.to_string(),
            })?;
        Ok(HandedLedger {
            store,
            gate: gate.clone(),
        })
    }

    /// The KV key of message `dedup_id` (`<transport>:<platform id>`) of `session_key`.
    pub fn key(&self, session_key: &str, dedup_id: &str) -> String {
        self.gate
            .key()
            .name("h", &["handed", session_key, dedup_id])
    }

    /// The mark of `key`; a value that does not open with the cluster key counts as none
    /// (the gate counts and logs it): an outsider cannot make a message skipped.
    pub async fn mark(&self, key: &str) -> Result<Option<Mark>, HandedError> {
        let value = self
            .store
            .get(key)
            .await
            .map_err(|error| self.failed("read a mark", error))?;
        let Some(value) = value else {
            return Ok(None);
        };
        match sealed_kv::open(self.gate.key(), &self.store.name, key, &value) {
            Ok(plain) => Ok(serde_json::from_slice(&plain).ok()),
            Err(refused) => {
                self.gate
                    .refuse(&format!("{}/{key}", self.store.name), &refused);
                Ok(None)
            }
        }
    }

    /// Writes `mark` for `key`.
    pub async fn set(&self, key: &str, mark: Mark) -> Result<(), HandedError> {
        let plain = serde_json::to_vec(&mark).unwrap_or_default();
        let sealed = sealed_kv::seal(self.gate.key(), &self.store.name, key, &plain)
            .map_err(|error| self.failed("seal a mark", error))?;
        self.store
            .put(key, Bytes::from(sealed))
            .await
            .map(drop)
            .map_err(|error| self.failed("write a mark", error))
    }

    fn failed(&self, action: &'static str, error: impl std::fmt::Display) -> HandedError {
        HandedError {
            action,
            bucket: self.store.name.clone(),
            detail: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_handed_over_only_when_the_ledger_has_never_seen_it() {
        assert_eq!(decide(None), Handover::Deliver);
        assert_eq!(decide(Some(Mark::Handed)), Handover::AlreadyHanded);
        assert_eq!(decide(Some(Mark::Handing)), Handover::MayNotHaveRun);
    }

    #[test]
    fn marks_outlive_every_redelivery_of_the_inbound_stream() {
        let stream = super::super::inbound::InboundSettings::default().max_age;
        assert!(MARK_MAX_AGE > stream, "{MARK_MAX_AGE:?} vs {stream:?}");
    }

    #[test]
    fn the_crash_window_notice_quotes_the_message_and_says_what_to_do() {
        let long = "x".repeat(200);
        let notice = may_not_have_run_notice(&long);
        assert!(notice.contains(&"x".repeat(60)), "{notice}");
        assert!(!notice.contains(&"x".repeat(61)), "{notice}");
        assert!(notice.contains("send it again"), "{notice}");
        assert!(may_not_have_run_notice("deploy").contains("\"deploy\""));
    }
}
