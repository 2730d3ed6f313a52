//! The pure normalizer: one raw Slack payload and the bot's own identity in, an
//! [`Envelope`] or the reason it is ignored out. No I/O, no clock, no randomness, so
//! `host-shim explain slack payload.json` shows exactly what the running transport would
//! do, and no payload can make it panic (C5).
//!
//! It reads a Socket Mode envelope (`{"envelope_id", "type": "events_api", "payload"}`), an
//! Events API `event_callback` body, or a bare `message` / `app_mention` event.
//!
//! # What the envelope carries
//!
//! - `user_id`: `event.user` (`U…`, or `W…` on Enterprise Grid: never assumed to be `U`).
//! - `is_direct`: `channel_type == "im"`, or, on an `app_mention` (which has no
//!   `channel_type`), a `D…` channel.
//! - `conversation_id` and `thread_id`: one conversation per thread
//!   (docs/protocols.md#slack-events, "conversation key = (channel, thread_ts ?? ts of the
//!   root)"), so pausing, pairing codes and replies belong to the thread a person is
//!   talking in:
//!
//! | message | `conversation_id` | `thread_id` | the bridge's replies go |
//! |---|---|---|---|
//! | top level in an IM | `D1` | none | into the IM |
//! | reply in a thread (IM or channel) | `C1/<thread_ts>` | `<thread_ts>` | into that thread |
//! | top level in a channel, group or group DM | `C1/<ts>` | `<ts>` | into a thread under it |
//!
//!   A top-level channel message opens a thread because that is where a Slack user expects
//!   a bot's answer (progress cards and long replies would otherwise flood the channel),
//!   and the code a person types to pair is then typed in that same thread.
//! - `timestamp`: `ts` (seconds with microseconds) in ms.
//! - `text`: mrkdwn resolved to plain text ([`crate::mrkdwn`]): the bot's `<@U…>` mention
//!   removed, other tokens resolved, `&amp; &lt; &gt;` undone.
//! - `addressed`: an IM, an `app_mention`, or the bot's `<@U…>` in the text. Decision 1:
//!   `<@bot> status` arrives as `status`, addressed, and the bridge parses the command.
//! - `attachments`: every file with a `url_private_download` (the reference the transport
//!   downloads with the bot token); deleted or hidden files have none and are left out.
//!
//! # Button clicks
//!
//! An `interactive` envelope whose payload is `block_actions` (a click on the approval
//! request's buttons, [`crate::blocks`]) becomes the command the button stands for (its
//! `value`), from the clicker (`user.id`), in the clicked message's conversation: its
//! channel, and its thread (`message.thread_ts`, or `container.thread_ts`) when it is in
//! one, exactly the conversation the bridge posted the request to; addressed, direct in a
//! `D…` channel, with `action:<action_ts>` as its message id (two clicks are two answers)
//! ([`normalize_block_actions`]). A `value` that is not one of the bridge's button
//! commands ([`transport_core::buttons::is_button_command`]) is refused: a client can send
//! any value it likes. The envelope is acknowledged on the socket like every other
//! ([`crate::socket`]); a refused clicker is told why by a message only they see
//! ([`refusal`]).
//!
//! # What is ignored, and why
//!
//! - The bot's own messages (`user` is the bot user) and every other bot's (I14): modern
//!   apps post plain messages with a `bot_id` and **no subtype**, legacy integrations use
//!   `subtype: bot_message`; either is enough.
//! - `message_changed` (an edit, not a new prompt), `message_deleted`, and every other
//!   subtype except `file_share` (a person sharing a file, often with a comment) and
//!   `thread_broadcast` (a person's thread reply also shown in the channel).
//! - Hidden messages, messages without a sender, channel or `ts`, and messages with neither
//!   text nor a downloadable file.
//! - Events other than `message` and `app_mention`.
//!
//! Deduplication (an `app_mention` and a `message` for the same `(channel, ts)`, a
//! redelivered envelope) is not the normalizer's: it needs memory, see [`crate::dedupe`].

use serde::Deserialize;
use serde_json::Value;
use transport_core::buttons::is_button_command;
use transport_core::platform::{BotSelf, Normalized};
use transport_core::printable::clean_ids;
use transport_core::{Attachment, AttachmentKind, Envelope};

