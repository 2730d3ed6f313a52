//! The per-session state document: trust, pending codes, pause, remembered chats and which of them
//! follow local turns (docs/architecture.md#the-original-module-by-module). The host stores it
//! opaquely; loading is tolerant.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::core::code_hash::CodeHash;
use crate::keys::{ConversationKey, Identity};

/// A live pairing challenge for one conversation. The code itself is not here: only its
/// salted hash is kept (docs/security.md#pairing), so the document cannot be read to pair a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingChallenge {
    /// The code's salted hash.
    pub hash: CodeHash,
    /// How many digits the code has: only a digit string of this length is an attempt (I33).
    pub digits: u32,
    /// When the code stops working (ms since epoch).
    pub expires_at: u64,
    /// Wrong attempts against this code so far.
    pub attempts: u32,
}

/// A conversation the bridge remembers (it may be sent turns it started, and local turns
/// when it follows).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConversationTarget {
    /// Transport id.
    pub transport: String,
    /// Conversation id.
    pub conversation_id: String,
    /// Thread, when the conversation is threaded.
    pub thread_id: Option<String>,
}

impl ConversationTarget {
    /// `transport:conversationId`, the key for pause state and pending codes.
    pub fn key(&self) -> ConversationKey {
        ConversationKey::new(&self.transport, &self.conversation_id)
    }
}

/// Everything one session remembers across restarts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionState {
    /// Last change (ms since epoch); the host prunes the oldest sessions by it.
    pub updated_at: u64,
    /// Trusted identity → paired-at (ms).
    pub trusted: BTreeMap<Identity, u64>,
    /// Conversation key → live challenge.
    pub pending: BTreeMap<ConversationKey, PendingChallenge>,
    /// Paused conversation keys.
    pub paused: BTreeSet<ConversationKey>,
    /// Conversation keys that see local turns (typed at the terminal) and `/connect digest`: a DM
    /// from its first remembered message, a group only after `/follow`
    /// (docs/security.md#who-sees-what: a group that once ran `/status` was sent a DM user's
    /// answers).
    pub following: BTreeSet<ConversationKey>,
    /// Remembered conversations, deduplicated by transport, conversation and thread.
    pub conversations: Vec<ConversationTarget>,
    /// The turn that was running when the document was saved, if any: after a restart the chats
    /// that saw its card are told it was lost
    /// (docs/decisions.md#decision-20-work-cut-short-is-reported).
    pub turn: Option<RunningTurn>,
    /// Bytes of chat files the inbox saved today: the daily cap
    /// (`bridge.inbox.maxBytesPerDay`) must hold across restarts, or a restart would reset it.
    pub inbox: InboxUse,
}

/// What the inbox has taken today.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InboxUse {
    /// The day ([`crate::core::inbox::day_of`]) the count is for.
    pub day: u64,
    /// Bytes saved that day.
    pub bytes: u64,
}

impl InboxUse {
    /// Bytes already saved on `day` (none when the count is from another day).
    pub fn used_on(&self, day: u64) -> u64 {
        if self.day == day { self.bytes } else { 0 }
    }

    /// Counts `bytes` saved on `day`.
    pub fn add(&mut self, day: u64, bytes: u64) {
        let before = self.used_on(day);
        *self = InboxUse {
            day,
            bytes: before.saturating_add(bytes),
        };
    }
}

/// What the chats saw of a running turn.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunningTurn {
    /// When it started (ms).
    pub started_at: u64,
    /// It came from a messenger.
    pub remote: bool,
    /// One card per conversation, with the handle to edit it.
    pub cards: Vec<CardRecord>,
    /// The conversations a remote turn answers (the chats whose prompts it took); empty
    /// for a local turn. Kept so a bridge restarted mid-turn still answers only them.
    pub audience: Vec<ConversationTarget>,
    /// The chat messages this turn answers (its prompt and the steers into it): what its
    /// reactions and its done message name. Kept so a turn a restart cut short still marks
    /// them failed.
    pub prompts: Vec<PromptMark>,
}

/// A user's message the bridge took as a prompt, by its platform id: what a reaction or a
/// reply names (docs/pi.md#reactions-and-the-done-message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptMark {
    /// Where it was sent.
    pub target: ConversationTarget,
    /// The platform's id of the message.
    pub message_id: String,
}

/// A progress card posted in a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardRecord {
    /// Where it was posted.
    pub target: ConversationTarget,
    /// The handle to edit it, when the transport can.
    pub edit_key: Option<String>,
}

/// Most entries kept per map or list when loading, so a hostile or corrupted state file
/// cannot make a session allocate without bound.
pub const MAX_ENTRIES: usize = 10_000;

impl SessionState {
    /// Whether `identity` may prompt.
    pub fn is_trusted(&self, identity: &Identity) -> bool {
        self.trusted.contains_key(identity)
    }

    /// Trusts `identity` from `at` (ms); pairing again refreshes the time.
    pub fn trust(&mut self, identity: &Identity, at: u64) {
        self.trusted.insert(identity.clone(), at);
    }

    /// Withdraws trust; true when `identity` was trusted.
    pub fn revoke(&mut self, identity: &Identity) -> bool {
        self.trusted.remove(identity).is_some()
    }

    /// Withdraws all trust (`/connect disconnect`); returns how many identities lost it.
    pub fn revoke_all(&mut self) -> usize {
        let count = self.trusted.len();
        self.trusted.clear();
        count
    }

    /// When `identity` paired, if it is trusted.
    pub fn paired_at(&self, identity: &Identity) -> Option<u64> {
        self.trusted.get(identity).copied()
    }

    /// The live challenge for a conversation key.
    pub fn pending(&self, key: &ConversationKey) -> Option<&PendingChallenge> {
        self.pending.get(key)
    }

