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
    if !envelope.attachments.is_empty() {
        let kinds: Vec<String> = envelope
            .attachments
            .iter()
            .map(|a| a.media_type.clone())
            .collect();
        lines.push(format!("attachments: {}", kinds.join(", ")));
    }
    lines.join("\n")
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
}
