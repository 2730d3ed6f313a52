//! Opt-in session transcripts (I42): JSON lines of what came into the bridge,
//! what it did and what the host answered, redacted, without raw payloads, rotated by
//! size; `host-shim replay` runs one through a component build and reports where the
//! effects differ.
//!
//! A transcript holds nothing the state file would not: no token (the bridge's redaction
//! engine runs over every text), no pairing code (masked by shape, see [`scrub`]), no
//! attachment or image bytes (their type and size only), no random bytes a code was made
//! from.

pub mod file;
pub mod line;
pub mod read;
pub mod script;
pub mod scrub;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use file::{RotatingFile, Rotation};
use line::{Event, Line};
use scrub::Scrubber;

/// The environment variable that turns transcripts on: a directory to write them to.
pub const TRANSCRIPT_ENV: &str = "PI_BOT_CONNECT_TRANSCRIPT";

/// A transcript that cannot be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot write a transcript in {dir}: {source}")]
pub struct OpenError {
    /// The directory asked for.
    pub dir: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// The directory transcripts go to: the command line's choice, else
/// `PI_BOT_CONNECT_TRANSCRIPT` (read through `var`); `None` (no transcript) when neither
/// names one. Never on by default: a transcript holds conversations.
pub fn directory(flag: Option<PathBuf>, var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    flag.or_else(|| {
        var(TRANSCRIPT_ENV)
            .filter(|v| !v.trim().is_empty())
            .map(PathBuf::from)
    })
}

/// Where one session's transcript goes. Cheap to clone; every clone writes to the same
/// place in one sequence.
#[derive(Clone)]
pub struct Transcript(Arc<Mutex<Recorder>>);

struct Recorder {
    key: String,
    /// The bridge build, for every header ([`crate::sandbox::runtime::component_digest`]).
    bridge: String,
    seq: u64,
    scrubber: Scrubber,
    sink: Sink,
    /// Writing failed once: the transcript stopped (the session goes on).
    stopped: bool,
    /// Clock reads in the input being handled, and the time the last one showed (the
    /// input's recorded time before any).
    reads: u32,
    shown: u64,
}

enum Sink {
    File(RotatingFile),
    Memory(Vec<Line>),
}

/// The line that opens each file: whose transcript it is and which host wrote it.
fn session_event(scrubber: &Scrubber, key: &str, bridge: &str) -> Event {
    Event::Session {
        key: scrubber.plain(key),
        host: env!("CARGO_PKG_VERSION").to_string(),
        bridge: bridge.to_string(),
    }
}

impl Recorder {
    /// Numbers `event` and writes it; a file that would pass its cap is rotated first,
    /// and the new file starts with a header (so a rotated-out file still says whose it
    /// is), numbered before the line so the sequence stays in file order.
    fn write(&mut self, at: u64, event: Event) -> std::io::Result<()> {
        match &mut self.sink {
            Sink::Memory(lines) => {
                self.seq += 1;
                lines.push(Line::new(self.seq, at, event));
                Ok(())
            }
            Sink::File(file) => {
                let mut line = Line::new(self.seq + 1, at, event);
                let mut text = line.to_json();
                if file.needs_rotation(text.len() as u64 + 1) {
                    file.rotate()?;
                    self.seq += 1;
                    let header = Line::new(
                        self.seq,
                        at,
                        session_event(&self.scrubber, &self.key, &self.bridge),
                    );
                    file.append(&header.to_json())?;
                    line.seq = self.seq + 1;
                    text = line.to_json();
                }
                file.append(&text)?;
                self.seq += 1;
                Ok(())
            }
        }
    }
}

impl Transcript {
    /// Appends to `<dir>/<key as a file name>.jsonl`, rotated at `rotation`, starting with
    /// a header line for this run naming the `bridge` build (empty: unknown).
    pub fn create(
        dir: &Path,
        key: &str,
        bridge: &str,
        rotation: Rotation,
        now_ms: u64,
    ) -> Result<Transcript, OpenError> {
        let error = |source| OpenError {
            dir: dir.to_path_buf(),
            source,
        };
        let file = RotatingFile::open(dir, &file::file_stem(key), rotation).map_err(error)?;
        Transcript::start(key, bridge, Sink::File(file), now_ms).map_err(error)
    }

    /// A transcript kept in memory (replay records the new run's effects in one).
    pub fn in_memory(key: &str, bridge: &str, now_ms: u64) -> Transcript {
        match Transcript::start(key, bridge, Sink::Memory(Vec::new()), now_ms) {
            Ok(transcript) => transcript,
            Err(_) => unreachable!("writing to memory cannot fail"),
        }
    }

