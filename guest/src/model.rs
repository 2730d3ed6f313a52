//! Plain data that crosses the component boundary, mirrored from the WIT files in `wit/`
//! (`types.wit`, `transport.wit`, `agent.wit` and `session.wit`).
//!
//! The core and the bridge work on these types only, so they build and test natively;
//! `wasm.rs` converts between them and the wit-bindgen types.

pub use crate::keys::{ConversationKey, Identity};

/// Severity of a message meant for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Routine information.
    Info,
    /// Something is off but the session goes on.
    Warning,
    /// Something failed.
    Error,
}

/// What an inbound attachment is, as declared by the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentKind {
    /// A picture the model may look at.
    Image,
    /// Any other file.
    File,
}

/// An attachment announced by a messenger; bytes are fetched on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Declared kind.
    pub kind: AttachmentKind,
    /// Declared media type.
    pub media_type: String,
    /// Opaque transport reference for fetching.
    pub reference: String,
    /// Original file name.
    pub name: Option<String>,
    /// Declared size in bytes.
    pub size_bytes: Option<u64>,
    /// Declared length of a voice note or audio in seconds, when the platform gives one.
    pub duration_seconds: Option<u32>,
}

/// One normalized inbound chat message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Envelope {
    /// Transport id.
    pub transport: String,
    /// Conversation id inside the transport.
    pub conversation_id: String,
    /// Sender id inside the transport.
    pub user_id: String,
    /// Thread or topic anchor.
    pub thread_id: Option<String>,
    /// Platform timestamp (ms since epoch), 0 when unknown.
    pub timestamp_ms: u64,
    /// Message text.
    pub text: String,
    /// Direct message.
    pub is_direct: bool,
    /// The bot was explicitly addressed.
    pub addressed: bool,
    /// Attachments.
    pub attachments: Vec<Attachment>,
    /// The transport's reference to the button press this message is, `None` for a typed
    /// message: what [`Outbound::answers_press`] names to answer the presser alone.
    pub press: Option<String>,
    /// The platform's id of this message: what a reply ([`Outbound::reply_to`]) or a
    /// reaction names. `None` where the platform has none.
    pub message_id: Option<String>,
}

impl Envelope {
    /// The unit of trust: `transport:userId` (I12). A bare user id is never trusted.
    pub fn identity(&self) -> Identity {
        Identity::new(&self.transport, &self.user_id)
    }

    /// Key for pause state and pending challenges: `transport:conversationId`.
    pub fn conversation_key(&self) -> ConversationKey {
        ConversationKey::new(&self.transport, &self.conversation_id)
    }
}

/// How a transport counts message length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthUnit {
    /// Unicode scalar values.
    Chars,
    /// UTF-16 code units.
    Utf16,
    /// UTF-8 bytes.
    Bytes,
}

/// Which markup a transport renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    /// No markup.
    Plain,
    /// Markdown as written.
    Markdown,
    /// Telegram's HTML subset.
    Html,
    /// Slack's mrkdwn.
    Mrkdwn,
}

/// What a transport can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Threads exist.
    pub threads: bool,
    /// Messages can be edited.
    pub edit: bool,
    /// Attachments can be fetched.
    pub attachments: bool,
    /// A typing indicator exists.
    pub typing: bool,
    /// Platform limit for one message, in `length_unit`.
    pub max_message_length: u32,
    /// Unit of the limit.
    pub length_unit: LengthUnit,
    /// Markup rendered by the platform.
    pub markup: Markup,
    /// The bot can react to a user's message.
    pub reactions: bool,
    /// The bot can stream a draft of its next message (in some chats).
    pub drafts: bool,
}

impl Capabilities {
    /// A chat that only takes text, with `markup` and a limit of `limit` in `unit`: all the
    /// outbound pipeline reads. Tests, benchmarks and the fuzz targets start from it and say
    /// only what their chat adds.
    pub const fn text_only(markup: Markup, unit: LengthUnit, limit: u32) -> Capabilities {
        Capabilities {
            threads: false,
            edit: false,
            attachments: false,
            typing: false,
            max_message_length: limit,
            length_unit: unit,
            markup,
            reactions: false,
            drafts: false,
        }
    }

    /// Telegram's text: HTML, 4,096 UTF-16 units a message.
    pub const TELEGRAM_TEXT: Capabilities =
        Capabilities::text_only(Markup::Html, LengthUnit::Utf16, 4096);
}

