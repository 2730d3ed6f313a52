//! Bot API types: the fields this transport reads and writes, nothing more
//! (docs/protocols.md#telegram-messages-chats-and-entities;
//! <https://core.telegram.org/bots/api#available-types>).
//!
//! Every id is `i64`: chat and user ids "may have more than 32 significant bits"
//! (docs/protocols.md#telegram-requests-and-responses), and group ids are negative. Every
//! field that Telegram may omit is optional or defaulted, and unknown fields are ignored,
//! so a payload from a newer Bot API version (or an independent implementation) still
//! parses instead of stalling the poll on one update.

use serde::{Deserialize, Serialize};

/// The envelope of every Bot API answer: `{"ok": true, "result": ...}` or
/// `{"ok": false, "error_code": ..., "description": ..., "parameters"?: ...}`.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiResponse<T> {
    /// Whether the call succeeded.
    pub ok: bool,
    /// The result when `ok`.
    pub result: Option<T>,
    /// Telegram's error code when not `ok` (documented as "subject to change").
    #[serde(default)]
    pub error_code: Option<i64>,
    /// A human-readable description of the error.
    #[serde(default)]
    pub description: Option<String>,
    /// Extra information about the error (flood control, group migration).
    #[serde(default)]
    pub parameters: Option<ResponseParameters>,
}

/// `ResponseParameters`: why a request failed and what to do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ResponseParameters {
    /// The group was upgraded to a supergroup with this id.
    #[serde(default)]
    pub migrate_to_chat_id: Option<i64>,
    /// Flood control: seconds to wait before repeating the request.
    #[serde(default)]
    pub retry_after: Option<u64>,
}

/// One incoming update. At most one of the optional fields is present; the others
/// are kept as raw JSON so an update kind this transport does not handle can still be
/// named (and its offset still advanced).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Update {
    /// Sequential update id; the next `offset` is the highest one plus 1. Defaulted so a
    /// pasted `{"message": ...}` still reads in `explain`; the listener takes the id from
    /// the raw update itself.
    #[serde(default)]
    pub update_id: i64,
    /// A new message.
    #[serde(default)]
    pub message: Option<Message>,
    /// A new version of a message that was edited.
    #[serde(default)]
    pub edited_message: Option<serde_json::Value>,
    /// A new channel post.
    #[serde(default)]
    pub channel_post: Option<serde_json::Value>,
    /// An edited channel post.
    #[serde(default)]
    pub edited_channel_post: Option<serde_json::Value>,
    /// A press on one of the bot's inline keyboard buttons.
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
}

/// `CallbackQuery`: someone pressed a callback button of an inline keyboard. The client
/// shows a spinner until the bot calls `answerCallbackQuery`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CallbackQuery {
    /// Unique id of the query, for `answerCallbackQuery`.
    #[serde(default)]
    pub id: String,
    /// Who pressed the button.
    pub from: User,
    /// The bot's message the button was under; absent for inline-mode messages. When the
    /// message is too old it is an `InaccessibleMessage`: chat and id only, `date` 0.
    #[serde(default)]
    pub message: Option<Message>,
    /// Id of an inline-mode message the button was under (instead of `message`).
    #[serde(default)]
    pub inline_message_id: Option<String>,
    /// The button's `callback_data`. "A bad client can send arbitrary data in this field."
    #[serde(default)]
    pub data: Option<String>,
    /// A game button's short name (instead of `data`).
    #[serde(default)]
    pub game_short_name: Option<String>,
}

/// `InlineKeyboardMarkup`: buttons under a message, row by row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InlineKeyboardMarkup {
    /// The rows of buttons.
    pub inline_keyboard: Vec<Vec<InlineKeyboardButton>>,
}

/// `InlineKeyboardButton` of the callback kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InlineKeyboardButton {
    /// The label.
    pub text: String,
    /// What a press sends back in `CallbackQuery.data`: 1–64 bytes.
    pub callback_data: String,
}

