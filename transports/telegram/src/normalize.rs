//! The pure normalizer (I40): one raw Bot API update and the bot's own identity in, an
//! [`Envelope`] or the reason it is ignored out. No I/O, no clock, no randomness, so
//! `host-shim explain telegram payload.json` shows exactly what the running transport
//! would do, and no payload can make it panic (C5).
//!
//! # What the envelope carries
//!
//! - `conversation_id`: `chat.id`. `user_id`: `from.id`, or `sender_chat.id` for an
//!   anonymous group admin (`GroupAnonymousBot`) or someone posting as a channel
//!   (`Channel_Bot`): those are people, keyed on the chat they speak for
//!   (docs/protocols.md#telegram-addressing-privacy-mode-and-other-bots).
//! - `thread_id`: `message_thread_id`, **only** when `is_topic_message` is true. A reply in
//!   a non-forum supergroup carries a `message_thread_id` too (teloxide `issue_1107`); that
//!   is a reply thread, not a topic, and answering "in" it would fail
//!   (docs/protocols.md#telegram-forum-topics-and-reply-threads).
//! - `is_direct`: `chat.type == "private"`.
//! - `timestamp`: `date` in ms: the real send time, also for the backlog delivered after a
//!   restart, so the bridge can decide what is too old
//!   (docs/decisions.md#decision-10-telegrams-backlog-is-answered-but-not-a-stale-one-for-strangers).
//! - `text`: `text`, else `caption`, with every mention of the bot removed (by entity, in
//!   UTF-16 offsets) and `/cmd@OurBot` rewritten to `/cmd`.
//! - `attachments`: the largest photo size, a document (or audio, voice, video, animation,
//!   video note, sticker), never downloaded here.
//!
//! # Addressing and commands (docs/decisions.md#decision-1-bot-status-is-a-command)
//!
//! `addressed` is true when the bot was explicitly addressed: a private chat, an
//! `@OurBot` `mention` entity, a `text_mention` entity of the bot's user, a reply to one of
//! the bot's messages (but not the topic-root reply every forum message carries), or a
//! leading `bot_command` that is bare (`/status`) or names us (`/status@OurBot`).
//!
//! The mention is removed from the text, together with what separates a *leading* mention
//! from the words after it (whitespace, `,`, `:`, `-`, the same characters the bridge's own
//! `@bot` stripping drops). So, in a group:
//!
//! | sent | text | addressed |
//! |---|---|---|
//! | `@OurBot /status` | `/status` | true |
//! | `@OurBot status` | `status` | true |
//! | `@OurBot, status please` | `status please` | true |
//! | `/status@OurBot` | `/status` | true |
//! | `@OurBot` | `` (empty) | true |
//! | `please @OurBot look` | `please look` | true |
//! | `status` | `status` | false |
//!
//! The router must therefore treat the text of an addressed, non-direct envelope the way it
//! treats the body after a leading `@bot`: a remote prefix (`/status`) is a command as
//! always, a bare known command word without arguments (`status`) is a command too, and an
//! empty text is the bot being called by name (help). Nothing else in the text tells it
//! that a mention was there: the flag is the only carrier.
//!
//! # Button presses
//!
//! A `callback_query` (a press on the approval request's Approve / Deny button) becomes the
//! command the button stands for, from the presser, in the request's chat
//! ([`normalize_callback_query`]). Data that is not one of the bridge's button commands
//! ([`transport_core::buttons::is_button_command`]) is ignored.
//!
//! # What is ignored, and why
//!
//! Edited messages and channel posts (not new prompts), messages from other bots and from
//! the bot itself (I14), commands for another bot (`/status@OtherBot`, I40), channel posts
//! forwarded automatically into a discussion group, service messages and anything else with
//! neither text nor a readable attachment, and update kinds the bridge does not ask for.

use serde::Deserialize;
use serde_json::Value;
use transport_core::buttons::is_button_command;
use transport_core::platform::{BotSelf, Normalized};
use transport_core::printable::clean_ids;
use transport_core::{Attachment, AttachmentKind, Envelope};

use crate::wire::{CallbackQuery, FileLike, Message, MessageEntity, Update, User};

/// The transport id envelopes carry.
pub const TRANSPORT_ID: &str = "telegram";

/// `GroupAnonymousBot`: the fake sender of messages an anonymous group admin posts.
pub const GROUP_ANONYMOUS_BOT_ID: i64 = 1_087_968_824;

/// `Channel_Bot`: the fake sender of messages posted in a group on behalf of a channel.
pub const CHANNEL_BOT_ID: i64 = 136_817_688;

