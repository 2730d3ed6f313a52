//! The pure normalizer, rule by rule (docs/protocols.md#robo_claw-grpc, with
//! docs/decisions.md#decision-8-robo_claw-sends-only-to-the-addressed-room-and-knows-only-its-own-sender).

use std::collections::HashMap;

use serde_json::json;
use transport_core::platform::{BotSelf, Normalized};
use transport_core::{AttachmentKind, Envelope};
use transport_robo_claw::normalize::{
    chat_message_from_json, command_text, normalize, normalize_message, outbound, room_of,
};
use transport_robo_claw::proto::ChatMessage;

fn message(sender: &str, content: &str, metadata: &[(&str, &str)]) -> ChatMessage {
    ChatMessage {
        sender_id: sender.to_owned(),
        content: content.to_owned(),
        timestamp: 42,
        metadata: metadata
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
    }
}

fn envelope(normalized: Normalized) -> Envelope {
    match normalized {
        Normalized::Message(envelope) => envelope,
        Normalized::Ignored(reason) => panic!("ignored: {reason}"),
    }
}

fn ignored(normalized: Normalized) -> String {
    match normalized {
        Normalized::Ignored(reason) => reason,
        Normalized::Message(envelope) => panic!("delivered: {envelope:?}"),
    }
}

#[test]
fn a_message_becomes_a_direct_addressed_envelope_in_its_room() {
    let got = envelope(normalize_message(
        &message(" alice ", "  do the thing  ", &[("room_id", " lab ")]),
        "robot",
    ));
    assert_eq!(
        got,
        Envelope {
            transport: "robo_claw".into(),
            conversation_id: "lab".into(),
            user_id: "alice".into(),
            thread_id: None,
            timestamp: 42,
            text: "do the thing".into(),
            is_direct: true,
            addressed: true,
            attachments: vec![],
            message_id: None,
            press: None,
        }
    );
}

#[test]
fn defaults_fill_a_missing_sender_and_room_and_a_negative_time() {
    let mut bare = message("", "hi", &[]);
    bare.timestamp = -5;
    let got = envelope(normalize_message(&bare, "robot"));
    assert_eq!(
        (
            got.user_id.as_str(),
            got.conversation_id.as_str(),
            got.timestamp
        ),
        ("user", "default", 0)
    );
    assert_eq!(
        room_of(&HashMap::from([("room_id".into(), "  ".into())])),
        Ok("default".into())
    );
}

#[test]
fn only_the_configured_sender_is_the_bot() {
    let reason = ignored(normalize_message(&message("claw", "echo", &[]), "claw"));
    assert!(reason.contains("the bot itself"), "{reason}");
    // The original also dropped every "robot"; decision 8 keeps a person of that name
    // (docs/decisions.md#decision-8-robo_claw-sends-only-to-the-addressed-room-and-knows-only-its-own-sender).
    assert_eq!(
        envelope(normalize_message(&message("robot", "hi", &[]), "claw")).user_id,
        "robot"
    );
    assert!(matches!(
        normalize_message(&message("robot", "echo", &[]), "robot"),
        Normalized::Ignored(_)
    ));
}

#[test]
fn an_empty_message_is_ignored_unless_it_carries_a_file() {
    let reason = ignored(normalize_message(&message("a", "   ", &[]), "robot"));
    assert!(reason.contains("empty"), "{reason}");
    let got = envelope(normalize_message(
        &message(
            "a",
            "",
            &[
                ("file_id", "f1"),
                ("type", "IMAGE/PNG"),
                ("filename", "cat.png"),
            ],
        ),
        "robot",
    ));
    let attachment = &got.attachments[0];
    assert_eq!(attachment.kind, AttachmentKind::Image);
    assert_eq!(attachment.media_type, "image/png");
    assert_eq!(attachment.reference, "f1");
    assert_eq!(attachment.name.as_deref(), Some("cat.png"));
    let file = envelope(normalize_message(
        &message("a", "see", &[("file_id", "f2")]),
        "robot",
    ));
    assert_eq!(file.attachments[0].kind, AttachmentKind::File);
    assert_eq!(file.attachments[0].media_type, "application/octet-stream");
}

#[test]
fn overlong_ids_are_ignored_with_the_reason() {
    let long = "x".repeat(300);
    let reason = ignored(normalize_message(
        &message("a", "hi", &[("room_id", &long)]),
        "robot",
    ));
    assert!(reason.contains("room id is 300 bytes"), "{reason}");
    let reason = ignored(normalize_message(&message(&long, "hi", &[]), "robot"));
    assert!(reason.contains("sender_id of 300 bytes"), "{reason}");
}

#[test]
fn a_command_gets_the_slash_it_lacks() {
    assert_eq!(command_text(" status "), "/status");
    assert_eq!(command_text("/pause"), "/pause");
}

