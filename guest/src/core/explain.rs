//! `/connect explain`: what the bridge did with the last messages it received, in words a person
//! can act on, so "why did the bot not answer?" needs no log reading
//! (docs/decisions.md#decision-15-explain-replay-and-doctor-answer-why-did-the-bot-not-answer).
//! Only metadata is kept: who, where, when and the decision, never the message text.

use std::collections::VecDeque;

use crate::core::pairing::PairingReason;
use crate::core::router::{IgnoreReason, UnsupportedFeature};
use crate::core::text::format_duration;
use crate::keys::{ConversationKey, Identity};

/// How many decisions are remembered; older ones are forgotten first.
pub const REMEMBERED: usize = 20;

/// What the bridge did with one inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not for the bot, or nothing in it.
    Ignored(IgnoreReason),
    /// Sender not paired: the chat was told how to pair (and why, if a code existed).
    NotPaired(PairingReason),
    /// The pairing code matched.
    Paired,
    /// An unpaired sender over the strangers' rate limit: dropped without a reply.
    StrangerFlood,
    /// A press on the bridge's buttons by an identity that may not answer: refused (to
    /// the presser alone where the platform allows), nothing decided, no pairing code made.
    PressRefused,
    /// A new unpaired chat while the pairing codes were full: told to try later.
    PairingFull,
    /// Pairing is closed after too many wrong codes: the message was not judged
    /// (docs/security.md#pairing).
    PairingClosed,
    /// A remote command was answered (its canonical name).
    Command(&'static str),
    /// The identity sent more than its rate limit allows.
    RateLimited,
    /// The conversation is paused: the prompt was not forwarded.
    Paused,
    /// The text was over `bridge.maxInboundChars`: refused, the sender told the limit.
    TooLong {
        /// The limit.
        limit: u32,
    },
    /// Attachments the bridge does not take were refused.
    Unsupported(UnsupportedFeature),
    /// An attachment could not be fetched or was not what it claimed.
    AttachmentRefused,
    /// The agent did not accept the prompt.
    PromptFailed,
    /// As many prompts as `bridge.maxQueuedPrompts` already waited: not forwarded.
    QueueFull {
        /// The limit.
        limit: u32,
    },
    /// The prompt reached the agent, with this many images.
    Prompt {
        /// Images forwarded with it.
        images: usize,
    },
}

/// One remembered decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// When the message arrived.
    pub at_ms: u64,
    /// `transport:conversationId`.
    pub conversation: ConversationKey,
    /// `transport:userId`.
    pub identity: Identity,
    /// What was done.
    pub outcome: Outcome,
}

/// The last [`REMEMBERED`] decisions, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionLog {
    decisions: VecDeque<Decision>,
}

impl DecisionLog {
    /// Remembers `decision`, forgetting the oldest beyond [`REMEMBERED`].
    pub fn record(&mut self, decision: Decision) {
        if self.decisions.len() == REMEMBERED {
            self.decisions.pop_front();
        }
        self.decisions.push_back(decision);
    }

    /// The remembered decisions, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Decision> {
        self.decisions.iter()
    }
}

/// What an outcome means and, when the person expected an answer, what to do about it.
pub fn outcome_text(outcome: &Outcome, local_command: &str) -> String {
    match outcome {
        Outcome::Ignored(IgnoreReason::Unaddressed) => "ignored: a group message that did not \
            address the bot. Mention it, reply to it, or start with a configured prefix \
            (bridge.requireAddressing)."
            .into(),
        Outcome::Ignored(IgnoreReason::Empty) => "ignored: it had no text.".into(),
        Outcome::Ignored(IgnoreReason::StaleUnpaired) => "ignored: an unpaired sender's \
            message older than the pairing window (bridge.pairingTtlMs), delivered late (the \
            backlog after a restart). A new message from them gets a code."
            .into(),
        Outcome::NotPaired(reason) => {
            let why = match reason {
                PairingReason::New => "a new pairing code was shown on this terminal",
                PairingReason::Expired => {
                    "the code had expired, so a new one was shown on this terminal"
                }
                PairingReason::Locked => {
                    "too many wrong codes, so a new one was shown on this terminal"
                }
                PairingReason::Awaiting => "a code is waiting to be typed in that chat",
                PairingReason::Mismatch => "the code typed was wrong",
                PairingReason::Reissued => {
                    "the session restarted, so its code was replaced by the one shown here at start"
                }
            };
            format!("not paired: {why}. See it with /{local_command} pair.")
        }
        Outcome::Paired => "paired with the code from this terminal.".into(),
        Outcome::PressRefused => "refused: a button press by an identity that may not answer \
            approvals or questions decided nothing; only the presser was told."
            .into(),
        Outcome::StrangerFlood => "ignored: too many messages from unpaired senders at once \
            (a flood is limited per transport and overall); no reply was sent."
            .into(),
        Outcome::PairingClosed => format!(
            "not paired: pairing is closed after too many wrong codes (bridge.pairingMaxFailuresPerHour), \
             so the message was not checked against any code. Run /{local_command} pair for a fresh code."
        ),
        Outcome::PairingFull => "not paired: too many pairing codes were already waiting, so \
            no code was made; the chat was told to try later."
            .into(),
        Outcome::Command(name) => format!("answered the command /{name}."),
        Outcome::RateLimited => "rate limited: more messages a minute than \
            bridge.rateLimit allows from this sender. Wait a minute, or raise the limit."
            .into(),
        Outcome::Paused => format!(
            "not forwarded: the chat is paused. Send /resume there, or /{local_command} resume here."
        ),
        Outcome::Unsupported(feature) => {
            let what = match feature {
                UnsupportedFeature::Attachments => "this session or transport takes no attachments",
                UnsupportedFeature::AttachmentNotImage => {
                    "an attachment was not an allowed image type"
                }
                UnsupportedFeature::AttachmentTooLarge => {
                    "an attachment was over bridge.attachments.maxBytes"
                }
                UnsupportedFeature::AttachmentTooMany => {
                    "more attachments than bridge.attachments.maxCount"
                }
            };
            format!("refused: {what}; the chat was told.")
        }
        Outcome::TooLong { limit } => format!(
            "refused: longer than bridge.maxInboundChars ({limit} characters); the chat was \
             told the limit and nothing was forwarded."
        ),
        Outcome::AttachmentRefused => {
            "refused: an attachment could not be fetched or was not what it claimed; the chat \
             was told."
                .into()
        }
        Outcome::PromptFailed => {
            "not delivered: the agent did not take the prompt (see the error on this \
             terminal); the chat was told."
                .into()
        }
        Outcome::QueueFull { limit } => format!(
            "not queued: {limit} prompts already waited (bridge.maxQueuedPrompts); the chat \
             was told and nothing was forwarded."
        ),
        Outcome::Prompt { images: 0 } => "forwarded to the agent.".into(),
        Outcome::Prompt { images } => format!("forwarded to the agent with {images} image(s)."),
    }
}

