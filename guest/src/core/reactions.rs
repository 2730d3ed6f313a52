//! Which reaction a user's message gets (docs/pi.md#reactions-and-the-done-message): a
//! card's edits do not make a phone buzz, and in a busy group the card may be far from the
//! message it answers, so the message itself shows how far it got: 👀 taken, ✅ done, ❌ not
//! run. Pure, so the rule is tested without a bridge.

use crate::core::explain::Outcome;
use crate::model::Reaction;

/// The reaction for a message that asked for a prompt, by what the bridge did with it;
/// `None` for messages that were no prompt (commands, pairing, strangers: a stranger's
/// message gets no reaction, it must learn nothing but how to pair).
pub fn for_outcome(outcome: &Outcome) -> Option<Reaction> {
    match outcome {
        Outcome::Prompt { .. } => Some(Reaction::Received),
        // Not run, and the chat was told why in a message of its own.
        Outcome::RateLimited
        | Outcome::Paused
        | Outcome::TooLong { .. }
        | Outcome::Unsupported(_)
        | Outcome::AttachmentRefused
        | Outcome::PromptFailed
        | Outcome::QueueFull { .. } => Some(Reaction::Failed),
        Outcome::Ignored(_)
        | Outcome::NotPaired(_)
        | Outcome::Paired
        | Outcome::StrangerFlood
        | Outcome::PressRefused
        | Outcome::PairingFull
        | Outcome::PairingClosed
        | Outcome::Command(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::pairing::PairingReason;
    use crate::core::router::IgnoreReason;

    #[test]
    fn a_prompt_is_marked_taken_a_refused_one_failed_and_anything_else_not_at_all() {
        assert_eq!(
            for_outcome(&Outcome::Prompt { images: 0 }),
            Some(Reaction::Received)
        );
        for refused in [
            Outcome::RateLimited,
            Outcome::Paused,
            Outcome::TooLong { limit: 10 },
            Outcome::AttachmentRefused,
            Outcome::PromptFailed,
            Outcome::QueueFull { limit: 1 },
        ] {
            assert_eq!(for_outcome(&refused), Some(Reaction::Failed), "{refused:?}");
        }
        for silent in [
            Outcome::Ignored(IgnoreReason::Empty),
            Outcome::NotPaired(PairingReason::Mismatch),
            Outcome::Paired,
            Outcome::StrangerFlood,
            Outcome::PairingClosed,
            Outcome::Command("status"),
        ] {
            assert_eq!(for_outcome(&silent), None, "{silent:?}");
        }
    }
}
