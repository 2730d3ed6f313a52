//! Session state documents in a JetStream KV bucket, in place of the shared state file
//! once sessions run on several machines.
//!
//! Why compare-and-set: a session node that paused (or lost its network) for longer than
//! the others waited comes back believing it still runs its sessions. Every save names the
//! revision its writer loaded; KV `update` writes only if that is still the key's latest, so
//! the stale node gets [`KvStateError::Conflict`] and writes nothing, and two nodes can
//! never both own a session's state.
//!
//! Why a format number: a node whose host-shim is older than the one that last saved a
//! session would load the document, drop what it does not know, and save the rest over it.
//! Every document carries the format it was written in (`stateFormat`, [`STATE_FORMAT`]);
//! a session whose document is newer than this host-shim reads is refused here
//! ([`KvStateError::Newer`]) and is not started on this node at all.

use std::collections::HashMap;
use std::sync::Mutex;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;

use super::seal::Gate;
use super::sealed_kv::{self, ValueRefused};
use super::subjects::{Prefix, session_token};
use crate::disk::state_store::{QueueFold, StateChanges, StateStore, StateStoreError, StoredState};

/// The format of the state documents this host-shim writes. Raise it when a document gains
/// something an older host-shim would drop on its next save; documents written before
/// formats were recorded are format 0.
pub const STATE_FORMAT: u64 = 1;

/// The document's field that holds its format; the guest never sees it.
const FORMAT_FIELD: &str = "stateFormat";

/// Why a session's state could not be loaded or saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvStateError {
    /// Someone saved this session since this writer loaded it; nothing was written.
    #[error(
        "another node saved session {session_key:?} since this one loaded it (this one expected \
         revision {expected_revision}), so this one wrote nothing. Only one node may run a \
         session: stop it on this node, the other node has it now"
    )]
    Conflict {
        /// The session whose save was refused.
        session_key: String,
        /// The revision this writer loaded (0: it saw no document).
        expected_revision: u64,
    },
    /// The guest handed over something that is not a JSON object (a guest bug).
    #[error(
        "the state of session {session_key:?} is not a JSON object ({detail}); nothing was written"
    )]
    NotAnObject {
        /// The session whose save was refused.
        session_key: String,
        /// What was wrong with it.
        detail: String,
    },
    /// The stored value is not sealed with the cluster key, or does not open with it: a
    /// forgery (a paired identity written by a client without the key) is never loaded.
    #[error("{0}")]
    Refused(ValueRefused),
    /// The stored value is not JSON text (written by something else).
    #[error(
        "the stored state of session {session_key:?} in bucket {bucket} is not UTF-8 JSON; \
         inspect it with `nats kv get {bucket} <key>` and delete it if it is not bot-connect's"
    )]
    Unreadable {
        /// The session.
        session_key: String,
        /// The KV bucket.
        bucket: String,
    },
    /// The document was written by a newer host-shim: loading it here would lose what this
    /// one does not know at the next save.
    #[error(
        "the state of session {session_key:?} was written by a newer host-shim (state format \
         {found}; this one reads up to {known}), so this node does not run the session and \
         writes nothing to its state: upgrade host-shim on this machine"
    )]
    Newer {
        /// The session.
        session_key: String,
        /// The document's format.
        found: u64,
        /// The newest format this host-shim reads ([`STATE_FORMAT`]).
        known: u64,
    },
    /// NATS did not do what was asked.
    #[error(
        "NATS could not {action} for session {session_key:?}: {detail}. Check that nats-server \
         runs with JetStream (-js) and that this node can reach it; nothing was lost, try again"
    )]
    Nats {
        /// What was being done.
        action: &'static str,
        /// The session.
        session_key: String,
        /// What the client said.
        detail: String,
    },
}

/// A document as loaded, with the revision a save must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The document, `None` when the session has none (never saved, or deleted).
    pub document: Option<String>,
    /// The key's revision; 0 when it never existed.
    pub revision: u64,
    /// The format the document was written in (0: none, or written before formats).
    pub format: u64,
}

impl Loaded {
    /// [`KvStateError::Newer`] when this host-shim cannot read the document's format.
    pub fn readable(&self, session_key: &str) -> Result<(), KvStateError> {
        if self.format > STATE_FORMAT {
            return Err(KvStateError::Newer {
                session_key: session_key.to_owned(),
                found: self.format,
                known: STATE_FORMAT,
            });
        }
        Ok(())
    }
}

