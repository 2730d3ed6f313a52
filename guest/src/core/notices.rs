//! Bridge-authored notices sent to a chat (reference-behaviour §3.5).
//!
//! Kept in one place so every refusal a person can receive is reviewed and tested together.
//! None of them ever contains a pairing code or a prompt body.

/// Reply when attachments arrive but the host or the transport cannot forward them (I13).
pub const ATTACHMENTS_UNSUPPORTED_NOTICE: &str =
    "Attachments are not supported yet. Please describe what you need in text instead.";

/// Reply when an attachment's media type is not on the allowed list.
pub const ATTACHMENT_NOT_AN_IMAGE_NOTICE: &str =
    "Only images can be forwarded right now. Please describe that file in text instead.";

/// Reply when an attachment is larger than `attachments.maxBytes`.
pub const ATTACHMENT_TOO_LARGE_NOTICE: &str =
    "That image is too large to forward. Please send a smaller one.";

/// Reply when one message carries more than `attachments.maxCount` attachments.
pub const ATTACHMENT_TOO_MANY_NOTICE: &str =
    "Too many attachments in one message. Please send the images a few at a time.";

/// Reply when downloading an attachment failed, so nothing was forwarded.
pub const ATTACHMENT_FETCH_FAILED_NOTICE: &str =
    "I could not download that image, so I did not send it. Try again or describe it in text.";

/// Replied when the agent refused a forwarded prompt (the terminal gets the reason), so the
/// sender is never left waiting for an answer that will not come.
pub const PROMPT_NOT_DELIVERED_NOTICE: &str =
    "The pi session did not accept that message. The local terminal shows why; try again later.";

/// Reply to a prompt sent to a paused conversation (I9): says why nothing happens and how to undo it.
pub const PAUSED_NOTICE: &str = "Delivery is paused. Send /resume to continue.";

/// Reply to the first rate-limited input in a minute (I37); later denials stay silent.
pub const RATE_LIMITED_NOTICE: &str =
    "Too many messages. Please wait a moment before sending more.";

/// Reply naming a command the bridge does not know.
pub fn unknown_command_notice(name: &str) -> String {
    format!("Unknown command '{name}'.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notice_texts_are_verbatim() {
        let rows = [
            (
                ATTACHMENTS_UNSUPPORTED_NOTICE,
                "Attachments are not supported yet. Please describe what you need in text instead.",
            ),
            (
                ATTACHMENT_NOT_AN_IMAGE_NOTICE,
                "Only images can be forwarded right now. Please describe that file in text instead.",
            ),
            (
                ATTACHMENT_TOO_LARGE_NOTICE,
                "That image is too large to forward. Please send a smaller one.",
            ),
            (
                ATTACHMENT_TOO_MANY_NOTICE,
                "Too many attachments in one message. Please send the images a few at a time.",
            ),
            (
                ATTACHMENT_FETCH_FAILED_NOTICE,
                "I could not download that image, so I did not send it. Try again or describe it in text.",
            ),
            (
                PAUSED_NOTICE,
                "Delivery is paused. Send /resume to continue.",
            ),
            (
                RATE_LIMITED_NOTICE,
                "Too many messages. Please wait a moment before sending more.",
            ),
        ];
        for (actual, expected) in rows {
            assert_eq!(actual, expected);
        }
        assert_eq!(
            unknown_command_notice("deploy"),
            "Unknown command 'deploy'."
        );
    }
}
