//! The per-session state document: trust, pending codes, pause, broadcast targets
//! (reference-behaviour §4.4). The host stores it opaquely; loading is tolerant.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

/// A live pairing challenge for one conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingChallenge {
    /// The digits to type.
    pub code: String,
    /// When the code stops working (ms since epoch).
    pub expires_at: u64,
    /// Wrong attempts against this code so far.
    pub attempts: u32,
}

/// A conversation the bridge broadcasts to.
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
    pub fn key(&self) -> String {
        format!("{}:{}", self.transport, self.conversation_id)
    }
}

/// Everything one session remembers across restarts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionState {
    /// Last change (ms since epoch); the host prunes the oldest sessions by it.
    pub updated_at: u64,
    /// Trusted identity → paired-at (ms).
    pub trusted: BTreeMap<String, u64>,
    /// Conversation key → live challenge.
    pub pending: BTreeMap<String, PendingChallenge>,
    /// Paused conversation keys.
    pub paused: BTreeSet<String>,
    /// Broadcast targets, deduplicated by transport, conversation and thread.
    pub conversations: Vec<ConversationTarget>,
}

/// Most entries kept per map or list when loading, so a hostile or corrupted state file
/// cannot make a session allocate without bound.
pub const MAX_ENTRIES: usize = 10_000;

/// `transport:userId`: a transport without `:` or whitespace, then a user id without
/// whitespace. A bare user id is never an identity (I12).
pub(crate) fn is_identity(text: &str) -> bool {
    text.split_once(':').is_some_and(|(transport, user)| {
        !transport.is_empty()
            && !user.is_empty()
            && !transport.chars().any(char::is_whitespace)
            && !user.chars().any(char::is_whitespace)
    })
}

impl SessionState {
    /// Whether `identity` may prompt.
    pub fn is_trusted(&self, identity: &str) -> bool {
        self.trusted.contains_key(identity)
    }

    /// Trusts `identity` from `at` (ms); pairing again refreshes the time.
    pub fn trust(&mut self, identity: &str, at: u64) {
        self.trusted.insert(identity.to_string(), at);
    }

    /// Withdraws trust; true when `identity` was trusted.
    pub fn revoke(&mut self, identity: &str) -> bool {
        self.trusted.remove(identity).is_some()
    }

    /// Withdraws all trust (`/connect disconnect`); returns how many identities lost it.
    pub fn revoke_all(&mut self) -> usize {
        let count = self.trusted.len();
        self.trusted.clear();
        count
    }

    /// When `identity` paired, if it is trusted.
    pub fn paired_at(&self, identity: &str) -> Option<u64> {
        self.trusted.get(identity).copied()
    }

    /// The live challenge for a conversation key.
    pub fn pending(&self, key: &str) -> Option<&PendingChallenge> {
        self.pending.get(key)
    }

    /// Sets or (with `None`) clears the challenge for a conversation key.
    pub fn set_pending(&mut self, key: &str, challenge: Option<PendingChallenge>) {
        match challenge {
            Some(challenge) => {
                self.pending.insert(key.to_string(), challenge);
            }
            None => {
                self.pending.remove(key);
            }
        }
    }

    /// Whether a conversation key is paused.
    pub fn is_paused(&self, key: &str) -> bool {
        self.paused.contains(key)
    }

    /// Pauses or resumes a conversation key; true when that changed anything.
    pub fn set_paused(&mut self, key: &str, paused: bool) -> bool {
        if paused {
            self.paused.insert(key.to_string())
        } else {
            self.paused.remove(key)
        }
    }

    /// Adds a broadcast target; true when it is new. Targets differing only in thread are
    /// distinct, so every thread the bot was used in keeps getting its replies.
    pub fn remember_conversation(&mut self, target: ConversationTarget) -> bool {
        if self.conversations.contains(&target) {
            return false;
        }
        self.conversations.push(target);
        true
    }

    /// What both local `/connect disconnect` and remote `/disconnect` do (decision 7):
    /// revoke `identity`, unpause and clear the pending code of `conversation_key`, and stop
    /// broadcasting to that conversation, so neither path leaves a stale pause or code
    /// behind and a chat that was just unpaired stops receiving the session's cards and
    /// replies. True when anything changed.
    pub fn disconnect(&mut self, identity: &str, conversation_key: &str) -> bool {
        let revoked = self.revoke(identity);
        let unpaused = self.set_paused(conversation_key, false);
        let cleared = self.pending.remove(conversation_key).is_some();
        let targets = self.conversations.len();
        self.conversations.retain(|t| t.key() != conversation_key);
        let forgotten = self.conversations.len() != targets;
        revoked || unpaused || cleared || forgotten
    }