    /// Sets or (with `None`) clears the challenge for a conversation key.
    pub fn set_pending(&mut self, key: &ConversationKey, challenge: Option<PendingChallenge>) {
        match challenge {
            Some(challenge) => {
                self.pending.insert(key.clone(), challenge);
            }
            None => {
                self.pending.remove(key);
            }
        }
    }

    /// Whether a conversation key is paused.
    pub fn is_paused(&self, key: &ConversationKey) -> bool {
        self.paused.contains(key)
    }

    /// Pauses or resumes a conversation key; true when that changed anything.
    pub fn set_paused(&mut self, key: &ConversationKey, paused: bool) -> bool {
        set_member(&mut self.paused, key, paused)
    }

    /// Whether a conversation key sees local turns and `/connect digest`.
    pub fn is_following(&self, key: &ConversationKey) -> bool {
        self.following.contains(key)
    }

    /// Starts (`/follow`) or stops (`/unfollow`) sending local turns to a conversation key;
    /// true when that changed anything.
    pub fn set_following(&mut self, key: &ConversationKey, following: bool) -> bool {
        set_member(&mut self.following, key, following)
    }

    /// Remembers the conversation a message came from; true when it is new. A DM follows
    /// local turns from its first remembered message (it is one person's own chat with the
    /// bot); a group never follows by being remembered, only by `/follow`, so one `/status`
    /// in a team group does not put the terminal's work in front of the whole team.
    pub fn remember_chat(&mut self, target: ConversationTarget, direct: bool) -> bool {
        let key = target.key();
        let new = self.remember_conversation(target);
        if new && direct {
            self.following.insert(key);
        }
        new
    }

    /// Adds a remembered conversation without deciding whether it follows; true when it is
    /// new. Targets differing only in thread are distinct, so every thread the bot was used
    /// in keeps getting the turns it started.
    pub fn remember_conversation(&mut self, target: ConversationTarget) -> bool {
        if self.conversations.contains(&target) {
            return false;
        }
        self.conversations.push(target);
        true
    }

    /// What both local `/connect disconnect` and remote `/disconnect` do
    /// (docs/decisions.md#decision-7-local-and-remote-disconnect-clear-the-same-state): revoke
    /// `identity`, unpause, unfollow and clear the pending code of `conversation_key`, and forget
    /// that conversation, so neither path leaves a stale pause, follow or code behind and a chat
    /// that was just unpaired stops receiving the session's cards and replies. True when anything
    /// changed.
    pub fn disconnect(&mut self, identity: &Identity, conversation_key: &ConversationKey) -> bool {
        let revoked = self.revoke(identity);
        let unpaused = self.set_paused(conversation_key, false);
        let unfollowed = self.set_following(conversation_key, false);
        let cleared = self.pending.remove(conversation_key).is_some();
        let targets = self.conversations.len();
        self.conversations.retain(|t| t.key() != *conversation_key);
        let forgotten = self.conversations.len() != targets;
        revoked || unpaused || unfollowed || cleared || forgotten
    }

    /// Local `/connect disconnect`: every pairing revoked, every pause, follow and pending
    /// code cleared, no conversation remembered. Returns how many pairings were revoked.
    pub fn disconnect_all(&mut self) -> usize {
        self.paused.clear();
        self.following.clear();
        self.pending.clear();
        self.conversations.clear();
        self.revoke_all()
    }
}

/// Adds (`on`) or removes `key`; true when that changed the set. One helper for every
/// per-conversation switch (`paused`, `following`), so they cannot drift apart.
fn set_member(set: &mut BTreeSet<ConversationKey>, key: &ConversationKey, on: bool) -> bool {
    if on {
        set.insert(key.clone())
    } else {
        set.remove(key)
    }
}