/// Normalizes one raw payload: a Bot API `Update` (what `getUpdates` returns), or, for
/// convenience in `host-shim explain`, a bare `Message`.
pub fn normalize(payload: &Value, me: &BotSelf) -> Normalized {
    let looks_like_message = payload.get("update_id").is_none()
        && payload.get("message_id").is_some()
        && payload.get("chat").is_some();
    if looks_like_message {
        return match Message::deserialize(payload) {
            Ok(message) => normalize_message(&message, me),
            Err(_) => ignored("a message this bridge cannot read (a field has the wrong type)"),
        };
    }
    match Update::deserialize(payload) {
        Ok(update) => normalize_update(&update, payload, me),
        Err(_) => ignored(
            "not a Telegram update this bridge can read (no numeric update_id, or a field of the wrong type)",
        ),
    }
}

/// Normalizes a parsed update; `raw` is the same update as JSON, used only to name an
/// update kind the transport has no type for.
pub fn normalize_update(update: &Update, raw: &Value, me: &BotSelf) -> Normalized {
    if let Some(message) = &update.message {
        return normalize_message(message, me);
    }
    if update.edited_message.is_some() {
        return ignored("an edited message: only new messages become prompts or commands");
    }
    if update.channel_post.is_some() || update.edited_channel_post.is_some() {
        return ignored("a channel post: the bridge answers people in chats, not channels");
    }
    if let Some(query) = &update.callback_query {
        return normalize_callback_query(query, me);
    }
    let kind = raw
        .as_object()
        .and_then(|fields| fields.keys().find(|key| key.as_str() != "update_id"))
        .map_or_else(|| "empty".to_owned(), |key| key.clone());
    Normalized::Ignored(format!(
        "an update of kind {kind:?}: the bridge only handles new messages"
    ))
}

/// Normalizes a button press (`callback_query`) into the command the button stands for,
/// as if the presser had typed it: from `telegram:<from.id>`, in the chat (and forum
/// topic) of the message the button was under, addressed (a press on the bot's own
/// message is meant for the bot), direct iff the chat is private. The timestamp is 0
/// (unknown): a query carries no time of its own, and the message's `date` is when the
/// request was sent, not when it was answered.
pub fn normalize_callback_query(query: &CallbackQuery, me: &BotSelf) -> Normalized {
    if is_my_id(query.from.id, me) || query.from.is_bot {
        return Normalized::Ignored(format!(
            "a button press from a bot{}",
            bot_name(&query.from)
        ));
    }
    let Some(message) = &query.message else {
        return ignored(
            "a button press on an inline-mode message: it names no chat, so there is nowhere to answer",
        );
    };
    if message.chat.kind == "channel" {
        return ignored("a button press in a channel: the bridge answers people in chats");
    }
    let Some(data) = query.data.as_deref() else {
        return ignored("a game button press: this bridge sends no games");
    };
    let text = data.trim();
    if !is_button_command(text) {
        return ignored(
            "a button press whose data is not a bridge command (a client can send any data, so only the bridge's own /approve, /deny, /details and /answer buttons are taken)",
        );
    }
    let thread_id = match (message.is_topic_message, message.message_thread_id) {
        (Some(true), Some(thread)) => Some(thread.to_string()),
        _ => None,
    };
    Normalized::Message(clean_ids(Envelope {
        transport: TRANSPORT_ID.to_owned(),
        conversation_id: message.chat.id.to_string(),
        user_id: query.from.id.to_string(),
        thread_id,
        timestamp: 0,
        text: text.to_owned(),
        is_direct: message.chat.kind == "private",
        addressed: true,
        attachments: Vec::new(),
        // A press is its own event (two presses on one message are two answers), so its
        // id is the query's, not the message's.
        message_id: (!query.id.is_empty()).then(|| format!("callback:{}", query.id)),
        // The same id names the press for a private answer (the listener keeps the
        // query unanswered until the bridge answered it or was done with it).
        press: (!query.id.is_empty()).then(|| format!("callback:{}", query.id)),
    }))
}

