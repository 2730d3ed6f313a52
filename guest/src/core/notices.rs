//! Bridge-authored notices sent to a chat (docs/architecture.md#the-original-module-by-module).
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

/// A press on an approval's or a question's button by an identity that may not answer
/// (not paired, or only allowed to prompt): said to the presser alone where the platform
/// allows, so a group does not watch who tried.
pub const PRESS_REFUSED_NOTICE: &str = "Your press decided nothing: only a paired identity can answer approvals and the agent's questions. To pair, send the bot a message and type the code its terminal shows.";

/// Reply to the first rate-limited input in a minute (I37); later denials stay silent.
pub const RATE_LIMITED_NOTICE: &str =
    "Too many messages. Please wait a moment before sending more.";

/// Reply to a new unpaired chat while the pairing codes are full
/// (docs/decisions.md#decision-18-unpaired-senders-are-bounded): no code is made, and the person
/// learns that trying later may work.
pub const PAIRING_FULL_NOTICE: &str =
    "This pi session has too many pairing requests waiting. Try again in a few minutes.";

/// Reply to a message over `bridge.maxInboundChars` (docs/security.md#remote-input): nothing was
/// forwarded, and the sender learns the limit so they can shorten or split it.
pub fn too_long_notice(chars: usize, limit: u32) -> String {
    format!(
        "That message is too long to forward: {chars} characters, and this session takes at most {limit}. Nothing was sent to pi; please shorten it or send it in parts."
    )
}

/// Reply to a prompt that arrived while `limit` prompts already waited for the busy agent
/// (`bridge.maxQueuedPrompts`): it was not forwarded, so a queue cannot grow without bound
/// and slow every save of the session, and the sender learns why and what to do.
pub fn queue_full_notice(limit: u32) -> String {
    format!(
        "Not queued: {limit} prompts already wait for the agent, the most this session keeps. Nothing was sent to pi; send it again once some have run (/status shows the agent's state)."
    )
}

/// Reply to a prompt forwarded as a follow-up while the agent is busy
/// (docs/decisions.md#decision-20-work-cut-short-is-reported): a visible queue, so the sender knows
/// it was taken and roughly when it runs. `ahead` counts the running turn and the follow-ups queued
/// before this one.
pub fn queued_notice(ahead: usize) -> String {
    format!("Queued, {ahead} ahead. The agent is busy; this runs when its turn comes.")
}

/// Reply to a prompt forwarded as a steer while the agent is busy: it joins the running
/// turn rather than waiting for its own.
pub const STEERED_NOTICE: &str =
    "The agent is busy; it reads this in its current turn, after the step it is on.";

/// The last line of a card whose turn the session stopped before it finished, so the card
/// does not stay at "thinking…".
pub const TURN_STOPPED_LINE: &str = "⊘ stopped: the pi session ended before this turn finished";

/// The last line of a card whose turn was lost to a restart.
pub const TURN_LOST_LINE: &str = "⊘ interrupted: the pi session restarted before this turn finished; send the request again if it is still needed";

/// What a chat is told about its queued prompts that will not run: at shutdown, or at the
/// start after a restart (`restarted`).
pub fn queued_not_run_notice(count: usize, restarted: bool) -> String {
    if restarted {
        format!(
            "The pi session restarted; {count} queued message(s) from this chat were not run. Send them again if they are still needed."
        )
    } else {
        format!(
            "The pi session stopped before it ran {count} queued message(s) from this chat. Send them again when it is back."
        )
    }
}

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
        assert_eq!(
            too_long_notice(20_001, 16_000),
            "That message is too long to forward: 20001 characters, and this session takes at most 16000. Nothing was sent to pi; please shorten it or send it in parts."
        );
        assert_eq!(
            queued_notice(2),
            "Queued, 2 ahead. The agent is busy; this runs when its turn comes."
        );
        assert_eq!(
            queued_not_run_notice(1, false),
            "The pi session stopped before it ran 1 queued message(s) from this chat. Send them again when it is back."
        );
        assert_eq!(
            queued_not_run_notice(3, true),
            "The pi session restarted; 3 queued message(s) from this chat were not run. Send them again if they are still needed."
        );
        assert_eq!(
            PAIRING_FULL_NOTICE,
            "This pi session has too many pairing requests waiting. Try again in a few minutes."
        );
    }
}