    /// Local `/connect disconnect`: every pairing revoked, every pause and pending code
    /// cleared, no broadcast target left. Returns how many pairings were revoked.
    pub fn disconnect_all(&mut self) -> usize {
        self.paused.clear();
        self.pending.clear();
        self.conversations.clear();
        self.revoke_all()
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
            match timestamp(at) {
                Some(at) if is_identity(identity) => {
                    state.trusted.insert(identity.clone(), at);
                }
                Some(_) => warn(format!(
                    "{base}.trusted.{identity}: expected a \"transport:userId\" identity, ignored"
                )),
                None => warn(format!(
                    "{base}.trusted.{identity}: expected a timestamp, ignored"
                )),
            }
        }
    }
    if let Some(pending) = object_field(fields, "pending", &base, &mut warn) {
        for (key, challenge) in capped(pending, &format!("{base}.pending"), &mut warn) {
            match parse_challenge(challenge) {
                Some(challenge) => {
                    state.pending.insert(key.clone(), challenge);
                }
                None => warn(format!(
                    "{base}.pending.{key}: malformed challenge, ignored"
                )),
            }
        }
    }
    if let Some(paused) = fields.get("paused") {
        match paused
            .as_array()
            .filter(|keys| keys.iter().all(Value::is_string))
        {
            Some(keys) => {
                let keys = capped(keys, &format!("{base}.paused"), &mut warn);
                state.paused = keys.filter_map(Value::as_str).map(String::from).collect();
            }
            None => warn(format!(
                "{base}.paused: expected an array of strings, ignored"
            )),
        }
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
    (state, warnings)
}

/// Writes the document [`parse_session_state`] reads, compact.
pub fn serialize_session_state(state: &SessionState) -> String {
    let document = StateJson {
        updated_at: state.updated_at,
        trusted: &state.trusted,
        pending: state
            .pending
            .iter()
            .map(|(key, challenge)| {
                let json = ChallengeJson {
                    code: &challenge.code,
                    expires_at: challenge.expires_at,
                    attempts: challenge.attempts,
                };
                (key.as_str(), json)
            })
            .collect(),
        paused: &state.paused,
        conversations: state
            .conversations
            .iter()
            .map(|target| TargetJson {
                transport: &target.transport,
                conversation_id: &target.conversation_id,
                thread_id: target.thread_id.as_deref(),
            })
            .collect(),
    };
    // String keys, strings and integers always serialize; the fallback only keeps this total.
    serde_json::to_string(&document).unwrap_or_else(|_| String::from("{}"))
}

/// The stored shape of a session.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StateJson<'a> {
    updated_at: u64,
    trusted: &'a BTreeMap<String, u64>,
    pending: BTreeMap<&'a str, ChallengeJson<'a>>,
    paused: &'a BTreeSet<String>,
    conversations: Vec<TargetJson<'a>>,
}

/// The stored shape of a challenge.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChallengeJson<'a> {
    code: &'a str,
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

/// `{"code": digits, "expiresAt": ms, "attempts": n}`.
fn parse_challenge(value: &Value) -> Option<PendingChallenge> {
    let code = value.get("code")?.as_str()?;
    if code.is_empty() || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let expires_at = timestamp(value.get("expiresAt")?)?;
    let attempts = u32::try_from(timestamp(value.get("attempts")?)?).ok()?;
    Some(PendingChallenge {
        code: code.to_string(),
        expires_at,
        attempts,
    })
}

