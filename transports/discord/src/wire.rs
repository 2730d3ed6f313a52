//! Discord Gateway v10 and REST v10 types: the fields this transport reads and writes,
//! nothing more (docs/protocols.md#discord-gateway-and-rest).
//!
//! Every id is a string: Discord sends snowflakes as strings because they do not fit a
//! JavaScript number. Every field Discord may omit is optional or defaulted and unknown
//! fields are ignored, so a payload with extra keys (`_trace`, newer fields) still parses
//! instead of stalling the gateway on one event.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Gateway opcodes (docs/protocols.md#discord-connecting-heartbeats-and-resuming).
pub mod op {
    /// An event (`t`, `s`, `d`).
    pub const DISPATCH: u8 = 0;
    /// Heartbeat, both ways: received means "send one now".
    pub const HEARTBEAT: u8 = 1;
    /// Start a new session.
    pub const IDENTIFY: u8 = 2;
    /// Resume a dropped session.
    pub const RESUME: u8 = 6;
    /// Discord asks the client to reconnect and resume.
    pub const RECONNECT: u8 = 7;
    /// The session is invalid; `d` says whether it may be resumed.
    pub const INVALID_SESSION: u8 = 9;
    /// First frame on a connection: `d.heartbeat_interval`.
    pub const HELLO: u8 = 10;
    /// Acknowledges a heartbeat.
    pub const HEARTBEAT_ACK: u8 = 11;
}

/// Gateway intents (docs/protocols.md#discord-intents).
pub mod intents {
    /// MESSAGE_CREATE in servers.
    pub const GUILD_MESSAGES: u64 = 1 << 9;
    /// MESSAGE_CREATE in direct messages.
    pub const DIRECT_MESSAGES: u64 = 1 << 12;
    /// Privileged: without it, server messages that do not mention the bot arrive empty.
    pub const MESSAGE_CONTENT: u64 = 1 << 15;
    /// Exactly what the bridge needs, nothing more: 37376.
    pub const BRIDGE: u64 = GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT;
}

/// One gateway frame: `{"op": int, "d": any, "s": ?int, "t": ?string}`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Frame {
    /// Opcode.
    pub op: u8,
    /// Payload.
    #[serde(default)]
    pub d: Value,
    /// Sequence number, only on dispatches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<u64>,
    /// Event name, only on dispatches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<String>,
}

/// `d` of HELLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Hello {
    /// Milliseconds between heartbeats.
    pub heartbeat_interval: u64,
}

/// `d` of READY: what a session needs to resume and to recognise itself.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Ready {
    /// The bot user.
    pub user: User,
    /// Session id, for RESUME.
    pub session_id: String,
    /// Where to resume this session.
    #[serde(default)]
    pub resume_gateway_url: Option<String>,
}

/// `d` of IDENTIFY.
#[derive(Debug, Clone, Serialize)]
pub struct Identify<'a> {
    /// The bot token (never logged).
    pub token: &'a str,
    /// Intents bitmask.
    pub intents: u64,
    /// Client properties.
    pub properties: IdentifyProperties,
}

/// `properties` of IDENTIFY.
#[derive(Debug, Clone, Serialize)]
pub struct IdentifyProperties {
    /// Operating system.
    pub os: &'static str,
    /// Library name.
    pub browser: &'static str,
    /// Library name.
    pub device: &'static str,
}

/// `d` of RESUME.
#[derive(Debug, Clone, Serialize)]
pub struct Resume<'a> {
    /// The bot token (never logged).
    pub token: &'a str,
    /// The session to resume.
    pub session_id: &'a str,
    /// The last sequence number received.
    pub seq: Option<u64>,
}

/// `GET /gateway/bot`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GatewayBot {
    /// `wss://gateway.discord.gg`.
    pub url: String,
    /// How many new sessions (IDENTIFY) the bot may still start.
    #[serde(default)]
    pub session_start_limit: Option<SessionStartLimit>,
}

/// `session_start_limit` of `GET /gateway/bot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct SessionStartLimit {
    /// Sessions per day.
    #[serde(default)]
    pub total: u64,
    /// Sessions left until the reset.
    pub remaining: u64,
    /// Milliseconds until `remaining` is reset to `total`.
    #[serde(default)]
    pub reset_after: u64,
    /// IDENTIFYs allowed per 5 seconds.
    #[serde(default = "one")]
    pub max_concurrency: u64,
}

