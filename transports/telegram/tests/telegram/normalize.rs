//! Normalizer table tests (I40), on payloads shaped like real `getUpdates` output
//! (docs/protocols.md#telegram-messages-chats-and-entities to
//! docs/protocols.md#telegram-forum-topics-and-reply-threads): anonymous admins, forum
//! topics and their root-reply quirk, `message_thread_id` in non-forum supergroups,
//! mentions by entity with UTF-16 offsets.

use serde_json::{Value, json};
use transport_core::platform::{BotSelf, Normalized};
use transport_core::{Attachment, AttachmentKind, Envelope};
use transport_telegram::normalize::normalize;

const BOT_ID: i64 = 999;
const GROUP: i64 = -1_001_160_242_915;

fn me() -> BotSelf {
    BotSelf {
        id: BOT_ID.to_string(),
        username: "piBot".to_owned(),
    }
}

fn person() -> Value {
    json!({"id": 5_000_000_001_i64, "is_bot": false, "first_name": "Ada", "username": "ada", "language_code": "en"})
}

fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Pi", "username": "piBot"})
}

fn private_chat() -> Value {
    json!({"id": 5_000_000_001_i64, "first_name": "Ada", "username": "ada", "type": "private"})
}

fn group_chat() -> Value {
    json!({"id": GROUP, "title": "Team", "type": "supergroup"})
}

fn forum_chat() -> Value {
    json!({"id": GROUP, "title": "Team", "type": "supergroup", "is_forum": true})
}

fn update(message: Value) -> Value {
    json!({"update_id": 100, "message": message})
}

fn text_in(chat: Value, text: &str, entities: Value) -> Value {
    json!({
        "message_id": 10,
        "from": person(),
        "chat": chat,
        "date": 1_700_000_000,
        "text": text,
        "entities": entities,
    })
}

/// `{"type": kind, "offset", "length"}` for `needle` in `text`, in UTF-16 units.
fn entity(text: &str, needle: &str, kind: &str) -> Value {
    let at = text.find(needle).expect("needle in text");
    json!({
        "type": kind,
        "offset": text[..at].encode_utf16().count(),
        "length": needle.encode_utf16().count(),
    })
}

fn message(result: Normalized) -> Envelope {
    match result {
        Normalized::Message(envelope) => envelope,
        Normalized::Ignored(reason) => panic!("ignored: {reason}"),
    }
}

fn reason(result: Normalized) -> String {
    match result {
        Normalized::Ignored(reason) => reason,
        Normalized::Message(envelope) => panic!("not ignored: {envelope:?}"),
    }
}

#[test]
fn a_private_message_is_direct_and_addressed_with_its_real_time() {
    let envelope = message(normalize(
        &update(text_in(private_chat(), "hello there", json!([]))),
        &me(),
    ));
    assert_eq!(
        envelope,
        Envelope {
            transport: "telegram".to_owned(),
            conversation_id: "5000000001".to_owned(),
            user_id: "5000000001".to_owned(),
            thread_id: None,
            timestamp: 1_700_000_000_000,
            text: "hello there".to_owned(),
            is_direct: true,
            addressed: true,
            attachments: vec![],
            message_id: Some("5000000001:10".to_owned()),
            press: None,
        }
    );
}

/// (sent text, entities over it as (covered text, type), expected text, expected addressed).
type Row<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, bool);

