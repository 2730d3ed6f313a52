//! Slack's wire shapes: the Web API answers and arguments this transport uses, the Socket
//! Mode frames, and the Events API payloads
//! (docs/protocols.md#slack-socket-mode-and-events-api). Only the fields the transport
//! reads or writes; unknown fields are ignored and every field Slack may omit is optional
//! or defaulted, so a payload from a newer Slack still parses.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Every Web API answer: `{"ok": true, ...}` or `{"ok": false, "error": "code", ...}`,
/// usually with HTTP 200 either way (docs/protocols.md#slack-sending).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ApiAnswer {
    /// Whether the call succeeded.
    #[serde(default)]
    pub ok: bool,
    /// The error code when not `ok` (`invalid_auth`, `channel_not_found`, ...).
    #[serde(default)]
    pub error: Option<String>,
    /// With `missing_scope`: the scope the method needs.
    #[serde(default)]
    pub needed: Option<String>,
}

/// `auth.test`: who the bot token belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AuthTest {
    /// The bot's user id (`U…`, or `W…` on Enterprise Grid): what mentions and its own
    /// messages carry.
    #[serde(default)]
    pub user_id: String,
    /// The bot user's name.
    #[serde(default)]
    pub user: Option<String>,
    /// The bot id (`B…`).
    #[serde(default)]
    pub bot_id: Option<String>,
    /// Workspace name.
    #[serde(default)]
    pub team: Option<String>,
    /// Workspace id.
    #[serde(default)]
    pub team_id: Option<String>,
}

/// `apps.connections.open`: a single-use WebSocket URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ConnectionsOpen {
    /// `wss://wss-….slack.com/link/?ticket=…`.
    #[serde(default)]
    pub url: String,
}

/// `chat.postMessage` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PostMessage<'a> {
    /// Channel, IM or group id.
    pub channel: &'a str,
    /// mrkdwn text, already rendered and split by the bridge.
    pub text: &'a str,
    /// Post into this thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_ts: Option<&'a str>,
    /// Always true: the bridge renders mrkdwn.
    pub mrkdwn: bool,
    /// False: an agent's reply full of links would otherwise fill the channel with previews.
    pub unfurl_links: bool,
    /// False, for the same reason.
    pub unfurl_media: bool,
    /// Block Kit blocks (the text and its buttons); left out when there are none, and
    /// `text` is then what Slack shows.
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    pub blocks: &'a [Value],
}

/// `chat.update` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdateMessage<'a> {
    /// Channel of the message.
    pub channel: &'a str,
    /// The message's `ts`.
    pub ts: &'a str,
    /// The new text.
    pub text: &'a str,
    /// Always sent, even empty: Slack keeps a message's old blocks when an update leaves
    /// the field out, and a decided approval must not keep live buttons.
    pub blocks: &'a [Value],
}

/// `chat.postEphemeral` arguments: a message only `user` sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PostEphemeral<'a> {
    /// Channel the user is in.
    pub channel: &'a str,
    /// Who sees it.
    pub user: &'a str,
    /// The text.
    pub text: &'a str,
    /// The thread it belongs in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_ts: Option<&'a str>,
}

/// `reactions.add` and `reactions.remove` arguments: the bot's own reaction on a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReactionOnMessage<'a> {
    /// Channel of the message.
    pub channel: &'a str,
    /// The message's `ts`.
    pub timestamp: &'a str,
    /// The emoji's name, without colons (`eyes`).
    pub name: &'a str,
}

/// What `chat.postMessage` and `chat.update` answer with, as far as it is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Posted {
    /// Channel the message is in.
    #[serde(default)]
    pub channel: String,
    /// The message's `ts`: its id, and the key to edit it.
    #[serde(default)]
    pub ts: String,
}

/// One Socket Mode frame from Slack, by its `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// The first frame of every connection.
    Hello(Hello),
    /// Slack will close (or has refused) this connection.
    Disconnect {
        /// `warning`, `refresh_requested`, `link_disabled`, `too_many_websockets`, ...
        reason: String,
    },
    /// An envelope to acknowledge (events, slash commands, interactivity).
    Envelope(Envelope),
    /// Something else (a frame type this transport does not know); nothing to do.
    Other(String),
}

/// The `hello` frame.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Hello {
    /// How many connections the app has open, this one included.
    #[serde(default)]
    pub num_connections: Option<u32>,
    /// Slack's debugging details.
    #[serde(default)]
    pub debug_info: Option<HelloDebug>,
}

/// `hello.debug_info`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct HelloDebug {
    /// Seconds the connection is expected to live before Slack refreshes it.
    #[serde(default)]
    pub approximate_connection_time: Option<u64>,
}

/// A Socket Mode envelope.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Envelope {
    /// What the acknowledgement must echo.
    pub envelope_id: String,
    /// `events_api`, `slash_commands` or `interactive`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// For `events_api`: the Events API `event_callback` body.
    #[serde(default)]
    pub payload: Value,
    /// 0 on first delivery; ≥ 1 when Slack redelivers an envelope it saw no ack for.
    #[serde(default)]
    pub retry_attempt: Option<u64>,
    /// Why it was redelivered (`timeout`, ...).
    #[serde(default)]
    pub retry_reason: Option<String>,
}