/// Reads one session's document (the object under `sessions.<id>`).
///
/// Never fails: a malformed piece is dropped with a warning (`session_id` only names it)
/// and the rest loads, so a damaged file costs at most the damaged entries.
pub fn parse_session_state(document: &str, session_id: &str) -> (SessionState, Vec<String>) {
    let base = format!("sessions.{session_id}");
    let mut warnings = Vec::new();
    let mut state = SessionState::default();
    let value: Value = match serde_json::from_str(document) {
        Ok(value) => value,
        Err(_) => {
            warnings.push(format!("{base}: not valid JSON, starting empty"));
            return (state, warnings);
        }
    };
    let Some(fields) = value.as_object() else {
        warnings.push(format!("{base}: expected an object, ignored"));
        return (state, warnings);
    };
    let mut warn = |text: String| warnings.push(text);
    if let Some(updated) = fields.get("updatedAt") {
        match timestamp(updated) {
            Some(at) => state.updated_at = at,
            None => warn(format!("{base}.updatedAt: expected a timestamp, ignored")),
        }
    }
    if let Some(trusted) = object_field(fields, "trusted", &base, &mut warn) {
        for (identity, at) in capped(trusted, &format!("{base}.trusted"), &mut warn) {
            match (timestamp(at), Identity::parse(identity)) {
                (Some(at), Some(identity)) => {
                    state.trusted.insert(identity, at);
                }
                (Some(_), None) => warn(format!(
                    "{base}.trusted.{identity}: expected a \"transport:userId\" identity, ignored"
                )),
                (None, _) => warn(format!(
                    "{base}.trusted.{identity}: expected a timestamp, ignored"
                )),
            }
        }
    }
    if let Some(pending) = object_field(fields, "pending", &base, &mut warn) {
        for (key, challenge) in capped(pending, &format!("{base}.pending"), &mut warn) {
            match parse_challenge(challenge) {
                Some(challenge) => {
                    state
                        .pending
                        .insert(ConversationKey::from_stored(key), challenge);
                }
                // Written by a version that stored codes in plain text: not migrated, since
                // hashing needs a salt this pure parser has no way to draw, and keeping the
                // plain code in memory would undo the point. That chat gets a new code when
                // it writes again.
                None if challenge.get("code").is_some() => warn(format!(
                    "{base}.pending.{key}: a pairing code stored in plain text by an older \
                     version was dropped; that chat gets a new code when it writes again"
                )),
                None => warn(format!(
                    "{base}.pending.{key}: malformed challenge, ignored"
                )),
            }
        }
    }
    if let Some(paused) = fields.get("paused")
        && let Some(keys) = key_set(paused, &format!("{base}.paused"), &mut warn)
    {
        state.paused = keys;
    }
    if let Some(following) = fields.get("following")
        && let Some(keys) = key_set(following, &format!("{base}.following"), &mut warn)
    {
        state.following = keys;
    }
    if let Some(conversations) = fields.get("conversations") {
        match conversations.as_array() {
            Some(targets) => {
                let targets = capped(targets, &format!("{base}.conversations"), &mut warn);
                for (i, target) in targets.enumerate() {
                    match parse_target(target) {
                        Some(target) => {
                            state.remember_conversation(target);
                        }
                        None => warn(format!(
                            "{base}.conversations[{i}]: malformed target, ignored"
                        )),
                    }
                }
            }
            None => warn(format!("{base}.conversations: expected an array, ignored")),
        }
    }
    // Written before chats could follow: which remembered chat is a DM was never stored,
    // so none follows until it sends /follow; saying so once (the warning rewrites the
    // document, with `following`) beats local turns silently going nowhere.
    if !fields.contains_key("following") && !state.conversations.is_empty() {
        warn(format!(
            "{base}: saved before chats could follow local turns, so no chat sees turns typed \
             at the terminal yet; send /follow in each chat that should (a DM paired from now \
             on follows by default)"
        ));
    }
    if let Some(turn) = fields.get("turn") {
        match parse_turn(turn) {
            Some(turn) => state.turn = Some(turn),
            None => warn(format!("{base}.turn: malformed turn, ignored")),
        }
    }
    if let Some(inbox) = fields.get("inbox") {
        let day = inbox.get("day").and_then(timestamp);
        let bytes = inbox.get("bytes").and_then(timestamp);
        match (day, bytes) {
            (Some(day), Some(bytes)) => state.inbox = InboxUse { day, bytes },
            // Unreadable, the count starts from nothing: at worst one more day's worth of
            // files is taken, and the warning says why.
            _ => warn(format!(
                "{base}.inbox: expected {{\"day\": n, \"bytes\": n}}, today's file count starts again"
            )),
        }
    }
    (state, warnings)
}

/// The `queued` array of a document saved before the queue was kept as entries of its own
/// (crate::core::queue), with a warning for each part that could not be read: adopted into
/// the queue once, so a prompt queued before the upgrade is still answered or reported.
pub fn parse_legacy_queue(
    document: &str,
    session_key: &str,
) -> (Vec<ConversationTarget>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut targets = Vec::new();
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(document) else {
        return (targets, warnings);
    };
    let base = format!("sessions.{session_key}");
    let mut warn = |line: String| warnings.push(line);
    if let Some(queued) = fields.get("queued") {
        match queued.as_array() {
            Some(entries) => {
                let entries = capped(entries, &format!("{base}.queued"), &mut warn);
                for (i, target) in entries.enumerate() {
                    match parse_target(target) {
                        Some(target) => targets.push(target),
                        None => warn(format!("{base}.queued[{i}]: malformed target, ignored")),
                    }
                }
            }
            None => warn(format!("{base}.queued: expected an array, ignored")),
        }
    }
    (targets, warnings)
}

/// One queue entry in its stored shape (`{"transport": …, "conversationId": …,
/// "threadId"?: …, "messageId"?: …}`, a target as everywhere in the document, with the
/// prompt's platform message id when it has one).
pub fn target_entry(target: &ConversationTarget, message_id: Option<&str>) -> String {
    let entry = MarkJson {
        target: target_json(target),
        message_id,
    };
    // String fields always serialize; the fallback only keeps this total.
    serde_json::to_string(&entry).unwrap_or_else(|_| String::from("{}"))
}

/// A target with its optional `messageId` (a queue entry, a turn's prompt); `None` when the
/// target is malformed or the id is there but not a non-empty string.
pub fn parse_marked_target(value: &Value) -> Option<(ConversationTarget, Option<String>)> {
    let message_id = match value.get("messageId") {
        None | Some(Value::Null) => None,
        Some(id) => Some(id.as_str().filter(|s| !s.is_empty())?.to_string()),
    };
    Some((parse_target(value)?, message_id))
}

