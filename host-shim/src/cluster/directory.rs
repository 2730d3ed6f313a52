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
//!
//! Whether a session is offline is decided by presence alone ([`state_of`]): its lease
//! and its node's key age out of their buckets on the NATS server, so no two machines'
//! clocks are ever compared. Times shown ("active 2 min ago", "last seen") are the NATS
//! server's time of the entry's last write, less what the node measured on its own clock
//! between the activity and that write ([`Listed::times`]): a node whose clock is off
//! shows the right age, and the answering node's clock being off can only make an age
//! zero, never negative.

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_util::{StreamExt as _, TryStreamExt as _};
use serde::{Deserialize, Serialize};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::bot_lock::Holder;
use super::seal::Gate;
use super::sealed_kv;
use super::state_store::KvStateError;
use super::subjects::{Prefix, session_token};
use crate::broker::bindings::Binding;
use crate::broker::routing::{SessionState, UsageSoFar, since};

/// A session the cluster runs, as `/sessions` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The id of the node running it (its key in the node bucket), for presence.
    #[serde(default)]
    pub node_id: String,
    /// The machine (host name) running it, for `/sessions`.
    #[serde(default)]
    pub machine: String,
    /// When a turn last started or ended there (or the session started), by the node's
    /// clock, ms since the epoch. Only ever compared with `written_at_ms`.
    #[serde(default)]
    pub active_at_ms: u64,
    /// When the node wrote this entry, by the node's clock.
    #[serde(default)]
    pub written_at_ms: u64,
    /// Tokens and cost so far, where its agent reports them.
    #[serde(default)]
    pub usage: Option<UsageSoFar>,
    /// Why the node that wrote this will not run the session (for the chats), if it will not.
    #[serde(default)]
    pub refused: Option<String>,
    /// The identities its state trusts (`<transport>:<user>`), as its last save said: the
    /// ingress makes the session's topic in each one's private chat with the bot where the
    /// bot makes topics there (docs/scaling.md#topics-in-private-chats). Sealed like the
    /// rest of the entry, so only the cluster reads who is paired.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub paired: BTreeSet<String>,
    /// Set when the session was forgotten (docs/scaling.md#forgetting-a-session): the entry
    /// is then a tombstone, listed nowhere, kept so the chats still bound to the session
    /// hear why their messages are not delivered. A node that runs the session again writes
    /// its entry over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgotten: Option<Forgotten>,
}

/// Why a session was forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "camelCase")]
pub enum ForgetReason {
    /// An operator ran `host-shim cluster forget`.
    Operator,
    /// It was offline longer than the ingress's `--forget-offline-after`.
    #[serde(rename_all = "camelCase")]
    Expired {
        /// The limit it passed, in seconds.
        after_secs: u64,
    },
}

/// What a tombstone records besides the session's name and place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forgotten {
    /// Who forgot it, and why.
    pub why: ForgetReason,
    /// The transports whose bound chats were told already (each by the ingress holding
    /// that bot), so a failover does not tell them twice.
    #[serde(default)]
    pub told: BTreeSet<String>,
}

/// Entries (or lock values) read at once when listing: one after another, a thousand
/// sessions cost a thousand round trips.
const READS: usize = 32;

/// How often marking a tombstone told is tried when other writes keep coming first (one
/// ingress per bot marks it, so more than a few is something else writing).
const MARK_TRIES: usize = 5;

/// How often a running session's entry is written again though nothing changed, so its
/// "last seen" stays fresh for when its node dies. Looked at once a lease renewal, so
/// never more often than that.
pub const SEEN_REFRESH: Duration = Duration::from_secs(30);

impl SessionEntry {
    /// Whether this entry should be written again at `now_ms` (the node's clock), its
    /// session now `busy` or not and `prompted` (it took a prompt since the last look): a
    /// turn started or ended, a prompt came (its turn may have been shorter than a look),
    /// or [`SEEN_REFRESH`] passed since the last write. A clock that jumped back counts as
    /// time passed, or a node whose clock was set back an hour would not refresh for an
    /// hour.
    pub fn due(&self, busy: bool, prompted: bool, now_ms: u64) -> bool {
        let refresh = u64::try_from(SEEN_REFRESH.as_millis()).unwrap_or(u64::MAX);
        prompted || busy != self.busy || now_ms.abs_diff(self.written_at_ms) >= refresh
    }