fn one() -> u64 {
    1
}

/// A user (person, bot or webhook author).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct User {
    /// Snowflake.
    pub id: String,
    /// User name (unique, lower case, since 2023).
    #[serde(default)]
    pub username: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_name: Option<String>,
    /// "Whether the user belongs to an OAuth2 application" (bots, webhooks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot: Option<bool>,
    /// Discord's own system user (Discord's official announcements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<bool>,
}

/// An attachment of a message (docs/protocols.md#discord-messages).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Attachment {
    /// Snowflake.
    #[serde(default)]
    pub id: String,
    /// File name.
    #[serde(default)]
    pub filename: String,
    /// Media type, optional.
    #[serde(default)]
    pub content_type: Option<String>,
    /// Size in bytes.
    #[serde(default)]
    pub size: Option<u64>,
    /// Signed, expiring CDN URL.
    #[serde(default)]
    pub url: Option<String>,
    /// The media proxy's URL for the same file.
    #[serde(default)]
    pub proxy_url: Option<String>,
    /// A voice message's length in seconds (a float). Kept as JSON so a value of another
    /// type costs the duration, not the whole message.
    #[serde(default)]
    pub duration_secs: Option<serde_json::Value>,
}

/// `message_reference`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct MessageReference {
    /// The referenced message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Its channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<String>,
    /// Its server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<String>,
    /// Create Message: fail when the referenced message is gone (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_if_not_exists: Option<bool>,
}

/// The message a reply refers to: only who wrote it matters here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ReferencedMessage {
    /// Snowflake.
    #[serde(default)]
    pub id: String,
    /// Its author.
    #[serde(default)]
    pub author: Option<User>,
}

/// A Message object plus the MESSAGE_CREATE extra fields (docs/protocols.md#discord-messages).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Message {
    /// Snowflake.
    pub id: String,
    /// The channel, or the thread (a thread is a channel).
    pub channel_id: String,
    /// Present in servers, absent in DMs.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// Sender.
    pub author: User,
    /// Text (empty without the Message Content intent, except DMs and mentions).
    #[serde(default)]
    pub content: String,
    /// ISO 8601 send time.
    #[serde(default)]
    pub timestamp: Option<String>,
    /// Users mentioned, the authority on mentions (a reply ping is here, not in content).
    #[serde(default)]
    pub mentions: Vec<User>,
    /// `@everyone` / `@here` was used.
    #[serde(default)]
    pub mention_everyone: bool,
    /// Files.
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    /// Set when a webhook posted the message.
    #[serde(default)]
    pub webhook_id: Option<String>,
    /// Message type: 0 DEFAULT, 19 REPLY, others are system messages.
    #[serde(rename = "type", default)]
    pub kind: u8,
    /// What a reply refers to.
    #[serde(default)]
    pub message_reference: Option<MessageReference>,
    /// The replied-to message (types 19, 21, 23); `null` when it was deleted.
    #[serde(default)]
    pub referenced_message: Option<ReferencedMessage>,
    /// 1 DM, 3 group DM, 10/11/12 threads, 0 text channel.
    #[serde(default)]
    pub channel_type: Option<u8>,
}

/// `allowed_mentions` on everything the bot posts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllowedMentions {
    /// Which mention kinds in the content notify: none of `everyone`, `roles`, `users`.
    pub parse: [&'static str; 0],
    /// Whether a reply pings the author of the replied-to message.
    pub replied_user: bool,
}

/// Agent text is quoted, pasted and generated: none of it may ping `@everyone`, a role or
/// a person (`{"parse": []}`, docs/protocols.md#discord-rest).
pub const NO_PINGS: AllowedMentions = AllowedMentions {
    parse: [],
    replied_user: false,
};

/// `POST /channels/{id}/threads` body: a thread without a message.
#[derive(Debug, Clone, Serialize)]
pub struct StartThread<'a> {
    /// 1–100 characters.
    pub name: &'a str,
    /// 11: `PUBLIC_THREAD`.
    #[serde(rename = "type")]
    pub kind: u8,
    /// Minutes without activity before Discord archives it itself (10080: a week, the
    /// longest; a session idle for a day keeps its thread in the list).
    pub auto_archive_duration: u32,
}

/// `PATCH /channels/{id}` body for a thread: its name and whether it is archived.
#[derive(Debug, Clone, Serialize)]
pub struct ModifyThread<'a> {
    /// The new name, 1–100 characters.
    pub name: &'a str,
    /// Archived (ended) or not.
    pub archived: bool,
}

