//! The cluster-wide single-instance lock per bot credential: one JetStream KV key per bot,
//! with a TTL, in place of the lock file (I15) once ingress nodes run on several machines.
//!
//! Why KV and not a lock service: JetStream already gives the two operations a lock needs,
//! "write only if the key does not exist" (`create`) and "write only if nobody wrote since
//! revision r" (`update`). The TTL is the bucket's `max_age`: every renewal is a new write,
//! so a key ages out `ttl` after the holder's last renewal. (Per-key TTLs need the server to
//! allow message TTLs on the bucket, and the client renews only without one, so the bucket
//! age it is; every bot lock of one prefix shares the TTL.)

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::subjects::Prefix;

/// How long a lock outlives its holder's last renewal, unless configured.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// How often a holder renews, unless configured: a third of the TTL, so one renewal can be
/// lost (a slow NATS answer) without losing the lock.
pub const DEFAULT_RENEW_EVERY: Duration = Duration::from_secs(5);

/// Why a bot lock could not be taken or kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BotLockError {
    /// Another node holds the lock and renews it.
    #[error(
        "the bot lock {key} is held by {holder}: another ingress node runs this bot. Keep this \
         node as a standby (it takes over once the other has not renewed for the lock TTL), or \
         stop the other one"
    )]
    Held {
        /// The lock's KV key.
        key: String,
        /// Who holds it, as it described itself (host and process, never a token).
        holder: String,
    },
    /// This node held the lock but cannot prove it still does.
    #[error(
        "this node lost the bot lock {key}: it was not renewed within the lock TTL, and another \
         node may hold it now. Stop this bot's platform connection now; check this node's \
         connection to NATS, then start it again as a standby"
    )]
    Lost {
        /// The lock's KV key.
        key: String,
    },
    /// NATS did not do what was asked.
    #[error(
        "NATS could not {action} (bot lock {key}): {detail}. Check that nats-server runs with \
         JetStream (-js) and that this node can reach it"
    )]
    Nats {
        /// What was being done.
        action: &'static str,
        /// The lock's KV key.
        key: String,
        /// What the client said (never a token: lock values hold none).
        detail: String,
    },
}

/// What a lock's value says about its holder; shown to the node that is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Unique per process and start: tells this holder from a restarted one.
    pub id: String,
    /// For a person: host and process id.
    pub description: String,
}

impl Holder {
    /// This process, with a fresh random id.
    pub fn this_process() -> Holder {
        let mut bytes = [0u8; 8];
        // No randomness is no reason to refuse the lock: the time stands in.
        if getrandom::fill(&mut bytes).is_err() {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            bytes = (nanos as u64).to_le_bytes();
        }
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let claimant = crate::disk::lock::Claimant::this_process(0);
        Holder {
            id,
            description: format!("pid {} on {}", claimant.pid, claimant.host),
        }
    }
}

/// The bucket of bot locks of one prefix.
#[derive(Debug, Clone)]
pub struct BotLocks {
    store: kv::Store,
    ttl: Duration,
}

impl BotLocks {
    /// Opens (creating if need be) the lock bucket of `prefix` with this TTL. Every node of a
    /// prefix must use the same TTL: the last one to open the bucket sets it.
    pub async fn open(
        jetstream: &jetstream::Context,
        prefix: &Prefix,
        ttl: Duration,
    ) -> Result<BotLocks, BotLockError> {
        BotLocks::open_bucket(
            jetstream,
            prefix.lock_bucket(),
            "bot-connect: one key per bot credential, held by one ingress node",
            ttl,
        )
        .await
    }

    /// Opens (creating if need be) another bucket of leases with the same rules: the
    /// session leases (one node runs a session) and the node presence keys.
    pub async fn open_bucket(
        jetstream: &jetstream::Context,
        bucket: String,
        description: &str,
        ttl: Duration,
    ) -> Result<BotLocks, BotLockError> {
        let store = jetstream
            .create_or_update_key_value(kv::Config {
                bucket: bucket.clone(),
                description: description.into(),
                history: 1,
                max_age: ttl,
                ..kv::Config::default()
            })
            .await
            .map_err(|error| BotLockError::Nats {
                action: "open the lock bucket",
                key: bucket,
                detail: error.to_string(),
            })?;
        Ok(BotLocks { store, ttl })
    }

    /// Every key held now, with its holder. A value that is not a holder (written by
    /// something else) is skipped.
    pub async fn holders(&self) -> Result<Vec<(String, Holder)>, BotLockError> {
        use futures_util::TryStreamExt as _;
        let failed = |detail: String| BotLockError::Nats {
            action: "list the lock bucket",
            key: String::new(),
            detail,
        };
        let keys: Vec<String> = self
            .store
            .keys()
            .await
            .map_err(|error| failed(error.to_string()))?
            .try_collect()
            .await
            .map_err(|error| failed(error.to_string()))?;
        let mut held = Vec::with_capacity(keys.len());
        for key in keys {
            let value = self
                .store
                .get(&key)
                .await
                .map_err(|error| failed(error.to_string()))?;
            if let Some(holder) = value.and_then(|v| serde_json::from_slice::<Holder>(&v).ok()) {
                held.push((key, holder));
            }
        }
        Ok(held)
    }

    /// The TTL the bucket was opened with.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Takes `key` for `holder` if nobody holds it; [`BotLockError::Held`] otherwise.
    pub async fn try_acquire(&self, key: &str, holder: &Holder) -> Result<BotLock, BotLockError> {
        let value = encode(holder);
        match self.store.create(key, value.clone()).await {
            Ok(revision) => Ok(BotLock {
                store: self.store.clone(),
                key: key.to_owned(),
                value,
                revision,
            }),
            Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {
                Err(BotLockError::Held {
                    key: key.to_owned(),
                    holder: self.holder_of(key).await,
                })
            }
            Err(error) => Err(BotLockError::Nats {
                action: "create the lock key",
                key: key.to_owned(),
                detail: error.to_string(),
            }),
        }
    }

