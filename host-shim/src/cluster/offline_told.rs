//! Which chats were told that a session is offline (docs/scaling.md#sessions-across-machines):
//! a chat hears it once per offline period, whichever ingress holds the bot. The marks live
//! in the cluster's KV, not in one ingress's memory, so the ingress that takes the bot after
//! a failover does not tell a chat a second time.
//!
//! An offline period is named by the revision of the session's directory entry: nobody
//! writes an offline session's entry, and its node writes it again when it is back, so the
//! next period has another revision. A mark is one key, created atomically (two ingresses
//! racing for one chat: one creates, the other finds it), keyed by a keyed hash of session,
//! chat and period (no chat id in a key), and ages out after a day, as the messages it
//! speaks of do.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;

use super::directory::DirectoryError;
use super::seal::Gate;
use super::subjects::Prefix;

/// How long a mark is kept: the inbound stream's `max_age`, beyond which the messages the
/// notice said were waiting are gone too.
pub const MARK_KEPT: Duration = Duration::from_secs(24 * 3600);

/// The marks of one prefix.
#[derive(Debug, Clone)]
pub struct OfflineTold {
    store: kv::Store,
    gate: Gate,
}

impl OfflineTold {
    /// Opens (creating if need be) the bucket.
    pub async fn open(
        jetstream: &jetstream::Context,
        prefix: &Prefix,
        gate: &Gate,
    ) -> Result<OfflineTold, DirectoryError> {
        let bucket = prefix.offline_told_bucket();
        let store = jetstream
            .create_or_update_key_value(kv::Config {
                bucket: bucket.clone(),
                description: "bot-connect: chats told that a session is offline".into(),
                history: 1,
                max_age: MARK_KEPT,
                ..kv::Config::default()
            })
            .await
            .map_err(|error| DirectoryError {
                action: "open the bucket",
                bucket,
                detail: error.to_string(),
            })?;
        Ok(OfflineTold {
            store,
            gate: gate.clone(),
        })
    }

    /// Marks `conversation` told about `session`'s offline `period`; `Ok(true)` when this
    /// call made the mark (the chat is to be told now), `Ok(false)` when it was there.
    pub async fn first(
        &self,
        session: &str,
        conversation: &str,
        period: u64,
    ) -> Result<bool, DirectoryError> {
        let key = self.gate.key().name(
            "o",
            &["offline-told", session, conversation, &period.to_string()],
        );
        match self.store.create(key, Bytes::from_static(b"told")).await {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(DirectoryError {
                action: "mark a chat told",
                bucket: self.store.name.clone(),
                detail: error.to_string(),
            }),
        }
    }
}
