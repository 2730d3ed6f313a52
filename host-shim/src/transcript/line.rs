//! One transcript line: what came into the bridge, what it did, and what the host
//! answered it, as JSON with a format version, a sequence number and the injected clock.
//!
//! The types are the WIT types themselves (serde-derived in `wit`), so a line holds
//! exactly what crossed the sandbox boundary and replay can hand it back unchanged.

use serde::{Deserialize, Serialize};

use crate::wit::agent::{
    AgentQuestion, DeliverAs, FileReadError, InboxError, QuestionAnswer, SessionCommand,
    SessionInfo, SessionReply, WorkFacts,
};
use crate::wit::session::{
    AgentEvent, ConfigSource, Configuration, DiagnosticsReport, Note, Platform, ToolAnswer,
    ToolCall,
};
use crate::wit::transport::{Identity, Outbound, Reaction, Receipt, SendError};
use crate::wit::types::{Envelope, Level, ToolDecision};

/// The format this build writes. A reader skips lines of another version with a warning:
/// a newer format may mean something this replay cannot reproduce.
pub const FORMAT_VERSION: u32 = 1;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// Format version ([`FORMAT_VERSION`]).
    pub v: u32,
    /// Position in this session's transcript, from 1, without gaps (across rotation).
    pub seq: u64,
    /// The session clock (ms since the Unix epoch) when the line was written; for an
    /// input, the time replay gives the bridge while it handles that input.
    pub at: u64,
    /// Which way it went (derived from the kind; written for people reading the file).
    pub dir: Dir,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// Which way a line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    /// About the transcript itself (a run of the host began).
    Meta,
    /// Into the bridge: replay feeds these.
    In,
    /// What the bridge did: replay compares these.
    Out,
    /// What the host answered an import: replay hands these back.
    Host,
}

/// An image that went to the agent: its type and size, never its bytes (raw payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageMeta {
    /// Declared media type.
    pub media_type: String,
    /// Size in bytes.
    pub bytes: usize,
}

/// A fetched attachment: its type and size, never its bytes (raw payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedMeta {
    /// Media type the platform reported.
    pub media_type: String,
    /// Size in bytes.
    pub bytes: usize,
}

