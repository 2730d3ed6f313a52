//! How a component click is acknowledged (pure): Discord shows "This interaction failed"
//! unless the interaction callback (`POST /interactions/{id}/{token}/callback`) comes within
//! 3 seconds (docs/protocols.md#discord-interactions). The gateway sends it at once, before
//! the session sees the click and never waiting for it: a taken click gets type 6
//! DEFERRED_UPDATE_MESSAGE (the bridge edits the message itself once the approval is
//! decided), a refused one type 4 with flags 64, an ephemeral answer only the clicker sees,
//! saying why, and decides nothing.

use serde_json::Value;
use transport_core::platform::Normalized;

use crate::wire::{
    CHANNEL_MESSAGE_WITH_SOURCE, CallbackData, DEFERRED_UPDATE_MESSAGE, EPHEMERAL,
    InteractionCallback, NO_PINGS,
};

/// Longest refusal shown to the clicker, in characters (Discord allows 2000).
const REFUSAL_MAX_CHARS: usize = 300;

/// The callback for one interaction.
#[derive(Clone, PartialEq, Eq)]
pub struct Acknowledgement {
    /// The interaction's id.
    pub interaction_id: String,
    /// The interaction's token (a credential for 15 minutes: never logged).
    pub token: String,
    /// What the callback says.
    pub callback: InteractionCallback,
}

impl std::fmt::Debug for Acknowledgement {
    // The token answers for the bot for 15 minutes: it stays out of every debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acknowledgement")
            .field("interaction_id", &self.interaction_id)
            .field("token", &"<hidden>")
            .field("callback", &self.callback)
            .finish()
    }
}

/// The acknowledgement of the INTERACTION_CREATE whose `d` is `interaction`, given what the
/// normalizer made of it; `None` only when the payload names no id or token, so there is
/// no callback to make. Read from the raw payload, so even an interaction the normalizer
/// could not read is answered.
pub fn acknowledgement(interaction: &Value, normalized: &Normalized) -> Option<Acknowledgement> {
    let text = |key: &str| {
        interaction
            .get(key)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    };
    let (interaction_id, token) = (text("id")?, text("token")?);
    let callback = match normalized {
        Normalized::Message(_) => InteractionCallback {
            kind: DEFERRED_UPDATE_MESSAGE,
            data: None,
        },
        Normalized::Ignored(reason) => InteractionCallback {
            kind: CHANNEL_MESSAGE_WITH_SOURCE,
            data: Some(CallbackData {
                content: refusal_text(reason),
                flags: EPHEMERAL,
                allowed_mentions: NO_PINGS,
            }),
        },
    };
    Some(Acknowledgement {
        interaction_id,
        token,
        callback,
    })
}

/// What a refused clicker reads.
pub fn refusal_text(reason: &str) -> String {
    let text = format!("This click was not taken and decided nothing: {reason}.");
    if text.chars().count() <= REFUSAL_MAX_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(REFUSAL_MAX_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::Envelope;

    fn envelope() -> Envelope {
        Envelope {
            transport: "discord".into(),
            conversation_id: "1".into(),
            user_id: "2".into(),
            thread_id: None,
            timestamp: 0,
            text: "/approve ab3k".into(),
            is_direct: true,
            addressed: true,
            attachments: Vec::new(),
            message_id: None,
            press: None,
        }
    }

    #[test]
    fn a_taken_click_is_deferred_and_a_refused_one_answered_only_to_the_clicker() {
        let raw = serde_json::json!({"id": "77", "token": "tok", "type": 3});
        let taken = acknowledgement(&raw, &Normalized::Message(envelope())).expect("ack");
        assert_eq!(
            serde_json::to_value(&taken.callback).expect("json"),
            serde_json::json!({"type": 6})
        );
        assert_eq!(
            (taken.interaction_id.as_str(), taken.token.as_str()),
            ("77", "tok")
        );
        let refused = acknowledgement(&raw, &Normalized::Ignored("a bot".into())).expect("ack");
        let body = serde_json::to_value(&refused.callback).expect("json");
        assert_eq!(body["type"], 4);
        assert_eq!(body["data"]["flags"], 64);
        assert_eq!(
            body["data"]["content"],
            "This click was not taken and decided nothing: a bot."
        );
        assert_eq!(
            body["data"]["allowed_mentions"]["parse"],
            serde_json::json!([])
        );
        assert_eq!(
            acknowledgement(
                &serde_json::json!({"id": "77"}),
                &Normalized::Ignored("x".into())
            ),
            None
        );
        assert_eq!(refusal_text(&"r".repeat(400)).chars().count(), 300);
    }
}