/// Rows of [`Row`], in a supergroup.
#[test]
fn group_addressing_and_mention_stripping() {
    let rows: Vec<Row<'_>> = vec![
        // Decision 1: both stay commands for the router (text + addressed flag).
        (
            "@piBot /status",
            vec![("@piBot", "mention"), ("/status", "bot_command")],
            "/status",
            true,
        ),
        ("@piBot status", vec![("@piBot", "mention")], "status", true),
        (
            "@piBot, status please",
            vec![("@piBot", "mention")],
            "status please",
            true,
        ),
        (
            "@PIBOT: fix the build",
            vec![("@PIBOT", "mention")],
            "fix the build",
            true,
        ),
        ("@piBot", vec![("@piBot", "mention")], "", true),
        (
            "/status@piBot",
            vec![("/status@piBot", "bot_command")],
            "/status",
            true,
        ),
        (
            "/status@PiBot now",
            vec![("/status@PiBot", "bot_command")],
            "/status now",
            true,
        ),
        ("/status", vec![("/status", "bot_command")], "/status", true),
        (
            "please @piBot look at this",
            vec![("@piBot", "mention")],
            "please look at this",
            true,
        ),
        (
            "thanks @piBot, nice",
            vec![("@piBot", "mention")],
            "thanks nice",
            true,
        ),
        // UTF-16 offsets: an astral emoji before the mention counts 2 units.
        (
            "👀😀 @piBot check\n  indented",
            vec![("@piBot", "mention")],
            "👀😀 check\n  indented",
            true,
        ),
        ("hello everyone", vec![], "hello everyone", false),
        (
            "@someone else",
            vec![("@someone", "mention")],
            "@someone else",
            false,
        ),
        (
            "@piBotty is not us",
            vec![("@piBotty", "mention")],
            "@piBotty is not us",
            false,
        ),
        // A mention as text but without an entity is not a mention (Telegram always sends one).
        ("@piBot status", vec![], "@piBot status", false),
        // A command for another bot later in the text does not matter.
        (
            "what does /start@OtherBot do",
            vec![("/start@OtherBot", "bot_command")],
            "what does /start@OtherBot do",
            false,
        ),
    ];
    for (text, spans, expected, addressed) in rows {
        let entities: Vec<Value> = spans
            .iter()
            .map(|(needle, kind)| entity(text, needle, kind))
            .collect();
        let envelope = message(normalize(
            &update(text_in(group_chat(), text, json!(entities))),
            &me(),
        ));
        assert_eq!(
            (
                envelope.text.as_str(),
                envelope.addressed,
                envelope.is_direct
            ),
            (expected, addressed, false),
            "{text:?}"
        );
    }
}

#[test]
fn a_text_mention_of_the_bot_addresses_it_by_utf16_offset() {
    let text = "😀 Pi bot, look at this";
    let mut mention = entity(text, "Pi bot", "text_mention");
    mention["user"] = bot_user();
    let envelope = message(normalize(
        &update(text_in(group_chat(), text, json!([mention]))),
        &me(),
    ));
    assert_eq!(
        (envelope.text.as_str(), envelope.addressed),
        ("😀 look at this", true)
    );

    let mut someone = entity(text, "Pi bot", "text_mention");
    someone["user"] = person();
    let envelope = message(normalize(
        &update(text_in(group_chat(), text, json!([someone]))),
        &me(),
    ));
    assert_eq!((envelope.text.as_str(), envelope.addressed), (text, false));
}

#[test]
fn a_command_for_another_bot_is_ignored() {
    let text = "/status@OtherBot";
    let why = reason(normalize(
        &update(text_in(
            group_chat(),
            text,
            json!([entity(text, text, "bot_command")]),
        )),
        &me(),
    ));
    assert!(why.contains("another bot (@OtherBot)"), "{why}");
}

#[test]
fn a_reply_to_the_bot_addresses_it() {
    let mut reply = text_in(group_chat(), "and the tests?", json!([]));
    reply["reply_to_message"] = json!({
        "message_id": 9, "from": bot_user(), "chat": group_chat(), "date": 1_699_999_999, "text": "Done."
    });
    let envelope = message(normalize(&update(reply), &me()));
    assert!(envelope.addressed);
    assert_eq!(envelope.thread_id, None);
}

/// Real getUpdates shape (docs/protocols.md#telegram-forum-topics-and-reply-threads): a
/// plain message inside a topic the bot created carries `reply_to_message` = the
/// `forum_topic_created` root, whose id is the thread id.
#[test]
fn a_topic_message_keeps_its_topic_and_the_root_reply_is_not_a_reply_to_the_bot() {
    let mut topic = text_in(forum_chat(), "hello topic", json!([]));
    topic["message_thread_id"] = json!(5);
    topic["is_topic_message"] = json!(true);
    topic["reply_to_message"] = json!({
        "message_id": 5,
        "from": bot_user(),
        "chat": forum_chat(),
        "date": 1_699_000_000,
        "message_thread_id": 5,
        "forum_topic_created": {"name": "Deploys", "icon_color": 7_322_096},
        "is_topic_message": true
    });
    let envelope = message(normalize(&update(topic.clone()), &me()));
    assert_eq!(envelope.thread_id.as_deref(), Some("5"));
    assert!(
        !envelope.addressed,
        "the topic root is not a reply to the bot"
    );

    // An explicit reply to the bot's message inside the topic is.
    topic["reply_to_message"] = json!({
        "message_id": 8, "from": bot_user(), "chat": forum_chat(), "date": 1_699_000_100,
        "message_thread_id": 5, "is_topic_message": true, "text": "Deployed."
    });
    let envelope = message(normalize(&update(topic), &me()));
    assert_eq!(envelope.thread_id.as_deref(), Some("5"));
    assert!(envelope.addressed);
}