    /// Who holds `key`, for messages; a value this code did not write is described as such.
    async fn holder_of(&self, key: &str) -> String {
        match self.store.get(key).await {
            Ok(Some(value)) => match serde_json::from_slice::<Holder>(&value) {
                Ok(holder) => holder.description,
                Err(_) => "a holder whose lock value this version cannot read".to_owned(),
            },
            // Released between the refusal and this read: the next attempt may succeed.
            Ok(None) => "a holder that just released it".to_owned(),
            Err(_) => "an unknown holder (its lock value could not be read)".to_owned(),
        }
    }
}

fn encode(holder: &Holder) -> Bytes {
    // Serializing two strings cannot fail; an empty value would still be a valid lock.
    Bytes::from(serde_json::to_vec(holder).unwrap_or_default())
}

/// A held lock. Renew it more often than the TTL ([`BotLock::keep_alive`] does), and
/// [`BotLock::release`] it on stop; dropping it without releasing leaves it to age out.
#[derive(Debug)]
pub struct BotLock {
    store: kv::Store,
    key: String,
    value: Bytes,
    revision: u64,
}

impl BotLock {
    /// The lock's KV key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Writes the lock again on the revision this holder wrote last, restarting its TTL.
    /// Anyone else's write in between (the key aged out and another node took it) makes
    /// this [`BotLockError::Lost`].
    pub async fn renew(&mut self) -> Result<(), BotLockError> {
        match self
            .store
            .update(&self.key, self.value.clone(), self.revision)
            .await
        {
            Ok(revision) => {
                self.revision = revision;
                Ok(())
            }
            Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(BotLockError::Lost {
                    key: self.key.clone(),
                })
            }
            Err(error) => Err(BotLockError::Nats {
                action: "renew the lock",
                key: self.key.clone(),
                detail: error.to_string(),
            }),
        }
    }

    /// Deletes the lock if this holder still holds it, so a standby need not wait for the
    /// TTL. A lock already lost is left alone (it is someone else's now).
    pub async fn release(self) -> Result<(), BotLockError> {
        match self
            .store
            .delete_expect_revision(&self.key, Some(self.revision))
            .await
        {
            Ok(()) => Ok(()),
            // Someone wrote since our last renewal: the lock is theirs, nothing to release.
            Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(()),
            Err(error) => Err(BotLockError::Nats {
                action: "release the lock",
                key: self.key.clone(),
                detail: error.to_string(),
            }),
        }
    }

    /// Renews the lock every `every` in a task until [`KeptLock::release`]. A renewal that
    /// fails for a NATS error is retried at the next tick; once no renewal has succeeded for
    /// `ttl`, or one is refused, the lock is lost and [`KeptLock::lost`] says so.
    pub fn keep_alive(self, every: Duration, ttl: Duration) -> KeptLock {
        let (lost_tx, lost_rx) = watch::channel(None);
        let key = self.key.clone();
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut lock = self;
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            let mut renewed_at = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    _ = &mut stop_rx => return Some(lock),
                    _ = ticks.tick() => {}
                }
                match lock.renew().await {
                    Ok(()) => renewed_at = tokio::time::Instant::now(),
                    Err(lost @ BotLockError::Lost { .. }) => {
                        let _ = lost_tx.send(Some(lost));
                        return None;
                    }
                    // NATS errors for a whole TTL: the key may have aged out and been taken.
                    Err(_) if renewed_at.elapsed() >= ttl => {
                        let _ = lost_tx.send(Some(BotLockError::Lost {
                            key: lock.key.clone(),
                        }));
                        return None;
                    }
                    // Transient: the next tick tries again while the TTL still covers us.
                    Err(_) => {}
                }
            }
        });
        KeptLock {
            key,
            lost: lost_rx,
            stop: Some(stop_tx),
            task,
        }
    }
}

/// A lock renewed in the background (see [`BotLock::keep_alive`]).
#[derive(Debug)]
pub struct KeptLock {
    key: String,
    lost: watch::Receiver<Option<BotLockError>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: JoinHandle<Option<BotLock>>,
}

impl KeptLock {
    /// The lock's KV key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// True once the lock is known lost (no wait).
    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some() || self.task.is_finished()
    }

    /// Resolves when the lock is lost, with the error to show; the caller must then stop
    /// the platform connection. Pending for as long as the lock is held.
    pub async fn lost(&mut self) -> BotLockError {
        match self.lost.wait_for(Option::is_some).await {
            Ok(lost) => lost.clone().unwrap_or_else(|| BotLockError::Lost {
                key: self.key.clone(),
            }),
            // The renewing task ended without a word: it was stopped or it panicked.
            Err(_) => BotLockError::Lost {
                key: self.key.clone(),
            },
        }
    }

    /// Stops renewing and releases the lock if it is still held.
    pub async fn release(mut self) -> Result<(), BotLockError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(Some(lock)) => lock.release().await,
            // Lost already (someone else's now), or the task failed: nothing of ours to delete.
            Ok(None) | Err(_) => Ok(()),
        }
    }

    /// Stops renewing without releasing, as a node that dies would: the lock ages out
    /// after the TTL. For tests and for a shutdown that must not wait on NATS.
    pub fn abandon(self) {
        self.task.abort();
    }
}

impl Drop for KeptLock {
    fn drop(&mut self) {
        // A forgotten handle must not keep a lock alive for ever.
        self.task.abort();
    }
}
