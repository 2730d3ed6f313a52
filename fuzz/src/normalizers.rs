//! The platform normalizers: raw payload JSON → envelope or "ignored" (I14, I40).
//!
//! Property: no panic, and never an envelope from a message the bot sent itself. Each
//! check uses the same bot identity as its crate's normalize tests, so the seed payloads
//! built from those tests reach the "own message" paths.

use serde_json::Value;
use transport_core::platform::{BotSelf, Normalized};

/// The payload as JSON, or `None` when the bytes are not JSON at all (a transport never
/// hands its normalizer anything else, so there is nothing to check).
fn json(data: &[u8]) -> Option<Value> {
    serde_json::from_slice(data).ok()
}

fn me(id: &str, username: &str) -> BotSelf {
    BotSelf {
        id: id.to_owned(),
        username: username.to_owned(),
    }
}

/// Telegram's own id in the tests (`BOT_ID`).
pub const TELEGRAM_BOT_ID: i64 = 999;
/// Discord's own id in the tests.
pub const DISCORD_BOT_ID: &str = "987654321098765432";
/// Slack's own user id in the tests.
pub const SLACK_BOT_ID: &str = "U0BOT1234";

/// Telegram: the message the normalizer reads (a bare Message or `update.message`) whose
/// `from.id` is the bot's is never an envelope.
pub fn telegram(data: &[u8]) {
    let Some(payload) = json(data) else { return };
    let me = me(&TELEGRAM_BOT_ID.to_string(), "piBot");
    let result = transport_telegram::normalize::normalize(&payload, &me);
    let bare = payload.get("update_id").is_none()
        && payload.get("message_id").is_some()
        && payload.get("chat").is_some();
    let message = if bare {
        Some(&payload)
    } else {
        payload.get("message")
    };
    let from_me = message
        .and_then(|m| m.get("from"))
        .and_then(|from| from.get("id"))
        .and_then(Value::as_i64)
        == Some(TELEGRAM_BOT_ID);
    if let Normalized::Message(envelope) = &result {
        assert!(
            !from_me,
            "telegram made an envelope of the bot's own message: {envelope:?}"
        );
        assert_eq!(envelope.transport, "telegram");
    }
    // The same payload through the crate's declared normalizer gives the same answer:
    // `host-shim preview` uses the declaration, the transport the function.
    assert_eq!(
        (transport_telegram::PLATFORM.normalize)(&payload, &me),
        result
    );
}

/// Discord: an envelope's user is the author, never the bot.
pub fn discord(data: &[u8]) {
    let Some(payload) = json(data) else { return };
    let me = me(DISCORD_BOT_ID, "pi-bot");
    let result = (transport_discord::PLATFORM.normalize)(&payload, &me);
    if let Normalized::Message(envelope) = &result {
        assert_ne!(
            envelope.user_id, DISCORD_BOT_ID,
            "discord made an envelope of the bot's own message: {envelope:?}"
        );
        assert_eq!(envelope.transport, "discord");
    }
}

/// Slack: an envelope's user is the sender, never the bot.
pub fn slack(data: &[u8]) {
    let Some(payload) = json(data) else { return };
    let me = me(SLACK_BOT_ID, "pi");
    let result = (transport_slack::PLATFORM.normalize)(&payload, &me);
    if let Normalized::Message(envelope) = &result {
        assert_ne!(
            envelope.user_id, SLACK_BOT_ID,
            "slack made an envelope of the bot's own message: {envelope:?}"
        );
        assert_eq!(envelope.transport, "slack");
    }
}

/// robo_claw (proto3 JSON of a `ChatMessage`): an envelope's sender is never the bot's
/// self sender id, the default one or a configured one. The first input byte picks which.
pub fn robo_claw(data: &[u8]) {
    let (self_id, rest) = match data.split_first() {
        Some((b'c', rest)) => ("  claw-bot ", rest),
        _ => ("", data),
    };
    let Some(payload) = json(rest) else { return };
    let me = me(self_id, "");
    let expected_self = match self_id.trim() {
        "" => transport_robo_claw::normalize::DEFAULT_SELF_SENDER_ID,
        id => id,
    };
    let result = (transport_robo_claw::PLATFORM.normalize)(&payload, &me);
    if let Normalized::Message(envelope) = &result {
        assert_ne!(
            envelope.user_id, expected_self,
            "robo_claw made an envelope of the bot's own message: {envelope:?}"
        );
        assert_eq!(envelope.transport, "robo_claw");
        assert!(envelope.is_direct && envelope.addressed);
    }
}