/// teloxide `issue_1107`: a reply in a non-forum supergroup carries `message_thread_id`
/// without `is_topic_message`; it is a reply thread, not a topic.
#[test]
fn a_reply_thread_outside_a_forum_is_not_a_topic() {
    let text = "/report";
    let mut reply = text_in(
        group_chat(),
        text,
        json!([entity(text, text, "bot_command")]),
    );
    reply["message_thread_id"] = json!(134_545);
    reply["reply_to_message"] = json!({
        "message_id": 134_545, "from": person(), "chat": group_chat(), "date": 1_699_000_000,
        "message_thread_id": 134_545, "text": "spam"
    });
    let envelope = message(normalize(&update(reply), &me()));
    assert_eq!(envelope.thread_id, None);
    assert_eq!(envelope.text, "/report");
}

/// teloxide `issue_419` shape: an anonymous admin posts as the group.
#[test]
fn an_anonymous_admin_is_a_person_keyed_on_the_group() {
    let payload = update(json!({
        "message_id": 198_283,
        "from": {"id": 1_087_968_824, "is_bot": true, "first_name": "Group", "username": "GroupAnonymousBot"},
        "sender_chat": {"id": GROUP, "title": "Team", "type": "supergroup"},
        "chat": group_chat(),
        "date": 1_620_000_000,
        "text": "@piBot status",
        "entities": [{"type": "mention", "offset": 0, "length": 6}]
    }));
    let envelope = message(normalize(&payload, &me()));
    assert_eq!(envelope.user_id, GROUP.to_string());
    assert_eq!(
        (envelope.text.as_str(), envelope.addressed),
        ("status", true)
    );
}

#[test]
fn bots_the_bot_itself_edits_channels_and_service_messages_are_ignored() {
    let mut from_bot = text_in(group_chat(), "/status@piBot", json!([]));
    from_bot["from"] =
        json!({"id": 42, "is_bot": true, "first_name": "Other", "username": "OtherBot"});
    let mut own = text_in(group_chat(), "Done.", json!([]));
    own["from"] = bot_user();
    let mut anonymous_without_chat = text_in(group_chat(), "hi", json!([]));
    anonymous_without_chat["from"] = json!({"id": 1_087_968_824, "is_bot": true, "first_name": "Group", "username": "GroupAnonymousBot"});
    let mut auto_forward = text_in(group_chat(), "new post", json!([]));
    auto_forward["from"] = json!({"id": 777_000, "is_bot": false, "first_name": "Telegram"});
    auto_forward["sender_chat"] = json!({"id": -1_009_999, "title": "News", "type": "channel"});
    auto_forward["is_automatic_forward"] = json!(true);
    let mut no_sender = text_in(group_chat(), "hi", json!([]));
    no_sender.as_object_mut().expect("object").remove("from");
    let service = json!({
        "message_id": 11, "from": person(), "chat": group_chat(), "date": 1_700_000_000,
        "new_chat_members": [person()]
    });
    let rows: Vec<(Value, &str)> = vec![
        (update(from_bot), "another bot (@OtherBot)"),
        (update(own), "the bot's own message"),
        (update(anonymous_without_chat), "another bot"),
        (update(auto_forward), "forwarded automatically"),
        (update(no_sender), "without a sender"),
        (update(service), "neither text nor an attachment"),
        (
            json!({"update_id": 101, "edited_message": text_in(private_chat(), "fixed typo", json!([]))}),
            "an edited message",
        ),
        (
            json!({"update_id": 102, "channel_post": {"message_id": 1, "chat": {"id": -1_009_999, "type": "channel"}, "date": 1, "text": "x"}}),
            "a channel post",
        ),
        (
            json!({"update_id": 103, "callback_query": {"id": "1", "from": person(), "chat_instance": "x", "data": "y"}}),
            "a button press on an inline-mode message",
        ),
        (
            json!({"update_id": 104, "message_reaction": {"chat": group_chat(), "message_id": 1, "date": 1}}),
            "\"message_reaction\"",
        ),
    ];
    for (payload, expected) in rows {
        let why = reason(normalize(&payload, &me()));
        assert!(why.contains(expected), "{payload}: {why}");
    }
}

