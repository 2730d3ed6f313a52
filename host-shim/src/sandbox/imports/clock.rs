//! `clock`: the time the guest is shown, and the tick it asks for.

use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::transcript::line::Event;
use crate::wit::clock;

/// What the clock's calls may touch: the tick the guest asked for (time itself is the
/// tape's, which a replay answers).
pub struct ClockPart<'a> {
    tick_at: &'a mut Option<u64>,
}

/// The clock interface's view, for the linker.
pub struct ClockImports;

impl HasData for ClockImports {
    type Data<'a> = Imports<'a, ClockPart<'a>>;
}

impl SessionContext {
    /// The clock interface's view of this session.
    pub fn clock_imports(&mut self) -> Imports<'_, ClockPart<'_>> {
        imports!(
            self,
            ClockPart {
                tick_at: &mut self.tick_at
            }
        )
    }

    /// The time the guest is shown (see [`super::tape::Tape::guest_now_ms`]).
    pub fn guest_now_ms(&mut self) -> u64 {
        self.clock_imports().tape.guest_now_ms()
    }
}

impl clock::Host for Imports<'_, ClockPart<'_>> {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.tape.guest_now_ms())
    }

    fn request_tick(&mut self, at_ms: u64) -> wasmtime::Result<()> {
        self.tape.record(|| Event::RequestTick { at_ms });
        *self.part.tick_at = Some(at_ms);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::local::clock::ManualClock;
    use crate::sandbox::imports::SessionHost;
    use crate::sandbox::imports::fixture::{NOW, host};
    use crate::transcript::Transcript;
    use crate::transcript::script::Script;

    /// A recorded run shows the guest the live clock, as an unrecorded one does, and
    /// replay shows it the same time at the same read: a read that moved on by 1 ms
    /// under load (a tick asked for 1 ms later) once made replay differ.
    #[test]
    fn replay_shows_the_guest_each_time_the_recorded_run_showed_read_by_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut host = host(dir.path());
        let clock = Arc::new(ManualClock::new(NOW));
        host.ctx.clock = clock.clone();
        let transcript = Transcript::in_memory("t", "", NOW);
        host.ctx.transcript = Some(transcript.clone());
        let shown = |host: &mut SessionHost| {
            clock::Host::now_ms(&mut host.ctx.clock_imports()).expect("now_ms")
        };

        let mut live = Vec::new();
        for moves in [[0, 1, 0], [2, 0, 3]] {
            host.ctx.record_input(|| Event::Tick);
            for ms in moves {
                clock.advance(ms);
                live.push(shown(&mut host));
            }
        }
        assert_eq!(live, [NOW, NOW + 1, NOW + 1, NOW + 3, NOW + 3, NOW + 6]);

        let lines = transcript.lines();
        let inputs: Vec<u64> = lines
            .iter()
            .filter(|line| line.dir == crate::transcript::line::Dir::In)
            .map(|line| line.at)
            .collect();
        host.ctx.transcript = None;
        host.ctx.script = Some(Box::new(Script::new(lines.iter().map(|line| &line.event))));
        let mut replayed = Vec::new();
        for at in inputs {
            // The replay clock stands at each input's recorded time.
            clock.set(at);
            host.ctx.script.as_mut().expect("script").next_input();
            for _ in 0..3 {
                replayed.push(shown(&mut host));
            }
        }
        assert_eq!(replayed, live);
    }
}