/// Normalizes one message (see the module docs for every rule).
pub fn normalize_message(message: &Message, me: &BotSelf) -> Normalized {
    if message.chat.kind == "channel" {
        return ignored("a message in a channel: the bridge answers people in chats, not channels");
    }
    if message.is_automatic_forward == Some(true) {
        return ignored("a channel post forwarded automatically into its discussion group");
    }
    let user_id = match sender(message, me) {
        Ok(id) => id,
        Err(reason) => return Normalized::Ignored(reason),
    };
    let is_direct = message.chat.kind == "private";
    let (text, entities) = match (&message.text, &message.caption) {
        (Some(text), _) => (text.as_str(), message.entities.as_slice()),
        (None, Some(caption)) => (caption.as_str(), message.caption_entities.as_slice()),
        (None, None) => ("", &[][..]),
    };
    let attachments = attachments(message);
    if text.trim().is_empty() && attachments.is_empty() {
        return ignored(
            "a message with neither text nor an attachment (a service message, a poll, a location, ...)",
        );
    }

    let units: Vec<u16> = text.encode_utf16().collect();
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut addressed = is_direct;
    for entity in entities {
        let Some((start, end)) = span(entity, units.len()) else {
            continue;
        };
        let covered = String::from_utf16_lossy(&units[start..end]);
        match entity.kind.as_str() {
            "bot_command" => {
                let leading = units[..start].iter().all(|unit| is_space_unit(*unit));
                match covered.split_once('@') {
                    Some((command, target)) if is_me(target, me) => {
                        addressed = true;
                        let at = start + command.encode_utf16().count();
                        cut.push((at, end));
                    }
                    Some((_, target)) if leading => {
                        return Normalized::Ignored(format!(
                            "a command for another bot (@{target})"
                        ));
                    }
                    // A bare leading command goes to every bot in the chat, us included.
                    None if leading => addressed = true,
                    _ => {}
                }
            }
            "mention"
                if covered
                    .strip_prefix('@')
                    .is_some_and(|name| is_me(name, me)) =>
            {
                addressed = true;
                cut.push((start, end));
            }
            "text_mention"
                if entity
                    .user
                    .as_ref()
                    .is_some_and(|user| is_my_id(user.id, me)) =>
            {
                addressed = true;
                cut.push((start, end));
            }
            _ => {}
        }
    }
    if replies_to_me(message, me) {
        addressed = true;
    }

    let thread_id = match (message.is_topic_message, message.message_thread_id) {
        (Some(true), Some(thread)) => Some(thread.to_string()),
        _ => None,
    };
    Normalized::Message(clean_ids(Envelope {
        transport: TRANSPORT_ID.to_owned(),
        conversation_id: message.chat.id.to_string(),
        user_id,
        thread_id,
        timestamp: u64::try_from(message.date)
            .unwrap_or(0)
            .saturating_mul(1_000),
        text: remove_spans(&units, cut),
        is_direct,
        addressed,
        attachments,
        // Telegram's message ids count per chat, so the chat makes them unique.
        message_id: Some(format!("{}:{}", message.chat.id, message.message_id)),
        press: None,
    }))
}

fn ignored(reason: &str) -> Normalized {
    Normalized::Ignored(reason.to_owned())
}

/// The sender's id, or why the message is not from a person the bridge answers (I14).
fn sender(message: &Message, me: &BotSelf) -> Result<String, String> {
    let Some(from) = &message.from else {
        return Err("a message without a sender".to_owned());
    };
    if is_my_id(from.id, me) {
        return Err("the bot's own message".to_owned());
    }
    if !from.is_bot {
        return Ok(from.id.to_string());
    }
    match &message.sender_chat {
        // Telegram writes these fake bot senders itself; the human behind them is keyed on
        // the chat they speak for, so pairing one admin pairs the group's anonymous admins.
        Some(chat) if speaks_for_a_chat(from) => Ok(chat.id.to_string()),
        _ => Err(format!("a message from another bot{}", bot_name(from))),
    }
}

fn speaks_for_a_chat(user: &User) -> bool {
    let name = user.username.as_deref().unwrap_or_default();
    user.id == GROUP_ANONYMOUS_BOT_ID
        || user.id == CHANNEL_BOT_ID
        || name.eq_ignore_ascii_case("GroupAnonymousBot")
        || name.eq_ignore_ascii_case("Channel_Bot")
}

fn bot_name(user: &User) -> String {
    user.username
        .as_deref()
        .map(|name| format!(" (@{name})"))
        .unwrap_or_default()
}

fn is_my_id(id: i64, me: &BotSelf) -> bool {
    !me.id.is_empty() && id.to_string() == me.id
}

fn is_me(name: &str, me: &BotSelf) -> bool {
    !me.username.is_empty() && name.eq_ignore_ascii_case(&me.username)
}

/// A reply to one of the bot's messages, except the topic root: every message in a forum
/// topic carries `reply_to_message` = the `forum_topic_created` service message, so in a
/// topic the bot created, everything would otherwise look like a reply to it
/// (docs/protocols.md#telegram-forum-topics-and-reply-threads).
fn replies_to_me(message: &Message, me: &BotSelf) -> bool {
    let Some(reply) = &message.reply_to_message else {
        return false;
    };
    let topic_root = reply.forum_topic_created.is_some()
        || (message.is_topic_message == Some(true)
            && message.message_thread_id == Some(reply.message_id));
    !topic_root
        && reply
            .from
            .as_ref()
            .is_some_and(|from| is_my_id(from.id, me))
}