    /// Records where the session stands at `now_ms`, before the entry is written: a prompt
    /// or a change of `busy` is activity.
    pub fn record(&mut self, busy: bool, prompted: bool, usage: Option<UsageSoFar>, now_ms: u64) {
        if prompted || busy != self.busy {
            self.active_at_ms = now_ms;
        }
        self.busy = busy;
        if usage.is_some() {
            self.usage = usage;
        }
        self.written_at_ms = now_ms;
    }
}

/// The machine named in a node's description (`pid 42 on build`), or the whole description
/// when it names none.
pub fn machine_of(holder: &Holder) -> String {
    machine_in(&holder.description)
}

/// The machine a node's description (`pid 42 on build`) names, or the whole description.
pub fn machine_in(description: &str) -> String {
    description
        .rsplit_once(" on ")
        .map_or(description, |(_, host)| host)
        .to_owned()
}

/// What a session's chats are told when `machine` will not run it because of `why`.
pub fn refusal(why: &KvStateError, machine: &str) -> String {
    match why {
        KvStateError::Newer { found, known, .. } => format!(
            "its state was written by a newer host-shim (state format {found}; host-shim on \
             {machine} reads up to {known}): upgrade host-shim on {machine}"
        ),
        other => format!("host-shim on {machine} cannot run it: {other}"),
    }
}

/// A session entry as read back, with the NATS server's time of its last write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The entry.
    pub entry: SessionEntry,
    /// When the server stored it, ms since the epoch (the server's clock).
    pub written_ms: u64,
    /// Its KV revision: what a write that must not cross another (forgetting it) expects,
    /// and, while the session is offline, what names its offline period (nobody writes an
    /// offline session's entry; it is written again when the session is back).
    pub revision: u64,
}

impl Listed {
    /// How long ago, at `now_ms` by the reader's clock, the session was last active
    /// (`online`) or last seen (its entry last written). The time between the activity
    /// and the write is the node's own measure, taken off the server's time of the write.
    pub fn ago(&self, now_ms: u64, online: bool) -> Duration {
        let seen = self.written_ms;
        if !online {
            return since(now_ms, seen);
        }
        let before_write = self
            .entry
            .written_at_ms
            .saturating_sub(self.entry.active_at_ms);
        since(now_ms, seen.saturating_sub(before_write))
    }
}

/// Which session nodes are live and which node holds each session's lease, as the NATS
/// server's buckets say (keys age out after the TTL there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Presence {
    /// The ids of the live session nodes.
    pub nodes: BTreeSet<String>,
    /// The holder id of each lease, by session token.
    pub leases: BTreeMap<String, String>,
}

