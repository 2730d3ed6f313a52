//! At most once to the platform per send (docs/scaling.md#the-flow, step 6): each send a
//! session node asks of the ingress carries a send id, and the ingress remembers, per send
//! id, that it is posting it or has posted it, so the same send asked again returns the first
//! receipt instead of a second message.
//!
//! Why: a send's answer can be lost while its message was posted: nats-server restarting
//! between the ingress's post and its answer, or the answer arriving after the session
//! node stopped waiting. The session node used to give up then and only tell the chat "a
//! reply may not have been posted", and one in six runs of the nats-server restart test
//! ended with the last answer of a prompt neither posted nor reported (Telegram and Slack
//! have no idempotency key for a post, so the session node could not simply ask again).
//! With this ledger it asks again, with the same send id, until its patience runs out.
//!
//! Two places remember:
//! - this process's memory, per send id, holding the receipt once posted; a copy of a send
//!   that is still being posted waits for it (a slow platform, a rate limit waited out);
//! - a KV bucket, `<prefix>-posted`, for copies that reach *another* ingress (the first one
//!   died): [`PostMark::Posting`] is written before the post, [`PostMark::Posted`] with the
//!   receipt after it. A copy that finds `Posting` from a process that is gone is the crash
//!   window: nobody knows whether the platform got it, so it is not posted again and the
//!   chat is told ([`Unposted::MayHaveBeenPosted`]).
//!
//! A post the platform refused was not posted: its mark is removed, so asking again posts.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use transport_core::{SendReceipt, TransportError};

use super::seal::Gate;
use super::sealed_kv;
use super::subjects::Prefix;
use super::warn;
use crate::local::logging::LogSink;

/// How long a mark is kept: as long as a parked reply can wait in the outbox (24 h), so a
/// send parked after a lost answer still finds the mark of its first post, and more.
pub const POSTED_MAX_AGE: Duration = Duration::from_secs(48 * 60 * 60);

/// How many sends this process remembers. Copies come within the session node's patience
/// (seconds); at a hundred sends a second this is still over a minute of them.
const REMEMBERED_SENDS: usize = 8192;

/// What the ledger knows of one send, in the KV bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mark", rename_all = "camelCase")]
pub enum PostMark {
    /// An ingress is posting it, or died while it did.
    Posting,
    /// Posted, with the platform's receipt.
    #[serde(rename_all = "camelCase")]
    Posted {
        /// Platform message id.
        message_id: String,
        /// Key to edit it later.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        edit_key: Option<String>,
    },
}

/// What to do with a send, given its mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repost {
    /// Never posted (or refused): post it.
    Post,
    /// Posted already: answer with this receipt, post nothing.
    AlreadyPosted(SendReceipt),
    /// Another process was posting it and is gone: it may have been posted; post nothing.
    MayHaveBeenPosted,
}

/// The decision for a send whose KV mark is `mark` (this process's memory knew nothing).
pub fn decide(mark: Option<PostMark>) -> Repost {
    match mark {
        None => Repost::Post,
        Some(PostMark::Posted {
            message_id,
            edit_key,
        }) => Repost::AlreadyPosted(SendReceipt {
            message_id,
            edit_key,
        }),
        Some(PostMark::Posting) => Repost::MayHaveBeenPosted,
    }
}

/// Why a send has no receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unposted {
    /// The platform (or the transport) refused it: nothing was posted.
    Refused(TransportError),
    /// A process that is gone was posting it: it may or may not have been posted.
    MayHaveBeenPosted,
}

/// The chat's notice for a reply that may not have been posted.
pub fn maybe_posted_notice() -> String {
    "⚠ A reply may not have been posted: the machine posting it stopped answering while it \
     did. If an answer is missing above, ask again."
        .to_owned()
}

/// The ledger could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "NATS could not open bucket {bucket}: {detail}. Without it a send asked again after a lost \
     answer could be posted twice; check that nats-server runs with JetStream (-js) and that \
     this node can reach it"
)]
pub struct PostedError {
    /// The bucket.
    pub bucket: String,
    /// What the client said.
    pub detail: String,
}

/// One send in this process's memory: its receipt once posted. Locked for the whole post,
/// so a copy waits for the first instead of posting beside it.
type Slot = Arc<tokio::sync::Mutex<Option<SendReceipt>>>;

/// This process's memory of recent sends, oldest first for forgetting.
#[derive(Debug, Default)]
struct Remembered {
    slots: HashMap<String, Slot>,
    order: VecDeque<String>,
}

/// The posted ledger of one prefix, shared by the ingress's sends and its outbox.
#[derive(Clone)]
pub struct PostLedger {
    store: kv::Store,
    gate: Gate,
    log: Arc<dyn LogSink>,
    remembered: Arc<Mutex<Remembered>>,
}