    fn start(key: &str, bridge: &str, sink: Sink, now_ms: u64) -> std::io::Result<Transcript> {
        let mut recorder = Recorder {
            key: key.to_string(),
            bridge: bridge.to_string(),
            seq: 0,
            scrubber: Scrubber::default(),
            sink,
            stopped: false,
            reads: 0,
            shown: now_ms,
        };
        let header = session_event(&recorder.scrubber, key, bridge);
        recorder.write(now_ms, header)?;
        Ok(Transcript(Arc::new(Mutex::new(recorder))))
    }

    /// Writes the input `event` at `at`, as [`Transcript::record`]; the clock reads the
    /// bridge makes while handling it are counted from here ([`Transcript::clock_read`]).
    pub fn record_input(&self, at: u64, event: Event) -> Option<String> {
        if let Ok(mut recorder) = self.0.lock() {
            recorder.reads = 0;
            recorder.shown = at;
        }
        self.record(at, event)
    }

    /// Notes that the bridge read the clock and was shown `now_ms`: written only when that
    /// differs from what the input's previous read showed (or the input's own time), so
    /// replay can show the bridge every time it saw, read by read, while most inputs gain
    /// no line. Replay once showed the input's time throughout, and a read that moved on
    /// by 1 ms under load (a tick asked for 1 ms later) made it differ from the run.
    pub fn clock_read(&self, now_ms: u64) -> Option<String> {
        let read = {
            let Ok(mut recorder) = self.0.lock() else {
                return None;
            };
            recorder.reads = recorder.reads.saturating_add(1);
            if recorder.shown == now_ms {
                return None;
            }
            recorder.shown = now_ms;
            recorder.reads
        };
        self.record(now_ms, Event::Clock { read, now_ms })
    }

    /// Writes `event`, scrubbed, as the next line. Returns why, the one time writing
    /// fails: the transcript then stops, and the session goes on without it.
    pub fn record(&self, at: u64, event: Event) -> Option<String> {
        let Ok(mut recorder) = self.0.lock() else {
            return None;
        };
        if recorder.stopped {
            return None;
        }
        let event = recorder.scrubber.event(event);
        match recorder.write(at, event) {
            Ok(()) => None,
            Err(error) => {
                recorder.stopped = true;
                Some(error.to_string())
            }
        }
    }

    /// The lines of an in-memory transcript (empty for a file).
    pub fn lines(&self) -> Vec<Line> {
        match self.0.lock() {
            Ok(recorder) => match &recorder.sink {
                Sink::Memory(lines) => lines.clone(),
                Sink::File(_) => Vec::new(),
            },
            Err(_) => Vec::new(),
        }
    }

    /// Takes the lines an in-memory transcript holds so far (empty for a file).
    pub fn drain(&self) -> Vec<Line> {
        match self.0.lock() {
            Ok(mut recorder) => match &mut recorder.sink {
                Sink::Memory(lines) => std::mem::take(lines),
                Sink::File(_) => Vec::new(),
            },
            Err(_) => Vec::new(),
        }
    }

    /// The file being written (none in memory).
    pub fn path(&self) -> Option<PathBuf> {
        match self.0.lock() {
            Ok(recorder) => match &recorder.sink {
                Sink::File(file) => Some(file.path()),
                Sink::Memory(_) => None,
            },
            Err(_) => None,
        }
    }

    /// Reads the code length from the config files an instance is configured with (replay
    /// does not record its inputs, so it tells its transcript this way).
    pub fn configure(&self, sources: &[crate::wit::session::ConfigSource]) {
        if let Ok(mut recorder) = self.0.lock() {
            recorder.scrubber.configure(sources);
        }
    }

    /// The text replay types for a masked inbound message (see [`Scrubber::unmask`]),
    /// from the codes this transcript's run showed.
    pub fn unmask(&self, text: &str, masked: &[usize], code: Option<usize>) -> String {
        match self.0.lock() {
            Ok(recorder) => recorder.scrubber.unmask(text, masked, code),
            Err(_) => text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_clock_read_that_moved_on_within_its_input_is_written() {
        let transcript = Transcript::in_memory("k", "", 100);
        transcript.drain();
        transcript.record_input(105, Event::Tick);
        transcript.clock_read(105);
        transcript.clock_read(107);
        transcript.clock_read(107);
        transcript.record_input(110, Event::Tick);
        transcript.clock_read(111);
        let written: Vec<Event> = transcript.drain().into_iter().map(|l| l.event).collect();
        assert_eq!(
            written,
            vec![
                Event::Tick,
                Event::Clock {
                    read: 2,
                    now_ms: 107
                },
                Event::Tick,
                Event::Clock {
                    read: 1,
                    now_ms: 111
                },
            ]
        );
    }
}
