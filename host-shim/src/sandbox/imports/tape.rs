//! The one place an import call meets the transcript. What the guest asked is noted
//! before the call; the answer comes from the recorded script in a replay (never from the
//! world) and from the live host otherwise; the answer is noted after. Import functions
//! say what to note and what the live call is, and none records by hand: a new import
//! cannot forget one half, and replay cannot reach a messenger by a path nobody taped.

use crate::local::clock::Clock;
use crate::local::logging::{LogLine, LogSink};
use crate::transcript::Transcript;
use crate::transcript::line::Event;
use crate::transcript::script::Script;
use crate::wit::types;

use super::SessionContext;

/// The transcript's side of a session, as one interface's calls see it: where calls are
/// noted (a recording) or answered from (a replay), and what noting needs.
pub struct Tape<'a> {
    /// Session key, for the log line that says the transcript stopped.
    pub(super) key: &'a str,
    /// The clock every line is stamped with.
    pub(super) clock: &'a dyn Clock,
    /// Where "transcript stopped" goes.
    pub(super) log: &'a dyn LogSink,
    /// The recording, if this session records.
    pub(super) transcript: Option<&'a Transcript>,
    /// The recorded answers, if this session is a replay.
    pub(super) script: Option<&'a mut Script>,
}

impl Tape<'_> {
    /// Records `event`, if the session records (`event` is only built then). A one-way
    /// call (a tick asked for, a lock let go) is noted so and then done, in a replay too:
    /// what it changes is what the replayed run must see.
    pub fn record(&self, event: impl FnOnce() -> Event) {
        record_with(
            self.key,
            self.clock,
            self.log,
            self.transcript,
            event,
            Transcript::record,
        );
    }

    /// The time the guest is shown: the clock, whose reads a recording transcript notes
    /// (only those that moved on within an input); in replay, what the recorded run
    /// showed at the same read of the same input.
    pub fn guest_now_ms(&mut self) -> u64 {
        let now = self.clock.now_ms();
        if let Some(script) = self.script.as_deref_mut() {
            return script.now(now);
        }
        if let Some(transcript) = self.transcript {
            let error = transcript.clock_read(now);
            stopped(self.key, self.log, error);
        }
        now
    }

    /// This session replays a transcript: calls that would reach the world do not.
    pub fn replaying(&self) -> bool {
        self.script.is_some()
    }
}

impl SessionContext {
    /// Records `event` in the transcript, if there is one (`event` is only built then).
    /// A transcript that cannot be written says so once in the log and stops; the
    /// session goes on.
    pub fn record(&self, event: impl FnOnce() -> Event) {
        self.write(event, Transcript::record);
    }

    /// Records an input about to go into the guest; the clock reads it makes while
    /// handling it are counted from here.
    pub fn record_input(&self, event: impl FnOnce() -> Event) {
        self.write(event, Transcript::record_input);
    }

    fn write(
        &self,
        event: impl FnOnce() -> Event,
        write: impl FnOnce(&Transcript, u64, Event) -> Option<String>,
    ) {
        record_with(
            &self.key,
            &*self.clock,
            &*self.log,
            self.transcript.as_ref(),
            event,
            write,
        );
    }
}

fn record_with(
    key: &str,
    clock: &dyn Clock,
    log: &dyn LogSink,
    transcript: Option<&Transcript>,
    event: impl FnOnce() -> Event,
    write: impl FnOnce(&Transcript, u64, Event) -> Option<String>,
) {
    let Some(transcript) = transcript else {
        return;
    };
    let error = write(transcript, clock.now_ms(), event());
    stopped(key, log, error);
}

/// Says in the log why the transcript stopped, the one time writing it fails.
fn stopped(key: &str, log: &dyn LogSink, error: Option<String>) {
    if let Some(error) = error {
        log.write(
            key,
            LogLine {
                level: types::Level::Warning,
                event: "transcript stopped".into(),
                fields: vec![("error".into(), error)],
            },
        );
    }
}

impl Tape<'_> {
    /// An awaited call: `asked` noted before, the answer from the script in a replay or
    /// from `live` otherwise (built, never polled, in a replay), `answered` noted after.
    pub(super) async fn exchange<T>(
        &mut self,
        asked: impl FnOnce() -> Event,
        replayed: impl FnOnce(&mut Script) -> T,
        live: impl Future<Output = T>,
        answered: impl FnOnce(&T) -> Event,
    ) -> T {
        self.record(asked);
        self.answer(replayed, live, answered).await
    }

    /// An awaited call whose question needs no note (its answer is all a replay reads).
    pub(super) async fn answer<T>(
        &mut self,
        replayed: impl FnOnce(&mut Script) -> T,
        live: impl Future<Output = T>,
        answered: impl FnOnce(&T) -> Event,
    ) -> T {
        let answer = match self.script.as_deref_mut() {
            Some(script) => replayed(script),
            None => live.await,
        };
        self.record(|| answered(&answer));
        answer
    }

    /// A call that does not wait, answered by the script in a replay or by `live`.
    pub(super) fn answer_now<T>(
        &mut self,
        replayed: impl FnOnce(&mut Script) -> T,
        live: impl FnOnce() -> T,
        answered: impl FnOnce(&T) -> Event,
    ) -> T {
        let answer = match self.script.as_deref_mut() {
            Some(script) => replayed(script),
            None => live(),
        };
        self.record(|| answered(&answer));
        answer
    }
}
