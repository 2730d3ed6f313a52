//! Pure: one `ChatMessage` from a client → an envelope, or the reason it is ignored; and
//! the `ChatMessage` a reply becomes. No I/O, no clock (the caller passes the time).
//!
//! Rules (docs/protocols.md#robo_claw-grpc, with
//! docs/decisions.md#decision-8-robo_claw-sends-only-to-the-addressed-room-and-knows-only-its-own-sender):
//! - sender = trimmed `sender_id`, `"user"` when empty; only the configured self sender id
//!   is the bot itself (the original also dropped every `"robot"`, even with a custom id);
//! - content trimmed; no content and no `metadata.file_id` → ignored;
//! - `metadata.file_id` → one attachment: an image iff `metadata.type` starts with
//!   `image/`, media type `metadata.type` or `application/octet-stream`, name
//!   `metadata.filename`;
//! - conversation = the room: trimmed `metadata.room_id`, `"default"` when absent;
//! - timestamp as sent (the proto says "Unix epoch"; clients send milliseconds, as the
//!   server's own replies do), 0 when negative;
//! - every message is direct and addressed: a RoboClaw room is a conversation with the bot;
//! - message id = trimmed `metadata.message_id` when a client sends one (at most
//!   [`MAX_ID_BYTES`]), else none: the proto's `ChatMessage` has no id field of its own.

use std::collections::HashMap;

use serde_json::Value;
use std::borrow::Cow;

use transport_core::platform::{BotSelf, Normalized};
use transport_core::printable::{clean_ids, strip_invisible};
use transport_core::{Attachment, AttachmentKind, Button, Envelope};

use crate::peer_token::AUTH_TOKEN_KEY;
use crate::proto::ChatMessage;

/// Transport id, the key under `transports`.
pub const TRANSPORT_ID: &str = "robo_claw";

/// The room of a message that names none.
pub const DEFAULT_ROOM: &str = "default";

/// The bot's own sender id unless configured otherwise.
pub const DEFAULT_SELF_SENDER_ID: &str = "robot";

/// The sender of a message that names none.
pub const DEFAULT_SENDER: &str = "user";

/// `metadata` key naming the room (the conversation).
pub const ROOM_KEY: &str = "room_id";

/// `metadata` key of a reply's choices (the approval request's buttons): a JSON array of
/// `{"label", "command"}`. A client may show each as a button whose press sends
/// `command` as an ordinary message's `content`, exactly as if the person had typed it;
/// a client that ignores the key loses nothing, since the text says what to type.
pub const CHOICES_KEY: &str = "choices";

/// `metadata` key referring to an uploaded file.
pub const FILE_ID_KEY: &str = "file_id";

/// Longest room id or sender id accepted, in bytes: both become keys the bridge stores.
pub const MAX_ID_BYTES: usize = 256;

/// `metadata` key carrying the client's own id for a message, so a copy sent again
/// (a client retrying after a dropped stream) can be recognised downstream.
pub const MESSAGE_ID_KEY: &str = "message_id";

/// The room a message belongs to: trimmed `metadata.room_id`, [`DEFAULT_ROOM`] when it is
/// absent or blank. A room id longer than [`MAX_ID_BYTES`] is refused with the reason.
pub fn room_of(metadata: &HashMap<String, String>) -> Result<String, String> {
    check_room(metadata.get(ROOM_KEY).map_or("", String::as_str))
}

/// Checks a room id named by a client (message metadata or the room header): without
/// invisible characters ([`strip_invisible`]: an escape in a room id would reach the
/// terminal that shows it), trimmed, [`DEFAULT_ROOM`] when that leaves nothing. The
/// same cleaning for the stream's room and the message's, so replies still find it.
pub fn check_room(room: &str) -> Result<String, String> {
    let room = strip_invisible(room);
    let room = room.trim();
    if room.is_empty() {
        return Ok(DEFAULT_ROOM.to_owned());
    }
    if room.len() > MAX_ID_BYTES {
        return Err(format!(
            "the room id is {} bytes long; at most {MAX_ID_BYTES} are accepted",
            room.len()
        ));
    }
    Ok(room.to_owned())
}

/// Normalizes one message from a client (see the module docs for every rule).
/// `self_sender_id` is the bot's own sender id; messages from it are ignored (I14).
pub fn normalize_message(message: &ChatMessage, self_sender_id: &str) -> Normalized {
    let sender = sender_of(message);
    let sender = sender.as_ref();
    if sender == self_sender_id.trim() {
        return Normalized::Ignored(format!(
            "a message from the bot itself (sender_id {sender:?})"
        ));
    }
    if sender.len() > MAX_ID_BYTES {
        return Normalized::Ignored(format!(
            "a sender_id of {} bytes; at most {MAX_ID_BYTES} are accepted",
            sender.len()
        ));
    }
    let room = match room_of(&message.metadata) {
        Ok(room) => room,
        Err(reason) => return Normalized::Ignored(reason),
    };
    let text = message.content.trim();
    let attachment = attachment(&message.metadata);
    if text.is_empty() && attachment.is_none() {
        return Normalized::Ignored("an empty message: no content and no metadata.file_id".into());
    }
    Normalized::Message(clean_ids(Envelope {
        transport: TRANSPORT_ID.to_owned(),
        conversation_id: room,
        user_id: sender.to_owned(),
        thread_id: None,
        timestamp: u64::try_from(message.timestamp).unwrap_or(0),
        text: text.to_owned(),
        is_direct: true,
        addressed: true,
        attachments: attachment.into_iter().collect(),
        message_id: message_id(&message.metadata),
        press: None,
    }))
}

