//! Who a session running on this node is paired with, as its own state says: the session
//! node writes it into the session's directory entry (`paired`), where the ingress reads it
//! to make the session's topic in each paired user's private chat with the bot
//! (docs/scaling.md#topics-in-private-chats).
//!
//! The guest records a pairing by saving a document that trusts one more identity, so the
//! pairing is heard here, at the save that records it, through [`PairedStore`] around the
//! session's store: nothing guesses it from what the session sends, and no look reads every
//! session's state from the bucket again (the directory entries are read at each look
//! anyway). A load says it too, so a session taken over from a dead node lists its pairs
//! before its first save.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use crate::disk::state_store::{self, StateChanges, StateStore, StateStoreError, StoredState};

/// The identities one session trusts as of its last load or save (shared between its
/// store, which writes it, and the node, which reads it at each look).
#[derive(Debug, Clone, Default)]
pub struct PairedSeen(Arc<Mutex<BTreeSet<String>>>);

impl PairedSeen {
    /// The identities trusted now.
    pub fn now(&self) -> BTreeSet<String> {
        self.slot().clone()
    }

    /// Whether the identities trusted now are `written` (nothing to announce).
    pub fn is(&self, written: &BTreeSet<String>) -> bool {
        *self.slot() == *written
    }

    fn heard(&self, document: &str) {
        // A document that is not an object is refused by the store itself (and reported by
        // the guest): it pairs nobody new, so what was heard last stands.
        if let Ok(trusted) = state_store::trusted_in(document) {
            *self.slot() = trusted.into_iter().collect();
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        // Whole sets are written at once: a panic elsewhere leaves nothing half-written.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A session's store that tells [`PairedSeen`] whom each document it loads or saves
/// trusts. A refused save tells nothing: its pairing did not happen.
pub struct PairedStore {
    inner: Arc<dyn StateStore>,
    seen: PairedSeen,
}

impl PairedStore {
    /// `inner`, its documents' trusted identities told to `seen`.
    pub fn new(inner: Arc<dyn StateStore>, seen: PairedSeen) -> PairedStore {
        PairedStore { inner, seen }
    }
}

#[async_trait::async_trait]
impl StateStore for PairedStore {
    async fn load(&self, session_key: &str) -> Result<Option<StoredState>, StateStoreError> {
        let loaded = self.inner.load(session_key).await?;
        if let Some(state) = &loaded {
            self.seen.heard(&state.document);
        }
        Ok(loaded)
    }

    async fn save(&self, session_key: &str, changes: &StateChanges) -> Result<(), StateStoreError> {
        self.inner.save(session_key, changes).await?;
        if let Some(document) = &changes.document {
            self.seen.heard(document);
        }
        Ok(())
    }

    fn path(&self) -> Option<std::path::PathBuf> {
        self.inner.path()
    }

    fn hold(&self, session_key: &str) {
        self.inner.hold(session_key);
    }

    fn release(&self, session_key: &str) {
        self.inner.release(session_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that keeps one document in memory, refusing saves while `refuse` is set.
    #[derive(Default)]
    struct Memory {
        document: Mutex<Option<String>>,
        refuse: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl StateStore for Memory {
        async fn load(&self, _: &str) -> Result<Option<StoredState>, StateStoreError> {
            Ok(self
                .document
                .lock()
                .unwrap()
                .clone()
                .map(|document| StoredState {
                    document,
                    queued: Vec::new(),
                }))
        }

        async fn save(&self, _: &str, changes: &StateChanges) -> Result<(), StateStoreError> {
            if self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(StateStoreError::Unavailable);
            }
            if let Some(document) = &changes.document {
                *self.document.lock().unwrap() = Some(document.clone());
            }
            Ok(())
        }

        fn path(&self) -> Option<std::path::PathBuf> {
            None
        }

        fn hold(&self, _session_key: &str) {}

        fn release(&self, _session_key: &str) {}
    }

    fn set(identities: &[&str]) -> BTreeSet<String> {
        identities.iter().map(|i| (*i).to_owned()).collect()
    }

    #[tokio::test]
    async fn loads_and_committed_saves_say_who_is_paired_and_a_refused_save_says_nothing() {
        let memory = Arc::new(Memory::default());
        *memory.document.lock().unwrap() = Some(r#"{"trusted":{"telegram:1":5}}"#.into());
        let seen = PairedSeen::default();
        let store = PairedStore::new(memory.clone(), seen.clone());
        assert!(seen.is(&BTreeSet::new()));

        // Taken over from another node: its pairs are known before its first save.
        store.load("k").await.unwrap();
        assert_eq!(seen.now(), set(&["telegram:1"]));

        // A pairing is the save that records it.
        let paired = StateChanges::document(r#"{"trusted":{"telegram:1":5,"telegram:2":6}}"#);
        store.save("k", &paired).await.unwrap();
        assert!(seen.is(&set(&["telegram:1", "telegram:2"])));

        // The queue alone changing, or a refused save, pairs nobody.
        let queued = StateChanges {
            document: None,
            dequeued: 0,
            enqueued: vec!["{}".into()],
        };
        store.save("k", &queued).await.unwrap();
        memory
            .refuse
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let refused = StateChanges::document(r#"{"trusted":{"telegram:9":1}}"#);
        store.save("k", &refused).await.unwrap_err();
        assert_eq!(seen.now(), set(&["telegram:1", "telegram:2"]));
    }
}