/// The entity's span in UTF-16 units, when it lies inside the text; a payload with
/// nonsense offsets loses that entity, never the message.
fn span(entity: &MessageEntity, len: usize) -> Option<(usize, usize)> {
    let start = usize::try_from(entity.offset).ok()?;
    let end = start.checked_add(usize::try_from(entity.length).ok()?)?;
    (start < end && end <= len).then_some((start, end))
}

fn is_space_unit(unit: u16) -> bool {
    char::from_u32(u32::from(unit)).is_some_and(char::is_whitespace)
}

fn is_gap(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// The text without the spans in `cut`. Where a span is removed, the spaces on both sides
/// become one (`please @bot look` → `please look`) while newlines and indentation
/// elsewhere stay as written (a prompt may hold code). A span at the start takes the
/// separator after it along (`@bot, status` → `status`).
fn remove_spans(units: &[u16], mut cut: Vec<(usize, usize)>) -> String {
    cut.sort_unstable();
    let mut pieces: Vec<String> = Vec::new();
    let mut at = 0;
    for (start, end) in cut {
        let start = start.max(at);
        if end <= start {
            continue;
        }
        pieces.push(String::from_utf16_lossy(&units[at..start]));
        at = end;
    }
    pieces.push(String::from_utf16_lossy(&units[at..]));

    let mut pieces = pieces.into_iter();
    let mut text = pieces.next().unwrap_or_default();
    let mut leading = text.trim().is_empty();
    for piece in pieces {
        if leading {
            // Everything so far was the mention (and whitespace before it).
            text = piece
                .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ':' | '-'))
                .to_owned();
            leading = text.trim().is_empty();
            continue;
        }
        let kept = text.trim_end_matches(is_gap).len();
        let gap = kept < text.len() || piece.starts_with(is_gap);
        text.truncate(kept);
        // `thanks @bot, nice` → `thanks nice`: the comma belonged to the mention.
        let right = piece.trim_start_matches(is_gap);
        let right = right
            .strip_prefix([',', ':'])
            .map_or(right, |after| after.trim_start_matches(is_gap));
        if gap && !text.is_empty() && !right.is_empty() {
            text.push(' ');
        }
        text.push_str(right);
    }
    text.trim().to_owned()
}

/// The attachments the message announces, never downloaded here.
fn attachments(message: &Message) -> Vec<Attachment> {
    let mut found = Vec::new();
    // Every captured payload lists sizes smallest first; choosing by area does not rely on it.
    if let Some(photo) = message
        .photo
        .iter()
        .max_by_key(|size| (size.width.saturating_mul(size.height), size.file_size))
    {
        found.push(Attachment {
            kind: AttachmentKind::Image,
            // Telegram re-encodes every photo as JPEG.
            media_type: "image/jpeg".to_owned(),
            reference: photo.file_id.clone(),
            name: None,
            size_bytes: photo.file_size,
            duration_seconds: None,
        });
    }
    // An animation also fills `document` "for backward compatibility": one file, not two.
    let document = if message.animation.is_some() {
        None
    } else {
        message.document.as_ref()
    };
    let files: [(Option<&FileLike>, &str); 6] = [
        (document, "application/octet-stream"),
        (message.audio.as_ref(), "audio/mpeg"),
        (message.voice.as_ref(), "audio/ogg"),
        (message.video.as_ref(), "video/mp4"),
        (message.animation.as_ref(), "video/mp4"),
        (message.video_note.as_ref(), "video/mp4"),
    ];
    for (file, fallback) in files {
        if let Some(file) = file {
            found.push(file_attachment(file, fallback));
        }
    }
    if let Some(sticker) = &message.sticker {
        let media_type = if sticker.is_animated == Some(true) {
            "application/x-tgsticker"
        } else if sticker.is_video == Some(true) {
            "video/webm"
        } else {
            "image/webp"
        };
        // The Bot API gives stickers no mime_type; the kind of sticker says it.
        found.push(file_attachment(sticker, media_type));
    }
    found
}

fn file_attachment(file: &FileLike, fallback: &str) -> Attachment {
    let media_type = file
        .mime_type
        .as_deref()
        .map(str::trim)
        .filter(|mime| !mime.is_empty())
        .unwrap_or(fallback)
        .to_ascii_lowercase();
    Attachment {
        kind: if media_type.starts_with("image/") {
            AttachmentKind::Image
        } else {
            AttachmentKind::File
        },
        media_type,
        reference: file.file_id.clone(),
        name: file.file_name.clone(),
        size_bytes: file.file_size,
        duration_seconds: file.duration.map(|d| u32::try_from(d).unwrap_or(u32::MAX)),
    }
}