/// The sender a message speaks as: `sender_id` without invisible characters
/// ([`strip_invisible`]), trimmed, [`DEFAULT_SENDER`] when that leaves nothing.
pub fn sender_of(message: &ChatMessage) -> Cow<'_, str> {
    match strip_invisible(&message.sender_id) {
        Cow::Borrowed(sender) => Cow::Borrowed(match sender.trim() {
            "" => DEFAULT_SENDER,
            sender => sender,
        }),
        Cow::Owned(sender) => Cow::Owned(match sender.trim() {
            "" => DEFAULT_SENDER.to_owned(),
            sender => sender.to_owned(),
        }),
    }
}

/// The client's id for the message, if it sent a usable one: a blank or oversized id is
/// no id (the message is still handled; only deduplication downstream is lost).
fn message_id(metadata: &HashMap<String, String>) -> Option<String> {
    let id = metadata.get(MESSAGE_ID_KEY)?.trim();
    (!id.is_empty() && id.len() <= MAX_ID_BYTES).then(|| id.to_owned())
}

fn attachment(metadata: &HashMap<String, String>) -> Option<Attachment> {
    let reference = metadata.get(FILE_ID_KEY).map(|id| id.trim())?;
    if reference.is_empty() {
        return None;
    }
    let media_type = metadata
        .get("type")
        .map(|kind| kind.trim().to_ascii_lowercase())
        .filter(|kind| !kind.is_empty())
        .unwrap_or_else(|| "application/octet-stream".to_owned());
    let kind = if media_type.starts_with("image/") {
        AttachmentKind::Image
    } else {
        AttachmentKind::File
    };
    Some(Attachment {
        kind,
        media_type,
        reference: reference.to_owned(),
        name: metadata
            .get("filename")
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty()),
        size_bytes: None,
        duration_seconds: None,
    })
}

/// The text a `SendCommand` hands the bridge: the content with a leading `/` added when it
/// has none (`status` → `/status`), so the bridge's default remote prefix recognises it.
pub fn command_text(content: &str) -> String {
    let content = content.trim();
    if content.starts_with('/') {
        content.to_owned()
    } else {
        format!("/{content}")
    }
}

/// The `ChatMessage` a reply to `room` becomes: sent by the bot at `timestamp_ms`, with the
/// room in `metadata.room_id` so a client can tell rooms apart, and its `buttons`, if any,
/// in `metadata.choices` ([`CHOICES_KEY`]).
pub fn outbound(
    self_sender_id: &str,
    room: &str,
    text: &str,
    timestamp_ms: u64,
    buttons: &[Button],
) -> ChatMessage {
    let mut metadata = HashMap::from([(ROOM_KEY.to_owned(), room.to_owned())]);
    let choices: Vec<Value> = buttons
        .iter()
        .filter(|b| !b.command.trim().is_empty())
        .map(|b| serde_json::json!({"label": b.label, "command": b.command}))
        .collect();
    if !choices.is_empty() {
        metadata.insert(CHOICES_KEY.to_owned(), Value::Array(choices).to_string());
    }
    ChatMessage {
        sender_id: self_sender_id.to_owned(),
        content: text.to_owned(),
        timestamp: i64::try_from(timestamp_ms).unwrap_or(i64::MAX),
        metadata,
    }
}

/// Reads a `ChatMessage` from its proto3 JSON form (`senderId` or `sender_id`, `content`,
/// `timestamp` as a number or a numeric string, `metadata` as an object of strings), for
/// `host-shim explain`. `metadata.auth_token` is dropped on the way in: a token pasted into
/// an explain file must not be echoed back.
pub fn chat_message_from_json(payload: &Value) -> Result<ChatMessage, String> {
    let fields = payload
        .as_object()
        .ok_or("not a ChatMessage: expected a JSON object")?;
    let text = |names: &[&str]| -> Result<String, String> {
        match names.iter().find_map(|name| fields.get(*name)) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(format!("{} must be a string", names[0])),
        }
    };
    let timestamp = match fields.get("timestamp") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(number)) => number.as_i64().ok_or("timestamp must be an integer")?,
        Some(Value::String(text)) => text
            .trim()
            .parse()
            .map_err(|_| "timestamp must be an integer".to_owned())?,
        Some(_) => return Err("timestamp must be an integer".into()),
    };
    let mut metadata = HashMap::new();
    match fields.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(entries)) => {
            for (key, value) in entries {
                let Value::String(value) = value else {
                    return Err(format!("metadata.{key} must be a string"));
                };
                if key != AUTH_TOKEN_KEY {
                    metadata.insert(key.clone(), value.clone());
                }
            }
        }
        Some(_) => return Err("metadata must be an object of strings".into()),
    }
    Ok(ChatMessage {
        sender_id: text(&["sender_id", "senderId"])?,
        content: text(&["content"])?,
        timestamp,
        metadata,
    })
}

/// [`transport_core::platform::Platform::normalize`] for robo_claw: a `ChatMessage` in
/// proto3 JSON; `me.id` is the configured self sender id (`"robot"` when empty).
pub fn normalize(payload: &Value, me: &BotSelf) -> Normalized {
    let self_sender_id = match me.id.trim() {
        "" => DEFAULT_SELF_SENDER_ID,
        id => id,
    };
    match chat_message_from_json(payload) {
        Ok(message) => normalize_message(&message, self_sender_id),
        Err(reason) => {
            Normalized::Ignored(format!("a ChatMessage this bridge cannot read: {reason}"))
        }
    }
}
