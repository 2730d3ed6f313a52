//! The one place an import call meets the transcript. What the guest asked is noted
//! before the call; the answer comes from the recorded script in a replay (never from the
//! world) and from the live host otherwise; the answer is noted after. Import functions
//! say what to note and what the live call is, and none records by hand: a new import
//! cannot forget one half, and replay cannot reach a messenger by a path nobody taped.

use crate::local::logging::LogLine;
use crate::transcript::Transcript;
use crate::transcript::line::Event;
use crate::transcript::script::Script;
use crate::wit::types;

use super::{SessionContext, SessionHost};

impl SessionContext {
    /// Records `event` in the transcript, if there is one (`event` is only built then).
    /// A transcript that cannot be written says so once in the log and stops; the
    /// session goes on.
    pub fn record(&self, event: impl FnOnce() -> Event) {
        self.record_with(event, Transcript::record);
    }

    /// Records an input about to go into the guest; the clock reads it makes while
    /// handling it are counted from here.
    pub fn record_input(&self, event: impl FnOnce() -> Event) {
        self.record_with(event, Transcript::record_input);
    }

    /// The time the guest is shown: the clock, whose reads a recording transcript notes
    /// (only those that moved on within an input); in replay, what the recorded run
    /// showed at the same read of the same input.
    pub fn guest_now_ms(&mut self) -> u64 {
        let now = self.clock.now_ms();
        if let Some(script) = self.script.as_mut() {
            return script.now(now);
        }
        if let Some(transcript) = &self.transcript {
            let error = transcript.clock_read(now);
            self.stopped(error);
        }
        now
    }

    fn record_with(
        &self,
        event: impl FnOnce() -> Event,
        write: impl FnOnce(&Transcript, u64, Event) -> Option<String>,
    ) {
        let Some(transcript) = &self.transcript else {
            return;
        };
        let error = write(transcript, self.clock.now_ms(), event());
        self.stopped(error);
    }

    /// Says in the log why the transcript stopped, the one time writing it fails.
    fn stopped(&self, error: Option<String>) {
        if let Some(error) = error {
            self.log.write(
                &self.key,
                LogLine {
                    level: types::Level::Warning,
                    event: "transcript stopped".into(),
                    fields: vec![("error".into(), error)],
                },
            );
        }
    }
}

impl SessionHost {
    /// An awaited call: `asked` noted before, the answer from the script in a replay or
    /// from `live`, `answered` noted after.
    pub(super) async fn exchange<T>(
        &mut self,
        asked: impl FnOnce() -> Event,
        replayed: impl FnOnce(&mut Script) -> T,
        live: impl AsyncFnOnce(&mut SessionHost) -> T,
        answered: impl FnOnce(&T) -> Event,
    ) -> T {
        self.ctx.record(asked);
        self.answer(replayed, live, answered).await
    }

    /// An awaited call whose question needs no note (its answer is all a replay reads).
    pub(super) async fn answer<T>(
        &mut self,
        replayed: impl FnOnce(&mut Script) -> T,
        live: impl AsyncFnOnce(&mut SessionHost) -> T,
        answered: impl FnOnce(&T) -> Event,
    ) -> T {
        let answer = match self.ctx.script.as_mut() {
            Some(script) => replayed(script),
            None => live(self).await,
        };
        self.ctx.record(|| answered(&answer));
        answer
    }

    /// A call that does not wait, answered by the script in a replay or by `live`.
    pub(super) fn answer_now<T>(
        &mut self,
        replayed: impl FnOnce(&mut Script) -> T,
        live: impl FnOnce(&mut SessionHost) -> T,
        answered: impl FnOnce(&T) -> Event,
    ) -> T {
        let answer = match self.ctx.script.as_mut() {
            Some(script) => replayed(script),
            None => live(self),
        };
        self.ctx.record(|| answered(&answer));
        answer
    }

    /// A one-way call: noted, then done. Replay does it too: its host has no messenger or
    /// agent to reach, and what the call changes (a tick asked for, a lock let go) is what
    /// the replayed run must see.
    pub(super) fn note(&mut self, event: impl FnOnce() -> Event) {
        self.ctx.record(event);
    }
}
