//! The outbox (docs/decisions.md#decision-12-an-outbox-per-conversation): when a platform asks the
//! bridge to wait (`retry_after`), the rest of that send and everything after it for the same
//! conversation wait in order and go out once the wait is over. Progress cards keep their own retry
//! (an edit that waits is replaced by the newer card text, never queued twice). A reply the person
//! is owed is never dropped silently: if the platform keeps refusing, the terminal is told.

use std::collections::{BTreeMap, VecDeque};

use super::Bridge;
use super::delivery::log_send_failure;
use crate::core::state::ConversationTarget;
use crate::host::Host;
use crate::keys::ConversationKey;
use crate::model::{Level, Outbound, OutboundKind, SendError};

/// Rate limits in a row one conversation may meet before its waiting messages are given up:
/// a platform that keeps saying "later" for minutes is not going to take them.
const MAX_WAITS: u32 = 5;

/// Messages waiting per conversation key (`transport:conversationId`).
#[derive(Debug, Default)]
pub(super) struct Outbox {
    queues: BTreeMap<ConversationKey, Queue>,
}

#[derive(Debug)]
struct Queue {
    target: ConversationTarget,
    /// Nothing is sent to the conversation before this time.
    not_before: u64,
    /// Rate limits met in a row.
    waits: u32,
    messages: VecDeque<Outbound>,
}

impl Outbox {
    /// Whether messages wait for the conversation `key`: a new send must queue behind them,
    /// or it would overtake them.
    pub(super) fn is_waiting(&self, key: &ConversationKey) -> bool {
        self.queues.contains_key(key)
    }

    /// Queues `messages` for `target` behind what already waits; `not_before` is when the
    /// platform said it may be sent again (the later of the old and new waits counts).
    pub(super) fn hold(
        &mut self,
        target: &ConversationTarget,
        messages: impl IntoIterator<Item = Outbound>,
        not_before: u64,
    ) {
        let queue = self.queues.entry(target.key()).or_insert_with(|| Queue {
            target: target.clone(),
            not_before,
            waits: 0,
            messages: VecDeque::new(),
        });
        queue.not_before = queue.not_before.max(not_before);
        queue.messages.extend(messages);
    }

    /// Empties the outbox; returns, per conversation key, how many replies were still
    /// waiting (conversations with none are left out).
    pub(super) fn drain_replies(&mut self) -> Vec<(ConversationKey, usize)> {
        std::mem::take(&mut self.queues)
            .into_iter()
            .map(|(key, q)| {
                let replies = q
                    .messages
                    .iter()
                    .filter(|m| m.kind == OutboundKind::Reply)
                    .count();
                (key, replies)
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// The earliest time a waiting queue may send again.
    pub(super) fn next_due(&self) -> Option<u64> {
        self.queues.values().map(|q| q.not_before).min()
    }
}

impl Bridge {
    /// Sends every waiting message whose wait is over, in order per conversation.
    pub(super) fn flush_outbox(&mut self, host: &mut dyn Host) {
        let now = host.now_ms();
        let due: Vec<ConversationKey> = self
            .delivery
            .outbox
            .queues
            .iter()
            .filter(|(_, q)| q.not_before <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.flush_queue(host, &key, now);
        }
        self.request_ticks(host);
    }

    fn flush_queue(&mut self, host: &mut dyn Host, key: &ConversationKey, now: u64) {
        let mut owed_reply_failed = None;
        loop {
            let Some(queue) = self.delivery.outbox.queues.get_mut(key) else {
                return;
            };
            let Some(message) = queue.messages.front() else {
                self.delivery.outbox.queues.remove(key);
                break;
            };
            match host.send(message) {
                Ok(_) => {
                    // Every message here waited for a platform's rate limit once at least:
                    // the operator's count of deliveries that needed a retry.
                    host.log(
                        Level::Info,
                        "outbound sent after waiting",
                        &[
                            ("transport", queue.target.transport.clone()),
                            ("kind", message.kind.as_str().into()),
                        ],
                    );
                    queue.messages.pop_front();
                    queue.waits = 0;
                }
                Err(SendError::RateLimited(wait)) => {
                    queue.waits += 1;
                    if queue.waits < MAX_WAITS {
                        queue.not_before = now.saturating_add(wait);
                        break;
                    }
                    let error = SendError::RateLimited(wait);
                    if queue.messages.iter().any(|m| m.kind == OutboundKind::Reply) {
                        owed_reply_failed = Some(error.to_string());
                    }
                    log_send_failure(host, &queue.target, message.kind, &error);
                    self.delivery.outbox.queues.remove(key);
                    break;
                }
                Err(error) => {
                    // One refused message (the chat is gone, the text was rejected) does
                    // not hold back the ones after it.
                    log_send_failure(host, &queue.target, message.kind, &error);
                    if message.kind == OutboundKind::Reply {
                        owed_reply_failed = Some(error.to_string());
                    }
                    queue.messages.pop_front();
                }
            }
        }
        if let Some(error) = owed_reply_failed {
            host.notify(
                Level::Warning,
                &format!("The reply could not be delivered to {key}: {error}"),
            );
        }
    }

    /// Asks for one tick at the earliest moment anything waits: a throttled card or a queue.
    /// The host keeps only the latest request, so every need is folded into one.
    pub(super) fn request_ticks(&mut self, host: &mut dyn Host) {
        if let Some(at) = [
            self.delivery.card_tick,
            self.delivery.outbox.next_due(),
            self.trust.stranger_notices.due(),
            self.pending.approvals.next_deadline(),
            self.pending.questions.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
        {
            host.request_tick(at);
        }
    }
}