/// A channel, as `POST /channels/{id}/threads` returns the thread.
#[derive(Debug, Clone, Deserialize)]
pub struct ThreadChannel {
    /// The thread's snowflake: messages in it have it as `channel_id`.
    pub id: String,
}

/// `POST /channels/{id}/messages` body.
#[derive(Debug, Clone, Serialize)]
pub struct CreateMessage<'a> {
    /// Text, up to 2000 code points.
    pub content: &'a str,
    /// Never ping anyone.
    pub allowed_mentions: AllowedMentions,
    /// Action rows of buttons; left out when there are none.
    #[serde(skip_serializing_if = "<[ActionRow]>::is_empty")]
    pub components: &'a [ActionRow],
    /// The message this one replies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_reference: Option<ReplyReference<'a>>,
}

/// A reply's pointer to the message it answers, in the same channel.
#[derive(Debug, Clone, Serialize)]
pub struct ReplyReference<'a> {
    /// The message replied to.
    pub message_id: &'a str,
    /// Post all the same when that message is gone (deleted while the turn ran): a reply
    /// is a pointer, never a reason to lose the message.
    pub fail_if_not_exists: bool,
}

/// A reply pings the author of the message it answers (the paired user who asked) and no
/// one else: the done message is meant to buzz their phone, while `parse` stays empty.
pub const PING_REPLIED_USER_ONLY: AllowedMentions = AllowedMentions {
    parse: [],
    replied_user: true,
};

/// `PATCH /channels/{id}/messages/{id}` body.
#[derive(Debug, Clone, Serialize)]
pub struct EditMessage<'a> {
    /// New text.
    pub content: &'a str,
    /// Never ping anyone (an edit can add mentions too).
    pub allowed_mentions: AllowedMentions,
    /// Always sent, even empty: an edit without buttons removes the old ones (a decided
    /// approval must not keep buttons that look live). A PATCH that leaves the field out
    /// would keep them.
    pub components: &'a [ActionRow],
}

/// Component type 1: a row of up to five buttons.
pub const ACTION_ROW: u8 = 1;
/// Component type 2: a button.
pub const BUTTON: u8 = 2;

/// An action row (component type 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActionRow {
    /// Always [`ACTION_ROW`].
    #[serde(rename = "type")]
    pub kind: u8,
    /// Up to five buttons.
    pub components: Vec<ComponentButton>,
}

/// A button (component type 2) whose click arrives as INTERACTION_CREATE with its
/// `custom_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentButton {
    /// Always [`BUTTON`].
    #[serde(rename = "type")]
    pub kind: u8,
    /// 1 primary (blurple), 2 secondary (grey), 3 success (green), 4 danger (red).
    pub style: u8,
    /// What the button shows, at most 80 characters.
    pub label: String,
    /// What a click sends back, at most 100 characters: the bridge's command.
    pub custom_id: String,
}

/// Interaction type 3: a click on a message component.
pub const MESSAGE_COMPONENT: u8 = 3;

/// `d` of INTERACTION_CREATE: the fields a component click needs
/// (docs/protocols.md#discord-interactions).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Interaction {
    /// Snowflake; with `token`, where the callback goes.
    pub id: String,
    /// 1 PING, 2 APPLICATION_COMMAND, 3 MESSAGE_COMPONENT, 4 autocomplete, 5 modal submit.
    #[serde(rename = "type")]
    pub kind: u8,
    /// Valid for 15 minutes; the callback must come within 3 seconds. Never logged.
    #[serde(default)]
    pub token: String,
    /// The component's data.
    #[serde(default)]
    pub data: Option<ComponentData>,
    /// Present in servers.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// Where the clicked message is.
    #[serde(default)]
    pub channel_id: Option<String>,
    /// The clicker, in a server.
    #[serde(default)]
    pub member: Option<Member>,
    /// The clicker, in a DM.
    #[serde(default)]
    pub user: Option<User>,
    /// The message the button is under.
    #[serde(default)]
    pub message: Option<ReferencedMessage>,
}

/// `data` of a component interaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ComponentData {
    /// The clicked button's `custom_id`.
    #[serde(default)]
    pub custom_id: String,
    /// 2 for a button.
    #[serde(default)]
    pub component_type: u8,
}

