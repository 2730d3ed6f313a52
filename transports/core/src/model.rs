//! The plain data a transport exchanges with the host.

use serde::{Deserialize, Serialize};

/// What an inbound attachment is, as declared by the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentKind {
    /// A picture.
    Image,
    /// Any other file.
    File,
}

/// An attachment announced by the platform; bytes are fetched only on demand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    /// Declared kind.
    pub kind: AttachmentKind,
    /// Declared media type.
    pub media_type: String,
    /// Opaque reference (file id or URL) for [`crate::Transport::fetch_attachment`].
    #[serde(rename = "ref")]
    pub reference: String,
    /// Original file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Declared size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Declared length of a voice note, an audio or a video, in whole seconds, when the
    /// platform gives one (Telegram's `duration`, Discord's `duration_secs`): the bridge's
    /// duration cap is judged on it before anything is downloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<u32>,
}

/// One normalized inbound message. Platform payloads stay inside the transport.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// Transport id.
    pub transport: String,
    /// Conversation id inside the transport.
    pub conversation_id: String,
    /// Sender id inside the transport.
    pub user_id: String,
    /// Thread or topic anchor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// Platform timestamp in ms since the epoch, 0 when unknown.
    #[serde(default)]
    pub timestamp: u64,
    /// Message text with transport mention syntax stripped.
    pub text: String,
    /// Direct message.
    pub is_direct: bool,
    /// The bot was explicitly addressed.
    #[serde(default)]
    pub addressed: bool,
    /// Attachments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// The platform's id for this message, unique per transport (Telegram: `<chat>:<message>`,
    /// Slack: `<channel>:<ts>`, ...); `None` where the platform gives none (the terminal).
    /// Why: a platform that redelivers (a retry, a poller restarted before it confirmed)
    /// sends the same id again, so a queue in between can drop the copy (NATS JetStream's
    /// `Nats-Msg-Id`, docs/scaling.md). The bridge hands it back unread as the message a
    /// reply or reaction names ([`OutboundMessage::reply_to`], [`crate::Transport::react`]),
    /// so each transport reads its own form there ([`own_message_id`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Set only when this message is a press on one of the bridge's buttons: the
    /// transport's own reference to that press (`callback:<id>`, `interaction:<id>`,
    /// `action:<user>:<ts>`), for [`OutboundMessage::answers_press`]. It names a press the
    /// transport remembers, never a credential (a Discord interaction token stays inside
    /// the transport). `None` for a typed message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub press: Option<String>,
}

/// How a platform counts message length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LengthUnit {
    /// Unicode scalar values.
    Chars,
    /// UTF-16 code units.
    Utf16,
    /// UTF-8 bytes.
    Bytes,
}

/// The markup a platform renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Markup {
    /// No markup.
    Plain,
    /// Markdown.
    Markdown,
    /// Telegram HTML.
    Html,
    /// Slack mrkdwn.
    Mrkdwn,
}

/// What a transport can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// Threads exist.
    pub threads: bool,
    /// Sent messages can be edited.
    pub edit: bool,
    /// Attachments can be fetched.
    pub attachments: bool,
    /// A typing indicator exists.
    pub typing: bool,
    /// Limit for one message, in `length_unit`.
    pub max_message_length: u32,
    /// Unit of the limit.
    pub length_unit: LengthUnit,
    /// Rendered markup.
    pub markup: Markup,
    /// The bot can react to a user's message ([`crate::Transport::react`]). Absent in what
    /// an older node serialized: no reactions.
    #[serde(default)]
    pub reactions: bool,
    /// The bot can stream a draft of its next message ([`crate::Transport::draft`]), in some
    /// chats at least. Absent in what an older node serialized: no drafts.
    #[serde(default)]
    pub drafts: bool,
}

/// Who the bot is on the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    /// The bot's own user id.
    pub bot_id: String,
    /// The bot's name.
    pub bot_name: String,
    /// Lock name for one-process-per-credential (derived from the bot id, never the
    /// token); `None` when the transport needs no lock.
    pub lock_name: Option<String>,
}