use crate::mrkdwn;
use crate::wire::{File, MessageEvent};

/// The transport id envelopes carry.
pub const TRANSPORT_ID: &str = "slack";

/// Separates channel and thread in a conversation id (`C1/1355517523.000005`); neither a
/// channel id nor a `ts` can contain it.
pub const THREAD_SEPARATOR: char = '/';

/// The conversation id of `channel`, in the thread rooted at `thread` when there is one.
pub fn conversation_id(channel: &str, thread: Option<&str>) -> String {
    match thread {
        Some(thread) => format!("{channel}{THREAD_SEPARATOR}{thread}"),
        None => channel.to_owned(),
    }
}

/// The channel and thread of a conversation id [`conversation_id`] made.
pub fn split_conversation(conversation: &str) -> (&str, Option<&str>) {
    match conversation.split_once(THREAD_SEPARATOR) {
        Some((channel, thread)) if is_ts(thread) => (channel, Some(thread)),
        _ => (conversation, None),
    }
}

/// Whether `text` has the shape of a Slack `ts` (`1355517523.000005`): the only thread
/// ids `chat.postMessage` can use.
pub fn is_ts(text: &str) -> bool {
    match text.split_once('.') {
        Some((seconds, micros)) => {
            !seconds.is_empty()
                && !micros.is_empty()
                && seconds.bytes().all(|b| b.is_ascii_digit())
                && micros.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// The event inside `payload`: the envelope's payload, the callback's event, or the
/// payload itself when it already is an event.
pub fn event_of(payload: &Value) -> &Value {
    let callback = match payload.get("envelope_id") {
        Some(_) => payload.get("payload").unwrap_or(&Value::Null),
        None => payload,
    };
    match callback.get("type").and_then(Value::as_str) {
        Some("event_callback") => callback.get("event").unwrap_or(&Value::Null),
        _ => callback,
    }
}

/// Normalizes one raw payload (see the module docs for every rule).
pub fn normalize(payload: &Value, me: &BotSelf) -> Normalized {
    if let Some(kind) = payload.get("envelope_id").and(payload.get("type")) {
        let kind = kind.as_str().unwrap_or_default();
        if kind == "interactive" {
            return normalize_interactive(payload.get("payload").unwrap_or(&Value::Null), me);
        }
        if kind != "events_api" {
            return Normalized::Ignored(format!(
                "a Socket Mode {kind:?} envelope: the bridge only handles events (messages)"
            ));
        }
    }
    if payload.get("type").and_then(Value::as_str) == Some("block_actions") {
        return normalize_block_actions(payload, me);
    }
    let event = event_of(payload);
    let Some(kind) = event.get("type").and_then(Value::as_str) else {
        return ignored(
            "not a Slack event this bridge can read (no event type); paste a Socket Mode envelope, an event_callback body or its event",
        );
    };
    if kind != "message" && kind != "app_mention" {
        return Normalized::Ignored(format!(
            "a {kind:?} event: the bridge only handles messages and app mentions"
        ));
    }
    match MessageEvent::deserialize(event) {
        Ok(message) => normalize_message(&message, me),
        Err(_) => ignored("a message this bridge cannot read (a field has the wrong type)"),
    }
}

/// Normalizes one `message` or `app_mention` event.
pub fn normalize_message(message: &MessageEvent, me: &BotSelf) -> Normalized {
    let own = !me.id.is_empty() && message.user.as_deref() == Some(me.id.as_str());
    if own {
        return ignored("the bot's own message");
    }
    match message.subtype.as_deref() {
        None | Some("file_share" | "thread_broadcast") => {}
        Some("bot_message") => return ignored("a message from a bot (subtype bot_message)"),
        Some("message_changed") => {
            return ignored(
                "an edited message (message_changed): only new messages become prompts or commands",
            );
        }
        Some("message_deleted") => return ignored("a deleted message (message_deleted)"),
        Some(other) => {
            return Normalized::Ignored(format!(
                "a message of subtype {other:?}: only what people write or share becomes a prompt"
            ));
        }
    }
    if let Some(bot) = &message.bot_id {
        return Normalized::Ignored(format!("a message from an app or bot ({bot})"));
    }
    if message.hidden == Some(true) {
        return ignored("a hidden message");
    }
    let Some(user) = message.user.as_deref().filter(|user| !user.is_empty()) else {
        return ignored("a message without a sender");
    };
    let (Some(channel), Some(ts)) = (
        message.channel.as_deref().filter(|c| !c.is_empty()),
        message.ts.as_deref().filter(|ts| !ts.is_empty()),
    ) else {
        return ignored("a message without a channel or ts");
    };
    let resolved = mrkdwn::resolve(message.text.as_deref().unwrap_or_default(), &me.id);
    let attachments = attachments(&message.files);
    if resolved.text.is_empty() && attachments.is_empty() && !resolved.mentions_me {
        return ignored("a message with neither text nor a downloadable file");
    }
    let is_direct = match message.channel_type.as_deref() {
        Some(kind) => kind == "im",
        None => channel.starts_with('D'),
    };
    let reply_to = message
        .thread_ts
        .as_deref()
        .filter(|thread| !thread.is_empty() && *thread != ts);
    let thread = match (reply_to, is_direct) {
        (Some(root), _) => Some(root),
        (None, true) => None,
        (None, false) => Some(ts),
    };
    Normalized::Message(clean_ids(Envelope {
        transport: TRANSPORT_ID.to_owned(),
        conversation_id: conversation_id(channel, thread),
        user_id: user.to_owned(),
        thread_id: thread.map(str::to_owned),
        timestamp: ts_to_ms(ts),
        text: resolved.text,
        is_direct,
        addressed: is_direct || message.kind == "app_mention" || resolved.mentions_me,
        attachments,
        // A ts is unique within its channel; Slack's retries and the `message` /
        // `app_mention` pair of one post both carry the same one.
        message_id: Some(format!("{channel}:{ts}")),
        press: None,
    }))
}

/// Normalizes an `interactive` envelope's payload: only `block_actions` is handled.
pub fn normalize_interactive(payload: &Value, me: &BotSelf) -> Normalized {
    match payload.get("type").and_then(Value::as_str) {
        Some("block_actions") => normalize_block_actions(payload, me),
        other => Normalized::Ignored(format!(
            "an interactive payload of type {:?}: only clicks on the bridge's buttons (block_actions) are handled",
            other.unwrap_or_default()
        )),
    }
}

/// The channel and thread of the message a `block_actions` payload's button is under.
fn clicked_place(payload: &Value) -> (Option<&str>, Option<&str>) {
    fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    }
    let container = payload.get("container").unwrap_or(&Value::Null);
    let channel = payload
        .get("channel")
        .and_then(|channel| text(channel, "id"))
        .or_else(|| text(container, "channel_id"));
    let thread = payload
        .get("message")
        .and_then(|message| text(message, "thread_ts"))
        .or_else(|| text(container, "thread_ts"))
        .filter(|thread| is_ts(thread));
    (channel, thread)
}

/// Normalizes one `block_actions` payload (see "Button clicks" in the module docs).
pub fn normalize_block_actions(payload: &Value, me: &BotSelf) -> Normalized {
    let user = payload
        .get("user")
        .and_then(|user| user.get("id"))
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty());
    let Some(user) = user else {
        return ignored("a button click that names no user");
    };
    if !me.id.is_empty() && user == me.id {
        return ignored("a button click by the bot itself");
    }
    let (Some(channel), thread) = clicked_place(payload) else {
        return ignored("a button click that names no channel, so there is nowhere to answer");
    };
    let action = payload
        .get("actions")
        .and_then(Value::as_array)
        .and_then(|actions| actions.first())
        .unwrap_or(&Value::Null);
    let value = action
        .get("value")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim();
    if !is_button_command(value) {
        return ignored(
            "a button click whose value is not a bridge command (a client can send any value, so only the bridge's own /approve, /deny and /details buttons are taken)",
        );
    }
    let action_ts = action
        .get("action_ts")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Normalized::Message(clean_ids(Envelope {
        transport: TRANSPORT_ID.to_owned(),
        conversation_id: conversation_id(channel, thread),
        user_id: user.to_owned(),
        thread_id: thread.map(str::to_owned),
        timestamp: ts_to_ms(action_ts),
        text: value.to_owned(),
        is_direct: channel.starts_with('D'),
        addressed: true,
        attachments: Vec::new(),
        message_id: (!action_ts.is_empty()).then(|| format!("action:{user}:{action_ts}")),
        press: (!action_ts.is_empty()).then(|| format!("action:{user}:{action_ts}")),
    }))
}

/// A message only the clicker sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Where the click was.
    pub channel: String,
    /// In which thread.
    pub thread_ts: Option<String>,
    /// Who clicked.
    pub user: String,
    /// Why nothing happened.
    pub text: String,
}