impl PostLedger {
    /// Opens (creating if need be) the bucket `<prefix>-posted`.
    pub async fn open(
        jetstream: &jetstream::Context,
        prefix: &Prefix,
        gate: &Gate,
        log: Arc<dyn LogSink>,
    ) -> Result<PostLedger, PostedError> {
        let bucket = prefix.posted_bucket();
        let store = jetstream
            .create_or_update_key_value(kv::Config {
                bucket: bucket.clone(),
                description: "bot-connect: sends posted to their platform (at most once)".into(),
                history: 1,
                max_age: POSTED_MAX_AGE,
                storage: jetstream::stream::StorageType::File,
                ..kv::Config::default()
            })
            .await
            .map_err(|error| PostedError {
                bucket,
                detail: error.to_string(),
            })?;
        Ok(PostLedger {
            store,
            gate: gate.clone(),
            log,
            remembered: Arc::default(),
        })
    }

    /// Posts with `post` unless send `send_id` was posted (or is being posted) already:
    /// then answers with the first post's receipt, or [`Unposted::MayHaveBeenPosted`] when
    /// a process that is gone was posting it.
    pub async fn post_once<F, Fut>(&self, send_id: &str, post: F) -> Result<SendReceipt, Unposted>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<SendReceipt, TransportError>>,
    {
        let slot = self.slot(send_id);
        let mut known = slot.lock().await;
        if let Some(receipt) = known.as_ref() {
            return Ok(receipt.clone());
        }
        let key = self.key(send_id);
        match self.claim(&key).await {
            Repost::Post => {}
            Repost::AlreadyPosted(receipt) => {
                *known = Some(receipt.clone());
                return Ok(receipt);
            }
            Repost::MayHaveBeenPosted => return Err(Unposted::MayHaveBeenPosted),
        }
        match post().await {
            Ok(receipt) => {
                let mark = PostMark::Posted {
                    message_id: receipt.message_id.clone(),
                    edit_key: receipt.edit_key.clone(),
                };
                if let Err(error) = self.put(&key, &mark).await {
                    // This process still remembers it; only a copy reaching another
                    // ingress would find `Posting` and tell the chat it may be missing.
                    warn(
                        self.log.as_ref(),
                        "nats_posted_mark_failed",
                        &[("error", error)],
                    );
                }
                *known = Some(receipt.clone());
                Ok(receipt)
            }
            Err(error) => {
                // Refused means not posted: a copy asked again may post.
                if let Err(failed) = self.store.delete(&key).await {
                    warn(
                        self.log.as_ref(),
                        "nats_posted_mark_failed",
                        &[("error", failed.to_string())],
                    );
                }
                Err(Unposted::Refused(error))
            }
        }
    }

    /// Marks `key` as being posted, or says what its mark tells instead. Without NATS the
    /// post goes ahead: this process's memory still keeps its own copies from posting twice,
    /// and a send must not wait for a mark while the answer it carries is due.
    async fn claim(&self, key: &str) -> Repost {
        let sealed = match self.seal(key, &PostMark::Posting) {
            Ok(sealed) => sealed,
            Err(error) => {
                warn(
                    self.log.as_ref(),
                    "nats_posted_mark_failed",
                    &[("error", error)],
                );
                return Repost::Post;
            }
        };
        let error = match self.store.create(key, sealed.clone()).await {
            Ok(_) => return Repost::Post,
            Err(error) => error,
        };
        if error.kind() != kv::CreateErrorKind::AlreadyExists {
            warn(
                self.log.as_ref(),
                "nats_posted_mark_failed",
                &[("error", error.to_string())],
            );
            return Repost::Post;
        }
        match self.mark(key).await {
            Some(mark) => decide(Some(mark)),
            // Only a value this cluster did not seal: an outsider cannot keep a reply from
            // being posted, so it is overwritten.
            None => {
                if let Err(error) = self.store.put(key, sealed).await {
                    warn(
                        self.log.as_ref(),
                        "nats_posted_mark_failed",
                        &[("error", error.to_string())],
                    );
                }
                Repost::Post
            }
        }
    }

    /// The mark of `key`; one that does not open with the cluster key counts as none (the
    /// gate counts and logs it).
    async fn mark(&self, key: &str) -> Option<PostMark> {
        let value = match self.store.get(key).await {
            Ok(value) => value?,
            Err(error) => {
                warn(
                    self.log.as_ref(),
                    "nats_posted_mark_failed",
                    &[("error", error.to_string())],
                );
                // Unreadable, yet it exists: posting could post twice.
                return Some(PostMark::Posting);
            }
        };
        match sealed_kv::open(self.gate.key(), &self.store.name, key, &value) {
            Ok(plain) => serde_json::from_slice(&plain).ok(),
            Err(refused) => {
                self.gate
                    .refuse(&format!("{}/{key}", self.store.name), &refused);
                None
            }
        }
    }

