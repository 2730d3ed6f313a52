//! A topic or thread per session (docs/broker.md#a-topic-per-session): the plain
//! data the broker and a transport exchange when the broker makes a session its own place
//! in a group (a Telegram forum topic, a Discord thread, a Slack thread).
//!
//! Why these are separate from sending: making a topic needs rights a bot may lack (a
//! forum admin's `can_manage_topics`, Discord's `CREATE_PUBLIC_THREADS`, Slack's
//! `chat:write` in the channel). The broker must tell "grant this right" apart from "the
//! topic was deleted by hand" and from a passing failure, so each is its own variant.

use serde::{Deserialize, Serialize};

/// Where one session's topic lives: the conversation (and thread) its messages arrive
/// with, and where its replies go. For Telegram the forum's chat id and the topic's
/// `message_thread_id`; for Discord the thread's own channel id (a thread is a channel);
/// for Slack `<channel>/<ts>` and the parent message's `ts`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Topic {
    /// The conversation id inbound messages in the topic carry.
    pub conversation_id: String,
    /// The thread id inbound messages in the topic carry, when the platform has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

/// Why a topic could not be made, resumed or marked ended. Each text says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// The transport has no topics, or its config names no place for them.
    #[error("{0}")]
    Unsupported(String),
    /// The bot lacks a right, or the place is not one topics can be made in: the text
    /// names the right to grant (or the setting to change).
    #[error("{0}")]
    MissingPermission(String),
    /// The topic is gone (deleted by hand): a new one is made.
    #[error("{0}")]
    Gone(String),
    /// Anything else (the network, the platform's side), described for a person.
    #[error("{0}")]
    Failed(String),
}

/// The platform's own name-length rule, for the broker's topic names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicNaming {
    /// Most characters a topic's name may hold (Telegram 128, Discord 100).
    pub max_chars: usize,
}