#[test]
fn a_reply_names_the_bot_the_time_and_the_room() {
    let reply = outbound("robot", "lab", "done", 1_700_000_000_000, &[]);
    assert_eq!(reply.sender_id, "robot");
    assert_eq!(reply.content, "done");
    assert_eq!(reply.timestamp, 1_700_000_000_000);
    assert_eq!(
        reply.metadata.get("room_id").map(String::as_str),
        Some("lab")
    );
    assert_eq!(
        reply.metadata.get("choices"),
        None,
        "no buttons, no choices"
    );
}

#[test]
fn a_request_carries_its_choices_as_json_in_the_metadata() {
    let buttons = [
        transport_core::Button {
            label: "Approve once".into(),
            command: "/approve qd4k".into(),
        },
        transport_core::Button {
            label: "Deny".into(),
            command: "/deny qd4k".into(),
        },
    ];
    let reply = outbound("robot", "lab", "Approval needed (qd4k)", 1, &buttons);
    let choices: serde_json::Value =
        serde_json::from_str(reply.metadata.get("choices").expect("choices")).expect("json");
    assert_eq!(
        choices,
        serde_json::json!([
            {"label": "Approve once", "command": "/approve qd4k"},
            {"label": "Deny", "command": "/deny qd4k"}
        ])
    );
}

#[test]
fn explain_reads_proto3_json_in_either_field_spelling() {
    let me = BotSelf::default();
    let got = envelope(normalize(
        &json!({"senderId": "bob", "content": "hi", "timestamp": "17", "metadata": {"room_id": "r"}}),
        &me,
    ));
    assert_eq!(
        (
            got.user_id.as_str(),
            got.timestamp,
            got.conversation_id.as_str()
        ),
        ("bob", 17, "r")
    );
    let got = envelope(normalize(
        &json!({"sender_id": "ann", "content": "yo"}),
        &me,
    ));
    assert_eq!(got.user_id, "ann");
    // An empty self id means the default, "robot".
    assert!(matches!(
        normalize(&json!({"sender_id": "robot", "content": "echo"}), &me),
        Normalized::Ignored(_)
    ));
    let custom = BotSelf {
        id: "claw".into(),
        username: String::new(),
    };
    assert!(matches!(
        normalize(&json!({"sender_id": "claw", "content": "echo"}), &custom),
        Normalized::Ignored(_)
    ));
}

#[test]
fn bad_json_is_ignored_with_a_reason_and_a_pasted_token_is_dropped() {
    let me = BotSelf::default();
    for (payload, expected) in [
        (json!([1, 2]), "expected a JSON object"),
        (json!({"content": 5}), "content must be a string"),
        (
            json!({"content": "x", "timestamp": "soon"}),
            "timestamp must be an integer",
        ),
        (
            json!({"content": "x", "metadata": {"a": 1}}),
            "metadata.a must be a string",
        ),
        (
            json!({"content": "x", "metadata": "x"}),
            "metadata must be an object",
        ),
    ] {
        let reason = ignored(normalize(&payload, &me));
        assert!(reason.contains(expected), "{payload}: {reason}");
    }
    let parsed = chat_message_from_json(&json!({
        "content": "x", "metadata": {"auth_token": "secret", "room_id": "r"}
    }))
    .expect("parsed");
    assert!(!parsed.metadata.contains_key("auth_token"));
}

#[test]
fn a_client_message_id_in_metadata_is_the_message_id_when_usable() {
    let id_of = |metadata: &[(&str, &str)]| {
        envelope(normalize_message(
            &message("alice", "hi", metadata),
            "robot",
        ))
        .message_id
    };
    assert_eq!(id_of(&[("message_id", " m-1 ")]).as_deref(), Some("m-1"));
    // No id, a blank one or an oversized one: the message is still handled, without an id.
    assert_eq!(id_of(&[]), None);
    assert_eq!(id_of(&[("message_id", "  ")]), None);
    let long = "x".repeat(257);
    assert_eq!(id_of(&[("message_id", long.as_str())]), None);
}

#[test]
fn escapes_and_bidi_overrides_in_room_and_sender_ids_are_stripped() {
    let message = ChatMessage {
        sender_id: "ad\u{202E}nimda\u{200B}".into(),
        content: "hi \u{202E} stays in the text".into(),
        timestamp: 1,
        metadata: HashMap::from([
            (
                "room_id".into(),
                "lab\u{1b}]52;c;ZXZpbA==\u{7}\u{2028}".into(),
            ),
            ("file_id".into(), "f1".into()),
            ("filename".into(), "cat\u{2066}.png".into()),
        ]),
    };
    let Normalized::Message(envelope) = normalize_message(&message, "robot") else {
        panic!("a message");
    };
    assert_eq!(envelope.conversation_id, "lab]52;c;ZXZpbA==");
    assert_eq!(envelope.user_id, "adnimda");
    assert_eq!(envelope.attachments[0].name.as_deref(), Some("cat.png"));
    assert_eq!(envelope.text, "hi \u{202E} stays in the text");
    // A room id of nothing but invisible characters is the default room.
    assert_eq!(
        room_of(&HashMap::from([(
            "room_id".into(),
            "\u{202E}\u{200B}".into()
        )])),
        Ok("default".to_owned())
    );
}