/// Who the bot is on a platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    /// The bot's own user id.
    pub bot_id: String,
    /// The bot's name.
    pub bot_name: String,
    /// What the transport can do.
    pub capabilities: Capabilities,
    /// Single-instance lock name, when the transport needs one.
    pub lock_name: Option<String>,
}

/// What kind of message is being sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboundKind {
    /// An agent reply.
    Reply,
    /// A progress card.
    Progress,
    /// A work digest card.
    Digest,
    /// A bridge-authored notice.
    Notice,
}

impl OutboundKind {
    /// Name used in log fields.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboundKind::Reply => "reply",
            OutboundKind::Progress => "progress",
            OutboundKind::Digest => "digest",
            OutboundKind::Notice => "notice",
        }
    }
}

/// A button under a message: a press arrives as an envelope whose text is `command`, as
/// if typed. Transports that cannot show buttons ignore them, so the text says what to type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    /// What the button shows (`Approve`).
    pub label: String,
    /// The text a press stands for (`/approve qd4k`), at most 64 bytes.
    pub command: String,
}

/// One message to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// Transport id.
    pub transport: String,
    /// Target conversation.
    pub conversation_id: String,
    /// Target thread.
    pub thread_id: Option<String>,
    /// What the message is.
    pub kind: OutboundKind,
    /// Final text in the transport's markup.
    pub text: String,
    /// Edit this message instead of posting.
    pub edit_key: Option<String>,
    /// Buttons under the message, one row; usually empty.
    pub buttons: Vec<Button>,
    /// Answers this press ([`Envelope::press`]) privately: only the presser sees it, and a
    /// transport that cannot do that fails without posting.
    pub answers_press: Option<String>,
    /// Post as a reply to this platform message ([`Envelope::message_id`]) of the same
    /// conversation; a transport without replies posts it plainly.
    pub reply_to: Option<String>,
}

/// The bot's reaction on a user's message: how far the bridge got with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// Taken: queued or handed to the agent.
    Received,
    /// Its turn ended.
    Done,
    /// Not run, or its turn was lost; the chat is told why.
    Failed,
}

impl Reaction {
    /// Name used in log fields.
    pub fn as_str(self) -> &'static str {
        match self {
            Reaction::Received => "received",
            Reaction::Done => "done",
            Reaction::Failed => "failed",
        }
    }
}

/// Proof that a message was posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// Platform message id.
    pub message_id: String,
    /// Key to edit the message later.
    pub edit_key: Option<String>,
}

/// Why a send failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// No running transport with that id.
    NotRunning,
    /// The platform refused an edit.
    EditRejected(String),
    /// The platform asked to wait this many ms.
    RateLimited(u64),
    /// Any other failure.
    Failed(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::NotRunning => write!(f, "transport is not running"),
            SendError::EditRejected(m) => write!(f, "edit rejected: {m}"),
            SendError::RateLimited(ms) => write!(f, "rate limited, retry after {ms} ms"),
            SendError::Failed(m) => write!(f, "{m}"),
        }
    }
}

/// Where speech is turned into text (`speech.engine`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoiceEngine {
    /// An OpenAI-compatible `/audio/transcriptions` endpoint.
    Http {
        /// The API's base URL.
        base_url: String,
        /// The environment variable holding the key, if the endpoint wants one.
        api_key_env: Option<String>,
        /// The model.
        model: String,
        /// The spoken language, when known.
        language: Option<String>,
    },
    /// A local command printing the transcript; `{file}` stands for the audio's path.
    Command {
        /// Program and arguments.
        argv: Vec<String>,
    },
}

/// A file to upload (`transport.send-file`): judged, redacted, within the upload limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundFile {
    /// Transport id.
    pub transport: String,
    /// Target conversation.
    pub conversation_id: String,
    /// Target thread.
    pub thread_id: Option<String>,
    /// Bare file name as the chat shows it.
    pub name: String,
    /// Media type inferred from the name and the bytes.
    pub media_type: String,
    /// Shown inline as a picture rather than as a document.
    pub as_image: bool,
    /// Plain-text caption; empty for none.
    pub caption: String,
    /// The bytes.
    pub data: Vec<u8>,
}