/// A file read for sending: where it led and its size, never its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileReadMeta {
    /// The resolved path.
    pub resolved_path: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// What a line records. The `kind` field of the JSON names the variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    // ── meta ──
    /// A host run began writing this transcript.
    Session {
        /// Session key.
        key: String,
        /// host-shim version.
        host: String,
        /// The bridge build that ran ([`crate::sandbox::runtime::component_digest`]); absent when
        /// not known (older transcripts, tests).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        bridge: String,
    },

    // ── inputs ──
    /// `configure` on a fresh instance (the config files' text, redacted).
    Configure {
        /// Config sources, lowest precedence first.
        sources: Vec<ConfigSource>,
        /// Transports the host offered.
        platforms: Vec<Platform>,
    },
    /// `start` with the transports built.
    Start {
        /// Transport ids.
        transports: Vec<String>,
    },
    /// An inbound chat message.
    Envelope {
        /// The message; its text masked (see [`crate::transcript::scrub`]).
        envelope: Envelope,
        /// Char positions in `envelope.text` whose digit was masked.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        masked: Vec<usize>,
        /// The masked digits were the code shown locally this many codes ago (0: the
        /// latest); absent when they were no code this session showed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<usize>,
    },
    /// `preview-envelope` (`host-shim preview`, the terminal's preview).
    Preview {
        /// The message, masked like an inbound one.
        envelope: Envelope,
        /// As for [`Event::Envelope`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        masked: Vec<usize>,
        /// As for [`Event::Envelope`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<usize>,
    },
    /// An agent event.
    AgentEvent {
        /// The event (assistant text redacted).
        event: AgentEvent,
    },
    /// A tool call the agent is about to make, with the paths it touches.
    ToolCall {
        /// The call.
        call: ToolCall,
    },
    /// A question the agent asks (`session.on-question`).
    Question {
        /// The question (its text redacted).
        question: AgentQuestion,
    },
    /// The agent's own terminal answered a question first (`on-local-question-answer`).
    LocalQuestionAnswer {
        /// The agent's id for the question.
        id: String,
        /// The answer (typed text redacted).
        answer: QuestionAnswer,
    },
    /// The terminal's answer to a pending approval.
    LocalAnswer {
        /// Approval id.
        id: String,
        /// Approved or denied.
        approved: bool,
    },
    /// A local `/connect …` command.
    LocalCommand {
        /// Its arguments.
        args: String,
    },
    /// The agent asked to send a file (`send-file`): the path as it wrote it and the
    /// caption.
    SendFile {
        /// The path.
        path: String,
        /// The caption.
        caption: Option<String>,
    },
    /// A timer tick.
    Tick,
    /// `diagnostics` (`doctor`).
    Diagnostics,
    /// `shutdown`.
    Shutdown,

    // ── effects ──
    /// What `configure` returned.
    Configured {
        /// The configuration.
        configuration: Configuration,
    },
    /// What `start` returned.
    Started {
        /// Notes for the terminal.
        notes: Vec<Note>,
    },
    /// A message sent or edited (an edit carries `edit_key`).
    Send {
        /// The message.
        message: Outbound,
    },
    /// A typing indicator.
    Typing {
        /// Transport id.
        transport: String,
        /// Conversation.
        conversation_id: String,
        /// Thread, if any.
        thread_id: Option<String>,
    },
    /// A reaction put on a user's message.
    React {
        /// Transport id.
        transport: String,
        /// Conversation.
        conversation_id: String,
        /// The message reacted to.
        message_id: String,
        /// The reaction set.
        reaction: Reaction,
        /// The reaction taken away.
        replaces: Option<Reaction>,
    },
    /// A draft of the bot's next message shown.
    Draft {
        /// Transport id.
        transport: String,
        /// Conversation.
        conversation_id: String,
        /// The draft stream.
        draft_id: u64,
        /// The draft as rendered.
        text: String,
    },
    /// A prompt handed to the agent.
    Prompt {
        /// The prompt text.
        text: String,
        /// How it is delivered.
        deliver_as: DeliverAs,
        /// Images with it, without their bytes.
        images: Vec<ImageMeta>,
    },
    /// A verdict for a parked tool call (`agent.resolve-tool-call`).
    Verdict {
        /// Approval id.
        id: String,
        /// The decision.
        decision: ToolDecision,
    },
    /// The answer to an agent question (`agent.answer-question`).
    QuestionAnswered {
        /// The agent's id for the question.
        id: String,
        /// The answer (typed text redacted).
        answer: QuestionAnswer,
    },
    /// What `on-tool-call` answered.
    ToolAnswer {
        /// Decided now or pending.
        answer: ToolAnswer,
    },
    /// The agent's turn was aborted.
    Abort,
    /// A session command handed to the agent (`/new`, `/model`, ...).
    SessionCommand {
        /// The command.
        command: SessionCommand,
    },
    /// A file from a chat to be saved into the inbox (`agent.save-to-inbox`). Its size,
    /// never its bytes: a transcript is for replaying decisions, not for keeping copies
    /// of what people sent.
    SaveToInbox {
        /// The inbox directory, relative to the working directory.
        dir: String,
        /// The sanitised file name.
        name: String,
        /// How many bytes.
        bytes: usize,
    },
    /// A voice note handed to the transcription engine (`speech.transcribe`): the
    /// engine's kind and the audio's type and size, never its bytes.
    Transcribe {
        /// `http` or `command`.
        engine: String,
        /// The audio's media type.
        media_type: String,
        /// How many bytes.
        bytes: usize,
    },
    /// A local notification.
    Notify {
        /// Level.
        level: Level,
        /// Text (codes masked).
        text: String,
    },
    /// A local yes/no question.
    Confirm {
        /// Title.
        title: String,
        /// Question.
        message: String,
    },
    /// The state was saved. Only sizes: the document holds salted code hashes that differ
    /// on every run, and the state store is where the state itself lives.
    Save {
        /// The new document's bytes; 0 when only the queue changed.
        bytes: usize,
        /// Queue entries that left the front.
        #[serde(default, skip_serializing_if = "is_zero")]
        dequeued: u32,
        /// Queue entries added at the end.
        #[serde(default, skip_serializing_if = "is_zero_len")]
        enqueued: usize,
    },
    /// A transport was asked to listen.
    Listen {
        /// Transport id.
        transport: String,
    },
    /// A lock was requested.
    Acquire {
        /// Lock name.
        name: String,
        /// Stale time the bridge gave.
        stale_after_ms: u64,
    },
    /// A lock was released.
    Release {
        /// Lock name.
        name: String,
    },
    /// A log line.
    Log {
        /// Level.
        level: Level,
        /// Event name.
        event: String,
        /// Fields (values redacted).
        fields: Vec<(String, String)>,
    },
    /// The bridge asked for a tick.
    RequestTick {
        /// When.
        at_ms: u64,
    },
    /// What `send-file` told the agent.
    FileSendAnswer {
        /// What was sent where, or why nothing was.
        result: Result<String, String>,
    },
    /// The bridge asked to read a file for sending (`agent.read-file`).
    ReadFile {
        /// The path as the agent wrote it.
        path: String,
        /// The most bytes asked for.
        max_bytes: u64,
    },
    /// The bridge asked how big an upload may be (`transport.upload-limit`).
    UploadLimit {
        /// Transport id.
        transport: String,
    },
    /// A file handed to a transport (`transport.send-file`): where, its name, type and
    /// size, never its bytes.
    SendUpload {
        /// Transport id.
        transport: String,
        /// Conversation.
        conversation_id: String,
        /// File name.
        name: String,
        /// Media type.
        media_type: String,
        /// How many bytes.
        bytes: usize,
        /// The caption.
        caption: String,
    },
    /// What a local command answered.
    Note {
        /// The note.
        note: Note,
    },
    /// What `preview-envelope` answered.
    PreviewText {
        /// The preview.
        text: String,
    },
    /// What `diagnostics` answered.
    DiagnosticsReport {
        /// The report.
        report: DiagnosticsReport,
    },
    /// The bridge trapped in a call; the host replaced the instance.
    Trap {
        /// The call.
        call: String,
        /// The cause.
        cause: String,
    },

    // ── host answers ──
    /// A clock read that showed the bridge a time other than the one before it in the
    /// same input (the input's own recorded time first): reads that show the same time
    /// are not written, so a transcript gains a line only when the clock moved on mid-input.
    Clock {
        /// Which read of this input, from 1.
        read: u32,
        /// What it showed (ms since the Unix epoch).
        now_ms: u64,
    },
    /// Bytes from the random source. `bytes` (hex) is withheld for short draws: pairing
    /// codes are made from 4-byte draws, and a transcript must not let anyone rebuild one.
    Rng {
        /// Bytes asked for.
        len: u32,
        /// The bytes, hex; absent when withheld.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<String>,
    },
    /// `store.load` (the saved document, which the state store holds anyway; redacted).
    Loaded {
        /// The document.
        document: Option<String>,
        /// The queue's entries, oldest first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        queued: Vec<String>,
    },
    /// `store.save`'s result.
    Saved {
        /// Result.
        result: Result<(), String>,
    },
    /// `transport.identify`.
    Identified {
        /// Transport id.
        transport: String,
        /// Result.
        result: Result<Identity, String>,
    },
    /// `transport.listen`'s result.
    Listened {
        /// Transport id.
        transport: String,
        /// Result.
        result: Result<(), String>,
    },
    /// `transport.send`'s result.
    Sent {
        /// Receipt or error.
        result: Result<Receipt, SendError>,
    },
    /// `transport.draft`'s result.
    Drafted {
        /// Result.
        result: Result<(), SendError>,
    },
    /// `transport.react`'s result.
    Reacted {
        /// Result.
        result: Result<(), String>,
    },
    /// `transport.fetch-attachment`, without the bytes.
    Fetched {
        /// Result.
        result: Result<FetchedMeta, String>,
    },
    /// `transport.diagnose`.
    Diagnosed {
        /// Transport id.
        transport: String,
        /// Its text.
        text: String,
    },
    /// `agent.send-prompt`'s result.
    Prompted {
        /// Result.
        result: Result<(), String>,
    },
    /// `agent.session-command`'s result.
    SessionReplied {
        /// Result.
        result: Result<SessionReply, String>,
    },
    /// `agent.read-file`'s result: where the file is and its size, never its bytes.
    FileRead {
        /// The resolved path and size, or why nothing was read.
        result: Result<FileReadMeta, FileReadError>,
    },
    /// `transport.upload-limit`'s answer.
    UploadLimited {
        /// Bytes.
        bytes: u64,
    },
    /// `transport.send-file`'s result.
    UploadSent {
        /// Result.
        result: Result<Receipt, SendError>,
    },
    /// `agent.save-to-inbox`'s result: the path written.
    InboxSaved {
        /// Result.
        result: Result<String, InboxError>,
    },
    /// `speech.transcribe`'s result (the transcript, redacted like any text).
    Transcribed {
        /// Result.
        result: Result<String, String>,
    },
    /// `agent.is-idle`.
    Idle {
        /// Idle or busy.
        idle: bool,
    },
    /// `agent.info`.
    Info {
        /// Session facts.
        info: SessionInfo,
    },
    /// `agent.work-snapshot` (redacted).
    Work {
        /// The facts.
        facts: WorkFacts,
    },
    /// `ui.confirm`'s answer.
    Confirmed {
        /// Yes or no.
        yes: bool,
    },
    /// `lock.acquire`'s result.
    Acquired {
        /// Result.
        result: Result<(), String>,
    },
}

