//! Inbound routing: one envelope in, exactly one [`Route`] out
//! (docs/architecture.md#the-original-module-by-module).
//!
//! The decision table, in order:
//!
//! | row | condition | route |
//! |---|---|---|
//! | U1 | unauthenticated, no live challenge, addressing required, not addressed | `Ignore(Unaddressed)` (I7) |
//! | U2 | unauthenticated otherwise | `Pair` (I6: never a prompt) |
//! | A1 | a remote command | `Command` (even while busy, I8) |
//! | A1b | a group message the transport marked addressed (mention stripped), whose body parses as after `@bot`: a prefixed command, a lone command word, or nothing | `Command` (empty: help; docs/decisions.md#decision-1-bot-status-is-a-command) |
//! | A2 | empty text, no attachments | `Ignore(Empty)` |
//! | A3 | addressing required, not addressed | `Ignore(Unaddressed)` |
//! | A3b | text longer than `maxInboundChars` | `TooLong` (never a prompt; the sender is told the limit) |
//! | A4 | an attachment problem | `Unsupported` (I13) |
//! | A5 | otherwise | `Prompt` |

use crate::core::commands::{
    ParsedCommand, parse_addressed_body, parse_local_habit, parse_remote_command,
};
use crate::core::config::{AttachmentSettings, BridgeConfig};
use crate::core::inbox;
use crate::core::notices;
use crate::core::state::PendingChallenge;
use crate::core::text::{starts_with_any_ci, strip_leading_mention};
use crate::core::voice;
use crate::keys::Identity;
use crate::model::{Attachment, DeliverAs, Envelope};

/// The prompt sent with attachments that came without any text, so the model knows what to do.
pub const ATTACHMENT_FALLBACK_PROMPT: &str = "Describe the attached image.";

/// Everything routing looks at.
#[derive(Debug, Clone, Copy)]
pub struct RouteInput<'a> {
    /// The inbound message.
    pub envelope: &'a Envelope,
    /// Resolved configuration.
    pub config: &'a BridgeConfig,
    /// The sender's identity is trusted ([`is_authenticated`]).
    pub authenticated: bool,
    /// The conversation's challenge, if any (possibly expired).
    pub pending: Option<&'a PendingChallenge>,
    /// The agent is in a turn.
    pub busy: bool,
    /// Host and transport can both take images for the model (I13).
    pub attachments_accepted: bool,
    /// The transport can fetch attachments at all (its `attachments` capability): a file
    /// for the inbox needs only that, not an agent that takes images.
    pub transport_fetches: bool,
    /// Current time (ms since epoch).
    pub now: u64,
}

/// Why a message is dropped without a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnoreReason {
    /// Nothing to forward.
    Empty,
    /// Channel chatter not meant for the bot.
    Unaddressed,
    /// An unpaired sender's message older than the pairing window, delivered late (the backlog a
    /// platform hands over after a restart):
    /// docs/decisions.md#decision-10-telegrams-backlog-is-answered-but-not-a-stale-one-for-strangers.
    StaleUnpaired,
}

/// Timestamps below this (September 2001 in ms) are not milliseconds since the epoch: a
/// client that sends seconds, or none, must not have every message taken for a stale one.
const PLAUSIBLE_EPOCH_MS: u64 = 1_000_000_000_000;

/// The backlog after a restart is answered, but not for an unpaired sender
/// whose message is older than the pairing window. A code made for it now would answer a
/// stranger's message from long ago, which they may no longer be waiting on, and every
/// such message would mint a code at once
/// (docs/decisions.md#decision-10-telegrams-backlog-is-answered-but-not-a-stale-one-for-strangers).
fn is_stale_for_pairing(timestamp_ms: u64, now_ms: u64, pairing_ttl_ms: u64) -> bool {
    timestamp_ms >= PLAUSIBLE_EPOCH_MS && now_ms.saturating_sub(timestamp_ms) > pairing_ttl_ms
}

