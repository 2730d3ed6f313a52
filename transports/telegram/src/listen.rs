//! The long-poll loop: `getUpdates` → normalize → hand on → confirm, for as long as the
//! transport runs.
//!
//! Delivery is at least once and in order, and never twice across restarts:
//! - An update is confirmed to Telegram only by the next `getUpdates` whose `offset` is
//!   past it, and that offset moves only after the session has *handled* the envelope
//!   (`deliver_and_wait`), so a crash between fetching and handling loses nothing.
//! - The offset is also written to a small file (atomically, mode 0600) before the next
//!   poll, so a restart does not get the last handled batch again.
//! - Updates the bridge does not want (edits, unknown kinds, other bots) still move the
//!   offset, or the poll would get them back for ever.
//!
//! Failures: 5xx, timeouts and dropped connections back off with jitter
//! (`transport_core::retry`, reset after a success) and resume. 401, 404, 409 and any other
//! refusal stop the loop, tell the terminal at once (`InboundSink::alert`) and stay in
//! `diagnose`: retrying cannot fix a revoked token or a second poller.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;
use transport_core::http::Failure as _;
use transport_core::jitter::Jitter;
use transport_core::platform::{BotSelf, Normalized};
use transport_core::retry::{Backoff, RetryPolicy};
use transport_core::{Envelope, InboundSink};

use crate::client::ApiError;
use crate::normalize::{TRANSPORT_ID, normalize};
pub use crate::offset::{OFFSET_KEPT, Offset, OffsetStore};
use crate::state::Shared;

/// Milliseconds since the epoch (0 for a clock before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Everything the loop needs; it owns it until it ends.
pub(crate) struct Listener {
    pub(crate) shared: Arc<Shared>,
    pub(crate) me: BotSelf,
    pub(crate) sink: InboundSink,
    pub(crate) offset: Option<Offset>,
    pub(crate) store: Option<OffsetStore>,
    pub(crate) cancel: CancellationToken,
    pub(crate) poll_timeout: Duration,
    pub(crate) reconnect: RetryPolicy,
    pub(crate) jitter: Box<dyn Jitter>,
}

impl Listener {
    /// Runs until stopped, the session goes away, or a failure retrying cannot fix.
    /// `backlog` is what the first poll in `start` already fetched.
    pub(crate) async fn run(mut self, mut batch: Vec<serde_json::Value>) {
        let mut backoff = Backoff::new(self.reconnect);
        loop {
            for update in std::mem::take(&mut batch) {
                if !self.handle(update).await {
                    return;
                }
            }
            let offset = self.offset.and_then(|offset| offset.for_request(now_ms()));
            self.shared.update(|stats| stats.polling(offset));
            let polled = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return,
                polled = self.shared.api.get_updates(offset, self.poll_timeout) => polled,
            };
            let error = match polled {
                Ok(updates) => {
                    backoff.succeeded();
                    batch = updates;
                    continue;
                }
                Err(error) => error,
            };
            if halts(&error) {
                let text = error.to_string();
                self.shared.update(|stats| stats.halted(&text));
                self.sink
                    .alert(TRANSPORT_ID, format!("stopped receiving messages: {text}"));
                return;
            }
            let wait = backoff
                .failed(error.outcome(), self.jitter.as_mut())
                .unwrap_or(self.reconnect.max);
            let failures = backoff.failures();
            self.shared
                .update(|stats| stats.retrying(&error.to_string(), failures));
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Normalizes and hands on one update, then moves the offset past it. False when the
    /// loop must end (stopped, or nobody takes messages any more); the offset then stays
    /// put, so the update comes again next time.
    async fn handle(&mut self, update: serde_json::Value) -> bool {
        let update_id = update.get("update_id").and_then(serde_json::Value::as_i64);
        let normalized = normalize(&update, &self.me);
        // A taken press stays unanswered while the bridge handles it, so the bridge can
        // answer it privately (only once: Telegram takes one answer per query); whatever
        // the bridge left unanswered is answered plainly once it is done.
        let mut held_press = None;
        if let Some(query_id) = callback_query_id(&update) {
            match &normalized {
                Normalized::Message(Envelope {
                    press: Some(press), ..
                }) => {
                    self.shared
                        .presses
                        .remember(press, Instant::now(), query_id);
                    held_press = Some(press.clone());
                }
                Normalized::Message(_) => self.answer_press(query_id, None),
                Normalized::Ignored(reason) => {
                    self.answer_press(query_id, Some(press_refused_text(reason)));
                }
            }
        }
        match normalized {
            Normalized::Message(envelope) => {
                let delivered = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => Err(transport_core::SessionGone),
                    delivered = self.sink.deliver_and_wait(envelope) => delivered,
                };
                if let Some(press) = held_press
                    && let Some(query_id) = self.shared.presses.take(&press, Instant::now())
                {
                    self.answer_press(query_id, None);
                }
                if self.cancel.is_cancelled() {
                    return false;
                }
                if delivered.is_err() {
                    self.shared
                        .update(|stats| stats.halted("the session no longer takes messages"));
                    return false;
                }
                self.shared.update(|stats| stats.received += 1);
            }
            Normalized::Ignored(reason) => {
                self.shared.update(|stats| {
                    stats.ignored += 1;
                    stats.last_skip = Some(reason);
                });
            }
        }
        if let Some(id) = update_id {
            let next = id.saturating_add(1);
            // Ids only grow within a session; a lower one (ids restarted after a quiet
            // week) must not move the offset back over updates already handled.
            if self
                .offset
                .is_none_or(|offset| next > offset.next || offset.for_request(now_ms()).is_none())
            {
                let offset = Offset {
                    next,
                    moved_at_ms: now_ms(),
                };
                self.offset = Some(offset);
                self.shared.remember_offset(offset);
                self.save(offset).await;
            }
        }
        true
    }

