//! The seam between a session's `store` import and wherever its state lives: the state
//! database on one machine (`state_db`), a JetStream KV bucket in a cluster
//! (`cluster::state_store`), the JSON state file of older versions (`state_file`, read and
//! migrated). A session's state is a document and a queue of entries; a save hands over only
//! what changed ([`StateChanges`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// What a session saved: its document and its queue's entries, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredState {
    /// The state document.
    pub document: String,
    /// The queue's entries, oldest first, as the guest wrote them.
    pub queued: Vec<String>,
}

/// What changed since the last load or save; a store applies all of it or none of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateChanges {
    /// The new document; `None` when only the queue changed.
    pub document: Option<String>,
    /// How many entries left the front of the stored queue.
    pub dequeued: u32,
    /// Entries added at the queue's end, oldest first.
    pub enqueued: Vec<String>,
}

impl StateChanges {
    /// Changes that replace the document and leave the queue alone.
    pub fn document(document: &str) -> StateChanges {
        StateChanges {
            document: Some(document.to_owned()),
            ..StateChanges::default()
        }
    }
}

/// Where sessions' state lives. Each call names only the session, and the store remembers
/// the revision it last loaded or saved, so a save over someone else's newer state is
/// refused.
#[async_trait::async_trait]
pub trait StateStore: Send + Sync {
    /// What `session_key` saved last, if anything; remembers its revision.
    async fn load(&self, session_key: &str) -> Result<Option<StoredState>, StateStoreError>;

    /// Applies `changes` to `session_key`'s state, refusing when another writer saved the
    /// session since this store last loaded or saved it.
    async fn save(&self, session_key: &str, changes: &StateChanges) -> Result<(), StateStoreError>;

    /// The file holding the state, if it is a file (kept out of an agent's reach).
    fn path(&self) -> Option<PathBuf>;

    /// `session_key` runs in this process now: its state must never be pruned to make room
    /// (a store that never prunes ignores this). No default, so a store that wraps another
    /// (the cluster's) cannot forget to pass it on to one that prunes (the JSON state file
    /// keeps its newest sessions only).
    fn hold(&self, session_key: &str);

    /// `session_key` stopped in this process.
    fn release(&self, session_key: &str);
}

/// Why a [`StateStore`] could not load or save.
#[derive(Debug, thiserror::Error)]
pub enum StateStoreError {
    /// A backend refused (the state database, the JSON state file, the cluster's KV
    /// bucket), in its own words. Boxed so this seam need not know the backends built on it
    /// (each converts its own error).
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync>),
    /// An earlier panic while the state file was in use left it unusable in this process.
    #[error(
        "the state file is unavailable after an earlier failure in this process; restart host-shim"
    )]
    Unavailable,
    /// The guest's changes do not fit what is stored (a guest bug: it dequeued entries the
    /// store does not hold, or wrote an entry that is not JSON); nothing was written.
    #[error(
        "the state of session {session_key:?} was not saved: {detail}. This is a bot-connect \
         bug; please report it with the log"
    )]
    BadChanges {
        /// The session.
        session_key: String,
        /// What did not fit.
        detail: String,
    },
}

