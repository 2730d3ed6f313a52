//! The host's recorded answers, handed back to the bridge during replay: the imports ask
//! the script instead of a messenger, the agent, the terminal or the state file, so a
//! replay touches nothing outside the process and runs the same every time.

use std::collections::VecDeque;

use crate::transcript::line::{Dir, Event, FileReadMeta};
use crate::wit::agent::{
    FileReadError, InboxError, OutgoingFile, SessionInfo, SessionReply, WorkFacts,
};
use crate::wit::store::SavedState;
use crate::wit::transport::{FetchedAttachment, Identity, Receipt, SendError};

/// Recorded answers, one queue per import, in recorded order. A queue that runs dry (the
/// new build asks more than the old one did) answers like an idle, empty host, and the
/// effects that follow show the difference.
#[derive(Debug, Default)]
pub struct Script {
    rng: VecDeque<Option<Vec<u8>>>,
    loaded: VecDeque<Option<SavedState>>,
    saved: VecDeque<Result<(), String>>,
    identified: VecDeque<Result<Identity, String>>,
    listened: VecDeque<Result<(), String>>,
    sent: VecDeque<Result<Receipt, SendError>>,
    reacted: VecDeque<Result<(), String>>,
    drafted: VecDeque<Result<(), SendError>>,
    fetched: VecDeque<Result<(String, usize), String>>,
    diagnosed: VecDeque<String>,
    prompted: VecDeque<Result<(), String>>,
    session_replied: VecDeque<Result<SessionReply, String>>,
    inbox_saved: VecDeque<Result<String, InboxError>>,
    files_read: VecDeque<Result<FileReadMeta, FileReadError>>,
    upload_limits: VecDeque<u64>,
    uploads: VecDeque<Result<Receipt, SendError>>,
    transcribed: VecDeque<Result<String, String>>,
    idle: VecDeque<bool>,
    info: VecDeque<SessionInfo>,
    work: VecDeque<WorkFacts>,
    confirmed: VecDeque<bool>,
    acquired: VecDeque<Result<(), String>>,
    /// The clock reads that moved on, per input in recorded order: (read, time shown).
    clock: VecDeque<Vec<(u32, u64)>>,
    /// The input being replayed: its clock reads so far, and what they showed.
    reads: Vec<(u32, u64)>,
    read: u32,
    /// Replaces withheld random bytes: a fixed sequence, so replay is deterministic.
    filler: u64,
    sends: u64,
}

