//! Preview: what the bridge would do with one message, without doing it (`host-shim
//! explain <transport> <payload.json>`).
//!
//! It runs the same router on the same state as [`Bridge::on_envelope`], and stops
//! before any effect: no reply, no pairing code, no save, no rate-limit count. A person
//! debugging "why did the bot not answer?" can feed a captured payload through it
//! without touching the live session.

use super::Bridge;
use crate::core::inbox;
use crate::core::pairing::{self, PairingDecision, PairingOptions, PairingReason};
use crate::core::router::{self, IgnoreReason, Route, RouteInput};
use crate::core::voice;
use crate::host::Host;
use crate::model::{DeliverAs, Envelope};

impl Bridge {
    /// Describes, in lines a person reads, what [`Bridge::on_envelope`] would do.
    pub fn preview_envelope(&self, host: &mut dyn Host, envelope: &Envelope) -> String {
        let identity = envelope.identity();
        let conversation = envelope.conversation_key();
        let now = host.now_ms();
        let trusted = self.state.is_trusted(&identity);
        let authenticated = router::is_authenticated(&identity, &self.config, trusted);
        let pending = self.state.pending(&conversation).cloned();
        let busy = !host.is_idle();
        let pairing_closed = host.pairing_closed_since().is_some();
        // The preview runs outside a live session, where the transport may not be running:
        // assume it takes attachments, so the verdict is about the message, not the host.
        let transport_fetches = self
            .capabilities(&envelope.transport)
            .is_none_or(|c| c.attachments);
        let attachments_accepted = self.session.accepts_images && transport_fetches;
        // Judged as if it arrived now: a payload captured earlier would otherwise always look like
        // stale backlog for an unpaired sender
        // (docs/decisions.md#decision-10-telegrams-backlog-is-answered-but-not-a-stale-one-for-strangers).
        let arriving = Envelope {
            timestamp_ms: now,
            ..envelope.clone()
        };
        let route = router::route(&RouteInput {
            envelope: &arriving,
            config: &self.config,
            authenticated,
            pending: pending.as_ref(),
            busy,
            attachments_accepted,
            transport_fetches,
            now,
        });
        let mut lines = vec![
            format!("conversation: {conversation}{}", thread(envelope)),
            format!(
                "sender: {identity} ({})",
                if trusted {
                    "paired"
                } else if authenticated {
                    "trusted by config"
                } else {
                    "not paired"
                }
            ),
            format!(
                "{}, {}",
                if envelope.is_direct {
                    "direct message"
                } else {
                    "group or channel message"
                },
                if envelope.addressed {
                    "addresses the bot"
                } else {
                    "does not address the bot"
                }
            ),
        ];
        if self.state.is_paused(&conversation) {
            lines.push("delivery in this conversation is paused".into());
        }
        let verdict = match route {
            Route::Ignore(IgnoreReason::Empty) => {
                "ignored: there is no text or attachment to forward".to_string()
            }
            Route::Ignore(IgnoreReason::Unaddressed) => "ignored: a group message that does not \
                 address the bot (mention it, reply to it, or start with a command prefix)"
                .to_string(),
            Route::Ignore(IgnoreReason::StaleUnpaired) => "ignored: the sender is not paired \
                 and the message is older than the pairing window (bridge.pairingTtlMs), so \
                 no code would be made for it"
                .to_string(),
            // As `on_envelope` does: a press is never a pairing attempt, and one that may
            // not decide is refused to the presser alone.
            Route::Pair if envelope.press.is_some() => PRESS_REFUSED.to_string(),
            Route::Command(parsed)
                if envelope.press.is_some()
                    && parsed.command.decides()
                    && !self.may_decide(&identity) =>
            {
                PRESS_REFUSED.to_string()
            }
            Route::Pair if pairing_closed && !self.trust.terminal_codes.contains(&conversation) => {
                "pairing: closed after too many wrong codes (bridge.pairingMaxFailuresPerHour); \
                 the text would not be checked against any code"
                    .to_string()
            }
            Route::Pair => {
                let options = PairingOptions::from_config(&self.config);
                // Deciding draws nothing: the preview never makes a real code, only says one
                // would be made.
                let decision =
                    pairing::decide_pairing(pending.as_ref(), &envelope.text, now, &options);
                match decision {
                    PairingDecision::Trust => {
                        "pairing: the text matches the live code, so the sender would be paired"
                            .to_string()
                    }
                    PairingDecision::Keep { reason, .. } | PairingDecision::Issue { reason } => {
                        let what = match reason {
                            PairingReason::New => "a new code would be shown in the local terminal",
                            PairingReason::Expired => {
                                "the code expired, so a new one would be shown in the local terminal"
                            }
                            PairingReason::Locked => {
                                "too many wrong codes, so a new one would be shown in the local terminal"
                            }
                            PairingReason::Awaiting => {
                                "a live code waits to be typed; the chat would be reminded"
                            }
                            PairingReason::Mismatch => "it would count as a wrong code",
                            PairingReason::Reissued => {
                                "the code was replaced at restart; the chat would be told so"
                            }
                        };
                        format!("pairing: the sender is not paired; {what}")
                    }
                }
            }
            Route::Command(parsed) => format!(
                "command: /{} (answered even while the agent works)",
                parsed.command.name()
            ),
            Route::TooLong { chars, limit } => format!(
                "refused: {chars} characters, over bridge.maxInboundChars ({limit}); the chat \
                 would be told the limit and nothing forwarded"
            ),
            Route::Unsupported(feature) => format!(
                "refused attachments; the chat would be told: {}",
                feature.notice()
            ),
            Route::Prompt {
                deliver_as,
                attachments,
                ..
            } => {
                let when = match deliver_as {
                    None => "now (the agent is idle)",
                    Some(DeliverAs::Steer) => "as a steer (the agent is busy)",
                    Some(_) => "as a follow-up (the agent is busy)",
                };
                let paused = if self.state.is_paused(&conversation) {
                    ", but delivery is paused here so it would not be forwarded"
                } else {
                    ""
                };
                let voices: Vec<&crate::model::Attachment> =
                    attachments.iter().filter(|a| voice::is_voice(a)).collect();
                let files: Vec<&crate::model::Attachment> = attachments
                    .iter()
                    .filter(|a| {
                        !voice::is_voice(a) && !inbox::is_model_image(a, &self.config.attachments)
                    })
                    .collect();
                let images = attachments.len() - files.len() - voices.len();
                let used = self.state.inbox.used_on(inbox::day_of(now));
                let refusal = voices
                    .iter()
                    .find_map(|v| voice::voice_problem(v, &envelope.transport, &self.config.voice))
                    .or_else(|| {
                        inbox::files_problem(&files, &envelope.transport, &self.config.inbox, used)
                    });
                match refusal {
                    Some(notice) => format!(
                        "refused the file(s) before downloading; the chat would be told: {notice}"
                    ),
                    None => {
                        let mut line = format!(
                            "prompt: forwarded to the agent {when} with {} attachment(s){paused}",
                            attachments.len()
                        );
                        if images > 0 {
                            line.push_str(&format!(
                                "\n  {images} image(s) for the model, re-checked on the bytes served"
                            ));
                        }
                        for note in &voices {
                            let engine = match &self.config.voice.engine {
                                Some(crate::model::VoiceEngine::Http { model, .. }) => {
                                    format!("the OpenAI-compatible endpoint ({model})")
                                }
                                _ => "the local command".to_owned(),
                            };
                            line.push_str(&format!(
                                "\n  voice note ({}{}) transcribed by {engine}; the transcript \
                                 echoed to the chat first, then sent as transcribed speech",
                                note.media_type,
                                note.duration_seconds
                                    .map(|s| format!(", {s} s"))
                                    .unwrap_or_default(),
                            ));
                        }
                        for file in &files {
                            line.push_str(&format!(
                                "\n  file {} ({}{}) saved as {}{}, its path added to the prompt",
                                inbox::shown_name(file),
                                file.media_type,
                                file.size_bytes
                                    .map(|s| format!(", {}", inbox::size_text(s)))
                                    .unwrap_or_default(),
                                self.config.inbox.dir.trim_end_matches('/').to_owned() + "/",
                                inbox::file_name(file),
                            ));
                        }
                        line
                    }
                }
            }
        };
        lines.push(verdict);
        lines.join("\n")
    }
}

/// The verdict on a press by someone who may not answer approvals or questions.
const PRESS_REFUSED: &str = "refused: a button press by someone who may not answer approvals or \
     questions decides nothing; only the presser would be told why (privately where the \
     platform allows), and no pairing code would be made";

/// `, thread <id>` when the message is in one.
fn thread(envelope: &Envelope) -> String {
    envelope
        .thread_id
        .as_deref()
        .map(|id| format!(", thread {id}"))
        .unwrap_or_default()
}
