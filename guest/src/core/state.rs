//! The per-session state document: trust, pending codes, pause, broadcast targets
//! (reference-behaviour §4.4). The host stores it opaquely; loading is tolerant.

use std::collections::{BTreeMap, BTreeSet};

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