fn hex_decode(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Lower-case hex of `bytes`.
pub fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Script {
    /// The answers among `events`, in order.
    pub fn new<'a>(events: impl IntoIterator<Item = &'a Event>) -> Script {
        let mut script = Script {
            filler: 0x9e37_79b9_7f4a_7c15,
            ..Script::default()
        };
        for event in events {
            if event.dir() == Dir::In {
                script.clock.push_back(Vec::new());
            }
            match event.clone() {
                Event::Clock { read, now_ms } => {
                    if let Some(reads) = script.clock.back_mut() {
                        reads.push((read, now_ms));
                    }
                }
                Event::Rng { bytes, .. } => {
                    script.rng.push_back(bytes.and_then(|h| hex_decode(&h)))
                }
                Event::Loaded { document, queued } => script
                    .loaded
                    .push_back(document.map(|document| SavedState { document, queued })),
                Event::Saved { result } => script.saved.push_back(result),
                Event::Identified { result, .. } => script.identified.push_back(result),
                Event::Listened { result, .. } => script.listened.push_back(result),
                Event::Sent { result } => script.sent.push_back(result),
                Event::Reacted { result } => script.reacted.push_back(result),
                Event::Drafted { result } => script.drafted.push_back(result),
                Event::Fetched { result } => script
                    .fetched
                    .push_back(result.map(|m| (m.media_type, m.bytes))),
                Event::Diagnosed { text, .. } => script.diagnosed.push_back(text),
                Event::Prompted { result } => script.prompted.push_back(result),
                Event::SessionReplied { result } => script.session_replied.push_back(result),
                Event::InboxSaved { result } => script.inbox_saved.push_back(result),
                Event::FileRead { result } => script.files_read.push_back(result),
                Event::UploadLimited { bytes } => script.upload_limits.push_back(bytes),
                Event::UploadSent { result } => script.uploads.push_back(result),
                Event::Transcribed { result } => script.transcribed.push_back(result),
                Event::Idle { idle } => script.idle.push_back(idle),
                Event::Info { info } => script.info.push_back(info),
                Event::Work { facts } => script.work.push_back(facts),
                Event::Confirmed { yes } => script.confirmed.push_back(yes),
                Event::Acquired { result } => script.acquired.push_back(result),
                _ => {}
            }
        }
        script
    }

    /// Replay moves on to the next recorded input: its clock reads are counted from 1.
    pub fn next_input(&mut self) {
        self.reads = self.clock.pop_front().unwrap_or_default();
        self.read = 0;
    }

    /// `clock.now-ms`: what the recorded run showed at this read of this input, which is
    /// the last time a read up to this one moved on to, else the input's own time
    /// (`input_ms`, the replay clock).
    pub fn now(&mut self, input_ms: u64) -> u64 {
        self.read = self.read.saturating_add(1);
        self.reads
            .iter()
            .take_while(|(read, _)| *read <= self.read)
            .last()
            .map_or(input_ms, |(_, shown)| *shown)
    }

    /// `rng.random-bytes`: the recorded bytes, or (withheld, or not recorded) bytes from
    /// a fixed sequence.
    pub fn rng(&mut self, len: u32) -> Vec<u8> {
        if let Some(Some(bytes)) = self.rng.pop_front()
            && bytes.len() == len as usize
        {
            return bytes;
        }
        (0..len)
            .map(|_| {
                // splitmix64: any fixed sequence would do; this one has no short cycles.
                self.filler = self.filler.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.filler;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (z ^ (z >> 31)) as u8
            })
            .collect()
    }

    /// `store.load`.
    pub fn loaded(&mut self) -> Option<SavedState> {
        self.loaded.pop_front().flatten()
    }

    /// `store.save`.
    pub fn saved(&mut self) -> Result<(), String> {
        self.saved.pop_front().unwrap_or(Ok(()))
    }

    /// `transport.identify`.
    pub fn identified(&mut self, id: &str) -> Result<Identity, String> {
        self.identified
            .pop_front()
            .unwrap_or_else(|| Err(format!("the transcript recorded no identity for '{id}'")))
    }

    /// `transport.listen`.
    pub fn listened(&mut self) -> Result<(), String> {
        self.listened.pop_front().unwrap_or(Ok(()))
    }

    /// `transport.send`.
    pub fn sent(&mut self) -> Result<Receipt, SendError> {
        self.sends += 1;
        let n = self.sends;
        self.sent.pop_front().unwrap_or_else(|| {
            Ok(Receipt {
                message_id: format!("replay-{n}"),
                edit_key: Some(format!("replay-{n}")),
            })
        })
    }

    /// `transport.draft`.
    pub fn drafted(&mut self) -> Result<(), SendError> {
        self.drafted.pop_front().unwrap_or(Ok(()))
    }

    /// `transport.react`.
    pub fn reacted(&mut self) -> Result<(), String> {
        self.reacted.pop_front().unwrap_or(Ok(()))
    }

    /// `transport.fetch-attachment`: zero bytes of the recorded size (the bytes
    /// themselves are never recorded).
    pub fn fetched(&mut self) -> Result<FetchedAttachment, String> {
        match self.fetched.pop_front() {
            Some(Ok((media_type, bytes))) => Ok(FetchedAttachment {
                media_type,
                data: vec![0; bytes],
            }),
            Some(Err(e)) => Err(e),
            None => Err("the transcript recorded no attachment here".into()),
        }
    }

    /// `transport.diagnose`.
    pub fn diagnosed(&mut self) -> String {
        self.diagnosed.pop_front().unwrap_or_default()
    }

    /// `agent.send-prompt`.
    pub fn prompted(&mut self) -> Result<(), String> {
        self.prompted.pop_front().unwrap_or(Ok(()))
    }

    /// `agent.session-command`: the recorded answer; without one, a refusal (the
    /// replayed bridge then says what a refused command says).
    pub fn session_replied(&mut self) -> Result<SessionReply, String> {
        self.session_replied
            .pop_front()
            .unwrap_or_else(|| Err("the transcript recorded no answer to this command".into()))
    }

    /// `agent.save-to-inbox`: the recorded answer; without one, a failure (a replay
    /// writes no file, and the replayed bridge then says what a failed save says).
    pub fn inbox_saved(&mut self) -> Result<String, InboxError> {
        self.inbox_saved.pop_front().unwrap_or_else(|| {
            Err(InboxError::Failed(
                "the transcript recorded no answer to this save".into(),
            ))
        })
    }

    /// `agent.read-file`: zero bytes of the recorded size at the recorded path (the bytes
    /// themselves are never recorded).
    pub fn file_read(&mut self) -> Result<OutgoingFile, FileReadError> {
        match self.files_read.pop_front() {
            Some(Ok(meta)) => Ok(OutgoingFile {
                resolved_path: meta.resolved_path,
                size_bytes: meta.bytes,
                data: vec![0; usize::try_from(meta.bytes).unwrap_or(0)],
            }),
            Some(Err(error)) => Err(error),
            None => Err(FileReadError::Failed(
                "the transcript recorded no file read here".into(),
            )),
        }
    }

    /// `transport.upload-limit`; 0 (cannot upload) when none was recorded.
    pub fn upload_limit(&mut self) -> u64 {
        self.upload_limits.pop_front().unwrap_or(0)
    }

    /// `transport.send-file`.
    pub fn uploaded(&mut self) -> Result<Receipt, SendError> {
        self.uploads.pop_front().unwrap_or_else(|| {
            Err(SendError::Failed(
                "the transcript recorded no upload here".into(),
            ))
        })
    }

    /// `speech.transcribe`: the recorded transcript; without one, a failure (a replay
    /// runs no engine).
    pub fn transcribed(&mut self) -> Result<String, String> {
        self.transcribed
            .pop_front()
            .unwrap_or_else(|| Err("the transcript recorded no transcription".into()))
    }

    /// `agent.is-idle`.
    pub fn idle(&mut self) -> bool {
        self.idle.pop_front().unwrap_or(true)
    }

    /// `agent.info`: the recorded facts, the last ones again when the queue runs dry.
    pub fn info(&mut self) -> SessionInfo {
        match self.info.len() {
            0 => SessionInfo {
                id: "replay".into(),
                name: None,
                cwd: "/".into(),
                accepts_images: false,
            },
            1 => self.info[0].clone(),
            _ => self
                .info
                .pop_front()
                .unwrap_or_else(|| unreachable!("len checked")),
        }
    }

    /// `agent.work-snapshot`.
    pub fn work(&mut self) -> WorkFacts {
        self.work.pop_front().unwrap_or(WorkFacts {
            branch: None,
            numstat: None,
            last_shell: None,
            last_prompt: None,
        })
    }

    /// `ui.confirm`.
    pub fn confirmed(&mut self) -> bool {
        self.confirmed.pop_front().unwrap_or(false)
    }

    /// `lock.acquire`.
    pub fn acquired(&mut self) -> Result<(), String> {
        self.acquired.pop_front().unwrap_or(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_bytes_come_back_and_withheld_ones_are_a_fixed_sequence() {
        let events = [
            Event::Rng {
                len: 2,
                bytes: Some("ab01".into()),
            },
            Event::Rng {
                len: 4,
                bytes: None,
            },
        ];
        let mut a = Script::new(&events);
        let mut b = Script::new(&events);
        assert_eq!(a.rng(2), vec![0xab, 0x01]);
        assert_eq!(b.rng(2), vec![0xab, 0x01]);
        // Withheld: both replays get the same bytes, so a replay is deterministic.
        let filler = a.rng(4);
        assert_eq!(filler.len(), 4);
        assert_eq!(filler, b.rng(4));
        // Past the recording, still a fixed sequence, not the OS source.
        assert_eq!(a.rng(8), b.rng(8));
    }
}