/// `answerCallbackQuery` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerCallbackQuery<'a> {
    /// The query answered.
    pub callback_query_id: &'a str,
    /// A notification for the presser, 0–200 characters; absent shows nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    /// Shows `text` as an alert the presser dismisses, not a toast that fades: used for
    /// the bridge's own answers, which say what to do.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub show_alert: bool,
}

/// `User`: a person or a bot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// Unique id (up to 52 significant bits).
    pub id: i64,
    /// True for bots.
    #[serde(default)]
    pub is_bot: bool,
    /// First name (always present on real payloads; defaulted so a sparse one parses).
    #[serde(default)]
    pub first_name: String,
    /// Last name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    /// User name without `@`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Only from `getMe`: privacy mode is off (the bot sees every group message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_read_all_group_messages: Option<bool>,
    /// Only from `getMe` (Bot API 9.3): topic mode is on for the bot in private chats
    /// (@BotFather's Threaded Mode), so it can make topics there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_topics_enabled: Option<bool>,
}

/// `Chat`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Chat {
    /// Unique id; negative for groups, `-100…` for supergroups and channels.
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Title of a group, supergroup or channel.
    #[serde(default)]
    pub title: Option<String>,
    /// User name of a private chat, supergroup or channel.
    #[serde(default)]
    pub username: Option<String>,
    /// True when the supergroup is a forum (has topics).
    #[serde(default)]
    pub is_forum: Option<bool>,
}

/// `MessageEntity`: a span of the text. Offsets and lengths are in UTF-16 code units.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct MessageEntity {
    /// `mention`, `text_mention`, `bot_command`, `url`, `bold`, ...
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Start, in UTF-16 code units.
    #[serde(default)]
    pub offset: u64,
    /// Length, in UTF-16 code units.
    #[serde(default)]
    pub length: u64,
    /// The mentioned user, for `text_mention`.
    #[serde(default)]
    pub user: Option<User>,
}

/// `PhotoSize`: one size of a photo.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PhotoSize {
    /// Id to download the file with.
    pub file_id: String,
    /// Width in pixels.
    #[serde(default)]
    pub width: u64,
    /// Height in pixels.
    #[serde(default)]
    pub height: u64,
    /// Size in bytes.
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// A file-like attachment: `Document`, `Audio`, `Voice`, `Video`, `Animation`,
/// `VideoNote` and `Sticker` share the fields the transport needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct FileLike {
    /// Id to download the file with.
    pub file_id: String,
    /// Original file name, as the sender's client gave it.
    #[serde(default)]
    pub file_name: Option<String>,
    /// MIME type as the sender's client gave it.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Size in bytes.
    #[serde(default)]
    pub file_size: Option<u64>,
    /// Voice, audio, video and video notes: the length in seconds as the sender's client
    /// gave it.
    #[serde(default)]
    pub duration: Option<u64>,
    /// Stickers only: an animated (`.tgs`) sticker.
    #[serde(default)]
    pub is_animated: Option<bool>,
    /// Stickers only: a video (`.webm`) sticker.
    #[serde(default)]
    pub is_video: Option<bool>,
}