/// Why attachments are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsupportedFeature {
    /// Host or transport cannot take attachments at all.
    Attachments,
    /// A media type is not on the allowed list.
    AttachmentNotImage,
    /// A declared size exceeds the limit.
    AttachmentTooLarge,
    /// More attachments than allowed in one message.
    AttachmentTooMany,
}

impl UnsupportedFeature {
    /// The refusal the chat receives: attachments are never dropped silently (I13).
    pub fn notice(self) -> &'static str {
        match self {
            UnsupportedFeature::Attachments => notices::ATTACHMENTS_UNSUPPORTED_NOTICE,
            UnsupportedFeature::AttachmentNotImage => notices::ATTACHMENT_NOT_AN_IMAGE_NOTICE,
            UnsupportedFeature::AttachmentTooLarge => notices::ATTACHMENT_TOO_LARGE_NOTICE,
            UnsupportedFeature::AttachmentTooMany => notices::ATTACHMENT_TOO_MANY_NOTICE,
        }
    }
}

/// What to do with one inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Drop it, reply nothing.
    Ignore(IgnoreReason),
    /// The sender is not trusted: run [`crate::core::pairing::decide_pairing`] on the text.
    Pair,
    /// Run a remote command.
    Command(ParsedCommand),
    /// Refuse the attachments with [`UnsupportedFeature::notice`].
    Unsupported(UnsupportedFeature),
    /// The text is over `bridge.maxInboundChars`: refuse it with
    /// [`notices::too_long_notice`], forward nothing.
    TooLong {
        /// Its length in characters.
        chars: usize,
        /// The limit.
        limit: u32,
    },
    /// Forward to the agent.
    Prompt {
        /// The prompt text, mention stripped.
        text: String,
        /// `None` when the agent is idle (start a turn now); the configured busy delivery otherwise.
        deliver_as: Option<DeliverAs>,
        /// Attachments to fetch and forward.
        attachments: Vec<Attachment>,
    },
}

/// Trust check (I12): the identity is listed in `allowUsers`, pairing is switched off, or the
/// session's store trusts it (`trusted`).
pub fn is_authenticated(identity: &Identity, config: &BridgeConfig, trusted: bool) -> bool {
    trusted || !config.require_pairing || config.allow_users.contains(identity)
}

/// The first reason the attachments cannot be forwarded, checked in this order: the
/// transport cannot fetch any, too many (before types, so one notice covers the whole
/// batch), then per image (an allowed image type, [`inbox::is_model_image`]) an agent that
/// takes none or a declared size over the limit. Any other attachment is a file for the
/// inbox, judged by [`inbox::files_problem`] with its name in the reply. Sizes are checked
/// again on the downloaded bytes by the bridge (I19); this only spares a pointless download.
pub fn find_attachment_problem(
    attachments: &[Attachment],
    images_accepted: bool,
    transport_fetches: bool,
    settings: &AttachmentSettings,
) -> Option<UnsupportedFeature> {
    if !transport_fetches {
        return Some(UnsupportedFeature::Attachments);
    }
    if attachments.len() as u64 > u64::from(settings.max_count) {
        return Some(UnsupportedFeature::AttachmentTooMany);
    }
    attachments
        .iter()
        .filter(|a| inbox::is_model_image(a, settings))
        .find_map(|a| {
            if !images_accepted {
                Some(UnsupportedFeature::Attachments)
            } else if a.size_bytes.is_some_and(|size| size > settings.max_bytes) {
                Some(UnsupportedFeature::AttachmentTooLarge)
            } else {
                None
            }
        })
}