/// `document` (a JSON object) with its format recorded.
fn stamped(document: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(document) {
        Ok(serde_json::Value::Object(mut fields)) => {
            fields.insert(FORMAT_FIELD.into(), STATE_FORMAT.into());
            serde_json::Value::Object(fields).to_string()
        }
        // Refused before it gets here (`check_object`).
        _ => document.to_owned(),
    }
}

/// `document` without its format, and the format (0 when it has none or is not an object).
fn unstamped(document: String) -> (String, u64) {
    match serde_json::from_str::<serde_json::Value>(&document) {
        Ok(serde_json::Value::Object(mut fields)) => match fields.remove(FORMAT_FIELD) {
            // A format that is not a number is not one this host-shim wrote: newer.
            Some(format) => (
                serde_json::Value::Object(fields).to_string(),
                format.as_u64().unwrap_or(u64::MAX),
            ),
            None => (document, 0),
        },
        _ => (document, 0),
    }
}

/// The state bucket of one prefix. Cheap to clone. Values are sealed with the cluster
/// key ([`sealed_kv`]).
#[derive(Debug, Clone)]
pub struct KvStateStore {
    store: kv::Store,
    bucket: String,
    gate: Gate,
}

/// How many past documents of a session the bucket keeps: after a bad save the previous
/// ones stay readable with `nats kv history`.
const HISTORY: i64 = 5;

impl KvStateStore {
    /// Opens (creating if need be) the state bucket of `prefix`.
    pub async fn open(
        jetstream: &jetstream::Context,
        prefix: &Prefix,
        gate: &Gate,
    ) -> Result<KvStateStore, KvStateError> {
        let bucket = prefix.state_bucket();
        let store = jetstream
            .create_or_update_key_value(kv::Config {
                bucket: bucket.clone(),
                description: "bot-connect: one state document per session".into(),
                history: HISTORY,
                ..kv::Config::default()
            })
            .await
            .map_err(|error| KvStateError::Nats {
                action: "open the state bucket",
                session_key: String::new(),
                detail: error.to_string(),
            })?;
        Ok(KvStateStore {
            store,
            bucket,
            gate: gate.clone(),
        })
    }

    /// The session's document and its revision.
    pub async fn load(&self, session_key: &str) -> Result<Loaded, KvStateError> {
        let token = session_token(session_key);
        let entry = self
            .store
            .entry(token.as_str())
            .await
            .map_err(|error| KvStateError::Nats {
                action: "load the state",
                session_key: session_key.to_owned(),
                detail: error.to_string(),
            })?;
        let Some(entry) = entry else {
            return Ok(Loaded {
                document: None,
                revision: 0,
                format: 0,
            });
        };
        let document = match entry.operation {
            // A deleted document is no document, but its revision still guards the next save.
            kv::Operation::Delete | kv::Operation::Purge => None,
            kv::Operation::Put => {
                let plain = sealed_kv::open(self.gate.key(), &self.bucket, &token, &entry.value)
                    .map_err(|refused| {
                        self.gate
                            .refuse(&format!("{}/{token}", self.bucket), &refused);
                        KvStateError::Refused(refused)
                    })?;
                Some(
                    String::from_utf8(plain).map_err(|_| KvStateError::Unreadable {
                        session_key: session_key.to_owned(),
                        bucket: self.bucket.clone(),
                    })?,
                )
            }
        };
        let (document, format) = match document.map(unstamped) {
            Some((document, format)) => (Some(document), format),
            None => (None, 0),
        };
        Ok(Loaded {
            document,
            revision: entry.revision,
            format,
        })
    }

    /// Saves `document` if the session is still at `expected_revision` (0: no document yet)
    /// and returns the new revision; [`KvStateError::Conflict`] otherwise.
    pub async fn save(
        &self,
        session_key: &str,
        document: &str,
        expected_revision: u64,
    ) -> Result<u64, KvStateError> {
        check_object(session_key, document)?;
        let key = session_token(session_key);
        let document = stamped(document);
        let value = Bytes::from(
            sealed_kv::seal(self.gate.key(), &self.bucket, &key, document.as_bytes())
                .map_err(KvStateError::Refused)?,
        );
        let conflict = || KvStateError::Conflict {
            session_key: session_key.to_owned(),
            expected_revision,
        };
        let nats = |error: String| KvStateError::Nats {
            action: "save the state",
            session_key: session_key.to_owned(),
            detail: error,
        };
        if expected_revision == 0 {
            return match self.store.create(&key, value).await {
                Ok(revision) => Ok(revision),
                Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => Err(conflict()),
                Err(error) => Err(nats(error.to_string())),
            };
        }
        match self.store.update(&key, value, expected_revision).await {
            Ok(revision) => Ok(revision),
            Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => Err(conflict()),
            Err(error) => Err(nats(error.to_string())),
        }
    }
}