/// `{"startedAt": ms, "remote": bool, "cards": [{target..., "editKey"?}], "audience"?:
/// [target...]}`; at most [`MAX_ENTRIES`] cards and audience entries are kept, and a
/// malformed card or audience entry spoils the whole turn (its notice or answer would go
/// to the wrong place otherwise).
fn parse_turn(value: &Value) -> Option<RunningTurn> {
    let started_at = timestamp(value.get("startedAt")?)?;
    let remote = value.get("remote")?.as_bool()?;
    let cards = value
        .get("cards")?
        .as_array()?
        .iter()
        .take(MAX_ENTRIES)
        .map(|card| {
            let edit_key = match card.get("editKey") {
                None | Some(Value::Null) => None,
                Some(key) => Some(key.as_str()?.to_string()),
            };
            Some(CardRecord {
                target: parse_target(card)?,
                edit_key,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let audience = match value.get("audience") {
        None => Vec::new(),
        Some(targets) => targets
            .as_array()?
            .iter()
            .take(MAX_ENTRIES)
            .map(parse_target)
            .collect::<Option<Vec<_>>>()?,
    };
    let prompts = match value.get("prompts") {
        None => Vec::new(),
        Some(marks) => marks
            .as_array()?
            .iter()
            .take(MAX_ENTRIES)
            .map(|mark| match parse_marked_target(mark)? {
                (target, Some(message_id)) => Some(PromptMark { target, message_id }),
                (_, None) => None,
            })
            .collect::<Option<Vec<_>>>()?,
    };
    Some(RunningTurn {
        started_at,
        remote,
        cards,
        audience,
        prompts,
    })
}

/// An array of conversation keys (`paused`, `following`); anything else is reported and
/// `None`, so the set keeps its default.
fn key_set(
    value: &Value,
    path: &str,
    warn: &mut impl FnMut(String),
) -> Option<BTreeSet<ConversationKey>> {
    match value
        .as_array()
        .filter(|keys| keys.iter().all(Value::is_string))
    {
        Some(keys) => Some(
            capped(keys, path, warn)
                .filter_map(Value::as_str)
                .map(ConversationKey::from_stored)
                .collect(),
        ),
        None => {
            warn(format!("{path}: expected an array of strings, ignored"));
            None
        }
    }
}

/// Writes the document [`parse_session_state`] reads, compact.
pub fn serialize_session_state(state: &SessionState) -> String {
    let document = StateJson {
        updated_at: state.updated_at,
        trusted: state
            .trusted
            .iter()
            .map(|(identity, at)| (identity.as_str(), *at))
            .collect(),
        pending: state
            .pending
            .iter()
            .map(|(key, challenge)| {
                let (salt, sha256) = challenge.hash.to_hex();
                let json = ChallengeJson {
                    salt,
                    sha256,
                    digits: challenge.digits,
                    expires_at: challenge.expires_at,
                    attempts: challenge.attempts,
                };
                (key.as_str(), json)
            })
            .collect(),
        paused: state.paused.iter().map(ConversationKey::as_str).collect(),
        following: state
            .following
            .iter()
            .map(ConversationKey::as_str)
            .collect(),
        conversations: state
            .conversations
            .iter()
            .map(|target| TargetJson {
                transport: &target.transport,
                conversation_id: &target.conversation_id,
                thread_id: target.thread_id.as_deref(),
            })
            .collect(),
        turn: state.turn.as_ref().map(|turn| TurnJson {
            started_at: turn.started_at,
            remote: turn.remote,
            cards: turn
                .cards
                .iter()
                .map(|card| CardJson {
                    target: target_json(&card.target),
                    edit_key: card.edit_key.as_deref(),
                })
                .collect(),
            audience: turn.audience.iter().map(target_json).collect(),
            prompts: turn
                .prompts
                .iter()
                .map(|mark| MarkJson {
                    target: target_json(&mark.target),
                    message_id: Some(&mark.message_id),
                })
                .collect(),
        }),
        inbox: (state.inbox.bytes > 0).then_some(InboxJson {
            day: state.inbox.day,
            bytes: state.inbox.bytes,
        }),
    };
    // String keys, strings and integers always serialize; the fallback only keeps this total.
    serde_json::to_string(&document).unwrap_or_else(|_| String::from("{}"))
}

/// The stored shape of a session.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StateJson<'a> {
    updated_at: u64,
    trusted: BTreeMap<&'a str, u64>,
    pending: BTreeMap<&'a str, ChallengeJson>,
    paused: Vec<&'a str>,
    // Always written, even empty: its absence marks a document from before following.
    following: Vec<&'a str>,
    conversations: Vec<TargetJson<'a>>,
    // Left out when there is none, so an idle session's document keeps its old shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<TurnJson<'a>>,
    // Left out until a file was saved, for the same reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    inbox: Option<InboxJson>,
}

/// The stored shape of the inbox's daily count.
#[derive(Serialize)]
struct InboxJson {
    day: u64,
    bytes: u64,
}

/// The stored shape of a running turn.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TurnJson<'a> {
    started_at: u64,
    remote: bool,
    cards: Vec<CardJson<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    audience: Vec<TargetJson<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    prompts: Vec<MarkJson<'a>>,
}

/// The stored shape of a prompt's message: its target, flattened, and its platform id.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MarkJson<'a> {
    #[serde(flatten)]
    target: TargetJson<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_id: Option<&'a str>,
}

/// The stored shape of a card: its target, flattened, and its edit handle.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CardJson<'a> {
    #[serde(flatten)]
    target: TargetJson<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    edit_key: Option<&'a str>,
}

fn target_json(target: &ConversationTarget) -> TargetJson<'_> {
    TargetJson {
        transport: &target.transport,
        conversation_id: &target.conversation_id,
        thread_id: target.thread_id.as_deref(),
    }
}

/// The stored shape of a challenge.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChallengeJson {
    salt: String,
    sha256: String,
    digits: u32,
    expires_at: u64,
    attempts: u32,
}

/// The stored shape of a broadcast target.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TargetJson<'a> {
    transport: &'a str,
    conversation_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread_id: Option<&'a str>,
}

/// The object under `name`, if present; a non-object is reported and skipped.
fn object_field<'v>(
    fields: &'v Map<String, Value>,
    name: &str,
    base: &str,
    warn: &mut impl FnMut(String),
) -> Option<&'v Map<String, Value>> {
    let value = fields.get(name)?;
    let object = value.as_object();
    if object.is_none() {
        warn(format!("{base}.{name}: expected an object, ignored"));
    }
    object
}

/// The first [`MAX_ENTRIES`] items; one warning when there were more.
fn capped<I: IntoIterator>(
    items: I,
    path: &str,
    warn: &mut impl FnMut(String),
) -> std::iter::Take<I::IntoIter>
where
    I::IntoIter: ExactSizeIterator,
{
    let items = items.into_iter();
    if items.len() > MAX_ENTRIES {
        warn(format!(
            "{path}: more than {MAX_ENTRIES} entries, the rest ignored"
        ));
    }
    items.take(MAX_ENTRIES)
}