/// A file the host read for `send_file` (`agent.read-file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingFile {
    /// The path with `~` expanded and links followed, absolute.
    pub resolved_path: String,
    /// Size on disk.
    pub size_bytes: u64,
    /// All its bytes.
    pub data: Vec<u8>,
}

/// Why `agent.read-file` returned no bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileReadError {
    /// Bigger than the bytes asked for; the payload is its size.
    TooLarge(u64),
    /// Missing, not a regular file, or unreadable; described for the agent.
    Failed(String),
}

/// Why `agent.save-to-inbox` wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxError {
    /// A file of that name exists; nothing was replaced.
    Exists,
    /// Anything else, described for a person.
    Failed(String),
}

/// An attachment's bytes as served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedAttachment {
    /// Media type from the response.
    pub media_type: String,
    /// The bytes.
    pub data: Vec<u8>,
}

/// When a prompt should reach the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliverAs {
    /// Start a turn now (agent idle).
    Immediate,
    /// After the current tool call.
    Steer,
    /// After the current turn's tool calls.
    FollowUp,
}

impl DeliverAs {
    /// Name used in log fields.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliverAs::Immediate => "immediate",
            DeliverAs::Steer => "steer",
            DeliverAs::FollowUp => "followUp",
        }
    }
}

/// An image forwarded to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptImage {
    /// Media type as served.
    pub media_type: String,
    /// Raw bytes.
    pub data: Vec<u8>,
}

/// Facts about the agent session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Session key.
    pub id: String,
    /// Human name.
    pub name: Option<String>,
    /// Working directory.
    pub cwd: String,
    /// The agent takes images.
    pub accepts_images: bool,
}

/// The last shell command the agent ran (for the digest's test line).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellRun {
    /// The command line.
    pub command: String,
    /// It failed.
    pub failed: bool,
    /// The end of its output.
    pub output: String,
}

/// Raw facts for the work digest, as the host gathered them (`agent.work-snapshot`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkFacts {
    /// `git rev-parse --abbrev-ref HEAD` output, if git answered.
    pub branch: Option<String>,
    /// `git diff --numstat HEAD` output, if git answered.
    pub numstat: Option<String>,
    /// The last shell command of the session.
    pub last_shell: Option<ShellRun>,
    /// The last prompt that started a turn.
    pub last_prompt: Option<String>,
}

/// A session command for the agent (`agent.session-command`): `/new`, `/compact`,
/// `/model`, `/thinking`, `/usage` typed in a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCommand {
    /// Start a new session.
    NewSession,
    /// Summarise the conversation; the text guides the summary.
    Compact(Option<String>),
    /// Switch to the model named.
    SetModel(String),
    /// List the models the agent can switch to.
    ListModels,
    /// Set the thinking level; `None` reports it.
    Thinking(Option<String>),
    /// Report token use and cost.
    Usage,
}

/// Tokens and cost of some model calls (`agent.token-use`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUse {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Tokens written to the cache.
    pub cache_write: u64,
    /// Cost in millionths of a dollar, when known.
    pub cost_micros: Option<u64>,
}

/// What `usage` reports (`agent.usage-report`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsageReport {
    /// The whole session.
    pub session: TokenUse,
    /// The last finished turn.
    pub last_turn: Option<TokenUse>,
    /// Tokens in the model's context now.
    pub context_tokens: Option<u64>,
    /// The model's context window.
    pub context_window: Option<u64>,
}

/// The agent's answer to a [`SessionCommand`] (`agent.session-reply`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionReply {
    /// Done; what changed.
    Done(String),
    /// The models: the current one and every one available, as `provider/id`.
    Models {
        /// In use.
        current: Option<String>,
        /// Available.
        available: Vec<String>,
    },
    /// Token use.
    Usage(UsageReport),
}

/// A message from the guest to the person at the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Severity.
    pub level: Level,
    /// Text.
    pub text: String,
}

impl Note {
    /// A note at `level`.
    pub fn new(level: Level, text: impl Into<String>) -> Self {
        Note {
            level,
            text: text.into(),
        }
    }
}

/// Which configuration file a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigScope {
    /// `~/.pi/agent/bot-connect.json`.
    Global,
    /// `<cwd>/.pi/bot-connect.json`.
    Project,
    /// `PI_BOT_CONNECT_CONFIG`.
    Override,
}