    /// Answers a button press so the presser's spinner stops: a refused press with `text`
    /// saying why; a taken one (once the bridge is done with it) without a word, the bridge
    /// having answered in the chat or privately. In its own task, best effort: nothing
    /// waits for it, and a failed answer only leaves a spinner (counted for `diagnose`).
    fn answer_press(&self, query_id: String, text: Option<String>) {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            if let Err(error) = shared
                .api
                .answer_callback_query(&query_id, text.as_deref(), false)
                .await
            {
                let text = error.to_string();
                shared.update(|stats| stats.last_error = Some(text));
            }
        });
    }

    async fn save(&mut self, offset: Offset) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let saved = tokio::task::spawn_blocking(move || store.save(offset))
            .await
            .unwrap_or_else(|_| Err("saving the Telegram offset was interrupted".to_owned()));
        if let Err(error) = saved {
            self.shared.update(|stats| stats.last_error = Some(error));
        }
    }
}

/// The `callback_query.id` of a button press, read from the raw update so that even a
/// press the normalizer cannot read is answered.
fn callback_query_id(update: &serde_json::Value) -> Option<String> {
    update
        .get("callback_query")?
        .get("id")?
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// The notification for a press the bridge does not take: the reason, within the 200
/// characters `answerCallbackQuery` allows.
fn press_refused_text(reason: &str) -> String {
    notification_text(&format!("Not taken: {reason}"))
}

/// `text` within the 200 characters `answerCallbackQuery` allows, cut with `…`.
pub(crate) fn notification_text(text: &str) -> String {
    const MAX_CHARS: usize = 200;
    if text.chars().count() <= MAX_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Failures the loop does not retry: the token, a second poller, a refused request.
pub(crate) fn halts(error: &ApiError) -> bool {
    matches!(
        error,
        ApiError::Unauthorized { .. }
            | ApiError::NotFound { .. }
            | ApiError::Conflict { .. }
            | ApiError::WebhookActive { .. }
            | ApiError::Rejected { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_press_is_told_why_within_telegrams_200_characters() {
        assert_eq!(press_refused_text("a game"), "Not taken: a game");
        let long = press_refused_text(&"x".repeat(500));
        assert_eq!(long.chars().count(), 200);
        assert!(long.ends_with('…'));
        let id = callback_query_id(&serde_json::json!({"callback_query": {"id": "q1"}}));
        assert_eq!(id.as_deref(), Some("q1"));
        assert_eq!(callback_query_id(&serde_json::json!({"message": {}})), None);
    }

    #[test]
    fn an_offset_older_than_telegrams_queue_is_not_sent() {
        let offset = Offset {
            next: 42,
            moved_at_ms: 1_000,
        };
        assert_eq!(offset.for_request(1_000 + 60_000), Some(42));
        let day = u64::try_from(OFFSET_KEPT.as_millis()).expect("fits");
        assert_eq!(offset.for_request(1_000 + day - 1), Some(42));
        assert_eq!(offset.for_request(1_000 + day), None);
        // A clock that went backwards keeps the offset.
        assert_eq!(offset.for_request(0), Some(42));
    }

    #[test]
    fn the_offset_file_round_trips_atomically_with_owner_only_access() {
        let dir = tempfile::tempdir().expect("dir");
        let store = OffsetStore::new(&dir.path().join("state"), "999");
        assert_eq!(store.load(), Ok(None));
        let offset = Offset {
            next: 7,
            moved_at_ms: 123,
        };
        store.save(offset).expect("saved");
        store
            .save(Offset { next: 8, ..offset })
            .expect("saved again");
        assert_eq!(store.load(), Ok(Some(Offset { next: 8, ..offset })));
        assert!(store.path().ends_with("telegram-999.offset.json"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(store.path())
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Only the offset file is left: no temporary files.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("state"))
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn a_damaged_offset_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("dir");
        let store = OffsetStore::new(dir.path(), "999");
        std::fs::write(store.path(), b"{not json").expect("write");
        let error = store.load().expect_err("invalid");
        assert!(error.contains("not valid"), "{error}");
    }
}