/// A server member: only the user matters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Member {
    /// The member's user.
    #[serde(default)]
    pub user: Option<User>,
}

/// Callback type 6 DEFERRED_UPDATE_MESSAGE: "taken"; the message is edited later.
pub const DEFERRED_UPDATE_MESSAGE: u8 = 6;
/// Callback type 4 CHANNEL_MESSAGE_WITH_SOURCE: an answer (ephemeral with flags 64).
pub const CHANNEL_MESSAGE_WITH_SOURCE: u8 = 4;
/// Message flag EPHEMERAL: only the clicker sees it.
pub const EPHEMERAL: u64 = 1 << 6;

/// `POST /interactions/{id}/{token}/callback` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InteractionCallback {
    /// [`DEFERRED_UPDATE_MESSAGE`] or [`CHANNEL_MESSAGE_WITH_SOURCE`].
    #[serde(rename = "type")]
    pub kind: u8,
    /// The ephemeral answer, for type 4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<CallbackData>,
}

/// `data` of a type 4 callback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallbackData {
    /// Text, up to 2000 code points.
    pub content: String,
    /// [`EPHEMERAL`].
    pub flags: u64,
    /// Never ping anyone.
    pub allowed_mentions: AllowedMentions,
}

/// What Create/Edit Message return: only the id is needed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SentMessage {
    /// Snowflake.
    pub id: String,
}

/// An error body: `{"code": 50035, "message": "Invalid Form Body", "errors": {...}}`, and
/// on 429 `{"message": ..., "retry_after": 64.57, "global": false}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ErrorBody {
    /// Discord's JSON error code (docs/protocols.md#discord-rate-limits), 0 when absent.
    #[serde(default)]
    pub code: i64,
    /// What went wrong.
    #[serde(default)]
    pub message: String,
    /// Float seconds to wait, on 429.
    #[serde(default)]
    pub retry_after: Option<f64>,
    /// Whether the 429 is the global limit.
    #[serde(default)]
    pub global: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bridge_asks_for_exactly_three_intents() {
        assert_eq!(intents::BRIDGE, 37_376);
    }

    #[test]
    fn frames_with_extra_keys_and_nulls_parse() {
        let frame: Frame = serde_json::from_str(
            r#"{"t":null,"s":null,"op":10,"d":{"heartbeat_interval":41250,"_trace":["gateway-prd"]}}"#,
        )
        .expect("hello");
        assert_eq!(frame.op, op::HELLO);
        let hello: Hello = serde_json::from_value(frame.d).expect("interval");
        assert_eq!(hello.heartbeat_interval, 41_250);
        let ack: Frame = serde_json::from_str(r#"{"op":11}"#).expect("ack");
        assert_eq!(
            (ack.op, ack.s, ack.d),
            (op::HEARTBEAT_ACK, None, Value::Null)
        );
    }

    #[test]
    fn allowed_mentions_serialize_as_an_empty_parse_list() {
        let body = serde_json::to_value(CreateMessage {
            content: "hi @everyone",
            allowed_mentions: NO_PINGS,
            components: &[],
            message_reference: None,
        })
        .expect("json");
        assert_eq!(
            body,
            serde_json::json!({"content": "hi @everyone", "allowed_mentions": {"parse": [], "replied_user": false}})
        );
    }

    /// A reply names its prompt, survives the prompt's deletion, and pings its author
    /// only: still nobody through the text.
    #[test]
    fn a_reply_references_its_message_and_pings_only_its_author() {
        let body = serde_json::to_value(CreateMessage {
            content: "Done in 4m12s. @everyone",
            allowed_mentions: PING_REPLIED_USER_ONLY,
            components: &[],
            message_reference: Some(ReplyReference {
                message_id: "1234",
                fail_if_not_exists: false,
            }),
        })
        .expect("json");
        assert_eq!(
            body,
            serde_json::json!({
                "content": "Done in 4m12s. @everyone",
                "allowed_mentions": {"parse": [], "replied_user": true},
                "message_reference": {"message_id": "1234", "fail_if_not_exists": false}
            })
        );
    }

    #[test]
    fn a_deleted_referenced_message_is_null_and_still_parses() {
        let message: Message = serde_json::from_value(serde_json::json!({
            "id": "1", "channel_id": "2", "author": {"id": "3", "username": "a"},
            "type": 19, "referenced_message": null
        }))
        .expect("message");
        assert_eq!(message.referenced_message, None);
    }
}