impl ConfigScope {
    /// The label notes use (`global config: ...`).
    pub fn label(self) -> &'static str {
        match self {
            ConfigScope::Global => "global",
            ConfigScope::Project => "project",
            ConfigScope::Override => "override",
        }
    }
}

/// What the host could read of a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigContent {
    /// The raw text.
    Text(String),
    /// The file exists but could not be read; why.
    Unreadable(String),
}

/// One configuration file found by the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSource {
    /// Which file.
    pub scope: ConfigScope,
    /// Path of the file.
    pub path: String,
    /// What could be read.
    pub content: ConfigContent,
}

/// What a transport setting holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingKind {
    /// A boolean.
    Boolean,
    /// An environment variable's name.
    EnvName,
    /// A URL with one of these schemes.
    Url(Vec<String>),
    /// An integer in `min..=max`.
    Integer {
        /// Smallest.
        min: i64,
        /// Largest.
        max: i64,
    },
    /// A non-empty string.
    Text,
}

/// A setting's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingValue {
    /// A boolean.
    Boolean(bool),
    /// An integer.
    Integer(i64),
    /// A string.
    Text(String),
}

/// One key a transport reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Key as written.
    pub name: String,
    /// What it holds.
    pub kind: SettingKind,
    /// Value when unset.
    pub default: Option<SettingValue>,
    /// What it is for.
    pub summary: String,
}

/// A transport the host offers, as its crate declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// Transport id.
    pub id: String,
    /// A person's name for it.
    pub display_name: String,
    /// Every key it reads.
    pub settings: Vec<Setting>,
}

/// A transport the configuration asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportRequest {
    /// Transport id.
    pub id: String,
    /// A missing credential is an error, not a skip.
    pub required: bool,
    /// Validated settings, defaults filled in, in the platform's order.
    pub settings: Vec<SettingEntry>,
}

/// One transport setting with its validated value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingEntry {
    /// Key as written.
    pub name: String,
    /// Its value, of the key's declared kind.
    pub value: SettingValue,
}

impl TransportRequest {
    /// The value of setting `name`, if the request has it.
    pub fn setting(&self, name: &str) -> Option<&SettingValue> {
        self.settings
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| &entry.value)
    }
}

/// Result of `configure`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Configuration {
    /// Notes to show once.
    pub notes: Vec<Note>,
    /// Transports to create, in order.
    pub transports: Vec<TransportRequest>,
    /// `bridge.localCommand`, so the host's terminal takes `/<name> …` as a local command.
    pub local_command: String,
}

/// Where a turn came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOrigin {
    /// Typed at the terminal.
    Local,
    /// Injected from a messenger.
    Remote,
}

/// What the agent is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentEvent {
    /// A turn started.
    TurnStarted(TurnOrigin),
    /// A tool call started.
    ToolStarted(String),
    /// A tool call ended.
    ToolFinished {
        /// Tool name.
        name: String,
        /// Success.
        ok: bool,
    },
    /// Visible assistant text.
    AssistantMessage(String),
    /// A line shown on the turn's card, the latest replacing the last; empty clears it.
    Notice(String),
    /// The assistant message so far, while the model writes it.
    AssistantDraft(String),
    /// The turn is over.
    TurnSettled,
}

/// How a tool call uses a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathAccess {
    /// It reads or lists.
    Read,
    /// It creates, changes or deletes.
    Write,
    /// The argument should name a path but the host could not read one (too long, not
    /// text); the path field holds the argument's name. Refused in a remote turn.
    Unjudgeable,
    /// The argument is a glob the call filters its files by (grep's `glob`); the path
    /// field holds it as written.
    Glob,
}

/// A path a tool call touches, as the host read it from the call's arguments (never the
/// contents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPath {
    /// Absolute, or relative to the session's working directory.
    pub path: String,
    /// Read or write.
    pub access: PathAccess,
    /// The host knows it as one of bot-connect's own files (config, state, locks).
    pub bridge_owned: bool,
}

/// A tool call the agent is about to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// Tool name.
    pub name: String,
    /// The paths it touches; empty when the host cannot tell (say, a shell command).
    pub paths: Vec<ToolPath>,
}

impl ToolCall {
    /// A call that touches no path the host could name.
    pub fn named(name: &str) -> Self {
        ToolCall {
            name: name.to_string(),
            paths: Vec::new(),
        }
    }
}