/// `{"transport", "conversationId", "threadId"?}` with non-empty ids (a `null` thread is
/// no thread).
fn parse_target(value: &Value) -> Option<ConversationTarget> {
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
                r#"{"pending":{"t:c":{"code":"12a","expiresAt":1,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"code":"","expiresAt":1,"attempts":0}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"code":"123456","expiresAt":1}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
            ),
            (
                r#"{"pending":{"t:c":{"code":"123456","expiresAt":1,"attempts":4294967296}}}"#,
                "sessions.s1.pending.t:c: malformed challenge, ignored",
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
                r#"{"conversations":{}}"#,
                "sessions.s1.conversations: expected an array, ignored",
            ),
            (
                r#"{"conversations":[{"transport":"t","conversationId":"c"},{"transport":"t"}]}"#,
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
            "pending":{"telegram:c1":{"code":"123456","expiresAt":99,"attempts":2},"x:y":{"code":"abc"}},
            "paused":["telegram:c1"],
            "conversations":[{"transport":"telegram","conversationId":"c1"},
                {"transport":"telegram","conversationId":"c1","threadId":null},
                {"transport":"telegram","conversationId":"c1","threadId":"t9"},7]}"#;
        let (state, warnings) = parse_session_state(document, "s1");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert_eq!(state.updated_at, 1_700_000_000_000);
        assert_eq!(state.paired_at("telegram:1"), Some(1_700_000_000_000));
        assert_eq!(state.paired_at("discord:2"), Some(1_700_000_000_000));
        assert!(!state.is_trusted("bare"));
        assert_eq!(
            state.pending("telegram:c1"),
            Some(&PendingChallenge {
                code: "123456".into(),
                expires_at: 99,
                attempts: 2
            })
        );
        assert!(state.pending("x:y").is_none());
        assert!(state.is_paused("telegram:c1"));
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
        state.trust("telegram:1", 3);
        state.set_pending(
            "telegram:c1",
            Some(PendingChallenge {
                code: "0042".into(),
                expires_at: 9,
                attempts: 1,
            }),
        );
        state.set_paused("telegram:c1", true);
        state.remember_conversation(target("telegram", "c1", None));
        state.remember_conversation(target("discord", "c2", Some("t")));
        assert_eq!(
            serialize_session_state(&state),
            concat!(
                r#"{"updatedAt":5,"trusted":{"telegram:1":3},"#,
                r#""pending":{"telegram:c1":{"code":"0042","expiresAt":9,"attempts":1}},"#,
                r#""paused":["telegram:c1"],"#,
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
    fn trust_operations() {
        let mut state = SessionState::default();
        assert!(!state.is_trusted("telegram:1"));
        state.trust("telegram:1", 10);
        state.trust("telegram:2", 20);
        state.trust("telegram:1", 30);
        assert_eq!(state.paired_at("telegram:1"), Some(30));
        assert!(state.revoke("telegram:1"));
        assert!(!state.revoke("telegram:1"));
        assert!(!state.is_trusted("telegram:1"));
        assert_eq!(state.revoke_all(), 1);
        assert_eq!(state.revoke_all(), 0);
    }

    #[test]
    fn pause_and_pending_report_changes() {
        let mut state = SessionState::default();
        assert!(state.set_paused("t:c", true));
        assert!(!state.set_paused("t:c", true));
        assert!(state.is_paused("t:c"));
        assert!(state.set_paused("t:c", false));
        assert!(!state.set_paused("t:c", false));
        let challenge = PendingChallenge {
            code: "1".into(),
            expires_at: 1,
            attempts: 0,
        };
        state.set_pending("t:c", Some(challenge.clone()));
        assert_eq!(state.pending("t:c"), Some(&challenge));
        state.set_pending("t:c", None);
        assert_eq!(state.pending("t:c"), None);
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
        state.trust("telegram:1", 1);
        state.trust("telegram:2", 1);
        state.set_paused("telegram:c", true);
        state.set_paused("telegram:other", true);
        state.set_pending(
            "telegram:c",
            Some(PendingChallenge {
                code: "1".into(),
                expires_at: 1,
                attempts: 0,
            }),
        );
        assert!(state.disconnect("telegram:1", "telegram:c"));
        assert!(!state.is_trusted("telegram:1"));
        assert!(state.is_trusted("telegram:2"));
        assert!(!state.is_paused("telegram:c"));
        assert!(state.is_paused("telegram:other"));
        assert!(state.pending("telegram:c").is_none());
        assert!(!state.disconnect("telegram:1", "telegram:c"));
    }

    #[test]
    fn disconnect_stops_broadcasting_to_that_conversation_only() {
        let target = |conversation: &str, thread: Option<&str>| ConversationTarget {
            transport: "telegram".into(),
            conversation_id: conversation.into(),
            thread_id: thread.map(String::from),
        };
        let mut state = SessionState::default();
        state.trust("telegram:1", 1);
        state.remember_conversation(target("c", None));
        state.remember_conversation(target("c", Some("t1")));
        state.remember_conversation(target("other", None));
        assert!(state.disconnect("telegram:1", "telegram:c"));
        assert_eq!(state.conversations, vec![target("other", None)]);
        // Nothing left to change for that chat: a second disconnect reports no change.
        assert!(!state.disconnect("telegram:1", "telegram:c"));

        state.trust("telegram:2", 1);
        state.set_paused("telegram:other", true);
        assert_eq!(state.disconnect_all(), 1);
        assert!(state.conversations.is_empty() && state.paused.is_empty());
        assert!(state.trusted.is_empty() && state.pending.is_empty());
    }
}