#[test]
fn captions_are_text_and_the_largest_photo_is_the_attachment() {
    let caption = "@piBot what is this?";
    let payload = update(json!({
        "message_id": 12,
        "from": person(),
        "chat": group_chat(),
        "date": 1_700_000_000,
        "photo": [
            {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 60, "file_size": 1_200},
            {"file_id": "large", "file_unique_id": "l", "width": 1280, "height": 853, "file_size": 98_000},
            {"file_id": "medium", "file_unique_id": "m", "width": 320, "height": 213, "file_size": 14_000}
        ],
        "caption": caption,
        "caption_entities": [entity(caption, "@piBot", "mention")]
    }));
    let envelope = message(normalize(&payload, &me()));
    assert_eq!(
        (envelope.text.as_str(), envelope.addressed),
        ("what is this?", true)
    );
    assert_eq!(
        envelope.attachments,
        vec![Attachment {
            kind: AttachmentKind::Image,
            media_type: "image/jpeg".to_owned(),
            reference: "large".to_owned(),
            name: None,
            size_bytes: Some(98_000),
            duration_seconds: None,
        }]
    );
}

#[test]
fn documents_and_other_files_are_attachments_with_their_types() {
    let document = update(json!({
        "message_id": 13, "from": person(), "chat": private_chat(), "date": 1_700_000_000,
        "document": {"file_name": "report.pdf", "mime_type": "application/pdf", "file_id": "doc-1", "file_unique_id": "d", "file_size": 52_000}
    }));
    let envelope = message(normalize(&document, &me()));
    assert_eq!(envelope.text, "");
    assert_eq!(
        envelope.attachments,
        vec![Attachment {
            kind: AttachmentKind::File,
            media_type: "application/pdf".to_owned(),
            reference: "doc-1".to_owned(),
            name: Some("report.pdf".to_owned()),
            size_bytes: Some(52_000),
            duration_seconds: None,
        }]
    );
    let png = update(json!({
        "message_id": 14, "from": person(), "chat": private_chat(), "date": 1,
        "document": {"file_name": "shot.png", "mime_type": "image/png", "file_id": "doc-2", "file_unique_id": "d2"}
    }));
    assert_eq!(
        message(normalize(&png, &me())).attachments[0].kind,
        AttachmentKind::Image
    );
    // An animation also fills `document`: one attachment, not two.
    let gif = update(json!({
        "message_id": 15, "from": person(), "chat": private_chat(), "date": 1,
        "animation": {"file_id": "anim", "file_unique_id": "a", "width": 1, "height": 1, "duration": 1, "mime_type": "video/mp4"},
        "document": {"file_id": "anim", "file_unique_id": "a", "mime_type": "video/mp4"}
    }));
    let attachments = message(normalize(&gif, &me())).attachments;
    assert_eq!(attachments.len(), 1);
    assert_eq!(attachments[0].media_type, "video/mp4");
    // A voice note is announced (so the bridge can refuse it out loud, I13).
    let voice = update(json!({
        "message_id": 16, "from": person(), "chat": private_chat(), "date": 1,
        "voice": {"file_id": "v", "file_unique_id": "v", "duration": 2}
    }));
    assert_eq!(
        message(normalize(&voice, &me())).attachments[0].media_type,
        "audio/ogg"
    );
    let sticker = update(json!({
        "message_id": 17, "from": person(), "chat": private_chat(), "date": 1,
        "sticker": {"file_id": "st", "file_unique_id": "st", "type": "regular", "width": 512, "height": 512, "is_animated": false, "is_video": false}
    }));
    let attachments = message(normalize(&sticker, &me())).attachments;
    assert_eq!(
        (attachments[0].kind, attachments[0].media_type.as_str()),
        (AttachmentKind::Image, "image/webp")
    );
}

#[test]
fn a_bare_message_is_read_too_for_explain() {
    let envelope = message(normalize(&text_in(private_chat(), "hi", json!([])), &me()));
    assert_eq!(envelope.text, "hi");
}