/// Where a listed session stands: offline unless its lease is held by a live node (so a
/// node that died, or whose lease aged out, is offline after the TTL, whatever any clock
/// says); busy as its node last wrote.
pub fn state_of(entry: &SessionEntry, presence: &Presence) -> SessionState {
    let online = presence
        .leases
        .get(&session_token(&entry.key))
        .is_some_and(|holder| presence.nodes.contains(holder));
    match (online, entry.busy) {
        (false, _) => SessionState::Offline,
        (true, true) => SessionState::Busy,
        (true, false) => SessionState::Idle,
    }
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

    /// Every session listed (forgotten ones left out), in key order, with the server's
    /// time of its last write. An entry that is not one, or is not sealed with the cluster
    /// key (written by something else), is skipped.
    pub async fn sessions(&self) -> Result<Vec<Listed>, DirectoryError> {
        let mut entries = self.entries().await?;
        entries.retain(|listed| listed.entry.forgotten.is_none());
        Ok(entries)
    }

    /// [`Directory::sessions`] with the tombstones of forgotten sessions.
    pub async fn entries(&self) -> Result<Vec<Listed>, DirectoryError> {
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
        let listed: Vec<Option<Listed>> = futures_util::stream::iter(keys)
            .map(|key| async move { self.listed_at(&key).await })
            .buffered(READS)
            .try_collect()
            .await?;
        Ok(listed.into_iter().flatten().collect())
    }

    /// Session `session_key`'s entry, if it has one that opens and was not forgotten.
    pub async fn session(&self, session_key: &str) -> Result<Option<Listed>, DirectoryError> {
        Ok(self
            .entry(session_key)
            .await?
            .filter(|listed| listed.entry.forgotten.is_none()))
    }

    /// Session `session_key`'s entry, its tombstone if it was forgotten.
    pub async fn entry(&self, session_key: &str) -> Result<Option<Listed>, DirectoryError> {
        self.listed_at(&session_token(session_key)).await
    }

    /// Replaces `listed`'s entry with its tombstone, unless the entry was written since
    /// it was read (its node is back: it is not forgotten then). The tombstone keeps the
    /// name, directory and machine, for the answer its chats get. `Ok(false)`: written
    /// since, nothing changed.
    pub async fn forget(&self, listed: &Listed, why: ForgetReason) -> Result<bool, DirectoryError> {
        let tombstone = SessionEntry {
            busy: false,
            node: String::new(),
            node_id: String::new(),
            forgotten: Some(Forgotten {
                why,
                told: BTreeSet::new(),
            }),
            ..listed.entry.clone()
        };
        self.replace(listed, &tombstone, "forget a session").await
    }

    /// Records that the chats of `transport` bound to the forgotten session `session_key`
    /// were told. Read again and retried when another ingress (another bot's) recorded
    /// its own meanwhile, so neither mark is lost. `Ok(false)`: the session is no longer
    /// forgotten (a node runs it again).
    pub async fn mark_told(
        &self,
        session_key: &str,
        transport: &str,
    ) -> Result<bool, DirectoryError> {
        for _ in 0..MARK_TRIES {
            let Some(listed) = self.entry(session_key).await? else {
                return Ok(false);
            };
            let Some(forgotten) = &listed.entry.forgotten else {
                return Ok(false);
            };
            if forgotten.told.contains(transport) {
                return Ok(true);
            }
            let mut marked = listed.entry.clone();
            if let Some(forgotten) = marked.forgotten.as_mut() {
                forgotten.told.insert(transport.to_owned());
            }
            if self
                .replace(&listed, &marked, "mark a forgotten session told")
                .await?
            {
                return Ok(true);
            }
        }
        Err(DirectoryError {
            action: "mark a forgotten session told",
            bucket: bucket_name(&self.sessions),
            detail: format!("its entry changed {MARK_TRIES} times while being marked"),
        })
    }

    /// Removes a tombstone for good, unless it was written since it was read.
    pub async fn drop_tombstone(&self, listed: &Listed) -> Result<(), DirectoryError> {
        let token = session_token(&listed.entry.key);
        match self
            .sessions
            .purge_expect_revision(&token, Some(listed.revision))
            .await
        {
            Ok(()) => Ok(()),
            // Written since (the session is back): it is no tombstone to drop any more.
            Err(_) if self.revision_moved(&token, listed.revision).await => Ok(()),
            Err(error) => Err(self.failed(&self.sessions, "drop a forgotten session", error)),
        }
    }

    /// Writes `entry` over `listed`'s entry if it is still the revision read. `Ok(false)`:
    /// another write came first.
    async fn replace(
        &self,
        listed: &Listed,
        entry: &SessionEntry,
        action: &'static str,
    ) -> Result<bool, DirectoryError> {
        let token = session_token(&listed.entry.key);
        let value = self.seal(
            &self.sessions,
            &token,
            &serde_json::to_vec(entry).unwrap_or_default(),
        )?;
        match self
            .sessions
            .update(&token, Bytes::from(value), listed.revision)
            .await
        {
            Ok(_) => Ok(true),
            Err(_) if self.revision_moved(&token, listed.revision).await => Ok(false),
            Err(error) => Err(self.failed(&self.sessions, action, error)),
        }
    }

    /// Whether the key's revision is no longer `revision` (written or removed since).
    async fn revision_moved(&self, token: &str, revision: u64) -> bool {
        match self.sessions.entry(token).await {
            Ok(Some(now)) => now.revision != revision,
            Ok(None) => true,
            Err(_) => false,
        }
    }

    /// The entry under KV key `key`, with the server's time of its write.
    async fn listed_at(&self, key: &str) -> Result<Option<Listed>, DirectoryError> {
        let stored = self
            .sessions
            .entry(key)
            .await
            .map_err(|error| self.failed(&self.sessions, "list the sessions", error))?;
        let Some(stored) = stored.filter(|s| s.operation == kv::Operation::Put) else {
            return Ok(None);
        };
        let written_ms =
            u64::try_from(stored.created.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
        let opened = self.open_value(&self.sessions, key, &stored.value);
        Ok(opened
            .and_then(|v| serde_json::from_slice(&v).ok())
            .map(|entry| Listed {
                entry,
                written_ms,
                revision: stored.revision,
            }))
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

    /// Unbinds `conversation`: its next message is routed as an unbound chat's.
    pub async fn unbind(&self, conversation: &str) -> Result<(), DirectoryError> {
        self.bindings
            .delete(self.binding_key(conversation))
            .await
            .map_err(|error| self.failed(&self.bindings, "remove a binding", error))
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

/// Reads [`Presence`] from the node and lease buckets, opened (never created: the session
/// nodes create them with their TTL) at the first read that finds them.
#[derive(Debug, Clone)]
pub struct PresenceReader {
    jetstream: jetstream::Context,
    prefix: Prefix,
    buckets: std::sync::Arc<tokio::sync::Mutex<Option<(kv::Store, kv::Store)>>>,
}

impl PresenceReader {
    /// A reader of `prefix`'s presence.
    pub fn new(jetstream: jetstream::Context, prefix: &Prefix) -> PresenceReader {
        PresenceReader {
            jetstream,
            prefix: prefix.clone(),
            buckets: std::sync::Arc::default(),
        }
    }

    /// The presence now. No bucket yet means no session node ever started: nobody is live.
    pub async fn read(&self) -> Result<Presence, DirectoryError> {
        let Some((nodes, leases)) = self.buckets().await else {
            return Ok(Presence::default());
        };
        Ok(Presence {
            nodes: holders(&nodes).await?.into_values().collect(),
            leases: holders(&leases).await?,
        })
    }

    /// The presence of one session: its lease and the node holding it, two reads however
    /// many sessions there are ([`state_of`] reads it like the whole).
    pub async fn of(&self, session_key: &str) -> Result<Presence, DirectoryError> {
        let Some((nodes, leases)) = self.buckets().await else {
            return Ok(Presence::default());
        };
        let token = session_token(session_key);
        let Some(holder) = holder_at(&leases, &token).await? else {
            return Ok(Presence::default());
        };
        // The node's presence key, as the session node names it (`node-<id>`).
        let node = holder_at(&nodes, &format!("node-{holder}")).await?;
        Ok(Presence {
            nodes: node.into_iter().collect(),
            leases: BTreeMap::from([(token, holder)]),
        })
    }

    /// Both buckets, opened at the first call that finds them.
    async fn buckets(&self) -> Option<(kv::Store, kv::Store)> {
        let mut buckets = self.buckets.lock().await;
        if buckets.is_none() {
            let nodes = self
                .jetstream
                .get_key_value(self.prefix.node_bucket())
                .await;
            let leases = self
                .jetstream
                .get_key_value(self.prefix.lease_bucket())
                .await;
            if let (Ok(nodes), Ok(leases)) = (nodes, leases) {
                *buckets = Some((nodes, leases));
            }
        }
        buckets.clone()
    }
}

/// The holder id under `key` of a lock-style bucket, if a holder is there.
async fn holder_at(store: &kv::Store, key: &str) -> Result<Option<String>, DirectoryError> {
    let value = store.get(key).await.map_err(|e| DirectoryError {
        action: "read who is live",
        bucket: bucket_name(store),
        detail: e.to_string(),
    })?;
    Ok(value
        .and_then(|v| serde_json::from_slice::<Holder>(&v).ok())
        .map(|holder| holder.id))
}

/// The holder id of every key of a lock-style bucket, by key. A value that is not a
/// holder is no holder.
async fn holders(store: &kv::Store) -> Result<BTreeMap<String, String>, DirectoryError> {
    let fail = |detail: String| DirectoryError {
        action: "read who is live",
        bucket: bucket_name(store),
        detail,
    };
    let keys: Vec<String> = store
        .keys()
        .await
        .map_err(|e| fail(e.to_string()))?
        .try_collect()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let values: Vec<(String, Option<Bytes>)> = futures_util::stream::iter(keys)
        .map(|key| async move {
            let value = store.get(&key).await.map_err(|e| fail(e.to_string()))?;
            Ok::<_, DirectoryError>((key, value))
        })
        .buffered(READS)
        .try_collect()
        .await?;
    Ok(values
        .into_iter()
        .filter_map(|(key, value)| {
            let holder = serde_json::from_slice::<Holder>(&value?).ok()?;
            Some((key, holder.id))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, busy: bool) -> SessionEntry {
        SessionEntry {
            key: key.into(),
            name: "api".into(),
            cwd: "/work/api".into(),
            busy,
            node: "pid 7 on laptop".into(),
            node_id: "n1".into(),
            machine: "laptop".into(),
            active_at_ms: 0,
            written_at_ms: 0,
            usage: None,
            refused: None,
            paired: BTreeSet::new(),
            forgotten: None,
        }
    }

    #[test]
    fn a_session_is_offline_unless_a_live_node_holds_its_lease() {
        let token = session_token("k");
        let presence = |nodes: &[&str], lease: Option<&str>| Presence {
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            leases: lease
                .map(|holder| (token.clone(), holder.to_owned()))
                .into_iter()
                .collect(),
        };
        let table = [
            (presence(&["n1"], Some("n1")), false, SessionState::Idle),
            (presence(&["n1"], Some("n1")), true, SessionState::Busy),
            // Moved to another live node before it wrote its entry: still online.
            (
                presence(&["n1", "n2"], Some("n2")),
                false,
                SessionState::Idle,
            ),
            // Its lease aged out (or was never taken).
            (presence(&["n1"], None), true, SessionState::Offline),
            // Its node's key aged out while the lease has not yet.
            (presence(&["n2"], Some("n1")), false, SessionState::Offline),
            (Presence::default(), false, SessionState::Offline),
        ];
        for (presence, busy, expected) in table {
            assert_eq!(
                state_of(&entry("k", busy), &presence),
                expected,
                "{presence:?}"
            );
        }
    }

    #[test]
    fn ages_come_from_the_servers_write_time_and_are_never_negative() {
        // The node's clock is a day ahead; 40 s passed on it between activity and write.
        let day = 86_400_000;
        let mut listed = Listed {
            entry: SessionEntry {
                active_at_ms: day + 1_000,
                written_at_ms: day + 41_000,
                ..entry("k", false)
            },
            written_ms: 1_000_000,
            revision: 1,
        };
        // (reader's now, online, expected age)
        let table = [
            (1_020_000, true, Duration::from_secs(60)),
            (1_020_000, false, Duration::from_secs(20)),
            // The reader's clock is behind the server's: zero, not "in 20 s".
            (990_000, false, Duration::ZERO),
            (950_000, true, Duration::ZERO),
        ];
        for (now, online, expected) in table {
            assert_eq!(listed.ago(now, online), expected, "{now} {online}");
        }
        // A node whose clock went back between activity and write: no time passed.
        listed.entry.written_at_ms = 0;
        assert_eq!(listed.ago(1_020_000, true), Duration::from_secs(20));
    }

    #[test]
    fn an_entry_is_written_again_on_a_change_of_turn_or_after_the_refresh() {
        let refresh = u64::try_from(SEEN_REFRESH.as_millis()).expect("fits");
        let mut written = entry("k", false);
        written.written_at_ms = 1_000_000;
        // (busy now, prompted since, node's clock now, due)
        let table = [
            (false, false, 1_000_000 + 1_000, false),
            (true, false, 1_000_000 + 1_000, true),
            // A turn that began and ended between two looks.
            (false, true, 1_000_000 + 1_000, true),
            (false, false, 1_000_000 + refresh, true),
            // The node's clock was set back: refreshed, not silent until it catches up.
            (false, false, 1_000_000 - refresh, true),
            (false, false, 1_000_000 - 1_000, false),
        ];
        for (busy, prompted, now, due) in table {
            assert_eq!(
                written.due(busy, prompted, now),
                due,
                "{busy} {prompted} {now}"
            );
        }
        let usage = UsageSoFar {
            input: 3,
            output: 4,
            cost_micros: None,
        };
        written.record(true, false, Some(usage), 1_005_000);
        assert_eq!(
            (
                written.busy,
                written.active_at_ms,
                written.written_at_ms,
                written.usage
            ),
            (true, 1_005_000, 1_005_000, Some(usage))
        );
        // A refresh without a change keeps the time of the last activity, and a usage
        // report that could not be had keeps the last one.
        written.record(true, false, None, 1_040_000);
        assert_eq!(
            (written.active_at_ms, written.written_at_ms, written.usage),
            (1_005_000, 1_040_000, Some(usage))
        );
        // A prompt whose whole turn fell between two looks is activity all the same.
        written.record(true, true, None, 1_050_000);
        assert_eq!(written.active_at_ms, 1_050_000);
    }

    #[test]
    fn the_machine_is_the_host_a_node_describes() {
        let holder = |description: &str| Holder {
            id: "x".into(),
            description: description.into(),
        };
        assert_eq!(
            machine_of(&holder("pid 42 on build.example")),
            "build.example"
        );
        assert_eq!(machine_of(&holder("laptop")), "laptop");
    }
}