impl Event {
    /// Which way this event went.
    pub fn dir(&self) -> Dir {
        match self {
            Event::Session { .. } => Dir::Meta,
            Event::Configure { .. }
            | Event::Start { .. }
            | Event::Envelope { .. }
            | Event::Preview { .. }
            | Event::AgentEvent { .. }
            | Event::ToolCall { .. }
            | Event::Question { .. }
            | Event::LocalQuestionAnswer { .. }
            | Event::LocalAnswer { .. }
            | Event::LocalCommand { .. }
            | Event::SendFile { .. }
            | Event::Tick
            | Event::Diagnostics
            | Event::Shutdown => Dir::In,
            Event::Configured { .. }
            | Event::Started { .. }
            | Event::Send { .. }
            | Event::Typing { .. }
            | Event::React { .. }
            | Event::Draft { .. }
            | Event::Prompt { .. }
            | Event::Verdict { .. }
            | Event::QuestionAnswered { .. }
            | Event::ToolAnswer { .. }
            | Event::Abort
            | Event::SessionCommand { .. }
            | Event::SaveToInbox { .. }
            | Event::FileSendAnswer { .. }
            | Event::ReadFile { .. }
            | Event::UploadLimit { .. }
            | Event::SendUpload { .. }
            | Event::Transcribe { .. }
            | Event::Notify { .. }
            | Event::Confirm { .. }
            | Event::Save { .. }
            | Event::Listen { .. }
            | Event::Acquire { .. }
            | Event::Release { .. }
            | Event::Log { .. }
            | Event::RequestTick { .. }
            | Event::Note { .. }
            | Event::PreviewText { .. }
            | Event::DiagnosticsReport { .. }
            | Event::Trap { .. } => Dir::Out,
            Event::Clock { .. }
            | Event::Rng { .. }
            | Event::Loaded { .. }
            | Event::Saved { .. }
            | Event::Identified { .. }
            | Event::Listened { .. }
            | Event::Sent { .. }
            | Event::Reacted { .. }
            | Event::Drafted { .. }
            | Event::Fetched { .. }
            | Event::Diagnosed { .. }
            | Event::Prompted { .. }
            | Event::SessionReplied { .. }
            | Event::InboxSaved { .. }
            | Event::FileRead { .. }
            | Event::UploadLimited { .. }
            | Event::UploadSent { .. }
            | Event::Transcribed { .. }
            | Event::Idle { .. }
            | Event::Info { .. }
            | Event::Work { .. }
            | Event::Confirmed { .. }
            | Event::Acquired { .. } => Dir::Host,
        }
    }

    /// Whether replay compares this event: every effect but log lines. A log line is
    /// diagnostics, not something the bridge did to the world, and its text follows from
    /// redacted inputs: "redacted a token" cannot be logged again from a transcript that
    /// holds no token.
    pub fn compared(&self) -> bool {
        self.dir() == Dir::Out && !matches!(self, Event::Log { .. })
    }

    /// The `kind` the JSON names this event by.
    pub fn kind(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
            .unwrap_or_default()
    }

    /// The event as one compact JSON object (for messages and differences).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("(unprintable: {e})"))
    }
}

impl Line {
    /// A line for `event`.
    pub fn new(seq: u64, at: u64, event: Event) -> Line {
        Line {
            v: FORMAT_VERSION,
            seq,
            at,
            dir: event.dir(),
            event,
        }
    }

    /// The line as JSON without a newline.
    pub fn to_json(&self) -> String {
        // Every field is a string, number, bool, list or map of those: serializing
        // cannot fail, and a line that somehow did would be dropped, not half-written.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Leaves a zero count out of a transcript line (lines written before the count existed
/// read as zero).
#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(count: &u32) -> bool {
    *count == 0
}

/// [`is_zero`] for a `usize` count.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero_len(count: &usize) -> bool {
    *count == 0
}