impl Frame {
    /// Reads one text frame. `None` when it is not a JSON object with a `type`: such a frame
    /// cannot be acknowledged or acted on, and the caller counts it.
    pub fn parse(text: &str) -> Option<Frame> {
        let value: Value = serde_json::from_str(text).ok()?;
        let kind = value.get("type")?.as_str()?.to_owned();
        Some(match kind.as_str() {
            "hello" => Frame::Hello(Hello::deserialize(&value).unwrap_or_default()),
            "disconnect" => Frame::Disconnect {
                reason: value
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_owned(),
            },
            // Control frames carry no envelope id and are never acknowledged
            // (docs/protocols.md#slack-socket-mode).
            _ => match value.get("envelope_id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() => match Envelope::deserialize(&value) {
                    Ok(envelope) => Frame::Envelope(envelope),
                    // An id but a broken body: still acknowledged, or Slack resends it
                    // for ever; the payload is kept as it is for the dispatcher to refuse.
                    Err(_) => Frame::Envelope(Envelope {
                        envelope_id: id.to_owned(),
                        kind,
                        payload: value.get("payload").cloned().unwrap_or(Value::Null),
                        retry_attempt: None,
                        retry_reason: None,
                    }),
                },
                _ => Frame::Other(kind),
            },
        })
    }
}

/// The acknowledgement of an envelope: `{"envelope_id": "<id>"}`.
pub fn ack(envelope_id: &str) -> String {
    serde_json::json!({ "envelope_id": envelope_id }).to_string()
}

/// The Events API `event_callback` body (the `payload` of an `events_api` envelope).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EventCallback {
    /// `event_callback`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Unique per event: what a redelivery repeats.
    #[serde(default)]
    pub event_id: Option<String>,
    /// The event itself.
    #[serde(default)]
    pub event: Value,
}

/// A `message` or `app_mention` event, with the fields the normalizer reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MessageEvent {
    /// `message` or `app_mention`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// `bot_message`, `message_changed`, `file_share`, `thread_broadcast`, ...
    #[serde(default)]
    pub subtype: Option<String>,
    /// `C…`, `D…` or `G…`.
    #[serde(default)]
    pub channel: Option<String>,
    /// `channel`, `group`, `im`, `mpim` (absent on `app_mention`).
    #[serde(default)]
    pub channel_type: Option<String>,
    /// The author (`U…` or `W…`); absent on legacy bot messages.
    #[serde(default)]
    pub user: Option<String>,
    /// Present on every message an app or bot posted, with or without a subtype.
    #[serde(default)]
    pub bot_id: Option<String>,
    /// mrkdwn text with `<…>` tokens and `&amp; &lt; &gt;` escapes.
    #[serde(default)]
    pub text: Option<String>,
    /// The message's id, `1355517523.000005`.
    #[serde(default)]
    pub ts: Option<String>,
    /// The thread's root `ts`, on replies (and on a root that has replies).
    #[serde(default)]
    pub thread_ts: Option<String>,
    /// Set on `message_changed` and other hidden subtypes.
    #[serde(default)]
    pub hidden: Option<bool>,
    /// Shared files.
    #[serde(default)]
    pub files: Vec<File>,
}

/// A file object as a message carries it (docs/protocols.md#slack-files).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct File {
    /// `F…`.
    #[serde(default)]
    pub id: Option<String>,
    /// File name.
    #[serde(default)]
    pub name: Option<String>,
    /// Declared MIME type.
    #[serde(default)]
    pub mimetype: Option<String>,
    /// Size in bytes.
    #[serde(default)]
    pub size: Option<u64>,
    /// Download URL; needs the bot token and `files:read`.
    #[serde(default)]
    pub url_private_download: Option<String>,
    /// `hidden_by_limit`, `tombstone` (deleted), `external`, `hosted`, ...
    #[serde(default)]
    pub mode: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_by_type_and_only_envelopes_have_ids() {
        let hello = r#"{"type":"hello","num_connections":1,"debug_info":{"host":"applink-1","build_number":10,"approximate_connection_time":18060},"connection_info":{"app_id":"A1"}}"#;
        assert_eq!(
            Frame::parse(hello),
            Some(Frame::Hello(Hello {
                num_connections: Some(1),
                debug_info: Some(HelloDebug {
                    approximate_connection_time: Some(18_060)
                })
            }))
        );
        assert_eq!(
            Frame::parse(
                r#"{"type":"disconnect","reason":"refresh_requested","debug_info":{"host":"wss-111.slack.com"}}"#
            ),
            Some(Frame::Disconnect {
                reason: "refresh_requested".to_owned()
            })
        );
        let envelope = r#"{"envelope_id":"e-1","type":"events_api","payload":{"type":"event_callback"},"accepts_response_payload":false,"retry_attempt":1,"retry_reason":"timeout"}"#;
        match Frame::parse(envelope) {
            Some(Frame::Envelope(envelope)) => {
                assert_eq!(envelope.envelope_id, "e-1");
                assert_eq!(envelope.retry_attempt, Some(1));
            }
            other => panic!("{other:?}"),
        }
        // A broken body with an id is still an envelope, so it is acknowledged.
        assert!(matches!(
            Frame::parse(r#"{"envelope_id":"e-2","type":"events_api","retry_attempt":"x"}"#),
            Some(Frame::Envelope(Envelope { ref envelope_id, .. })) if envelope_id == "e-2"
        ));
        assert_eq!(
            Frame::parse(r#"{"type":"pong"}"#),
            Some(Frame::Other("pong".to_owned()))
        );
        assert_eq!(Frame::parse("not json"), None);
        assert_eq!(Frame::parse("[1,2]"), None);
    }

    #[test]
    fn an_ack_echoes_the_envelope_id_only() {
        let ack: Value = serde_json::from_str(&ack("e-\"1")).expect("json");
        assert_eq!(ack, serde_json::json!({"envelope_id": "e-\"1"}));
    }
}