#[test]
fn no_payload_makes_it_panic() {
    let hostile = [
        json!(null),
        json!([]),
        json!("text"),
        json!({}),
        json!({"update_id": "one"}),
        json!({"update_id": 1, "message": {"chat": 5}}),
        json!({"update_id": 1, "message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "from": person(), "date": -5, "text": "x"}}),
        json!({"update_id": 1, "message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "from": person(), "date": 1, "text": "😀x",
        "entities": [
            {"type": "mention", "offset": 1, "length": 1},
            {"type": "mention", "offset": 99, "length": 3},
            {"type": "bot_command", "offset": 0, "length": 18_446_744_073_709_551_615_u64},
            {"type": "text_mention", "offset": 0, "length": 1}
        ]}}),
        json!({"update_id": 9_223_372_036_854_775_807_i64, "message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "from": person(), "date": 9_223_372_036_854_775_807_i64, "text": "late"}}),
    ];
    for payload in hostile {
        // Each either reads as a message or is ignored with a reason; none panics.
        match normalize(&payload, &me()) {
            Normalized::Message(envelope) => assert!(!envelope.conversation_id.is_empty()),
            Normalized::Ignored(reason) => assert!(!reason.is_empty()),
        }
    }
    // Without an identity (explain before getMe) nothing counts as a mention of the bot.
    let text = "@piBot hi";
    let envelope = message(normalize(
        &update(text_in(
            group_chat(),
            text,
            json!([entity(text, "@piBot", "mention")]),
        )),
        &BotSelf::default(),
    ));
    assert!(!envelope.addressed);
}

#[test]
fn an_update_pasted_without_its_id_is_read_too() {
    let payload = json!({"message": text_in(private_chat(), "pasted", json!([]))});
    assert_eq!(message(normalize(&payload, &me())).text, "pasted");
}

/// A `callback_query` update as `getUpdates` delivers it: the presser in `from`, the
/// bot's message the button was under in `message`, the button's `callback_data` in `data`.
fn press(from: Value, chat: Value, data: Option<&str>) -> Value {
    let mut query = json!({
        "id": "4382bfdwdsb323b2d9",
        "from": from,
        "message": {
            "message_id": 77,
            "from": bot_user(),
            "chat": chat,
            "date": 1_700_000_000,
            "text": "Approval needed (qd4k): a messenger-started turn wants to run 'bash'.",
            "reply_markup": {"inline_keyboard": [[
                {"text": "Approve", "callback_data": "/approve qd4k"},
                {"text": "Deny", "callback_data": "/deny qd4k"}
            ]]}
        },
        "chat_instance": "-8205300382226391735",
    });
    if let Some(data) = data {
        query["data"] = json!(data);
    }
    json!({"update_id": 101, "callback_query": query})
}

#[test]
fn a_button_press_is_the_command_it_stands_for_from_the_presser() {
    let cases = [
        // (chat, data, expected text, is_direct, thread)
        (private_chat(), "/approve qd4k", "/approve qd4k", true, None),
        (private_chat(), " /deny qd4k ", "/deny qd4k", true, None),
        (group_chat(), "/approve qd4k", "/approve qd4k", false, None),
        // An agent question's option and Yes / No (docs/pi.md#questions-pi-asks).
        (
            private_chat(),
            "/answer qd4k 3",
            "/answer qd4k 3",
            true,
            None,
        ),
        (
            group_chat(),
            "/answer qd4k yes",
            "/answer qd4k yes",
            false,
            None,
        ),
    ];
    for (chat, data, text, is_direct, thread) in cases {
        let conversation = chat["id"].as_i64().expect("id").to_string();
        let envelope = message(normalize(&press(person(), chat, Some(data)), &me()));
        assert_eq!(
            envelope,
            Envelope {
                transport: "telegram".to_owned(),
                conversation_id: conversation,
                user_id: "5000000001".to_owned(),
                thread_id: thread,
                timestamp: 0,
                text: text.to_owned(),
                is_direct,
                addressed: true,
                attachments: Vec::new(),
                message_id: Some("callback:4382bfdwdsb323b2d9".to_owned()),
                press: Some("callback:4382bfdwdsb323b2d9".to_owned()),
            },
            "{data}"
        );
    }
}

#[test]
fn a_press_in_a_forum_topic_answers_in_that_topic() {
    let mut update = press(person(), forum_chat(), Some("/deny qd4k"));
    update["callback_query"]["message"]["message_thread_id"] = json!(12);
    update["callback_query"]["message"]["is_topic_message"] = json!(true);
    let envelope = message(normalize(&update, &me()));
    assert_eq!(envelope.thread_id.as_deref(), Some("12"));
    assert_eq!(envelope.conversation_id, GROUP.to_string());
}

#[test]
fn a_press_on_a_message_too_old_to_read_still_counts() {
    // `InaccessibleMessage`: chat and id only, date 0.
    let mut update = press(person(), private_chat(), Some("/approve qd4k"));
    update["callback_query"]["message"] =
        json!({"chat": private_chat(), "message_id": 77, "date": 0});
    assert_eq!(message(normalize(&update, &me())).text, "/approve qd4k");
}

#[test]
fn presses_that_are_not_our_commands_are_ignored_with_the_reason() {
    let not_ours = [
        "please run rm -rf /",
        "/status",
        "/approve",
        "/approve qd4k extra",
        "/approve q-d4k",
        "approve qd4k",
        // An answer button carries one short choice, never free text a client made up.
        "/answer qd4k",
        "/answer qd4k run rm -rf",
        "/answer qd4k ../x",
        "/deny qd4k yes",
    ];
    for data in not_ours {
        let why = reason(normalize(
            &press(person(), private_chat(), Some(data)),
            &me(),
        ));
        assert!(why.contains("not a bridge command"), "{data}: {why}");
    }
    let game = reason(normalize(&press(person(), private_chat(), None), &me()));
    assert!(game.contains("game"), "{game}");
    let mut inline = press(person(), private_chat(), Some("/approve qd4k"));
    let query = inline["callback_query"].as_object_mut().expect("object");
    query.remove("message");
    query.insert("inline_message_id".to_owned(), json!("AAAA"));
    let why = reason(normalize(&inline, &me()));
    assert!(why.contains("inline-mode"), "{why}");
    let by_bot = reason(normalize(
        &press(bot_user(), private_chat(), Some("/approve qd4k")),
        &me(),
    ));
    assert!(by_bot.contains("from a bot"), "{by_bot}");
}

#[test]
fn message_ids_are_per_chat_and_a_button_press_is_its_own_message() {
    let private = message(normalize(
        &update(text_in(private_chat(), "hi", json!([]))),
        &me(),
    ));
    let group = message(normalize(
        &update(text_in(
            group_chat(),
            "/status",
            json!([{"type": "bot_command", "offset": 0, "length": 7}]),
        )),
        &me(),
    ));
    // Telegram counts message ids per chat: the same 10 in two chats is two messages.
    assert_eq!(private.message_id.as_deref(), Some("5000000001:10"));
    assert_eq!(group.message_id, Some(format!("{GROUP}:10")));
    let pressed = message(normalize(
        &press(person(), private_chat(), Some("/deny qd4k")),
        &me(),
    ));
    assert_eq!(
        pressed.message_id.as_deref(),
        Some("callback:4382bfdwdsb323b2d9")
    );
}

#[test]
fn a_voice_note_and_an_audio_carry_their_declared_duration_for_the_bridges_cap() {
    let voice = update(json!({
        "message_id": 15, "from": person(), "chat": private_chat(), "date": 1_700_000_000,
        "voice": {"file_id": "v-1", "file_unique_id": "v", "duration": 7, "file_size": 6_200}
    }));
    assert_eq!(
        message(normalize(&voice, &me())).attachments,
        vec![Attachment {
            kind: AttachmentKind::File,
            // No mime_type sent: Telegram's voice notes are Opus in Ogg.
            media_type: "audio/ogg".to_owned(),
            reference: "v-1".to_owned(),
            name: None,
            size_bytes: Some(6_200),
            duration_seconds: Some(7),
        }]
    );
    // A duration past u32 is held at its largest value, never wrapped to a short one.
    let audio = update(json!({
        "message_id": 16, "from": person(), "chat": private_chat(), "date": 1_700_000_000,
        "audio": {"file_id": "a-1", "file_unique_id": "a", "duration": 99_999_999_999_u64, "mime_type": "audio/mpeg"}
    }));
    assert_eq!(
        message(normalize(&audio, &me())).attachments[0].duration_seconds,
        Some(u32::MAX)
    );
}