/// Refuses what the state file refuses: a document must be a JSON object.
fn check_object(session_key: &str, document: &str) -> Result<(), KvStateError> {
    let refuse = |detail: String| KvStateError::NotAnObject {
        session_key: session_key.to_owned(),
        detail,
    };
    match serde_json::from_str::<serde_json::Value>(document) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(refuse("not an object".to_owned())),
        Err(error) => Err(refuse(error.to_string())),
    }
}

/// [`KvStateStore`] behind the same seam as the state file
/// ([`crate::disk::state_store::StateStore`]): it remembers the revision of each session it
/// loaded or saved, so the caller passes none, exactly like `StateFile::load` / `save`.
#[derive(Debug)]
pub struct KvSessionStates {
    store: KvStateStore,
    known: Mutex<HashMap<String, u64>>,
    /// The bucket's values are whole documents: the queue goes inside them.
    queues: QueueFold,
}

impl KvSessionStates {
    /// Wraps an opened bucket.
    pub fn new(store: KvStateStore) -> KvSessionStates {
        KvSessionStates {
            store,
            known: Mutex::new(HashMap::new()),
            queues: QueueFold::default(),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        // The map holds plain numbers: a panic elsewhere cannot leave it half-written.
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl From<KvStateError> for StateStoreError {
    fn from(error: KvStateError) -> Self {
        StateStoreError::Backend(Box::new(error))
    }
}

#[async_trait::async_trait]
impl StateStore for KvSessionStates {
    async fn load(&self, session_key: &str) -> Result<Option<StoredState>, StateStoreError> {
        let loaded = self.store.load(session_key).await?;
        // Refused before its revision is known: a save then finds none and writes nothing.
        loaded.readable(session_key)?;
        self.known().insert(session_key.to_owned(), loaded.revision);
        Ok(self.queues.split(session_key, loaded.document))
    }

    async fn save(&self, session_key: &str, changes: &StateChanges) -> Result<(), StateStoreError> {
        let (whole, folded) = self.queues.fold(session_key, changes)?;
        let expected = self.known().get(session_key).copied().unwrap_or(0);
        let revision = self.store.save(session_key, &whole, expected).await?;
        self.known().insert(session_key.to_owned(), revision);
        self.queues.written(session_key, folded);
        Ok(())
    }

    fn path(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// The bucket keeps every session (its history is per key): nothing is pruned.
    fn hold(&self, _session_key: &str) {}

    fn release(&self, _session_key: &str) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_carries_its_format_and_the_guest_never_sees_it() {
        let saved = stamped(r#"{"trusted":{"telegram:1":5}}"#);
        let value: serde_json::Value = serde_json::from_str(&saved).expect("JSON");
        assert_eq!(value[FORMAT_FIELD], STATE_FORMAT);
        let (document, format) = unstamped(saved);
        assert_eq!(format, STATE_FORMAT);
        assert_eq!(document, r#"{"trusted":{"telegram:1":5}}"#);
    }

    #[test]
    fn only_a_format_newer_than_this_host_shim_reads_is_refused() {
        // (document, format found, refused)
        let table = [
            (r#"{"trusted":{}}"#.to_owned(), 0, false),
            (
                format!(r#"{{"stateFormat":{STATE_FORMAT}}}"#),
                STATE_FORMAT,
                false,
            ),
            (
                format!(r#"{{"stateFormat":{}}}"#, STATE_FORMAT + 1),
                STATE_FORMAT + 1,
                true,
            ),
            (r#"{"stateFormat":"two"}"#.to_owned(), u64::MAX, true),
            ("not json".to_owned(), 0, false),
        ];
        for (document, found, refused) in table {
            let (_, format) = unstamped(document.clone());
            assert_eq!(format, found, "{document}");
            let loaded = Loaded {
                document: Some(document.clone()),
                revision: 3,
                format,
            };
            match loaded.readable("k") {
                Ok(()) => assert!(!refused, "{document}"),
                Err(error) => {
                    assert!(refused, "{document}");
                    let text = error.to_string();
                    assert!(text.contains("upgrade host-shim"), "{text}");
                    assert!(
                        text.contains(&format!("reads up to {STATE_FORMAT}")),
                        "{text}"
                    );
                }
            }
        }
    }
}