/// Routes one envelope through the decision table in the module docs.
pub fn route(input: &RouteInput<'_>) -> Route {
    let envelope = input.envelope;
    let config = input.config;
    let trimmed = envelope.text.trim();
    let bot = config.bot_username.as_deref();
    let stripped = bot.and_then(|b| strip_leading_mention(trimmed, b));
    let addressed = envelope.is_direct
        || envelope.addressed
        || stripped.is_some()
        || starts_with_any_ci(trimmed, &config.remote_prefixes);
    let mentioned = stripped.is_some();
    let text = stripped.unwrap_or_else(|| trimmed.to_string());

    if !input.authenticated {
        if is_stale_for_pairing(envelope.timestamp_ms, input.now, config.pairing_ttl_ms) {
            return Route::Ignore(IgnoreReason::StaleUnpaired);
        }
        let challenge_live = input.pending.is_some_and(|p| input.now < p.expires_at);
        if !challenge_live && config.require_addressing && !addressed {
            return Route::Ignore(IgnoreReason::Unaddressed);
        }
        return Route::Pair;
    }
    // `/connect help` typed in a chat, the terminal habit, is the remote `help`.
    if let Some(command) =
        parse_local_habit(trimmed, &config.remote_prefixes, bot, &config.local_command)
    {
        return Route::Command(command);
    }
    if let Some(command) = parse_remote_command(trimmed, &config.remote_prefixes, bot) {
        return Route::Command(command);
    }
    // Transports strip the bot's mention and set `addressed`, so `@bot status`
    // arrives as an addressed `status`. In a group that is the same as the body after a
    // leading `@bot`; an empty one asks for help instead of vanishing
    // (docs/decisions.md#decision-1-bot-status-is-a-command). A DM is always
    // addressed, so there a bare word stays a prompt, as before.
    if envelope.addressed
        && !envelope.is_direct
        && !mentioned
        && (envelope.attachments.is_empty() || !trimmed.is_empty())
        && let Some(command) = parse_addressed_body(trimmed, &config.remote_prefixes)
    {
        return Route::Command(command);
    }
    if text.is_empty() && envelope.attachments.is_empty() {
        return Route::Ignore(IgnoreReason::Empty);
    }
    if config.require_addressing && !addressed {
        return Route::Ignore(IgnoreReason::Unaddressed);
    }
    // Counted in characters, as the person typing sees them, so the limit they are told
    // matches what they can count.
    let chars = text.chars().count();
    if chars > config.max_inbound_chars as usize {
        return Route::TooLong {
            chars,
            limit: config.max_inbound_chars,
        };
    }
    if !envelope.attachments.is_empty()
        && let Some(feature) = find_attachment_problem(
            &envelope.attachments,
            input.attachments_accepted,
            input.transport_fetches,
            &config.attachments,
        )
    {
        return Route::Unsupported(feature);
    }
    let text = if !text.is_empty() {
        text
    } else if envelope
        .attachments
        .iter()
        .any(|a| inbox::is_model_image(a, &config.attachments))
    {
        ATTACHMENT_FALLBACK_PROMPT.to_string()
    } else if envelope.attachments.iter().all(voice::is_voice) {
        // A voice note alone: its transcript is the prompt.
        String::new()
    } else {
        inbox::FILES_FALLBACK_PROMPT.to_string()
    };
    Route::Prompt {
        text,
        deliver_as: input.busy.then_some(config.busy_delivery),
        attachments: envelope.attachments.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::commands::RemoteCommand;
    use crate::model::AttachmentKind;

    fn image(media_type: &str, size: Option<u64>) -> Attachment {
        Attachment {
            kind: AttachmentKind::Image,
            media_type: media_type.to_string(),
            reference: "ref-1".to_string(),
            name: None,
            size_bytes: size,
            duration_seconds: None,
        }
    }

    /// One row of the decision table: the message, the circumstances, the expected route.
    struct Row {
        name: &'static str,
        text: &'static str,
        is_direct: bool,
        addressed: bool,
        attachments: Vec<Attachment>,
        authenticated: bool,
        pending: Option<PendingChallenge>,
        busy: bool,
        accepted: bool,
        expected: Route,
    }

    fn row(name: &'static str, text: &'static str, expected: Route) -> Row {
        Row {
            name,
            text,
            is_direct: false,
            addressed: false,
            attachments: Vec::new(),
            authenticated: true,
            pending: None,
            busy: false,
            accepted: true,
            expected,
        }
    }

    fn prompt(text: &str, deliver_as: Option<DeliverAs>, attachments: Vec<Attachment>) -> Route {
        Route::Prompt {
            text: text.to_string(),
            deliver_as,
            attachments,
        }
    }

    fn command(command: RemoteCommand) -> Route {
        Route::Command(ParsedCommand {
            command,
            args: String::new(),
        })
    }

    fn live() -> Option<PendingChallenge> {
        Some(PendingChallenge {
            hash: crate::core::code_hash::CodeHash::new("123456", [0; 16]),
            digits: 6,
            expires_at: 2_000,
            attempts: 0,
        })
    }

    fn expired() -> Option<PendingChallenge> {
        Some(PendingChallenge {
            hash: crate::core::code_hash::CodeHash::new("123456", [0; 16]),
            digits: 6,
            expires_at: 1_000,
            attempts: 0,
        })
    }

    #[test]
    fn decision_table() {
        let unpaired = |r: Row| Row {
            authenticated: false,
            ..r
        };
        let direct = |r: Row| Row {
            is_direct: true,
            ..r
        };
        let addressed = |r: Row| Row {
            addressed: true,
            ..r
        };
        let rows = vec![
            // U1: unauthenticated chatter without a live challenge: silence, no challenge.
            unpaired(row(
                "U1 chatter",
                "meeting at 3pm",
                Route::Ignore(IgnoreReason::Unaddressed),
            )),
            unpaired(Row {
                pending: expired(),
                ..row(
                    "U1 expired challenge",
                    "hi",
                    Route::Ignore(IgnoreReason::Unaddressed),
                )
            }),
            // U2: addressed in any way, or a challenge is live.
            unpaired(direct(row("U2 direct message", "hello", Route::Pair))),
            unpaired(Row {
                addressed: true,
                ..row("U2 transport says addressed", "hello", Route::Pair)
            }),
            unpaired(row("U2 prefix", "/status", Route::Pair)),
            unpaired(row("U2 mention", "@piBot hello", Route::Pair)),
            unpaired(Row {
                pending: live(),
                ..row("U2 live challenge, unaddressed code", "123456", Route::Pair)
            }),
            unpaired(direct(row(
                "U2 never a prompt even for a command word",
                "status",
                Route::Pair,
            ))),
            // A1: commands, even while busy.
            row(
                "A1 prefixed command",
                "/status",
                command(RemoteCommand::Status),
            ),
            Row {
                busy: true,
                ..row(
                    "A1 command while busy",
                    "/abort",
                    command(RemoteCommand::Abort),
                )
            },
            row(
                "A1 decision 1 bare after mention",
                "@piBot status",
                command(RemoteCommand::Status),
            ),
            row(
                "A1 decision 1 prefixed after mention",
                "@piBot /status",
                command(RemoteCommand::Status),
            ),
            row(
                "A1 bare mention is help",
                "@piBot",
                command(RemoteCommand::Help),
            ),
            // A1b, docs/decisions.md#decision-1-bot-status-is-a-command: the transport stripped the
            // mention and said "addressed".
            addressed(row(
                "A1b addressed bare word (from `@bot status`)",
                "status",
                command(RemoteCommand::Status),
            )),
            addressed(row(
                "A1b addressed alias",
                "who",
                command(RemoteCommand::Whoami),
            )),
            addressed(row(
                "A1b addressed prefixed",
                "/status",
                command(RemoteCommand::Status),
            )),
            addressed(row(
                "A1b addressed prefixed with args",
                "/status verbose",
                Route::Command(ParsedCommand {
                    command: RemoteCommand::Status,
                    args: "verbose".into(),
                }),
            )),
            addressed(row(
                "A1b addressed empty asks for help",
                "  ",
                command(RemoteCommand::Help),
            )),
            addressed(row(
                "A1b a command word with more text is a prompt",
                "stop using tabs",
                prompt("stop using tabs", None, vec![]),
            )),
            addressed(row(
                "A1b prose is a prompt",
                "fix the tests",
                prompt("fix the tests", None, vec![]),
            )),
            Row {
                attachments: vec![image("image/png", Some(10))],
                ..addressed(row(
                    "A1b addressed picture without text is a prompt, not help",
                    "",
                    prompt(
                        ATTACHMENT_FALLBACK_PROMPT,
                        None,
                        vec![image("image/png", Some(10))],
                    ),
                ))
            },
            direct(addressed(row(
                "DM: a bare command word stays a prompt",
                "status",
                prompt("status", None, vec![]),
            ))),
            direct(addressed(row(
                "DM: empty stays ignored",
                " ",
                Route::Ignore(IgnoreReason::Empty),
            ))),
            row(
                "unaddressed group word is not a command",
                "status",
                Route::Ignore(IgnoreReason::Unaddressed),
            ),
            unpaired(addressed(row(
                "unpaired addressed word still pairs",
                "status",
                Route::Pair,
            ))),
            // A2: nothing to forward.
            direct(row("A2 empty", "   ", Route::Ignore(IgnoreReason::Empty))),
            row(
                "A2 empty unaddressed",
                "",
                Route::Ignore(IgnoreReason::Empty),
            ),
            // A3: paired but the message is not for the bot.
            row(
                "A3 unaddressed chatter",
                "lunch?",
                Route::Ignore(IgnoreReason::Unaddressed),
            ),
            // A4: attachment problems.
            Row {
                attachments: vec![image("image/png", None)],
                accepted: false,
                ..direct(row(
                    "A4 not accepted",
                    "look",
                    Route::Unsupported(UnsupportedFeature::Attachments),
                ))
            },
            Row {
                attachments: vec![image("image/png", None); 5],
                ..direct(row(
                    "A4 too many",
                    "",
                    Route::Unsupported(UnsupportedFeature::AttachmentTooMany),
                ))
            },
            // A file that is not an image goes to the inbox, with a prompt that says so,
            // even when the agent takes no images.
            Row {
                attachments: vec![image("application/pdf", None)],
                accepted: false,
                ..direct(row(
                    "A5 a file for the inbox",
                    "",
                    prompt(
                        inbox::FILES_FALLBACK_PROMPT,
                        None,
                        vec![image("application/pdf", None)],
                    ),
                ))
            },
            Row {
                attachments: vec![image("image/png", Some(8 * 1024 * 1024 + 1))],
                ..direct(row(
                    "A4 too large",
                    "",
                    Route::Unsupported(UnsupportedFeature::AttachmentTooLarge),
                ))
            },
            // A5: prompts.
            direct(row(
                "A5 idle",
                "fix the tests",
                prompt("fix the tests", None, vec![]),
            )),
            Row {
                busy: true,
                ..direct(row(
                    "A5 busy",
                    "fix the tests",
                    prompt("fix the tests", Some(DeliverAs::FollowUp), vec![]),
                ))
            },
            row(
                "A5 mention stripped",
                "@piBot, fix the tests",
                prompt("fix the tests", None, vec![]),
            ),
            row(
                "A5 prefix without a known command",
                "/deploy prod",
                prompt("/deploy prod", None, vec![]),
            ),
            row(
                "A5 mention then prose starting with an alias",
                "@piBot continue with the refactor",
                prompt("continue with the refactor", None, vec![]),
            ),
            Row {
                attachments: vec![image("image/png", Some(10))],
                ..direct(row(
                    "A5 image without text",
                    "",
                    prompt(
                        ATTACHMENT_FALLBACK_PROMPT,
                        None,
                        vec![image("image/png", Some(10))],
                    ),
                ))
            },
        ];
        let config = BridgeConfig {
            bot_username: Some("piBot".into()),
            ..BridgeConfig::default()
        };
        for r in rows {
            let envelope = Envelope {
                transport: "telegram".into(),
                conversation_id: "c1".into(),
                user_id: "42".into(),
                text: r.text.into(),
                is_direct: r.is_direct,
                addressed: r.addressed,
                attachments: r.attachments,
                ..Envelope::default()
            };
            let input = RouteInput {
                envelope: &envelope,
                config: &config,
                authenticated: r.authenticated,
                pending: r.pending.as_ref(),
                busy: r.busy,
                attachments_accepted: r.accepted,
                transport_fetches: true,
                now: 1_500,
            };
            assert_eq!(route(&input), r.expected, "{}", r.name);
        }
    }

    #[test]
    fn texts_over_the_inbound_cap_are_refused_after_the_addressing_check() {
        let config = BridgeConfig {
            max_inbound_chars: 5,
            ..BridgeConfig::default()
        };
        // (text, direct, expected)
        let rows = [
            ("héllo", true, prompt("héllo", None, vec![])),
            ("héllo!", true, Route::TooLong { chars: 6, limit: 5 }),
            // Surrounding whitespace is not counted: it is not forwarded either.
            ("  abcde  ", true, prompt("abcde", None, vec![])),
            // Unaddressed chatter stays ignored, however long: no reply to a channel.
            (
                "lunch today?",
                false,
                Route::Ignore(IgnoreReason::Unaddressed),
            ),
            // A command is answered whatever its length.
            (
                "/status now",
                true,
                command_with(RemoteCommand::Status, "now"),
            ),
        ];
        for (text, is_direct, expected) in rows {
            let envelope = Envelope {
                text: text.into(),
                is_direct,
                ..Envelope::default()
            };
            let input = RouteInput {
                envelope: &envelope,
                config: &config,
                authenticated: true,
                pending: None,
                busy: false,
                attachments_accepted: true,
                transport_fetches: true,
                now: 0,
            };
            assert_eq!(route(&input), expected, "{text:?}");
        }
    }

    fn command_with(command: RemoteCommand, args: &str) -> Route {
        Route::Command(ParsedCommand {
            command,
            args: args.to_string(),
        })
    }

    #[test]
    fn an_unpaired_senders_backlog_older_than_the_pairing_window_is_not_answered() {
        let config = BridgeConfig::default();
        let now = 1_700_000_000_000;
        let ttl = config.pairing_ttl_ms;
        // (timestamp, authenticated, expected)
        let rows = [
            (
                now - ttl - 1,
                false,
                Route::Ignore(IgnoreReason::StaleUnpaired),
            ),
            (now - ttl, false, Route::Pair),
            (now - 1_000, false, Route::Pair),
            // From the future (a fast clock elsewhere): not stale.
            (now + 60_000, false, Route::Pair),
            // Paired senders get their backlog answered, however old.
            (now - 10 * ttl, true, prompt("hello", None, vec![])),
            // Not milliseconds (seconds, or unknown): never taken for stale.
            (1_700_000_000, false, Route::Pair),
            (0, false, Route::Pair),
        ];
        for (timestamp, authenticated, expected) in rows {
            let envelope = Envelope {
                text: "hello".into(),
                is_direct: true,
                timestamp_ms: timestamp,
                ..Envelope::default()
            };
            let input = RouteInput {
                envelope: &envelope,
                config: &config,
                authenticated,
                pending: None,
                busy: false,
                attachments_accepted: true,
                transport_fetches: true,
                now,
            };
            assert_eq!(route(&input), expected, "{timestamp} {authenticated}");
        }
    }

    #[test]
    fn addressing_not_required_lets_chatter_through() {
        let config = BridgeConfig {
            require_addressing: false,
            busy_delivery: DeliverAs::Steer,
            ..BridgeConfig::default()
        };
        let envelope = Envelope {
            text: "lunch?".into(),
            ..Envelope::default()
        };
        let mut input = RouteInput {
            envelope: &envelope,
            config: &config,
            authenticated: true,
            pending: None,
            busy: true,
            attachments_accepted: true,
            transport_fetches: true,
            now: 0,
        };
        assert_eq!(
            route(&input),
            prompt("lunch?", Some(DeliverAs::Steer), vec![])
        );
        input.authenticated = false;
        assert_eq!(route(&input), Route::Pair);
    }

    #[test]
    fn authentication_table() {
        let allow = BridgeConfig {
            allow_users: vec![Identity::new("telegram", "42")],
            ..BridgeConfig::default()
        };
        let open = BridgeConfig {
            require_pairing: false,
            ..BridgeConfig::default()
        };
        let rows = [
            ("telegram", "42", &allow, false, true),
            ("discord", "42", &allow, false, false),
            // A bare user id has no transport, so it never matches a listed identity.
            ("", "42", &allow, false, false),
            ("discord", "7", &open, false, true),
            ("discord", "7", &allow, true, true),
        ];
        for (transport, user, config, trusted, expected) in rows {
            assert_eq!(
                is_authenticated(&Identity::new(transport, user), config, trusted),
                expected,
                "{transport}:{user}"
            );
        }
    }

    #[test]
    fn attachment_problem_order() {
        let settings = BridgeConfig::default().attachments;
        let pdf = image("application/pdf", None);
        let png = image("image/png", None);
        let big = image("image/png", Some(settings.max_bytes + 1));
        // (attachments, images accepted, transport fetches, expected)
        let rows: Vec<(Vec<Attachment>, bool, bool, Option<UnsupportedFeature>)> = vec![
            (
                vec![pdf.clone()],
                true,
                false,
                Some(UnsupportedFeature::Attachments),
            ),
            (
                vec![pdf.clone(); 5],
                true,
                true,
                Some(UnsupportedFeature::AttachmentTooMany),
            ),
            (
                vec![big.clone(), pdf.clone()],
                true,
                true,
                Some(UnsupportedFeature::AttachmentTooLarge),
            ),
            (
                vec![pdf.clone(), big.clone()],
                true,
                true,
                Some(UnsupportedFeature::AttachmentTooLarge),
            ),
            // A file needs only a transport that fetches; an image needs an agent that
            // takes images too.
            (vec![pdf.clone()], false, true, None),
            (
                vec![pdf.clone(), png.clone()],
                false,
                true,
                Some(UnsupportedFeature::Attachments),
            ),
            // A declared size is the inbox's to judge for a file (bridge.inbox.maxFileBytes).
            (
                vec![image("application/pdf", Some(settings.max_bytes + 1))],
                true,
                true,
                None,
            ),
            (
                vec![image("IMAGE/PNG", Some(settings.max_bytes))],
                true,
                true,
                None,
            ),
            (vec![image("image/webp", None); 4], true, true, None),
        ];
        for (attachments, images, fetches, expected) in rows {
            assert_eq!(
                find_attachment_problem(&attachments, images, fetches, &settings),
                expected,
                "{attachments:?} images {images} fetches {fetches}"
            );
        }
    }

    #[test]
    fn unsupported_notices() {
        let rows = [
            (
                UnsupportedFeature::Attachments,
                notices::ATTACHMENTS_UNSUPPORTED_NOTICE,
            ),
            (
                UnsupportedFeature::AttachmentNotImage,
                notices::ATTACHMENT_NOT_AN_IMAGE_NOTICE,
            ),
            (
                UnsupportedFeature::AttachmentTooLarge,
                notices::ATTACHMENT_TOO_LARGE_NOTICE,
            ),
            (
                UnsupportedFeature::AttachmentTooMany,
                notices::ATTACHMENT_TOO_MANY_NOTICE,
            ),
        ];
        for (feature, expected) in rows {
            assert_eq!(feature.notice(), expected);
        }
    }
}