/// The bridge's verdict on a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolDecision {
    /// Let it run.
    Allow,
    /// Block it with this reason.
    Block(String),
    /// Let it run with these arguments (name, value) set first: a remote search narrowed
    /// out of the protected paths.
    Narrowed(Vec<(String, String)>),
}

/// What a question asks for (pi's `ctx.ui` dialogs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionKind {
    /// One of these options, by its text.
    Select(Vec<String>),
    /// Yes or no.
    Confirm,
    /// One line of text.
    Input,
    /// Free text, possibly several lines.
    Editor,
}

/// A question the agent asks the person while it waits (`session.on-question`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentQuestion {
    /// The host's id, answered through `Host::answer_question`; never shown.
    pub id: String,
    /// What kind of answer it wants.
    pub kind: QuestionKind,
    /// The question itself.
    pub title: String,
    /// The confirm message, input placeholder or editor prefill; may be empty.
    pub message: String,
    /// The agent gives up after this many ms; `None` when it would wait for ever.
    pub timeout_ms: Option<u64>,
}

/// The answer to an [`AgentQuestion`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionAnswer {
    /// The chosen option's text, or the text typed.
    Value(String),
    /// Yes or no.
    Confirmed(bool),
    /// Dismissed: nobody answered in time.
    Cancelled,
}

/// An approval the bridge asked for: the host parks the tool call under `id` and asks
/// `title` / `message` locally while the chats may answer (see `wit/session.wit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// Short id, `/approve <id>` in the chats.
    pub id: String,
    /// Title of the local question.
    pub title: String,
    /// The local question; names the tool, never its arguments.
    pub message: String,
}

/// What `on_tool_call` answers: a verdict now, or later through `Host::resolve_tool_call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAnswer {
    /// The verdict.
    Decided(ToolDecision),
    /// Approval was asked for; the verdict comes exactly once, later.
    Pending(ApprovalRequest),
}

/// Where a transport stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportState {
    /// Listening.
    Running,
    /// Stopped by shutdown.
    Stopped,
    /// Failed to start.
    Failed,
}

impl TransportState {
    /// How `doctor` names it.
    pub fn label(self) -> &'static str {
        match self {
            TransportState::Running => "running",
            TransportState::Stopped => "stopped",
            TransportState::Failed => "failed to start",
        }
    }
}

/// Health of one transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportStatus {
    /// Transport id.
    pub id: String,
    /// Where it stands.
    pub state: TransportState,
    /// Detail line.
    pub detail: Option<String>,
}

/// What the guest sees of its sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SandboxView {
    /// Visible environment variables.
    pub environment_variables: u32,
    /// Visible arguments.
    pub arguments: u32,
}

/// Everything `doctor` shows about a session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diagnostics {
    /// Per transport.
    pub transports: Vec<TransportStatus>,
    /// Trusted identities.
    pub paired: u32,
    /// Remembered conversations.
    pub conversations: u32,
    /// Live pairing challenges.
    pub pending: u32,
    /// Paused conversation keys.
    pub paused: Vec<String>,
    /// The guest's view of its sandbox.
    pub sandbox: SandboxView,
}

/// Something only the bridge's memory holds (the WIT `hold`): dropping the instance now
/// would lose it, so a hibernating host waits while any is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hold {
    /// A turn is running.
    Turn,
    /// Prompts wait for the agent.
    QueuedPrompts,
    /// Tool calls wait for approval.
    Approvals,
    /// The agent's questions wait for an answer.
    Questions,
    /// Messages wait out a rate limit or a retry.
    Outbox,
    /// A progress card's throttled edit is due.
    CardEdit,
    /// A live pairing code, or a chat waiting for one while pairing is closed.
    Pairing,
    /// Steers waiting for the next turn.
    Steers,
    /// State changes the last save could not write.
    Unsaved,
}

/// What a session saved (`store.saved-state`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SavedState {
    /// The state document saved last.
    pub document: String,
    /// The queue's entries, oldest first, as the bridge wrote them.
    pub queued: Vec<String>,
}

/// What changed since the last load or save (`store.state-changes`), applied atomically.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateChanges {
    /// The new document; `None` when only the queue changed.
    pub document: Option<String>,
    /// How many entries left the front of the stored queue.
    pub dequeued: u32,
    /// Entries added at the queue's end, oldest first.
    pub enqueued: Vec<String>,
}