/// What kind of message is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboundKind {
    /// Agent reply.
    Reply,
    /// Progress card.
    Progress,
    /// Work digest.
    Digest,
    /// Bridge notice.
    Notice,
}

/// A button under a message. A press arrives as an ordinary envelope whose text is
/// `command`, from the person who pressed it, as if they had typed it; a transport that
/// cannot show buttons ignores them (the message text says what to type).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    /// What the button shows (`Approve`).
    pub label: String,
    /// The text a press stands for (`/approve qd4k`), at most 64 bytes.
    pub command: String,
}

/// A file to upload with its caption (the agent's `send_file`), already judged and
/// redacted by the bridge and within [`crate::Transport::max_upload_bytes`].
#[derive(Clone, PartialEq, Eq)]
pub struct OutboundFile {
    /// Target conversation.
    pub conversation_id: String,
    /// Target thread.
    pub thread_id: Option<String>,
    /// Bare file name as the chat shows it.
    pub name: String,
    /// Media type (`image/png`, `text/plain; charset=utf-8`).
    pub media_type: String,
    /// Show it inline as a picture (Telegram `sendPhoto`) rather than as a document.
    pub as_image: bool,
    /// Plain-text caption, sent without markup; empty for none.
    pub caption: String,
    /// The bytes.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for OutboundFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Megabytes of bytes in a debug line help nobody: their count says enough.
        f.debug_struct("OutboundFile")
            .field("conversation_id", &self.conversation_id)
            .field("thread_id", &self.thread_id)
            .field("name", &self.name)
            .field("media_type", &self.media_type)
            .field("as_image", &self.as_image)
            .field("caption", &self.caption)
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// One message to post, already within the platform's limit and markup. Serialized as
/// is between cluster nodes (a session node's send, served by the ingress).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboundMessage {
    /// Target conversation.
    pub conversation_id: String,
    /// Target thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// What the message is.
    pub kind: OutboundKind,
    /// Text.
    pub text: String,
    /// Edit the message with this key instead of posting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_key: Option<String>,
    /// Buttons under the message, one row; usually empty. Ignored by transports without
    /// buttons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buttons: Vec<Button>,
    /// When set, the message answers this press ([`Envelope::press`]) privately: only the
    /// person who pressed sees it (Telegram: the press's notification; Discord: an
    /// ephemeral follow-up; Slack: `chat.postEphemeral`). `edit_key` and `buttons` are
    /// ignored then. A transport that cannot answer privately, or no longer knows the
    /// press, fails and posts nothing: posting the answer in the conversation would show
    /// everyone what was meant for one person, so that choice is the caller's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers_press: Option<String>,
    /// When set, the message replies to this message ([`Envelope::message_id`])
    /// of the same conversation. A message that no longer exists is no reason to fail: the
    /// message is then posted without the reply. Ignored with `edit_key` and by transports
    /// without replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
}

/// The platform's own message id inside an [`Envelope::message_id`] (`<chat>:<message>`
/// on Telegram, `<channel>:<ts>` on Slack, the bare id on Discord): the part after the last
/// `:`. A bare id is its own.
pub fn own_message_id(reference: &str) -> &str {
    reference.rsplit(':').next().unwrap_or(reference).trim()
}

/// The bot's reaction on a user's message: how far the bridge got with it. Each transport
/// shows these as its own emoji.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reaction {
    /// Taken: queued or handed to the agent.
    Received,
    /// Its turn ended.
    Done,
    /// Not run, or its turn was lost; the chat is told why in a message.
    Failed,
}

/// Proof that a message was posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendReceipt {
    /// Platform message id (never empty).
    pub message_id: String,
    /// Key to edit this message later; `None` when the transport cannot edit.
    pub edit_key: Option<String>,
}

/// An attachment's bytes as served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedAttachment {
    /// Media type from the response (before `;`, trimmed, lower-cased).
    pub media_type: String,
    /// The bytes.
    pub data: Vec<u8>,
}