/// The `/connect explain` text: the remembered decisions, newest first, each with how long
/// ago, where, from whom and what it meant. With none it says where to look instead, because
/// a message that never arrived is the commonest reason for silence.
pub fn explain_text(log: &DecisionLog, now: u64, local_command: &str) -> String {
    let decisions: Vec<&Decision> = log.iter().rev().collect();
    if decisions.is_empty() {
        return format!(
            "bot-connect explain: no message has reached this session since it started.\n\
             If you sent one, check in this order:\n\
             1. the transport is running (/{local_command} doctor)\n\
             2. the bot is in that chat and may read it (invited; privacy mode, message intents or scopes)\n\
             3. no other pi process holds the same bot credential"
        );
    }
    let mut lines = vec![format!(
        "bot-connect explain: the last {} message(s), newest first",
        decisions.len()
    )];
    for d in decisions {
        let ago = i64::try_from(now.saturating_sub(d.at_ms)).unwrap_or(i64::MAX);
        lines.push(format!(
            "- {} ago in {} from {}: {}",
            format_duration(ago),
            d.conversation,
            d.identity,
            outcome_text(&d.outcome, local_command)
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(at_ms: u64, outcome: Outcome) -> Decision {
        Decision {
            at_ms,
            conversation: ConversationKey::new("telegram", "-100"),
            identity: Identity::new("telegram", "42"),
            outcome,
        }
    }

    #[test]
    fn outcome_table() {
        let rows = [
            (
                Outcome::Ignored(IgnoreReason::Unaddressed),
                "ignored: a group message that did not address the bot. Mention it, reply to it, or start with a configured prefix (bridge.requireAddressing).",
            ),
            (
                Outcome::Ignored(IgnoreReason::Empty),
                "ignored: it had no text.",
            ),
            (
                Outcome::NotPaired(PairingReason::Mismatch),
                "not paired: the code typed was wrong. See it with /bc pair.",
            ),
            (
                Outcome::NotPaired(PairingReason::Expired),
                "not paired: the code had expired, so a new one was shown on this terminal. See it with /bc pair.",
            ),
            (Outcome::Paired, "paired with the code from this terminal."),
            (Outcome::Command("status"), "answered the command /status."),
            (
                Outcome::RateLimited,
                "rate limited: more messages a minute than bridge.rateLimit allows from this sender. Wait a minute, or raise the limit.",
            ),
            (
                Outcome::Paused,
                "not forwarded: the chat is paused. Send /resume there, or /bc resume here.",
            ),
            (
                Outcome::Unsupported(UnsupportedFeature::AttachmentTooLarge),
                "refused: an attachment was over bridge.attachments.maxBytes; the chat was told.",
            ),
            (Outcome::Prompt { images: 0 }, "forwarded to the agent."),
            (
                Outcome::Prompt { images: 2 },
                "forwarded to the agent with 2 image(s).",
            ),
        ];
        for (outcome, text) in rows {
            assert_eq!(outcome_text(&outcome, "bc"), text, "{outcome:?}");
        }
    }

    #[test]
    fn newest_first_with_age_place_and_sender() {
        let mut log = DecisionLog::default();
        log.record(decision(1_000, Outcome::Ignored(IgnoreReason::Unaddressed)));
        log.record(decision(61_000, Outcome::Prompt { images: 0 }));
        assert_eq!(
            explain_text(&log, 121_000, "connect"),
            "bot-connect explain: the last 2 message(s), newest first\n\
             - 1m ago in telegram:-100 from telegram:42: forwarded to the agent.\n\
             - 2m ago in telegram:-100 from telegram:42: ignored: a group message that did not address the bot. Mention it, reply to it, or start with a configured prefix (bridge.requireAddressing)."
        );
    }

    #[test]
    fn only_the_last_twenty_are_kept() {
        let mut log = DecisionLog::default();
        for at in 0..25 {
            log.record(decision(at, Outcome::Paired));
        }
        let kept: Vec<u64> = log.iter().map(|d| d.at_ms).collect();
        assert_eq!(kept, (5..25).collect::<Vec<u64>>());
    }

    #[test]
    fn with_nothing_received_it_says_where_to_look() {
        assert_eq!(
            explain_text(&DecisionLog::default(), 0, "connect"),
            "bot-connect explain: no message has reached this session since it started.\n\
             If you sent one, check in this order:\n\
             1. the transport is running (/connect doctor)\n\
             2. the bot is in that chat and may read it (invited; privacy mode, message intents or scopes)\n\
             3. no other pi process holds the same bot credential"
        );
    }
}
