//! What every node of a cluster must agree on besides state: which sessions exist (for
//! `/sessions` and `/switch`, answered by the ingress) and which session each conversation
//! is bound to. Two KV buckets, keyed by hashes ([`subjects`](super::subjects)), so no chat
//! id, name or path is ever a key.
//!
//! Every value is sealed with the cluster key ([`sealed_kv`]): a session entry or a binding
//! a client without the key wrote (to steer a chat to another session) is skipped, never
//! followed, and a binding's key is a keyed hash, so an outsider cannot test chat ids
//! against the bucket (plain SHA-256 of an enumerable Telegram id could be reversed).
//!
//! Only the ingress holding a bot's lock writes that bot's bindings (its conversation ids
//! carry the transport id), so a binding has one writer at a time and a plain `put` is
//! enough. A session's entry is written by the node running it.

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_util::TryStreamExt as _;
use serde::{Deserialize, Serialize};

use super::seal::Gate;
use super::sealed_kv;
use super::subjects::{Prefix, session_token};
use crate::broker::bindings::Binding;

/// A session the cluster runs, as `/sessions` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEntry {
    /// Session key.
    pub key: String,
    /// The name chats reach it by.
    pub name: String,
    /// Its working directory.
    pub cwd: String,
    /// A turn was running at the last update.
    pub busy: bool,
    /// The node running it (host and pid), for `doctor` and the logs.
    pub node: String,
}

/// NATS refused a directory read or write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "NATS could not {action} in bucket {bucket}: {detail}. Check that nats-server runs with \
     JetStream (-js) and that this node can reach it"
)]
pub struct DirectoryError {
    /// What was being done.
    pub action: &'static str,
    /// The bucket.
    pub bucket: String,
    /// What the client said.
    pub detail: String,
}

/// The sessions and bindings buckets of one prefix.
#[derive(Debug, Clone)]
pub struct Directory {
    sessions: kv::Store,
    bindings: kv::Store,
    gate: Gate,
}

impl Directory {
    /// Opens (creating if need be) both buckets.
    pub async fn open(
        jetstream: &jetstream::Context,
        prefix: &Prefix,
        gate: &Gate,
    ) -> Result<Directory, DirectoryError> {
        let open = |bucket: String, description: &'static str| async move {
            jetstream
                .create_or_update_key_value(kv::Config {
                    bucket: bucket.clone(),
                    description: description.into(),
                    history: 1,
                    ..kv::Config::default()
                })
                .await
                .map_err(|error| DirectoryError {
                    action: "open the bucket",
                    bucket,
                    detail: error.to_string(),
                })
        };
        Ok(Directory {
            sessions: open(
                prefix.session_bucket(),
                "bot-connect: the sessions of the cluster, for /sessions",
            )
            .await?,
            bindings: open(
                prefix.binding_bucket(),
                "bot-connect: which session each conversation talks to",
            )
            .await?,
            gate: gate.clone(),
        })
    }

    /// Records (or updates) a session's entry.
    pub async fn announce(&self, entry: &SessionEntry) -> Result<(), DirectoryError> {
        let token = session_token(&entry.key);
        let value = self.seal(
            &self.sessions,
            &token,
            &serde_json::to_vec(entry).unwrap_or_default(),
        )?;
        self.sessions
            .put(token, Bytes::from(value))
            .await
            .map(|_| ())
            .map_err(|error| self.failed(&self.sessions, "record a session", error))
    }

    /// Every session recorded, in key order. An entry that is not one, or is not sealed
    /// with the cluster key (written by something else), is skipped.
    pub async fn sessions(&self) -> Result<Vec<SessionEntry>, DirectoryError> {
        let fail = |error: String| DirectoryError {
            action: "list the sessions",
            bucket: bucket_name(&self.sessions),
            detail: error,
        };
        let mut keys: Vec<String> = self
            .sessions
            .keys()
            .await
            .map_err(|e| fail(e.to_string()))?
            .try_collect()
            .await
            .map_err(|e| fail(e.to_string()))?;
        keys.sort();
        let mut entries = Vec::with_capacity(keys.len());
        for key in keys {
            let value = self
                .sessions
                .get(&key)
                .await
                .map_err(|e| fail(e.to_string()))?;
            let opened = value.and_then(|v| self.open_value(&self.sessions, &key, &v));
            if let Some(entry) = opened.and_then(|v| serde_json::from_slice(&v).ok()) {
                entries.push(entry);
            }
        }
        Ok(entries)
    }

    /// The session `conversation` (`<transport>:<conversation id>`) is bound to.
    /// A binding that does not open with the cluster key is no binding.
    pub async fn binding(&self, conversation: &str) -> Result<Option<Binding>, DirectoryError> {
        let key = self.binding_key(conversation);
        let value = self
            .bindings
            .get(key.as_str())
            .await
            .map_err(|error| self.failed(&self.bindings, "read a binding", error))?;
        Ok(value
            .and_then(|v| self.open_value(&self.bindings, &key, &v))
            .and_then(|v| serde_json::from_slice(&v).ok()))
    }

    /// Binds `conversation` to a session.
    pub async fn bind(&self, conversation: &str, binding: &Binding) -> Result<(), DirectoryError> {
        let key = self.binding_key(conversation);
        let value = self.seal(
            &self.bindings,
            &key,
            &serde_json::to_vec(binding).unwrap_or_default(),
        )?;
        self.bindings
            .put(key, Bytes::from(value))
            .await
            .map(|_| ())
            .map_err(|error| self.failed(&self.bindings, "save a binding", error))
    }

    /// The KV key of a conversation's binding: `c` and a keyed hash of
    /// `<transport>:<conversation id>`.
    pub fn binding_key(&self, conversation: &str) -> String {
        self.gate.key().name("c", &["conversation", conversation])
    }

    fn seal(&self, store: &kv::Store, key: &str, plain: &[u8]) -> Result<Vec<u8>, DirectoryError> {
        sealed_kv::seal(self.gate.key(), &store.name, key, plain)
            .map_err(|error| self.failed(store, "seal a value", error))
    }

    /// The opened value, or `None` when it does not open: a forgery is never followed,
    /// and the gate counts and logs it.
    fn open_value(&self, store: &kv::Store, key: &str, value: &[u8]) -> Option<Vec<u8>> {
        match sealed_kv::open(self.gate.key(), &store.name, key, value) {
            Ok(plain) => Some(plain),
            Err(refused) => {
                self.gate.refuse(&format!("{}/{key}", store.name), &refused);
                None
            }
        }
    }

    fn failed(
        &self,
        store: &kv::Store,
        action: &'static str,
        error: impl std::fmt::Display,
    ) -> DirectoryError {
        DirectoryError {
            action,
            bucket: bucket_name(store),
            detail: error.to_string(),
        }
    }
}

fn bucket_name(store: &kv::Store) -> String {
    store.name.clone()
}