/// `Message`, with the fields the normalizer reads
/// (docs/protocols.md#telegram-messages-chats-and-entities).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Message {
    /// Id inside the chat.
    pub message_id: i64,
    /// Sent at, in unix seconds.
    #[serde(default)]
    pub date: i64,
    /// Where it was sent.
    pub chat: Chat,
    /// Sender; a fake user (`GroupAnonymousBot`, `Channel_Bot`) for messages sent on
    /// behalf of a chat, absent in channels.
    #[serde(default)]
    pub from: Option<User>,
    /// The chat the message was sent on behalf of (anonymous admins, channels).
    #[serde(default)]
    pub sender_chat: Option<Chat>,
    /// Forum topic or reply thread (see the normalizer: only a topic when
    /// `is_topic_message`).
    #[serde(default)]
    pub message_thread_id: Option<i64>,
    /// True for a message sent to a forum topic.
    #[serde(default)]
    pub is_topic_message: Option<bool>,
    /// A channel post forwarded automatically into the channel's discussion group.
    #[serde(default)]
    pub is_automatic_forward: Option<bool>,
    /// The message this one replies to (one level deep).
    #[serde(default)]
    pub reply_to_message: Option<Box<Message>>,
    /// Service message: the forum topic was created (the root of every topic).
    #[serde(default)]
    pub forum_topic_created: Option<serde_json::Value>,
    /// Text of a text message.
    #[serde(default)]
    pub text: Option<String>,
    /// Entities of `text`.
    #[serde(default)]
    pub entities: Vec<MessageEntity>,
    /// Caption of a photo, document, ...
    #[serde(default)]
    pub caption: Option<String>,
    /// Entities of `caption`.
    #[serde(default)]
    pub caption_entities: Vec<MessageEntity>,
    /// Sizes of a photo, smallest to largest on every captured payload.
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    /// A general file.
    #[serde(default)]
    pub document: Option<FileLike>,
    /// An audio file.
    #[serde(default)]
    pub audio: Option<FileLike>,
    /// A voice note.
    #[serde(default)]
    pub voice: Option<FileLike>,
    /// A video.
    #[serde(default)]
    pub video: Option<FileLike>,
    /// An animation (GIF or silent H.264 video).
    #[serde(default)]
    pub animation: Option<FileLike>,
    /// A round video message.
    #[serde(default)]
    pub video_note: Option<FileLike>,
    /// A sticker.
    #[serde(default)]
    pub sticker: Option<FileLike>,
}

/// `File`: where to download a file from (`getFile`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct File {
    /// Id of the file.
    #[serde(default)]
    pub file_id: String,
    /// Size in bytes, when known.
    #[serde(default)]
    pub file_size: Option<u64>,
    /// Path for `/file/bot<token>/<file_path>`; absent when the file cannot be
    /// downloaded (over the 20 MB bot download limit).
    #[serde(default)]
    pub file_path: Option<String>,
}

/// The part of a sent or edited `Message` the transport keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct SentMessage {
    /// Id of the new message.
    pub message_id: i64,
}

/// `chat_id` as sent: a number for every chat the bridge talks to, a string for a
/// `@channelusername` (or an id the transport cannot read as a number).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ChatId {
    /// A numeric chat id.
    Id(i64),
    /// `@username` of a public channel or supergroup.
    Username(String),
}

impl ChatId {
    /// The chat id for a conversation id the normalizer produced.
    pub fn parse(conversation_id: &str) -> ChatId {
        match conversation_id.trim().parse::<i64>() {
            Ok(id) => ChatId::Id(id),
            Err(_) => ChatId::Username(conversation_id.to_owned()),
        }
    }
}

/// `sendMessage` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SendMessage<'a> {
    /// Target chat.
    pub chat_id: &'a ChatId,
    /// Forum topic to post in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
    /// The text, 1–4096 characters after entity parsing.
    pub text: &'a str,
    /// `HTML`, or absent for plain text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<&'static str>,
    /// Buttons under the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<&'a InlineKeyboardMarkup>,
    /// The message this one replies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_parameters: Option<ReplyParameters>,
}

/// `sendMessageDraft` parameters: the draft of the bot's next message, streamed in a
/// private chat while it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SendMessageDraft<'a> {
    /// The private chat (a user's id).
    pub chat_id: i64,
    /// Forum topic of the chat, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
    /// One stream: changes of drafts with the same non-zero id are animated.
    pub draft_id: i64,
    /// The draft, 1–4096 characters after entity parsing.
    pub text: &'a str,
    /// `HTML`.
    pub parse_mode: &'static str,
}

/// `ReplyParameters`: which message a new one replies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReplyParameters {
    /// The message replied to, in the same chat.
    pub message_id: i64,
    /// Post all the same when that message is gone (deleted while the turn ran): a reply
    /// is a pointer, never a reason to lose the message.
    pub allow_sending_without_reply: bool,
}

