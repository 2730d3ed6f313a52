//! Sending: every outbound body goes through the pipeline (redact, split, render,
//! chunk, cap) before it reaches a transport, and a failed send is isolated (I30).

use super::Bridge;
use crate::core::outbound;
use crate::core::state::ConversationTarget;
use crate::host::Host;
use crate::model::{Button, Level, Outbound, OutboundKind, Receipt, SendError};

/// What became of one send.
#[derive(Debug)]
pub(super) enum Delivery {
    /// Posted now; the first message's receipt (the handle for later edits).
    Sent(Receipt),
    /// Waiting in the outbox for the platform's rate limit to pass.
    Queued,
    /// Nothing to send (the text was blank once rendered).
    Empty,
}

impl Bridge {
    /// Sends `text` to one conversation through the pipeline. Only the first message
    /// carries `edit_key`.
    ///
    /// Progress cards report a rate limit to their caller, which retries with the newest
    /// card text. Everything else waits in the outbox when the platform asks for a pause,
    /// and queues behind what already waits there, so messages never overtake each other.
    pub(super) fn deliver(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        kind: OutboundKind,
        text: &str,
        edit_key: Option<String>,
    ) -> Result<Delivery, SendError> {
        self.deliver_with_buttons(host, target, kind, text, edit_key, &[])
    }

    /// [`Self::deliver`] with `buttons` under the first message only. The first message's
    /// receipt is the one handed back, the handle a caller keeps to edit the message later
    /// (an approval to its outcome), so the buttons must ride on exactly that part: on a
    /// later part of a split text they would stay live after the outcome replaced the
    /// first, and a press on them would look like it could still decide.
    pub(super) fn deliver_with_buttons(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        kind: OutboundKind,
        text: &str,
        edit_key: Option<String>,
        buttons: &[Button],
    ) -> Result<Delivery, SendError> {
        self.deliver_parts(host, target, kind, text, edit_key, buttons, None)
    }