/// What a refused click's clicker is told (`chat.postEphemeral`), given what the normalizer
/// made of `payload` (a `block_actions` payload): `None` for a click that was taken, and
/// for one that names no channel or user (nowhere to answer) or is the bot's own.
pub fn refusal(payload: &Value, normalized: &Normalized, me: &BotSelf) -> Option<Refusal> {
    let Normalized::Ignored(reason) = normalized else {
        return None;
    };
    if payload.get("type").and_then(Value::as_str) != Some("block_actions") {
        return None;
    }
    let user = payload.get("user")?.get("id")?.as_str()?;
    if user.is_empty() || user == me.id {
        return None;
    }
    let (Some(channel), thread) = clicked_place(payload) else {
        return None;
    };
    Some(Refusal {
        channel: channel.to_owned(),
        thread_ts: thread.map(str::to_owned),
        user: user.to_owned(),
        text: format!("This click was not taken and decided nothing: {reason}."),
    })
}

fn ignored(reason: &str) -> Normalized {
    Normalized::Ignored(reason.to_owned())
}

/// `1355517523.000005` → 1355517523000 ms; 0 when it is not a `ts`.
pub fn ts_to_ms(ts: &str) -> u64 {
    let (seconds, micros) = ts.split_once('.').unwrap_or((ts, ""));
    let Ok(seconds) = seconds.parse::<u64>() else {
        return 0;
    };
    let millis = micros
        .get(..3)
        .and_then(|digits| digits.parse::<u64>().ok())
        .unwrap_or(0);
    seconds.saturating_mul(1_000).saturating_add(millis)
}