/// The identities a session's `document` trusts: the keys of its `trusted` object (none
/// when it has no such object). The error says what the document is instead of a JSON
/// object ("got an array"), for a store that refuses it. The state database's trust index
/// and the cluster's directory entry both read a pairing here, so they agree on what one is.
pub fn trusted_in(document: &str) -> Result<Vec<String>, String> {
    match serde_json::from_str::<Value>(document) {
        Ok(Value::Object(mut fields)) => Ok(match fields.remove("trusted") {
            Some(Value::Object(trusted)) => trusted.into_iter().map(|(id, _)| id).collect(),
            _ => Vec::new(),
        }),
        Ok(Value::Array(_)) => Err("got an array".to_owned()),
        Ok(Value::String(_)) => Err("got a string".to_owned()),
        Ok(Value::Null) => Err("got null".to_owned()),
        Ok(Value::Bool(_)) => Err("got a boolean".to_owned()),
        Ok(Value::Number(_)) => Err("got a number".to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

/// For stores that keep the queue inside the document, as a `queued` array (the JSON state
/// file and the cluster's KV bucket, whose values are whole documents): remembers each
/// session's document and queue since its load, so the guest's changes can be folded into
/// the whole document those stores write. Such a save costs in proportion to the queue; the
/// state database stores entries as rows instead (docs/state.md).
#[derive(Debug, Default)]
pub struct QueueFold {
    sessions: Mutex<HashMap<String, StoredState>>,
}

impl QueueFold {
    /// Splits a stored document into the document without its queue and the queue's
    /// entries, and remembers both for [`QueueFold::fold`].
    pub fn split(&self, session_key: &str, stored: Option<String>) -> Option<StoredState> {
        let split = stored.map(|document| {
            split_queue(&document).unwrap_or(StoredState {
                document,
                queued: Vec::new(),
            })
        });
        self.sessions()
            .insert(session_key.to_owned(), split.clone().unwrap_or_default());
        split
    }

    /// The whole document to write once `changes` apply, with the queue inside, and the
    /// state to remember once it is written ([`QueueFold::written`]).
    pub fn fold(
        &self,
        session_key: &str,
        changes: &StateChanges,
    ) -> Result<(String, StoredState), StateStoreError> {
        let bad = |detail: String| StateStoreError::BadChanges {
            session_key: session_key.to_owned(),
            detail,
        };
        let mut state = self
            .sessions()
            .get(session_key)
            .cloned()
            .unwrap_or_default();
        let dequeued = changes.dequeued as usize;
        if dequeued > state.queued.len() {
            return Err(bad(format!(
                "{dequeued} queue entries removed, {} stored",
                state.queued.len()
            )));
        }
        state.queued.drain(..dequeued);
        state.queued.extend(changes.enqueued.iter().cloned());
        if let Some(document) = &changes.document {
            state.document.clone_from(document);
        }
        let mut whole = match serde_json::from_str::<Value>(&state.document) {
            Ok(Value::Object(fields)) => fields,
            // No document yet (only the queue changed on a new session).
            _ if state.document.is_empty() => serde_json::Map::new(),
            _ => return Err(bad("the document is not a JSON object".into())),
        };
        if !state.queued.is_empty() {
            let entries = state
                .queued
                .iter()
                .map(|entry| serde_json::from_str::<Value>(entry))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| bad(format!("a queue entry is not JSON: {error}")))?;
            whole.insert("queued".into(), Value::Array(entries));
        }
        Ok((Value::Object(whole).to_string(), state))
    }

    /// The folded document was written: `state` is what the store holds now.
    pub fn written(&self, session_key: &str, state: StoredState) {
        self.sessions().insert(session_key.to_owned(), state);
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, StoredState>> {
        // Whole values are inserted at once: a panic elsewhere leaves nothing half-written.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A document's `queued` array taken out, each entry as JSON text; `None` when the document
/// is not a JSON object (the guest reports it) or has no queue.
fn split_queue(document: &str) -> Option<StoredState> {
    let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(document) else {
        return None;
    };
    let Some(Value::Array(entries)) = fields.remove("queued") else {
        return None;
    };
    Some(StoredState {
        document: Value::Object(fields).to_string(),
        queued: entries.iter().map(Value::to_string).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compared as JSON values: key order is serde_json's business.
    fn json(text: &str) -> Value {
        serde_json::from_str(text).expect("JSON")
    }

    #[test]
    fn a_folded_queue_round_trips_through_the_whole_document() {
        let fold = QueueFold::default();
        let loaded = fold.split(
            "s",
            Some(r#"{"updatedAt":1,"queued":[{"transport":"t","conversationId":"a"}]}"#.into()),
        );
        let loaded = loaded.expect("a document");
        assert_eq!(json(&loaded.document), json(r#"{"updatedAt":1}"#));
        assert_eq!(loaded.queued.len(), 1);
        assert_eq!(
            json(&loaded.queued[0]),
            json(r#"{"transport":"t","conversationId":"a"}"#)
        );
        let changes = StateChanges {
            document: None,
            dequeued: 1,
            enqueued: vec![r#"{"transport":"t","conversationId":"b"}"#.into()],
        };
        let (whole, state) = fold.fold("s", &changes).expect("fold");
        assert_eq!(
            json(&whole),
            json(r#"{"updatedAt":1,"queued":[{"transport":"t","conversationId":"b"}]}"#)
        );
        fold.written("s", state);
        // Read back by a fresh store, the same state.
        let again = QueueFold::default().split("s", Some(whole));
        let again = again.expect("a document").queued;
        assert_eq!(again.len(), 1);
        assert_eq!(
            json(&again[0]),
            json(r#"{"transport":"t","conversationId":"b"}"#)
        );
        // An empty queue leaves no `queued` key behind.
        let (whole, _) = fold
            .fold(
                "s",
                &StateChanges {
                    document: None,
                    dequeued: 1,
                    enqueued: vec![],
                },
            )
            .expect("fold");
        assert_eq!(json(&whole), json(r#"{"updatedAt":1}"#));
    }

    #[test]
    fn changes_that_do_not_fit_are_refused_and_remember_nothing() {
        let fold = QueueFold::default();
        fold.split("s", Some(r#"{"updatedAt":1}"#.into()));
        let too_many = StateChanges {
            document: None,
            dequeued: 1,
            enqueued: vec![],
        };
        assert!(matches!(
            fold.fold("s", &too_many),
            Err(StateStoreError::BadChanges { .. })
        ));
        let not_json = StateChanges {
            document: None,
            dequeued: 0,
            enqueued: vec!["{".into()],
        };
        assert!(matches!(
            fold.fold("s", &not_json),
            Err(StateStoreError::BadChanges { .. })
        ));
        let (whole, _) = fold.fold("s", &StateChanges::default()).expect("fold");
        assert_eq!(json(&whole), json(r#"{"updatedAt":1}"#));
    }
}
