//! The gRPC message normalizer: protobuf bytes of a `ChatMessage`, as tonic hands them to
//! the robo_claw service, → envelope or "ignored".
//!
//! Property: no panic, and never an envelope from the bot's own sender id (trimmed,
//! whatever whitespace the client adds around it).

use prost::Message as _;
use transport_core::platform::Normalized;
use transport_robo_claw::normalize::{MAX_ID_BYTES, command_text, normalize_message};
use transport_robo_claw::proto::ChatMessage;

/// The self sender id the service is configured with in this check.
pub const SELF_SENDER_ID: &str = "robot";

/// Decodes `data` as a `ChatMessage` (bytes that are not one are what the server refuses
/// before any normalizer runs) and normalizes it.
pub fn chat_message(data: &[u8]) {
    let Ok(message) = ChatMessage::decode(data) else {
        return;
    };
    match normalize_message(&message, SELF_SENDER_ID) {
        Normalized::Message(envelope) => {
            assert_ne!(
                envelope.user_id, SELF_SENDER_ID,
                "an envelope from the bot's own sender id: {envelope:?}"
            );
            assert_ne!(message.sender_id.trim(), SELF_SENDER_ID);
            // Both become keys the bridge stores: their size is bounded.
            assert!(envelope.user_id.len() <= MAX_ID_BYTES, "{envelope:?}");
            assert!(
                envelope.conversation_id.len() <= MAX_ID_BYTES,
                "{envelope:?}"
            );
            assert!(!envelope.text.is_empty() || !envelope.attachments.is_empty());
        }
        Normalized::Ignored(reason) => assert!(!reason.is_empty()),
    }
    // The SendCommand path: whatever the content, a command the remote prefix recognises.
    assert!(command_text(&message.content).starts_with('/'));
}
