//! The transport seam: the one [`Transport`] trait every messenger implements, the plain
//! data it exchanges with the host, and the one request path every platform shares: the
//! retry policy and its loop ([`retry`], [`http`]), the HTTP client ([`http_client`]), the
//! capped download ([`download`]), the credential wrapper ([`Secret`]), jitter and the
//! poison-tolerant lock.
//!
//! A transport moves bytes. Redaction, rendering, chunking, trust, pairing, command
//! parsing and pause handling all happen in the bridge (the guest component). Each
//! platform lives in its own crate next to this one (`transports/<platform>`, with the
//! same modules every time: wire types, a pure `normalize`, the HTTP client, the
//! listener, settings) and passes the conformance kit in `transport-testing`.

pub mod buttons;
pub mod capped;
pub mod download;
pub mod forward;
pub mod http;
pub mod http_client;
pub mod inbound;
pub mod jitter;
pub mod model;
pub mod platform;
pub mod presses;
pub mod printable;
pub mod retry;
pub mod secret;
pub mod sync;
pub mod topics;

pub use inbound::{Inbound, InboundSink, InboundStream, SessionGone};
pub use secret::Secret;
pub use topics::{Topic, TopicError, TopicNaming};

pub use model::{
    Attachment, AttachmentKind, BotIdentity, Button, Capabilities, Envelope, FetchedAttachment,
    LengthUnit, Markup, OutboundFile, OutboundKind, OutboundMessage, Reaction, SendReceipt,
    own_message_id,
};

use async_trait::async_trait;

/// Why a transport operation failed. Messages are written for the person reading
/// `doctor` output and never contain a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// `send`, `typing` or `fetch_attachment` before `start` (or after `stop`).
    #[error("{0} transport is not started")]
    NotStarted(String),
    /// `start` on a transport that is already running.
    #[error("{0} transport is already started")]
    AlreadyStarted(String),
    /// The platform refused to edit the message (the caller may post a new one).
    #[error("{0}")]
    EditRejected(String),
    /// The platform asked to wait before sending again.
    #[error("rate limited; retry after {retry_after_ms} ms")]
    RateLimited {
        /// How long the platform asked to wait.
        retry_after_ms: u64,
    },
    /// The transport cannot do this (e.g. fetch attachments).
    #[error("{0}")]
    Unsupported(String),
    /// Anything else, described for a person.
    #[error("{0}")]
    Failed(String),
}

/// One messenger connection.
#[async_trait]
pub trait Transport: Send + Sync {
    /// Transport id (`telegram`, `discord`, `terminal`, ...), unique per session.
    fn id(&self) -> &str;

    /// What the transport can do. Available before `start`.
    fn capabilities(&self) -> Capabilities;

    /// Asks the platform who the bot is. Checks the credential before anything else
    /// (no lock, no socket) so a bad token fails fast with a clear message.
    async fn identify(&self) -> Result<BotIdentity, TransportError>;

    /// Begins receiving; envelopes go to `sink` in the order the platform delivered them.
    /// Fails with [`TransportError::AlreadyStarted`] when already running.
    async fn start(&self, sink: InboundSink) -> Result<(), TransportError>;

    /// Stops receiving and releases connections. Idempotent.
    async fn stop(&self);

    /// Posts a message, or edits one when `message.edit_key` is set and the transport
    /// can edit. Fails with [`TransportError::NotStarted`] before `start`.
    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError>;

    /// Shows a typing indicator, best effort and self-throttled.
    async fn typing(
        &self,
        _conversation_id: &str,
        _thread_id: Option<&str>,
    ) -> Result<(), TransportError> {
        Ok(())
    }

    /// Puts the bot's `reaction` on message `message_id` of `conversation_id`, taking away
    /// `replaces` (its previous reaction there) so one shows at a time. Best effort: the
    /// caller logs a failure and goes on.
    async fn react(
        &self,
        _conversation_id: &str,
        _message_id: &str,
        _reaction: Reaction,
        _replaces: Option<Reaction>,
    ) -> Result<(), TransportError> {
        Err(TransportError::Unsupported(format!(
            "{} cannot react to messages",
            self.id()
        )))
    }