    async fn put(&self, key: &str, mark: &PostMark) -> Result<(), String> {
        let sealed = self.seal(key, mark)?;
        self.store
            .put(key, sealed)
            .await
            .map(drop)
            .map_err(|error| error.to_string())
    }

    fn seal(&self, key: &str, mark: &PostMark) -> Result<Bytes, String> {
        let plain = serde_json::to_vec(mark).unwrap_or_default();
        sealed_kv::seal(self.gate.key(), &self.store.name, key, &plain)
            .map(Bytes::from)
            .map_err(|error| error.to_string())
    }

    /// The KV key of `send_id`: a keyed hash, like every other bucket's.
    fn key(&self, send_id: &str) -> String {
        self.gate.key().name("p", &["posted", send_id])
    }

    /// This process's slot for `send_id`.
    fn slot(&self, send_id: &str) -> Slot {
        self.remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .slot(send_id, REMEMBERED_SENDS)
    }
}

impl Remembered {
    /// The slot for `send_id`, made if need be, forgetting the oldest sends past `limit`;
    /// never one being posted, whose copies must keep waiting for it.
    fn slot(&mut self, send_id: &str, limit: usize) -> Slot {
        if let Some(slot) = self.slots.get(send_id) {
            return slot.clone();
        }
        while self.order.len() >= limit {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            let in_use = self
                .slots
                .get(&oldest)
                .is_some_and(|slot| Arc::strong_count(slot) > 1);
            if in_use {
                self.order.push_back(oldest);
                break;
            }
            self.slots.remove(&oldest);
        }
        let slot = Slot::default();
        self.slots.insert(send_id.to_owned(), slot.clone());
        self.order.push_back(send_id.to_owned());
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_is_posted_only_when_no_process_has_posted_or_is_posting_it() {
        assert_eq!(decide(None), Repost::Post);
        assert_eq!(
            decide(Some(PostMark::Posted {
                message_id: "7".into(),
                edit_key: Some("c:7".into())
            })),
            Repost::AlreadyPosted(SendReceipt {
                message_id: "7".into(),
                edit_key: Some("c:7".into())
            })
        );
        assert_eq!(decide(Some(PostMark::Posting)), Repost::MayHaveBeenPosted);
    }

    #[test]
    fn a_mark_survives_the_bucket() {
        for mark in [
            PostMark::Posting,
            PostMark::Posted {
                message_id: "12".into(),
                edit_key: None,
            },
        ] {
            let text = serde_json::to_vec(&mark).unwrap();
            assert_eq!(serde_json::from_slice::<PostMark>(&text).unwrap(), mark);
        }
    }

    #[test]
    fn marks_outlive_every_parked_reply() {
        // A send parked after its answer was lost is posted from the outbox up to its
        // max age later; its first post's mark must still be there.
        let outbox = super::super::outbox::OUTBOX_MAX_AGE;
        assert!(POSTED_MAX_AGE > outbox, "{POSTED_MAX_AGE:?} vs {outbox:?}");
    }

    #[test]
    fn memory_forgets_the_oldest_sends_but_never_one_being_posted() {
        let receipt = |id: &str| SendReceipt {
            message_id: id.into(),
            edit_key: None,
        };
        let mut remembered = Remembered::default();
        // Posted, and let go: only its receipt stays.
        for id in ["a", "b", "c"] {
            *remembered.slot(id, 3).try_lock().expect("free") = Some(receipt(id));
        }
        // "d" pushes out the oldest, "a"; "b" and "c" are still known.
        drop(remembered.slot("d", 3));
        assert!(!remembered.slots.contains_key("a"));
        for id in ["b", "c"] {
            let known = remembered.slot(id, 3).try_lock().expect("free").clone();
            assert_eq!(known, Some(receipt(id)), "{id}");
        }
        // A send being posted (its slot held) is not forgotten past the limit: a copy
        // arriving meanwhile must wait for it, not post beside it.
        let posting = remembered.slot("b", 3);
        drop(remembered.slot("e", 3));
        drop(remembered.slot("f", 3));
        assert!(remembered.slots.contains_key("b"), "{:?}", remembered.order);
        assert!(Arc::ptr_eq(&posting, &remembered.slot("b", 3)));
        // Once let go, it is forgotten in its turn.
        drop(posting);
        drop(remembered.slot("g", 3));
        assert!(
            !remembered.slots.contains_key("b"),
            "{:?}",
            remembered.order
        );
        assert!(remembered.slots.len() <= 3, "{:?}", remembered.order);
    }

    #[test]
    fn the_notice_says_what_to_do() {
        assert!(maybe_posted_notice().contains("ask again"));
    }
}