    /// [`Self::deliver`] of a new message whose first part replies to the user's message
    /// `reply_to` (the done message to its prompt): the phone shows what it answers and
    /// notifies its sender. Only the first part: one reply is enough to point at it.
    pub(super) fn deliver_replying(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        kind: OutboundKind,
        text: &str,
        reply_to: Option<String>,
    ) -> Result<Delivery, SendError> {
        self.deliver_parts(host, target, kind, text, None, &[], reply_to)
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver_parts(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        kind: OutboundKind,
        text: &str,
        edit_key: Option<String>,
        buttons: &[Button],
        reply_to: Option<String>,
    ) -> Result<Delivery, SendError> {
        let Some(capabilities) = self.capabilities(&target.transport) else {
            host.log(
                Level::Warning,
                "send to a transport that is not running",
                &[
                    ("transport", target.transport.clone()),
                    ("kind", kind.as_str().into()),
                ],
            );
            return Err(SendError::NotRunning);
        };
        let prepared = outbound::prepare(text, &capabilities, self.config.max_chunks);
        if !prepared.redactions.is_empty() {
            // Rule names only, never the match (I36).
            host.log(
                Level::Info,
                "redacted outbound text",
                &[
                    ("transport", target.transport.clone()),
                    ("kind", kind.as_str().into()),
                    ("rules", prepared.redactions.join(",")),
                ],
            );
        }
        let mut edit_key = edit_key;
        let mut messages: Vec<Outbound> = prepared
            .messages
            .into_iter()
            .chain(prepared.truncation_notice)
            .map(|text| Outbound {
                transport: target.transport.clone(),
                conversation_id: target.conversation_id.clone(),
                thread_id: target.thread_id.clone(),
                kind,
                text,
                edit_key: edit_key.take(),
                buttons: Vec::new(),
                answers_press: None,
                reply_to: None,
            })
            .collect();
        let Some(first) = messages.first_mut() else {
            return Ok(Delivery::Empty);
        };
        first.buttons = buttons.to_vec();
        first.reply_to = reply_to;
        let parts = messages.len();
        let mut messages = messages.into_iter();
        let queueable = kind != OutboundKind::Progress;
        if queueable && self.delivery.outbox.is_waiting(&target.key()) {
            self.delivery.outbox.hold(target, messages, 0);
            return Ok(Delivery::Queued);
        }
        let mut first = None;
        let mut index = 0;
        while let Some(message) = messages.next() {
            match host.send(&message) {
                Ok(receipt) => {
                    if index == 0 {
                        first = Some(receipt);
                    }
                }
                Err(SendError::RateLimited(wait)) if queueable => {
                    let not_before = host.now_ms().saturating_add(wait);
                    self.delivery.outbox.hold(
                        target,
                        std::iter::once(message).chain(messages),
                        not_before,
                    );
                    self.request_ticks(host);
                    return Ok(first.map_or(Delivery::Queued, Delivery::Sent));
                }
                Err(error) => {
                    log_send_failure(host, target, kind, &error);
                    // The first message decides whether the caller may fall back (an edit
                    // that was refused); later pieces of a reply are reported, not retried.
                    if index == 0 {
                        return Err(error);
                    }
                    // The caller hears "sent" (the first part landed), so a later part of
                    // a reply lost here must be reported now or it is missing without a
                    // word: the log alone is not seen by the person.
                    if kind == OutboundKind::Reply {
                        host.notify(
                            Level::Warning,
                            &format!(
                                "Part {} of {parts} of the reply could not be delivered to {}: {error}",
                                index + 1,
                                target.key()
                            ),
                        );
                    }
                }
            }
            index += 1;
        }
        Ok(first.map_or(Delivery::Empty, Delivery::Sent))
    }

    /// Answers in the conversation an envelope came from. A failure is logged by
    /// `deliver` and goes no further: one chat's failure never stops a turn (I30).
    pub(super) fn reply(&mut self, host: &mut dyn Host, target: &ConversationTarget, text: &str) {
        let _ = self.deliver(host, target, OutboundKind::Notice, text, None);
    }

    /// Answers a button press with `text` for the presser's eyes only (Telegram's press
    /// notification, Discord's ephemeral follow-up, Slack's `chat.postEphemeral`), or
    /// replies in the conversation when `press` is `None` (a typed command).
    ///
    /// Why: the bridge's refusal of a press (an unpaired or untrusted clicker) concerns the
    /// clicker alone, and in a group an ordinary reply would show everyone who tried.
    /// Where the transport cannot answer privately (no such platform feature, or the press
    /// is too old for it) the answer is said in the conversation instead, as a typed
    /// command's would be: a refusal nobody hears would leave the clicker pressing again.
    pub(super) fn answer_press(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        press: Option<&str>,
        text: &str,
    ) {
        let Some(press) = press else {
            self.reply(host, target, text);
            return;
        };
        let Some(capabilities) = self.capabilities(&target.transport) else {
            self.reply(host, target, text);
            return;
        };
        // Rendered like any message (redacted, within the platform's limit); a refusal is
        // one short message, so only the first part goes and the platform cuts the rest.
        let prepared = outbound::prepare(text, &capabilities, 1);
        let Some(first) = prepared.messages.into_iter().next() else {
            return;
        };
        let message = Outbound {
            transport: target.transport.clone(),
            conversation_id: target.conversation_id.clone(),
            thread_id: target.thread_id.clone(),
            kind: OutboundKind::Notice,
            text: first,
            edit_key: None,
            buttons: Vec::new(),
            answers_press: Some(press.to_owned()),
            reply_to: None,
        };
        if let Err(error) = host.send(&message) {
            host.log(
                Level::Info,
                "press answered in the conversation",
                &[
                    ("transport", target.transport.clone()),
                    ("error", error.to_string()),
                ],
            );
            self.reply(host, target, text);
        }
    }

    /// Sends `text` to each of `targets` (from [`Self::audience`] or [`Self::followers`], never
    /// every remembered chat: docs/security.md#who-sees-what), with `buttons` under it; returns how
    /// many received it.
    pub(super) fn publish_to(
        &mut self,
        host: &mut dyn Host,
        targets: &[ConversationTarget],
        kind: OutboundKind,
        text: &str,
        buttons: &[Button],
    ) -> usize {
        let mut delivered = 0;
        for target in targets {
            match self.deliver_with_buttons(host, target, kind, text, None, buttons) {
                // Waiting in the outbox counts: it goes out once the platform allows.
                Ok(Delivery::Sent(_) | Delivery::Queued) => delivered += 1,
                Ok(Delivery::Empty) => {}
                // A reply the person was owed is never dropped silently: the terminal
                // hears about it (docs/decisions.md#decision-12-an-outbox-per-conversation).
                Err(error) if kind == OutboundKind::Reply => host.notify(
                    Level::Warning,
                    &format!(
                        "The reply could not be delivered to {}: {error}",
                        target.key()
                    ),
                ),
                Err(_) => {}
            }
        }
        delivered
    }
}

/// The log line for a refused send: where, what kind, and the platform's error (never the text).
pub(super) fn log_send_failure(
    host: &mut dyn Host,
    target: &ConversationTarget,
    kind: OutboundKind,
    error: &SendError,
) {
    host.log(
        Level::Warning,
        "outbound send failed",
        &[
            ("transport", target.transport.clone()),
            ("kind", kind.as_str().into()),
            ("error", error.to_string()),
        ],
    );
}