fn attachments(files: &[File]) -> Vec<Attachment> {
    files
        .iter()
        .filter_map(|file| {
            let url = file.url_private_download.as_deref()?.trim();
            if url.is_empty() || file.mode.as_deref() == Some("tombstone") {
                return None;
            }
            let media_type = file
                .mimetype
                .as_deref()
                .map(str::trim)
                .filter(|mime| !mime.is_empty())
                .unwrap_or("application/octet-stream")
                .to_ascii_lowercase();
            Some(Attachment {
                kind: if media_type.starts_with("image/") {
                    AttachmentKind::Image
                } else {
                    AttachmentKind::File
                },
                media_type,
                reference: url.to_owned(),
                name: file.name.clone(),
                size_bytes: file.size,
                duration_seconds: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_ids_round_trip_and_only_a_ts_is_a_thread() {
        assert_eq!(conversation_id("C1", Some("1.2")), "C1/1.2");
        assert_eq!(split_conversation("C1/1.2"), ("C1", Some("1.2")));
        assert_eq!(split_conversation("D1"), ("D1", None));
        assert_eq!(split_conversation("C1/nope"), ("C1/nope", None));
        for ts in ["1355517523.000005", "1.2"] {
            assert!(is_ts(ts), "{ts}");
        }
        for bad in ["", "1", ".1", "1.", "a.b", "1.2.3", "conformance-thread"] {
            assert!(!is_ts(bad), "{bad}");
        }
    }

    #[test]
    fn a_ts_becomes_milliseconds() {
        assert_eq!(ts_to_ms("1355517523.000005"), 1_355_517_523_000);
        assert_eq!(ts_to_ms("1700000000.123456"), 1_700_000_000_123);
        assert_eq!(ts_to_ms("1700000000"), 1_700_000_000_000);
        assert_eq!(ts_to_ms("garbage"), 0);
    }
}