/// `setMessageReaction` parameters. The list replaces every reaction the bot had on the
/// message, so one call both sets the new reaction and takes the old one away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetMessageReaction<'a> {
    /// Chat of the message.
    pub chat_id: &'a ChatId,
    /// The message reacted to.
    pub message_id: i64,
    /// The reactions the bot leaves on it: one here.
    pub reaction: [ReactionTypeEmoji; 1],
}

/// `ReactionTypeEmoji`: one of the emoji Telegram allows as a reaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReactionTypeEmoji {
    /// Always `emoji`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The emoji.
    pub emoji: &'static str,
}

/// `editMessageText` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EditMessageText<'a> {
    /// Chat of the message.
    pub chat_id: &'a ChatId,
    /// The message to edit.
    pub message_id: i64,
    /// The new text.
    pub text: &'a str,
    /// `HTML`, or absent for plain text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<&'static str>,
    /// The buttons the message keeps; absent removes them (a decided approval's Approve /
    /// Deny must not stay pressable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<&'a InlineKeyboardMarkup>,
}

/// `sendChatAction` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SendChatAction<'a> {
    /// Target chat.
    pub chat_id: &'a ChatId,
    /// Forum topic the action shows in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
    /// `typing`.
    pub action: &'static str,
}

/// `createForumTopic` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreateForumTopic<'a> {
    /// The forum supergroup.
    pub chat_id: &'a ChatId,
    /// Topic name, 1–128 characters.
    pub name: &'a str,
}

/// `editForumTopic`, `closeForumTopic` and `reopenForumTopic` parameters (`name` only
/// for `editForumTopic`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForumTopicChange<'a> {
    /// The forum supergroup.
    pub chat_id: &'a ChatId,
    /// The topic.
    pub message_thread_id: i64,
    /// The new name (`editForumTopic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
}

/// A `ForumTopic`, as `createForumTopic` returns it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ForumTopic {
    /// The topic's id: the `message_thread_id` of its messages.
    pub message_thread_id: i64,
    /// Its name.
    #[serde(default)]
    pub name: String,
}

/// `getUpdates` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GetUpdates<'a> {
    /// Highest confirmed update id plus 1; absent on the very first poll.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Long poll timeout in seconds (0 = answer at once).
    pub timeout: u64,
    /// The update kinds wanted. Always sent: the filter is stored server-side and otherwise
    /// whatever a previous program set stays in force
    /// (docs/protocols.md#telegram-long-polling).
    pub allowed_updates: &'a [&'a str],
}

/// `getFile` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GetFile<'a> {
    /// The file to look up.
    pub file_id: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_past_32_bits_and_negative_group_ids_parse() {
        let update: Update = serde_json::from_value(serde_json::json!({
            "update_id": 900_000_001,
            "message": {
                "message_id": 5,
                "date": 1_700_000_000,
                "chat": {"id": -1_001_234_567_890_i64, "type": "supergroup"},
                "from": {"id": 7_000_000_000_i64, "is_bot": false, "first_name": "A"},
                "text": "hi",
                "some_future_field": {"nested": true}
            }
        }))
        .expect("parses");
        let message = update.message.expect("message");
        assert_eq!(message.chat.id, -1_001_234_567_890);
        assert_eq!(message.from.expect("from").id, 7_000_000_000);
    }

    #[test]
    fn an_error_answer_carries_its_retry_after() {
        let answer: ApiResponse<serde_json::Value> = serde_json::from_str(
            r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}"#,
        )
        .expect("parses");
        assert!(!answer.ok);
        assert_eq!(answer.parameters.and_then(|p| p.retry_after), Some(3));
    }

    #[test]
    fn chat_ids_are_numbers_unless_they_are_names() {
        assert_eq!(ChatId::parse("-100123"), ChatId::Id(-100_123));
        assert_eq!(
            ChatId::parse("@channel"),
            ChatId::Username("@channel".to_owned())
        );
        assert_eq!(
            serde_json::to_string(&ChatId::parse("42")).expect("json"),
            "42"
        );
    }
}
