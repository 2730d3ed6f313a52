//! Normalizer table tests on payloads shaped like real Events API traffic
//! (docs/protocols.md#slack-events; the shapes of slackapi/bolt-python's scenario fixtures
//! and the python-slack-sdk mock server): IMs, app mentions, threads, bot messages with and
//! without a subtype, edits, file shares, Enterprise Grid `W…` ids, and every wrapper
//! `explain` accepts.

use serde_json::{Value, json};
use transport_core::platform::{BotSelf, Normalized};
use transport_core::{Attachment, AttachmentKind, Envelope};
use transport_slack::normalize::normalize;

const BOT: &str = "U0BOT1234";

fn me() -> BotSelf {
    BotSelf {
        id: BOT.to_owned(),
        username: "pi".to_owned(),
    }
}

fn callback(event: Value) -> Value {
    json!({
        "token": "verification",
        "team_id": "T111",
        "enterprise_id": "E111",
        "api_app_id": "A111",
        "event": event,
        "type": "event_callback",
        "event_id": "Ev111",
        "event_time": 1_599_616_881,
        "authorizations": [{"enterprise_id": "E111", "team_id": "T111", "user_id": "W111", "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false,
        "event_context": "1-message-T111-C111"
    })
}

fn socket_envelope(payload: Value) -> Value {
    json!({
        "envelope_id": "57d6a792-4d35-4d0b-b6aa-3361493e1caf",
        "payload": payload,
        "type": "events_api",
        "accepts_response_payload": false,
        "retry_attempt": 0,
        "retry_reason": ""
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

fn im() -> Value {
    json!({
        "client_msg_id": "a8744611-0210-4f85-9f15-5faf7fb225c8",
        "type": "message",
        "text": "Hello hello can you hear me?",
        "user": "W222",
        "ts": "1610261659.001400",
        "team": "T111",
        "blocks": [{"type": "rich_text", "block_id": "bN8", "elements": []}],
        "channel": "D111",
        "event_ts": "1610261659.001400",
        "channel_type": "im"
    })
}

#[test]
fn an_im_is_direct_addressed_top_level_and_keyed_on_the_im() {
    let envelope = message(normalize(&callback(im()), &me()));
    assert_eq!(
        envelope,
        Envelope {
            transport: "slack".to_owned(),
            conversation_id: "D111".to_owned(),
            user_id: "W222".to_owned(),
            thread_id: None,
            timestamp: 1_610_261_659_001,
            text: "Hello hello can you hear me?".to_owned(),
            is_direct: true,
            addressed: true,
            attachments: Vec::new(),
            message_id: Some("D111:1610261659.001400".to_owned()),
            press: None,
        }
    );
    // The same message as a bare event, and inside a Socket Mode envelope.
    assert_eq!(message(normalize(&im(), &me())), envelope);
    assert_eq!(
        message(normalize(&socket_envelope(callback(im())), &me())),
        envelope
    );
}

#[test]
fn an_app_mention_is_addressed_its_mention_stripped_and_answered_in_a_thread_under_it() {
    let mention = json!({
        "client_msg_id": "c5d8f4a2",
        "type": "app_mention",
        "text": format!("<@{BOT}> /status"),
        "user": "W222",
        "ts": "1595926230.009600",
        "team": "T111",
        "channel": "C111",
        "event_ts": "1595926230.009600"
    });
    let envelope = message(normalize(&callback(mention), &me()));
    assert_eq!(envelope.text, "/status");
    assert!(envelope.addressed);
    assert!(!envelope.is_direct);
    assert_eq!(envelope.conversation_id, "C111/1595926230.009600");
    assert_eq!(envelope.thread_id.as_deref(), Some("1595926230.009600"));

    // Decision 1: `@bot status` is the bare command word, addressed.
    let plain = json!({"type": "app_mention", "text": format!("<@{BOT}|pi>, status"), "user": "U9", "ts": "1.000001", "channel": "C111"});
    let envelope = message(normalize(&plain, &me()));
    assert_eq!(
        (envelope.text.as_str(), envelope.addressed),
        ("status", true)
    );

    // A bare mention is the bot being called by name.
    let bare = json!({"type": "app_mention", "text": format!("<@{BOT}>"), "user": "U9", "ts": "1.000002", "channel": "C111"});
    let envelope = message(normalize(&bare, &me()));
    assert_eq!((envelope.text.as_str(), envelope.addressed), ("", true));
}

#[test]
fn a_channel_message_is_addressed_only_by_the_bots_own_mention() {
    let event = |text: &str| json!({"type": "message", "channel": "C111", "channel_type": "channel", "user": "U222", "text": text, "ts": "1700000000.000100"});
    let chatter = message(normalize(&event("lunch?"), &me()));
    assert!(!chatter.addressed && !chatter.is_direct);
    let other = message(normalize(&event("ask <@U999|ada>"), &me()));
    assert_eq!((other.text.as_str(), other.addressed), ("ask @ada", false));
    let mentioned = message(normalize(&event(&format!("please <@{BOT}> look")), &me()));
    assert_eq!(
        (mentioned.text.as_str(), mentioned.addressed),
        ("please look", true)
    );
    // A group DM is not direct either.
    let mut mpim = event("hi");
    mpim["channel_type"] = json!("mpim");
    mpim["channel"] = json!("G111");
    assert!(!message(normalize(&mpim, &me())).is_direct);
}

#[test]
fn a_thread_reply_belongs_to_its_thread_and_a_thread_root_to_itself() {
    let reply = json!({
        "type": "message",
        "text": "and the tests?",
        "user": "W222",
        "ts": "1610261700.002000",
        "thread_ts": "1610261659.001400",
        "parent_user_id": "W222",
        "channel": "C111",
        "event_ts": "1610261700.002000",
        "channel_type": "channel"
    });
    let envelope = message(normalize(&callback(reply.clone()), &me()));
    assert_eq!(envelope.conversation_id, "C111/1610261659.001400");
    assert_eq!(envelope.thread_id.as_deref(), Some("1610261659.001400"));
    assert_eq!(envelope.timestamp, 1_610_261_700_002);

    // In an IM a thread is its own conversation too.
    let mut in_im = reply.clone();
    in_im["channel"] = json!("D111");
    in_im["channel_type"] = json!("im");
    let envelope = message(normalize(&in_im, &me()));
    assert_eq!(envelope.conversation_id, "D111/1610261659.001400");
    assert!(envelope.is_direct);

    // thread_ts == ts is the root itself, not a reply.
    let mut root = reply;
    root["thread_ts"] = root["ts"].clone();
    assert_eq!(
        message(normalize(&root, &me())).conversation_id,
        "C111/1610261700.002000"
    );

    // A thread reply also sent to the channel is still the person's reply.
    let broadcast = json!({"type": "message", "subtype": "thread_broadcast", "text": "fyi", "user": "U2", "ts": "2.000001", "thread_ts": "1.000001", "channel": "C111", "channel_type": "channel"});
    assert_eq!(
        message(normalize(&broadcast, &me())).thread_id.as_deref(),
        Some("1.000001")
    );
}

#[test]
fn bot_messages_are_ignored_with_or_without_a_subtype_and_the_bots_own_too() {
    // A modern app's message (chat.postMessage): no subtype, but bot_id and a bot user.
    let modern = json!({
        "bot_id": "B999",
        "type": "message",
        "text": "Hi there! This is a reply to your message.",
        "user": "U999",
        "ts": "1610261539.000900",
        "team": "T111",
        "bot_profile": {"id": "B999", "deleted": false, "name": "other-app", "updated": 1_607_307_935, "app_id": "A222", "team_id": "T111"},
        "channel": "C111",
        "event_ts": "1610261539.000900",
        "channel_type": "channel"
    });
    assert_eq!(
        reason(normalize(&callback(modern.clone()), &me())),
        "a message from an app or bot (B999)"
    );
    // Our own post comes back the same way: recognised by our user id first.
    let mut own = modern.clone();
    own["user"] = json!(BOT);
    assert_eq!(reason(normalize(&own, &me())), "the bot's own message");
    // A legacy integration: subtype bot_message, no user at all.
    let legacy = json!({"type": "message", "subtype": "bot_message", "text": "deploy done", "ts": "1358877455.000010", "username": "ci", "bot_id": "BB12033", "channel": "C111", "channel_type": "channel"});
    assert!(reason(normalize(&legacy, &me())).contains("bot_message"));
    // An app mention written by a bot is still a bot's message.
    let mut bot_mention = modern;
    bot_mention["type"] = json!("app_mention");
    bot_mention["text"] = json!(format!("<@{BOT}> status"));
    assert!(reason(normalize(&bot_mention, &me())).contains("app or bot"));
}

#[test]
fn edits_deletions_and_other_subtypes_are_ignored_with_a_reason() {
    let changed = json!({
        "type": "message",
        "subtype": "message_changed",
        "hidden": true,
        "message": {"type": "message", "text": "edited text", "user": "W222", "ts": "1610261659.001400", "edited": {"user": "W222", "ts": "1610261700.000000"}},
        "channel": "C111",
        "previous_message": {"type": "message", "text": "original", "user": "W222", "ts": "1610261659.001400"},
        "event_ts": "1610261700.000200",
        "ts": "1610261700.000200",
        "channel_type": "channel"
    });
    assert!(reason(normalize(&callback(changed), &me())).contains("message_changed"));
    let deleted = json!({"type": "message", "subtype": "message_deleted", "hidden": true, "channel": "C111", "ts": "1.000003", "deleted_ts": "1.000001"});
    assert!(reason(normalize(&deleted, &me())).contains("message_deleted"));
    for subtype in [
        "channel_join",
        "me_message",
        "channel_topic",
        "some_future_subtype",
    ] {
        let event = json!({"type": "message", "subtype": subtype, "user": "U2", "text": "x", "ts": "1.000004", "channel": "C111"});
        assert!(
            reason(normalize(&event, &me())).contains(subtype),
            "{subtype}"
        );
    }
}

#[test]
fn a_file_share_keeps_its_comment_and_downloadable_files() {
    let share = json!({
        "type": "message",
        "subtype": "file_share",
        "text": "here is the screenshot &amp; the log",
        "user": "W222",
        "ts": "1610262000.000100",
        "channel": "D111",
        "channel_type": "im",
        "files": [
            {"id": "F111", "created": 1_610_262_000, "name": "screen.png", "title": "screen.png", "mimetype": "image/png", "filetype": "png", "size": 52_417, "mode": "hosted",
             "url_private": "https://files.slack.com/files-pri/T111-F111/screen.png",
             "url_private_download": "https://files.slack.com/files-pri/T111-F111/download/screen.png"},
            {"id": "F222", "name": "run.log", "mimetype": "text/plain", "size": 900, "mode": "hosted",
             "url_private_download": "https://files.slack.com/files-pri/T111-F222/download/run.log"},
            {"id": "F333", "mode": "hidden_by_limit"},
            {"id": "F444", "mode": "tombstone", "url_private_download": "https://files.slack.com/x"}
        ],
        "upload": false
    });
    let envelope = message(normalize(&callback(share), &me()));
    assert_eq!(envelope.text, "here is the screenshot & the log");
    assert_eq!(
        envelope.attachments,
        [
            Attachment {
                kind: AttachmentKind::Image,
                media_type: "image/png".to_owned(),
                reference: "https://files.slack.com/files-pri/T111-F111/download/screen.png"
                    .to_owned(),
                name: Some("screen.png".to_owned()),
                size_bytes: Some(52_417),
                duration_seconds: None,
            },
            Attachment {
                kind: AttachmentKind::File,
                media_type: "text/plain".to_owned(),
                reference: "https://files.slack.com/files-pri/T111-F222/download/run.log"
                    .to_owned(),
                name: Some("run.log".to_owned()),
                size_bytes: Some(900),
                duration_seconds: None,
            },
        ]
    );
    // A file without a comment is still a message.
    let bare = json!({"type": "message", "subtype": "file_share", "text": "", "user": "U2", "ts": "1.000005", "channel": "D1", "channel_type": "im",
        "files": [{"id": "F1", "mimetype": "image/jpeg", "url_private_download": "https://files.slack.com/a.jpg"}]});
    let envelope = message(normalize(&bare, &me()));
    assert_eq!(
        (envelope.text.as_str(), envelope.attachments.len()),
        ("", 1)
    );
}

#[test]
fn enterprise_grid_w_ids_are_users_and_mentions_like_any_other() {
    let grid_me = BotSelf {
        id: "W0BOT".to_owned(),
        username: "pi".to_owned(),
    };
    let event = json!({"type": "message", "channel": "C111", "channel_type": "channel", "user": "W012A3CDE", "text": "<@W0BOT> hi <@W0OTHER>", "ts": "1.000006", "team": "T111", "user_team": "T222", "source_team": "T222"});
    let envelope = message(normalize(&callback(event), &grid_me));
    assert_eq!(envelope.user_id, "W012A3CDE");
    assert_eq!(envelope.text, "hi @W0OTHER");
    assert!(envelope.addressed);
}

#[test]
fn text_tokens_are_resolved_before_the_escapes_are_undone() {
    let event = json!({"type": "message", "channel": "D1", "channel_type": "im", "user": "U2", "ts": "1.000007",
        "text": "fix <https://ci.example/run?a=1&amp;b=2|the run> in <#C1|dev>, <!here>: a &lt;b&gt; &amp;lt;"});
    assert_eq!(
        message(normalize(&event, &me())).text,
        "fix the run (https://ci.example/run?a=1&b=2) in #dev, @here: a <b> &lt;"
    );
}

#[test]
fn what_is_not_a_message_is_ignored_with_a_reason() {
    let rows: Vec<(Value, &str)> = vec![
        (
            json!({"type": "reaction_added", "user": "U2", "reaction": "thumbsup"}),
            "\"reaction_added\" event",
        ),
        (
            json!({"envelope_id": "e1", "type": "slash_commands", "payload": {"command": "/pi"}}),
            "\"slash_commands\" envelope",
        ),
        (
            json!({"type": "message", "channel": "C1", "text": "no user", "ts": "1.1"}),
            "without a sender",
        ),
        (
            json!({"type": "message", "user": "U2", "text": "no channel"}),
            "without a channel",
        ),
        (
            json!({"type": "message", "user": "U2", "channel": "D1", "ts": "1.1", "text": "   "}),
            "neither text",
        ),
        (
            json!({"type": "message", "user": "U2", "channel": "D1", "ts": "1.1", "text": 5}),
            "cannot read",
        ),
        (
            json!({"type": "message", "user": "U2", "channel": "D1", "ts": "1.1", "text": "x", "hidden": true}),
            "hidden",
        ),
        (json!({"update_id": 1}), "no event type"),
        (json!([1, 2, 3]), "no event type"),
        (json!(null), "no event type"),
        (json!({"type": "event_callback"}), "no event type"),
    ];
    for (payload, expected) in rows {
        let why = reason(normalize(&payload, &me()));
        assert!(why.contains(expected), "{payload}: {why}");
    }
}

#[test]
fn one_post_has_one_message_id_as_app_mention_and_as_message() {
    let mention = json!({"type": "app_mention", "text": format!("<@{BOT}> status"), "user": "U9", "ts": "1.000001", "channel": "C111"});
    let as_message = json!({"type": "message", "text": format!("<@{BOT}> status"), "user": "U9", "ts": "1.000001", "channel": "C111", "channel_type": "channel"});
    let ids = [mention, as_message].map(|event| message(normalize(&event, &me())).message_id);
    assert_eq!(
        ids,
        [
            Some("C111:1.000001".to_owned()),
            Some("C111:1.000001".to_owned())
        ]
    );
    // The same ts in another channel is another message.
    let elsewhere = json!({"type": "app_mention", "text": format!("<@{BOT}> status"), "user": "U9", "ts": "1.000001", "channel": "C222"});
    assert_eq!(
        message(normalize(&elsewhere, &me())).message_id.as_deref(),
        Some("C222:1.000001")
    );
}

#[test]
fn a_block_actions_click_is_the_buttons_command_from_the_clicker_in_the_requests_thread() {
    let click = json!({
        "type": "block_actions",
        "user": {"id": "W2", "username": "ada", "team_id": "T1"},
        "container": {"type": "message", "message_ts": "1.000002", "channel_id": "C1", "thread_ts": "1.000001"},
        "channel": {"id": "C1", "name": "general"},
        "message": {"type": "message", "ts": "1.000002", "thread_ts": "1.000001", "bot_id": "B1"},
        "actions": [{"type": "button", "action_id": "bridge-0", "value": "/approve qd4k turn", "action_ts": "1700000001.5"}]
    });
    let envelope = message(normalize(
        &socket_envelope_of("interactive", click.clone()),
        &me(),
    ));
    assert_eq!(envelope.text, "/approve qd4k turn");
    assert_eq!(envelope.user_id, "W2");
    assert_eq!(envelope.conversation_id, "C1/1.000001");
    assert_eq!(envelope.thread_id.as_deref(), Some("1.000001"));
    assert!(envelope.addressed && !envelope.is_direct);
    assert_eq!(
        envelope.message_id.as_deref(),
        Some("action:W2:1700000001.5")
    );
    assert_eq!(envelope.press.as_deref(), Some("action:W2:1700000001.5"));
    // The bare payload (what a person pastes into `explain`) reads the same.
    assert_eq!(message(normalize(&click, &me())).text, "/approve qd4k turn");
    let mut forged = click.clone();
    forged["actions"][0]["value"] = json!("please delete everything");
    assert!(reason(normalize(&forged, &me())).contains("not a bridge command"));
    let mut by_me = click.clone();
    by_me["user"]["id"] = json!(BOT);
    assert!(reason(normalize(&by_me, &me())).contains("by the bot itself"));
    let view = json!({"type": "view_submission", "user": {"id": "U2"}});
    assert!(
        reason(normalize(&socket_envelope_of("interactive", view), &me()))
            .contains("view_submission")
    );
}

fn socket_envelope_of(kind: &str, payload: Value) -> Value {
    json!({"envelope_id": "e1", "type": kind, "payload": payload, "accepts_response_payload": true})
}