/// Milliseconds since the epoch: a non-negative integer (`1.7e12` written by another
/// tool counts).
fn timestamp(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        let f = value.as_f64()?;
        // 2^53: beyond it a float no longer names one millisecond.
        (f.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&f)).then_some(f as u64)
    })
}

/// `{"salt": hex, "sha256": hex, "digits": n, "expiresAt": ms, "attempts": n}`; a plain
/// `"code"` next to them makes the entry malformed, so no code is ever read back.
fn parse_challenge(value: &Value) -> Option<PendingChallenge> {
    if value.get("code").is_some() {
        return None;
    }
    let hash = CodeHash::from_hex(value.get("salt")?.as_str()?, value.get("sha256")?.as_str()?)?;
    let digits = u32::try_from(timestamp(value.get("digits")?)?)
        .ok()
        .filter(|d| (1..=64).contains(d))?;
    let expires_at = timestamp(value.get("expiresAt")?)?;
    let attempts = u32::try_from(timestamp(value.get("attempts")?)?).ok()?;
    Some(PendingChallenge {
        hash,
        digits,
        expires_at,
        attempts,
    })
}

/// `{"transport", "conversationId", "threadId"?}` with non-empty ids (a `null` thread is
/// no thread).
/// A target as stored (`transport`, `conversationId`, optional `threadId`); `None` when
/// malformed.
pub fn parse_target(value: &Value) -> Option<ConversationTarget> {
    let text = |name: &str| {
        value
            .get(name)?
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let thread_id = match value.get("threadId") {
        None | Some(Value::Null) => None,
        Some(_) => Some(text("threadId")?),
    };
    Some(ConversationTarget {
        transport: text("transport")?,
        conversation_id: text("conversationId")?,
        thread_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Identity {
        let (transport, user) = text.split_once(':').unwrap_or((text, ""));
        Identity::new(transport, user)
    }

    fn key(text: &str) -> ConversationKey {
        ConversationKey::from_stored(text)
    }

    fn target(transport: &str, conversation: &str, thread: Option<&str>) -> ConversationTarget {
        ConversationTarget {
            transport: transport.into(),
            conversation_id: conversation.into(),
            thread_id: thread.map(String::from),
        }
    }

    #[test]
    fn every_warning_text_is_exact() {
        let rows: &[(&str, &str)] = &[
            ("nope", "sessions.s1: not valid JSON, starting empty"),
            ("[]", "sessions.s1: expected an object, ignored"),
            ("null", "sessions.s1: expected an object, ignored"),
            (
                r#"{"updatedAt":"x"}"#,
                "sessions.s1.updatedAt: expected a timestamp, ignored",
            ),
            (
                r#"{"trusted":5}"#,
                "sessions.s1.trusted: expected an object, ignored",
            ),
            (
                r#"{"trusted":{"telegram:1":"x"}}"#,
                "sessions.s1.trusted.telegram:1: expected a timestamp, ignored",
            ),
            (
                r#"{"trusted":{"telegram:1":-5}}"#,
                "sessions.s1.trusted.telegram:1: expected a timestamp, ignored",
            ),
            (
                r#"{"trusted":{"bare":5}}"#,
                r#"sessions.s1.trusted.bare: expected a "transport:userId" identity, ignored"#,
            ),
            (
                r#"{"pending":[]}"#,
                "sessions.s1.pending: expected an object, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"salt":"0707","sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","digits":6,"expiresAt":1,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"salt":"07070707070707070707070707070707","sha256":"zz01c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","digits":6,"expiresAt":1,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"salt":"07070707070707070707070707070707","sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","digits":0,"expiresAt":1,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"salt":"07070707070707070707070707070707","sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","expiresAt":1,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"salt":"07070707070707070707070707070707","sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","digits":6,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"salt":"07070707070707070707070707070707","sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","digits":6,"expiresAt":1,"attempts":4294967296}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","digits":6,"expiresAt":1,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"salt":"07070707070707070707070707070707","sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","digits":6,"expiresAt":1,"attempts":0,"code":"123456"}}}"#,
                "sessions.s1.pending.t:c: a pairing code stored in plain text by an older version was dropped; that chat gets a new code when it writes again",
            ),
            (
                r#"{"pending":{"t:c":{"code":"123456","expiresAt":1,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: a pairing code stored in plain text by an older version was dropped; that chat gets a new code when it writes again",
            ),
            (
                r#"{"paused":"t:c"}"#,
                "sessions.s1.paused: expected an array of strings, ignored",
            ),
            (
                r#"{"paused":["t:c",1]}"#,
                "sessions.s1.paused: expected an array of strings, ignored",
            ),
            (
                r#"{"following":"t:c"}"#,
                "sessions.s1.following: expected an array of strings, ignored",
            ),
            (
                r#"{"following":["t:c",null]}"#,
                "sessions.s1.following: expected an array of strings, ignored",
            ),
            (
                r#"{"conversations":[{"transport":"t","conversationId":"c"}]}"#,
                "sessions.s1: saved before chats could follow local turns, so no chat sees \
                 turns typed at the terminal yet; send /follow in each chat that should (a DM \
                 paired from now on follows by default)",
            ),
            (
                r#"{"conversations":{}}"#,
                "sessions.s1.conversations: expected an array, ignored",
            ),
            (
                r#"{"following":[],"conversations":[{"transport":"t","conversationId":"c"},{"transport":"t"}]}"#,
                "sessions.s1.conversations[1]: malformed target, ignored",
            ),
            (
                r#"{"conversations":[{"transport":"t","conversationId":"c","threadId":5}]}"#,
                "sessions.s1.conversations[0]: malformed target, ignored",
            ),
            (
                r#"{"conversations":["t:c"]}"#,
                "sessions.s1.conversations[0]: malformed target, ignored",
            ),
        ];
        for (document, warning) in rows {
            let (_, warnings) = parse_session_state(document, "s1");
            assert_eq!(warnings, vec![warning.to_string()], "document {document}");
        }
    }

    #[test]
    fn good_pieces_survive_next_to_bad_ones() {
        let document = r#"{"updatedAt":1700000000000,
            "trusted":{"telegram:1":1700000000000,"bare":1,"discord:2":1.7e12},
            "pending":{"telegram:c1":{"salt":"07070707070707070707070707070707","sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","digits":6,"expiresAt":99,"attempts":2},"x:y":{"code":"abc"}},
            "paused":["telegram:c1"],"following":["telegram:c1",3],
            "conversations":[{"transport":"telegram","conversationId":"c1"},
                {"transport":"telegram","conversationId":"c1","threadId":null},
                {"transport":"telegram","conversationId":"c1","threadId":"t9"},7]}"#;
        let (state, warnings) = parse_session_state(document, "s1");
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert_eq!(state.updated_at, 1_700_000_000_000);
        assert_eq!(state.paired_at(&id("telegram:1")), Some(1_700_000_000_000));
        assert_eq!(state.paired_at(&id("discord:2")), Some(1_700_000_000_000));
        assert!(!state.is_trusted(&id("bare")));
        assert_eq!(
            state.pending(&key("telegram:c1")),
            Some(&PendingChallenge {
                hash: CodeHash::new("123456", [7; 16]),
                digits: 6,
                expires_at: 99,
                attempts: 2
            })
        );
        assert!(state.pending(&key("x:y")).is_none());
        assert!(state.is_paused(&key("telegram:c1")));
        // A malformed `following` is dropped whole: nobody follows rather than a guess.
        assert!(state.following.is_empty());
        assert_eq!(
            state.conversations,
            vec![
                target("telegram", "c1", None),
                target("telegram", "c1", Some("t9"))
            ]
        );
    }

    #[test]
    fn oversized_maps_are_capped_with_one_warning() {
        let entries: Vec<String> = (0..MAX_ENTRIES + 5)
            .map(|i| format!("\"telegram:{i}\":1"))
            .collect();
        let document = format!(r#"{{"trusted":{{{}}}}}"#, entries.join(","));
        let (state, warnings) = parse_session_state(&document, "s1");
        assert_eq!(state.trusted.len(), MAX_ENTRIES);
        assert_eq!(
            warnings,
            vec!["sessions.s1.trusted: more than 10000 entries, the rest ignored".to_string()]
        );
    }

    #[test]
    fn oversized_lists_are_capped_with_one_warning() {
        let keys: Vec<String> = (0..MAX_ENTRIES + 1).map(|i| format!("\"t:{i}\"")).collect();
        let document = format!(r#"{{"paused":[{}]}}"#, keys.join(","));
        let (state, warnings) = parse_session_state(&document, "s1");
        assert_eq!(state.paused.len(), MAX_ENTRIES);
        assert_eq!(
            warnings,
            vec!["sessions.s1.paused: more than 10000 entries, the rest ignored".to_string()]
        );
    }

    #[test]
    fn serializes_to_the_stored_shape() {
        let mut state = SessionState {
            updated_at: 5,
            ..SessionState::default()
        };
        state.trust(&id("telegram:1"), 3);
        state.set_pending(
            &key("telegram:c1"),
            Some(PendingChallenge {
                hash: CodeHash::new("123456", [7; 16]),
                digits: 6,
                expires_at: 9,
                attempts: 1,
            }),
        );
        state.set_paused(&key("telegram:c1"), true);
        state.remember_chat(target("telegram", "c1", None), true);
        state.remember_chat(target("discord", "c2", Some("t")), false);
        assert_eq!(
            serialize_session_state(&state),
            concat!(
                r#"{"updatedAt":5,"trusted":{"telegram:1":3},"#,
                r#""pending":{"telegram:c1":{"salt":"07070707070707070707070707070707","#,
                r#""sha256":"a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565","#,
                r#""digits":6,"expiresAt":9,"attempts":1}},"#,
                r#""paused":["telegram:c1"],"following":["telegram:c1"],"#,
                r#""conversations":[{"transport":"telegram","conversationId":"c1"},"#,
                r#"{"transport":"discord","conversationId":"c2","threadId":"t"}]}"#
            )
        );
        assert_eq!(
            parse_session_state(&serialize_session_state(&state), "s1"),
            (state, vec![])
        );
    }

    #[test]
    fn a_running_turn_round_trips_in_the_stored_shape() {
        let state = SessionState {
            turn: Some(RunningTurn {
                started_at: 7,
                remote: true,
                cards: vec![
                    CardRecord {
                        target: target("tg", "c1", None),
                        edit_key: Some("m5".into()),
                    },
                    CardRecord {
                        target: target("dc", "c2", Some("t")),
                        edit_key: None,
                    },
                ],
                audience: vec![target("tg", "c1", None)],
                prompts: vec![PromptMark {
                    target: target("tg", "c1", None),
                    message_id: "42".into(),
                }],
            }),
            ..SessionState::default()
        };
        let document = serialize_session_state(&state);
        assert_eq!(
            document,
            concat!(
                r#"{"updatedAt":0,"trusted":{},"pending":{},"paused":[],"following":[],"#,
                r#""conversations":[],"#,
                r#""turn":{"startedAt":7,"remote":true,"cards":["#,
                r#"{"transport":"tg","conversationId":"c1","editKey":"m5"},"#,
                r#"{"transport":"dc","conversationId":"c2","threadId":"t"}],"#,
                r#""audience":[{"transport":"tg","conversationId":"c1"}],"#,
                r#""prompts":[{"transport":"tg","conversationId":"c1","messageId":"42"}]}}"#
            )
        );
        assert_eq!(parse_session_state(&document, "s1"), (state, vec![]));
        let rows = [
            (
                r#"{"turn":{"startedAt":1,"remote":"yes","cards":[]}}"#,
                "sessions.s1.turn: malformed turn, ignored",
            ),
            (
                r#"{"turn":{"startedAt":1,"remote":true,"cards":[{"transport":"t"}]}}"#,
                "sessions.s1.turn: malformed turn, ignored",
            ),
            (
                r#"{"turn":{"startedAt":1,"remote":true,"cards":[{"transport":"t","conversationId":"c","editKey":5}]}}"#,
                "sessions.s1.turn: malformed turn, ignored",
            ),
            (
                r#"{"turn":{"startedAt":1,"remote":true,"cards":[],"audience":[{"transport":"t"}]}}"#,
                "sessions.s1.turn: malformed turn, ignored",
            ),
            (
                r#"{"turn":{"startedAt":1,"remote":true,"cards":[],"audience":{}}}"#,
                "sessions.s1.turn: malformed turn, ignored",
            ),
        ];
        for (document, warning) in rows {
            let (_, warnings) = parse_session_state(document, "s1");
            assert_eq!(warnings, vec![warning.to_string()], "{document}");
        }
    }

    #[test]
    fn a_queue_saved_inside_the_document_is_read_once_for_adoption() {
        let document = concat!(
            r#"{"updatedAt":1,"queued":[{"transport":"tg","conversationId":"c1"},"#,
            r#"{"transport":"dc","conversationId":"c2","threadId":"t"}]}"#
        );
        assert_eq!(
            parse_legacy_queue(document, "s1"),
            (
                vec![target("tg", "c1", None), target("dc", "c2", Some("t"))],
                vec![]
            )
        );
        // The entries it becomes have the shape the document had.
        assert_eq!(
            target_entry(&target("dc", "c2", Some("t")), None),
            r#"{"transport":"dc","conversationId":"c2","threadId":"t"}"#
        );
        let rows = [
            (
                r#"{"queued":{}}"#,
                "sessions.s1.queued: expected an array, ignored",
            ),
            (
                r#"{"queued":[{"transport":"t","conversationId":"c"},7]}"#,
                "sessions.s1.queued[1]: malformed target, ignored",
            ),
        ];
        for (document, warning) in rows {
            let (_, warnings) = parse_legacy_queue(document, "s1");
            assert_eq!(warnings, vec![warning.to_string()], "{document}");
        }
        // Today's documents have no queue inside.
        assert_eq!(
            parse_legacy_queue(r#"{"updatedAt":1}"#, "s1"),
            (vec![], vec![])
        );
    }

    #[test]
    fn trust_operations() {
        let mut state = SessionState::default();
        assert!(!state.is_trusted(&id("telegram:1")));
        state.trust(&id("telegram:1"), 10);
        state.trust(&id("telegram:2"), 20);
        state.trust(&id("telegram:1"), 30);
        assert_eq!(state.paired_at(&id("telegram:1")), Some(30));
        assert!(state.revoke(&id("telegram:1")));
        assert!(!state.revoke(&id("telegram:1")));
        assert!(!state.is_trusted(&id("telegram:1")));
        assert_eq!(state.revoke_all(), 1);
        assert_eq!(state.revoke_all(), 0);
    }

    #[test]
    fn pause_and_pending_report_changes() {
        let mut state = SessionState::default();
        assert!(state.set_paused(&key("t:c"), true));
        assert!(!state.set_paused(&key("t:c"), true));
        assert!(state.is_paused(&key("t:c")));
        assert!(state.set_paused(&key("t:c"), false));
        assert!(!state.set_paused(&key("t:c"), false));
        let challenge = PendingChallenge {
            hash: CodeHash::new("1", [0; 16]),
            digits: 1,
            expires_at: 1,
            attempts: 0,
        };
        state.set_pending(&key("t:c"), Some(challenge.clone()));
        assert_eq!(state.pending(&key("t:c")), Some(&challenge));
        state.set_pending(&key("t:c"), None);
        assert_eq!(state.pending(&key("t:c")), None);
    }

    #[test]
    fn conversations_dedup_by_transport_conversation_and_thread() {
        let mut state = SessionState::default();
        assert!(state.remember_conversation(target("t", "c", None)));
        assert!(!state.remember_conversation(target("t", "c", None)));
        assert!(state.remember_conversation(target("t", "c", Some("x"))));
        assert!(state.remember_conversation(target("u", "c", None)));
        assert_eq!(state.conversations.len(), 3);
    }

    #[test]
    fn disconnect_revokes_unpauses_and_clears_the_code() {
        let mut state = SessionState::default();
        state.trust(&id("telegram:1"), 1);
        state.trust(&id("telegram:2"), 1);
        state.set_paused(&key("telegram:c"), true);
        state.set_paused(&key("telegram:other"), true);
        state.set_pending(
            &key("telegram:c"),
            Some(PendingChallenge {
                hash: CodeHash::new("1", [0; 16]),
                digits: 1,
                expires_at: 1,
                attempts: 0,
            }),
        );
        assert!(state.disconnect(&id("telegram:1"), &key("telegram:c")));
        assert!(!state.is_trusted(&id("telegram:1")));
        assert!(state.is_trusted(&id("telegram:2")));
        assert!(!state.is_paused(&key("telegram:c")));
        assert!(state.is_paused(&key("telegram:other")));
        assert!(state.pending(&key("telegram:c")).is_none());
        assert!(!state.disconnect(&id("telegram:1"), &key("telegram:c")));
    }

    #[test]
    fn disconnect_stops_broadcasting_to_that_conversation_only() {
        let target = |conversation: &str, thread: Option<&str>| ConversationTarget {
            transport: "telegram".into(),
            conversation_id: conversation.into(),
            thread_id: thread.map(String::from),
        };
        let mut state = SessionState::default();
        state.trust(&id("telegram:1"), 1);
        state.remember_conversation(target("c", None));
        state.remember_conversation(target("c", Some("t1")));
        state.remember_conversation(target("other", None));
        assert!(state.disconnect(&id("telegram:1"), &key("telegram:c")));
        assert_eq!(state.conversations, vec![target("other", None)]);
        // Nothing left to change for that chat: a second disconnect reports no change.
        assert!(!state.disconnect(&id("telegram:1"), &key("telegram:c")));

        state.trust(&id("telegram:2"), 1);
        state.set_paused(&key("telegram:other"), true);
        assert_eq!(state.disconnect_all(), 1);
        assert!(state.conversations.is_empty() && state.paused.is_empty());
        assert!(state.trusted.is_empty() && state.pending.is_empty());
    }

    #[test]
    fn a_dm_follows_from_its_first_message_and_a_group_never_by_being_remembered() {
        let mut state = SessionState::default();
        assert!(state.remember_chat(target("tg", "dm", None), true));
        assert!(state.remember_chat(target("tg", "group", None), false));
        assert!(state.is_following(&key("tg:dm")));
        assert!(!state.is_following(&key("tg:group")));
        // A DM that unfollowed stays unfollowed when it writes again.
        assert!(state.set_following(&key("tg:dm"), false));
        assert!(!state.set_following(&key("tg:dm"), false));
        assert!(!state.remember_chat(target("tg", "dm", None), true));
        assert!(!state.is_following(&key("tg:dm")));
        // A group follows only when asked.
        assert!(state.set_following(&key("tg:group"), true));
        assert!(!state.set_following(&key("tg:group"), true));
        assert!(state.is_following(&key("tg:group")));
    }

    #[test]
    fn disconnect_stops_following_for_that_chat_and_disconnect_all_for_every_chat() {
        let mut state = SessionState::default();
        state.trust(&id("tg:u1"), 1);
        state.remember_chat(target("tg", "dm", None), true);
        state.remember_chat(target("tg", "group", None), false);
        state.set_following(&key("tg:group"), true);
        assert!(state.disconnect(&id("tg:nobody"), &key("tg:dm")));
        assert!(!state.is_following(&key("tg:dm")));
        assert!(state.is_following(&key("tg:group")));
        // Unfollowing alone is a change worth saving.
        let mut only_following = SessionState::default();
        only_following.set_following(&key("tg:x"), true);
        assert!(only_following.disconnect(&id("tg:nobody"), &key("tg:x")));
        assert!(!only_following.is_following(&key("tg:x")));
        state.disconnect_all();
        assert!(state.following.is_empty());
    }

    #[test]
    fn following_round_trips_and_an_old_document_without_it_loads_with_one_warning() {
        let mut state = SessionState::default();
        state.remember_chat(target("tg", "dm", None), true);
        state.remember_chat(target("tg", "group", None), false);
        let document = serialize_session_state(&state);
        assert!(document.contains(r#""following":["tg:dm"]"#), "{document}");
        assert_eq!(parse_session_state(&document, "s1"), (state, vec![]));

        // Written by a version before following: everything else loads, nobody follows,
        // and the person is told what to do.
        let old = r#"{"updatedAt":5,"trusted":{"tg:u1":3},"paused":[],"conversations":[{"transport":"tg","conversationId":"dm"}],"turn":{"startedAt":1,"remote":true,"cards":[{"transport":"tg","conversationId":"dm","editKey":"m1"}]}}"#;
        let (loaded, warnings) = parse_session_state(old, "s1");
        assert!(loaded.is_trusted(&id("tg:u1")));
        assert_eq!(loaded.conversations, vec![target("tg", "dm", None)]);
        assert!(loaded.following.is_empty());
        assert_eq!(loaded.turn.as_ref().map(|t| t.audience.len()), Some(0));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("send /follow"), "{warnings:?}");
        // Rewritten once, it loads without the warning.
        let rewritten = serialize_session_state(&loaded);
        assert_eq!(parse_session_state(&rewritten, "s1"), (loaded, vec![]));
        // An idle old document with no chats has nothing to say.
        assert_eq!(
            parse_session_state(r#"{"updatedAt":1}"#, "s1").1,
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_inbox_count_round_trips_and_a_broken_one_starts_again_with_a_warning() {
        let mut state = SessionState::default();
        let idle = serialize_session_state(&state);
        assert!(!idle.contains("inbox"), "{idle}");
        state.inbox.add(20_000, 4096);
        let document = serialize_session_state(&state);
        assert!(
            document.contains(r#""inbox":{"day":20000,"bytes":4096}"#),
            "{document}"
        );
        assert_eq!(parse_session_state(&document, "s1"), (state, vec![]));
        let (loaded, warnings) =
            parse_session_state(r#"{"updatedAt":1,"inbox":{"day":"x"}}"#, "s1");
        assert_eq!(loaded.inbox, InboxUse::default());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("sessions.s1.inbox"), "{warnings:?}");
    }

    #[test]
    fn the_daily_count_starts_again_each_day() {
        let mut used = InboxUse::default();
        used.add(10, 100);
        used.add(10, 50);
        assert_eq!(used.used_on(10), 150);
        assert_eq!(used.used_on(11), 0);
        used.add(11, 7);
        assert_eq!(used, InboxUse { day: 11, bytes: 7 });
    }
}