    /// Shows `text` (rendered, within the limit) as the draft of the bot's next message in
    /// a conversation, streamed while the agent writes it; drafts with one `draft_id` are
    /// one stream. Fails where the platform or the chat has none, so the caller shows the
    /// preview elsewhere.
    async fn draft(
        &self,
        _conversation_id: &str,
        _thread_id: Option<&str>,
        _draft_id: u64,
        _text: &str,
    ) -> Result<(), TransportError> {
        Err(TransportError::Unsupported(format!(
            "{} cannot stream drafts",
            self.id()
        )))
    }

    /// Downloads an attachment's bytes, refusing more than `max_bytes` (checked on the
    /// bytes actually received, I19).
    async fn fetch_attachment(
        &self,
        _reference: &str,
        _max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        Err(TransportError::Unsupported(format!(
            "{} cannot download attachments",
            self.id()
        )))
    }

    /// The most bytes one file upload may hold (the platform's limit for bots); 0 when
    /// the transport cannot upload files.
    fn max_upload_bytes(&self) -> u64 {
        0
    }

    /// Uploads one file with its caption, posted as a new message. Refuses a file over
    /// [`Transport::max_upload_bytes`] without sending it.
    async fn send_file(&self, _file: OutboundFile) -> Result<SendReceipt, TransportError> {
        Err(TransportError::Unsupported(format!(
            "{} cannot upload files",
            self.id()
        )))
    }

    /// The place this bot's config names for a topic per session (`sessionTopics`: a
    /// forum group, a channel), as written there; `None`: no topics, sessions are reached
    /// with `/switch` only.
    fn topic_place(&self) -> Option<String> {
        None
    }

    /// How long a topic's name may be on this platform.
    fn topic_naming(&self) -> TopicNaming {
        TopicNaming { max_chars: 100 }
    }

    /// Makes a new topic called `name` in [`Transport::topic_place`] and returns where it
    /// is. Never deletes or reuses anything.
    async fn create_topic(&self, _name: &str) -> Result<Topic, TopicError> {
        Err(TopicError::Unsupported(format!(
            "{} cannot make a topic per session",
            self.id()
        )))
    }

    /// Whether this bot's config asks for the sessions' topics in the private chat of each
    /// user paired with a session (Telegram's `sessionTopics: "private"`, where the Bot API
    /// offers topics in a chat with the bot) rather than in the one place
    /// [`Transport::topic_place`] names. [`Transport::topic_place`] is then `"private"`.
    fn topics_in_private_chats(&self) -> bool {
        false
    }

    /// Makes a new topic called `name` in the private chat `chat_id` of a user with the bot
    /// (when [`Transport::topics_in_private_chats`]) and returns where it is.
    /// [`TopicError::MissingPermission`] says what to turn on when the bot has no topics in
    /// private chats.
    async fn create_private_topic(&self, _chat_id: &str, _name: &str) -> Result<Topic, TopicError> {
        Err(TopicError::Unsupported(format!(
            "{} cannot make topics in a private chat",
            self.id()
        )))
    }

    /// Opens `topic` again under `name` (a session attached again: its topic was marked
    /// ended). [`TopicError::Gone`] when it was deleted meanwhile.
    async fn resume_topic(&self, _topic: &Topic, _name: &str) -> Result<(), TopicError> {
        Err(TopicError::Unsupported(format!(
            "{} cannot make a topic per session",
            self.id()
        )))
    }

    /// Marks `topic` ended under `name` (renamed, closed or archived, never deleted: its
    /// history stays readable).
    async fn end_topic(&self, _topic: &Topic, _name: &str) -> Result<(), TopicError> {
        Err(TopicError::Unsupported(format!(
            "{} cannot make a topic per session",
            self.id()
        )))
    }

    /// Whether `error`, from a send into a topic, says the topic no longer exists (deleted
    /// by hand), so the broker makes a new one instead of losing the message.
    fn topic_gone(&self, _error: &TransportError) -> bool {
        false
    }

    /// One line for `doctor`: connection state and counters. Never a token or a body.
    fn diagnose(&self) -> String;
}
