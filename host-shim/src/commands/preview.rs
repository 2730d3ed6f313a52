//! `host-shim preview <transport> <payload.json>`: one raw platform payload through that
//! platform's own normalizer, then through the bridge's router as a preview, so "why did
//! the bot not answer?" can be answered from a captured payload without sending anything.
//!
//! Here: find the platform, parse the file, normalize, describe the envelope, then ask an
//! offline session (`offline`) for the bridge's half (pairing, command, prompt:
//! `session.preview-envelope`).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use transport_core::Envelope;
use transport_core::platform::{BotSelf, Normalized, Platform};

use crate::commands::offline::{self, OfflineSetup};
use crate::commands::process::{default_session_key, setup};
use crate::factory::PLATFORMS;
use crate::local::clock::SystemClock;

/// Why a payload could not be previewed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreviewError {
    /// No platform of that id in this build.
    #[error("this build has no '{given}' transport to preview; available: {available}")]
    UnknownTransport {
        /// What was asked for.
        given: String,
        /// The ids this build offers.
        available: String,
    },
    /// The file is not JSON.
    #[error(
        "the payload is not valid JSON ({0}); save the raw update or event exactly as the \
         platform sent it"
    )]
    NotJson(String),
}

/// The platform `id` of this build.
pub fn platform(id: &str) -> Result<&'static Platform, PreviewError> {
    PLATFORMS
        .iter()
        .copied()
        .find(|p| p.settings.id == id)
        .ok_or_else(|| PreviewError::UnknownTransport {
            given: id.to_string(),
            available: PLATFORMS
                .iter()
                .map(|p| p.settings.id)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Runs `payload` (the file's text) through `transport`'s normalizer as the bot `bot`.
pub fn normalize(
    transport: &str,
    payload: &str,
    bot: &BotSelf,
) -> Result<Normalized, PreviewError> {
    let platform = platform(transport)?;
    let value: serde_json::Value =
        serde_json::from_str(payload).map_err(|e| PreviewError::NotJson(e.to_string()))?;
    Ok((platform.normalize)(&value, bot))
}

/// What the normalizer made of the message, in lines a person reads. The message text
/// is shown by length only: a captured payload may hold a secret, and this output ends
/// up pasted into issue reports.
pub fn describe(envelope: &Envelope) -> String {
    let mut lines = vec![
        format!("transport: {}", envelope.transport),
        format!(
            "text after normalizing: {} character(s){}",
            envelope.text.chars().count(),
            command_hint(&envelope.text)
        ),
    ];
    for attachment in &envelope.attachments {
        lines.push(format!("attachment: {}", attachment_line(attachment)));
    }
    lines.join("\n")
}

/// One attachment as the platform declared it: what it is, its type, and the size and
/// length that the bridge's caps are judged on. The name is the sender's; shown in quotes
/// with control characters left out, so a name cannot forge a line of this report.
fn attachment_line(attachment: &transport_core::Attachment) -> String {
    let what = if attachment.media_type.starts_with("audio/") {
        "voice/audio"
    } else if attachment.kind == transport_core::AttachmentKind::Image {
        "image"
    } else {
        "file"
    };
    let mut facts = vec![attachment.media_type.clone()];
    if let Some(name) = &attachment.name {
        let shown: String = name.chars().filter(|c| !c.is_control()).take(80).collect();
        facts.push(format!("\"{shown}\""));
    }
    if let Some(size) = attachment.size_bytes {
        facts.push(guest::core::inbox::size_text(size));
    }
    if let Some(seconds) = attachment.duration_seconds {
        facts.push(format!("{seconds} s"));
    }
    format!("{what} ({})", facts.join(", "))
}

/// ` (starts like a command: /status)` when the text's first word looks like one; only
/// the word, never the rest of the text.
fn command_hint(text: &str) -> String {
    let first = text.split_whitespace().next().unwrap_or("");
    if first.starts_with('/') && first.len() <= 32 {
        format!(" (starts like a command: {first})")
    } else {
        String::new()
    }
}

/// `host-shim preview`: the platform's normalizer, then the bridge's preview.
pub async fn run(
    component: &[u8],
    transport: &str,
    payload: &Path,
    bot: &BotSelf,
    session: Option<String>,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(payload)
        .with_context(|| format!("cannot read the payload file {}", payload.display()))?;
    println!(
        "assuming the bot is @{} (id {}); pass --bot-name and --bot-id to match yours",
        bot.username, bot.id
    );
    let envelope = match normalize(transport, &text, bot)? {
        Normalized::Ignored(reason) => {
            println!("ignored by the {transport} transport: {reason}");
            println!("The bridge never sees this payload, so nothing is sent.");
            return Ok(());
        }
        Normalized::Message(envelope) => envelope,
    };
    println!("{}", describe(&envelope));
    let setup = setup()?;
    let offline = offline::spawn(OfflineSetup {
        component,
        paths: &setup.paths,
        discovery: &setup.discovery,
        key: session.unwrap_or_else(|| default_session_key(&setup.cwd)),
        cwd: setup.cwd.clone(),
        clock: Arc::new(SystemClock),
    })
    .await?;
    match offline.session.preview(envelope).await? {
        Some(verdict) => println!("{verdict}"),
        None => println!("The bridge failed while previewing; run `host-shim doctor`."),
    }
    offline.session.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bot() -> BotSelf {
        BotSelf {
            id: "999".into(),
            username: "piBot".into(),
        }
    }

    fn telegram(update: serde_json::Value) -> Normalized {
        normalize("telegram", &update.to_string(), &bot()).expect("telegram is offered")
    }

    fn message(extra: serde_json::Value) -> serde_json::Value {
        let mut message = json!({
            "message_id": 5,
            "from": {"id": 42, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": 42, "type": "private", "first_name": "Ada"},
            "date": 1_700_000_000,
            "text": "hello there"
        });
        if let (Some(m), Some(e)) = (message.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                m.insert(k.clone(), v.clone());
            }
        }
        message
    }

    #[test]
    fn an_unknown_transport_names_the_available_ones() {
        let error = normalize("matrix", "{}", &bot()).unwrap_err();
        assert_eq!(
            error,
            PreviewError::UnknownTransport {
                given: "matrix".into(),
                available: "telegram, discord, slack, robo_claw".into()
            }
        );
    }

    #[test]
    fn a_file_that_is_not_json_says_so() {
        assert!(matches!(
            normalize("telegram", "update_id: 1", &bot()),
            Err(PreviewError::NotJson(_))
        ));
    }

    #[test]
    fn a_private_message_becomes_a_direct_envelope() {
        let Normalized::Message(envelope) =
            telegram(json!({"update_id": 1, "message": message(json!({}))}))
        else {
            panic!("a private message is for the bridge");
        };
        assert!(envelope.is_direct && envelope.addressed);
        assert_eq!(envelope.conversation_id, "42");
        assert_eq!(
            describe(&envelope),
            "transport: telegram\ntext after normalizing: 11 character(s)"
        );
    }

    #[test]
    fn a_group_mention_is_addressed_with_the_mention_stripped() {
        let update = json!({"update_id": 2, "message": message(json!({
            "chat": {"id": -100123, "type": "supergroup", "title": "Team"},
            "text": "@piBot /status",
            "entities": [{"type": "mention", "offset": 0, "length": 6}]
        }))});
        let Normalized::Message(envelope) = telegram(update) else {
            panic!("a mention is for the bridge");
        };
        assert!(!envelope.is_direct && envelope.addressed);
        assert_eq!(envelope.text, "/status");
        assert!(describe(&envelope).contains("(starts like a command: /status)"));
    }

    #[test]
    fn a_topic_message_carries_its_topic() {
        let update = json!({"update_id": 3, "message": message(json!({
            "chat": {"id": -100123, "type": "supergroup", "title": "Team", "is_forum": true},
            "message_thread_id": 77,
            "is_topic_message": true,
            "text": "/status@piBot"
        }))});
        let Normalized::Message(envelope) = telegram(update) else {
            panic!("a topic message is for the bridge");
        };
        assert_eq!(envelope.thread_id.as_deref(), Some("77"));
    }

    #[test]
    fn another_bot_and_an_edit_are_ignored_with_a_reason() {
        let from_bot = json!({"update_id": 4, "message": message(json!({
            "from": {"id": 7, "is_bot": true, "first_name": "Other", "username": "otherBot"}
        }))});
        let edited = json!({"update_id": 5, "edited_message": message(json!({}))});
        for update in [from_bot, edited] {
            match telegram(update.clone()) {
                Normalized::Ignored(reason) => assert!(!reason.is_empty(), "{update}"),
                Normalized::Message(m) => panic!("{update} became {m:?}"),
            }
        }
    }

    #[test]
    fn a_voice_note_a_photo_and_a_document_are_each_described_with_their_caps_facts() {
        let voice = json!({"update_id": 6, "message": message(json!({
            "text": null,
            "voice": {"file_id": "v", "file_unique_id": "uv", "duration": 7,
                "mime_type": "audio/ogg", "file_size": 6200}
        }))});
        let photo = json!({"update_id": 7, "message": message(json!({
            "text": null, "caption": "what is this?",
            "photo": [
                {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 1200},
                {"file_id": "big", "file_unique_id": "b", "width": 1280, "height": 960, "file_size": 98000}
            ]
        }))});
        let document = json!({"update_id": 8, "message": message(json!({
            "text": null,
            "document": {"file_id": "d", "file_unique_id": "ud",
                "file_name": "../evil\nattachment: forged.pdf", "mime_type": "application/pdf",
                "file_size": 31_000_000}
        }))});
        let described: Vec<String> = [voice, photo, document]
            .into_iter()
            .map(|update| match telegram(update) {
                Normalized::Message(envelope) => describe(&envelope),
                Normalized::Ignored(reason) => panic!("ignored: {reason}"),
            })
            .collect();
        assert!(
            described[0].ends_with("attachment: voice/audio (audio/ogg, 6.1 KB, 7 s)"),
            "{}",
            described[0]
        );
        assert!(
            described[1].ends_with("attachment: image (image/jpeg, 95.7 KB)"),
            "{}",
            described[1]
        );
        assert!(
            described[2].ends_with(
                "attachment: file (application/pdf, \"../evilattachment: forged.pdf\", 29.6 MB)"
            ),
            "{}",
            described[2]
        );
        // The sender's name cannot start a line of its own.
        assert_eq!(
            described[2]
                .lines()
                .filter(|l| l.starts_with("attachment:"))
                .count(),
            1
        );
    }
}
