//! `TerminalTransport`: the person at the terminal plays the remote chat user.
//!
//! It is what `host-shim run` uses when no messenger is configured, so the whole flow
//! (pairing, replies, edits, tool approval) is visible offline. One terminal carries two
//! very different things: the simulated chat and local bridge output (a pairing code must
//! never look like something the chat could see, I1). Chat lines are drawn with `│`,
//! local lines with `▌`, and local commands typed here never become chat messages.
//!
//! The local side works whether or not the terminal is the chat: with a messenger
//! configured instead, local commands, `/quit` and Ctrl-D still work, and a line meant
//! for a chat is answered locally with where the chat is.
//!
//! Generic over its I/O so tests drive it through in-memory pipes.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use transport_core::{
    BotIdentity, Capabilities, Envelope, InboundSink, LengthUnit, Markup, OutboundMessage,
    SendReceipt, Transport, TransportError,
};

/// The transport id, conversation id and bot id of the terminal.
const ID: &str = "terminal";
/// Local command prefix when none is configured (`/connect …`).
const DEFAULT_LOCAL_COMMAND: &str = "connect";
/// Room for terminal events; a host that stops reading them pushes back on the reader
/// instead of letting memory grow.
const EVENT_CAPACITY: usize = 16;
/// Continuation prefix of a chat message; `│` lines up under the first line's.
const CHAT_NEXT: &str = "       │ ";
/// First-line prefix of local output.
const LOCAL_FIRST: &str = " local ▌ ";
/// Continuation prefix of local output; `▌` lines up under the first line's.
const LOCAL_NEXT: &str = "       ▌ ";

/// Something typed at the terminal that is not a chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalEvent {
    /// `/<local command> <args>`: the arguments after the prefix, trimmed.
    LocalCommand(String),
    /// `/quit`, `/exit` or end of input.
    Quit,
}

type Input = Box<dyn AsyncBufRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// The terminal chat. Hold it as `Arc<TerminalTransport>` to use [`Self::notify`] and
/// [`Self::ask`] beside the [`Transport`] methods.
pub struct TerminalTransport {
    verbose_typing: bool,
    shared: Arc<Shared>,
}

/// What the reader task and the transport both touch.
struct Shared {
    /// Locked by the reader task while it runs; aborting the task releases it, so the
    /// transport can start again after `stop`.
    input: tokio::sync::Mutex<Input>,
    /// One lock for all writes so a notification never lands inside a chat message.
    output: tokio::sync::Mutex<Output>,
    events: mpsc::Sender<TerminalEvent>,
    /// One question at a time: two pending questions could not tell whose `y` it is.
    asking: tokio::sync::Mutex<()>,
    state: Mutex<State>,
}

struct State {
    /// `bridge.localCommand`: lines starting with `/<it>` are local commands. Read per
    /// line, so the configured name applies from the moment the bridge is configured,
    /// though reading starts before (local commands work from the first moment).
    local_command: String,
    /// The task reading input, once local reading or the chat started it.
    reader: Option<JoinHandle<()>>,
    /// The terminal is the chat: between `start` and `stop`.
    is_chat: bool,
    /// Where chat lines go while it is the chat, until end of input drops it (so the
    /// session sees the chat's input end).
    chat: Option<InboundSink>,
    pending: Option<oneshot::Sender<bool>>,
    /// The pending question is an approval the chat may answer too: only `y`/`yes`/`n`/
    /// `no` answer it, and any other line (say, `/approve ab3k` typed as the chat) goes
    /// on as usual instead of being taken as a no.
    pending_open: bool,
    /// Set with the pending answer cleared, in one lock, so a question asked after end of
    /// input is refused instead of waiting out its timeout.
    input_closed: bool,
    posted: u64,
    sent: u64,
    received: u64,
    /// Whether the session has started what it was going to start ([`TerminalTransport::start`]
    /// or [`TerminalTransport::settled`]). Until then a chat line may be for a chat that is
    /// about to start, so it waits in `early` instead of being refused.
    decided: bool,
    /// Chat lines typed (or piped) while the session was still starting.
    early: Vec<String>,
}

/// Chat lines kept while the session starts; a longer paste is refused line by line.
const EARLY_LINES: usize = 64;

impl Default for State {
    fn default() -> Self {
        State {
            local_command: DEFAULT_LOCAL_COMMAND.to_owned(),
            reader: None,
            is_chat: false,
            chat: None,
            pending: None,
            pending_open: false,
            input_closed: false,
            posted: 0,
            sent: 0,
            received: 0,
            decided: false,
            early: Vec::new(),
        }
    }
}

/// What one input line means, before a pending question is considered.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Quit,
    Skip,
    Local(String),
    Chat(String),
}

impl Shared {
    /// A panic elsewhere must not make the terminal unusable for the rest of the run.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn write(&self, text: &str) -> Result<(), TransportError> {
        let mut output = self.output.lock().await;
        write_flushed(&mut output, text).await
    }
}

async fn write_flushed(output: &mut Output, text: &str) -> Result<(), TransportError> {
    let result = match output.write_all(text.as_bytes()).await {
        Ok(()) => output.flush().await,
        Err(error) => Err(error),
    };
    result.map_err(|error| {
        TransportError::Failed(format!(
            "terminal output is closed ({error}); nothing more can be shown"
        ))
    })
}

impl TerminalTransport {
    /// A stopped terminal reading lines from `input` and writing to `output`, plus the
    /// receiver of [`TerminalEvent`]s (local commands and quit).
    pub fn new(
        input: impl AsyncBufRead + Unpin + Send + 'static,
        output: impl AsyncWrite + Unpin + Send + 'static,
    ) -> (Self, mpsc::Receiver<TerminalEvent>) {
        let (events, receiver) = mpsc::channel(EVENT_CAPACITY);
        let shared = Arc::new(Shared {
            input: tokio::sync::Mutex::new(Box::new(input)),
            output: tokio::sync::Mutex::new(Box::new(output)),
            events,
            asking: tokio::sync::Mutex::new(()),
            state: Mutex::new(State::default()),
        });
        let terminal = Self {
            verbose_typing: false,
            shared,
        };
        (terminal, receiver)
    }

    /// The terminal on the process's stdin and stdout.
    pub fn stdio() -> (Self, mpsc::Receiver<TerminalEvent>) {
        Self::new(BufReader::new(tokio::io::stdin()), tokio::io::stdout())
    }

    /// Lines starting with `/<prefix>` become [`TerminalEvent::LocalCommand`] (the
    /// bridge's `bridge.localCommand`).
    pub fn with_local_command(self, prefix: &str) -> Self {
        self.set_local_command(prefix);
        self
    }

    /// Follows `bridge.localCommand` once the bridge is configured: from the next line on,
    /// `/<prefix> …` is a local command (and `/connect …` a chat line, unless that is it).
    pub fn set_local_command(&self, prefix: &str) {
        prefix.clone_into(&mut self.shared.state().local_command);
    }

    /// The local command prefix in effect (`connect` unless configured).
    pub fn local_command(&self) -> String {
        self.shared.state().local_command.clone()
    }

    /// Show `bot is typing…` on every `typing` call (off by default: it would bury the
    /// conversation).
    pub fn with_verbose_typing(mut self) -> Self {
        self.verbose_typing = true;
        self
    }

    /// Writes a local notification, `[bot-connect] <text>` (with the level after the tag
    /// unless it is `info`), marked as local so it cannot be mistaken for chat.
    pub async fn notify(&self, level: &str, text: &str) -> Result<(), TransportError> {
        let body = if level == "info" {
            format!("[bot-connect] {text}")
        } else {
            format!("[bot-connect] {level}: {text}")
        };
        self.shared
            .write(&block(LOCAL_FIRST, LOCAL_NEXT, &body))
            .await
    }

    /// Asks the person at the terminal a yes/no question (local tool approval, I39). The
    /// next input line answers it: `y` or `yes` is yes; anything else, no answer within
    /// `timeout`, a stopped transport or closed input is no.
    pub async fn ask(&self, question: &str, timeout: Duration) -> bool {
        match tokio::time::timeout(timeout, self.wait_for_answer(question)).await {
            Ok(answer) => answer,
            Err(_) => {
                let note = format!("no answer within {} s; taken as no", timeout.as_secs());
                // The answer is already no; a closed output has nothing left to tell.
                let _ = self
                    .shared
                    .write(&block(LOCAL_FIRST, LOCAL_NEXT, &note))
                    .await;
                false
            }
        }
    }

    /// Asks without a deadline of its own, for an approval the chat may answer too: the
    /// caller drops the future when it is decided elsewhere. `None` when nobody can answer
    /// here (input closed, output gone).
    pub async fn ask_open(&self, question: &str) -> Option<bool> {
        self.ask_once(question, true).await
    }

    async fn wait_for_answer(&self, question: &str) -> bool {
        self.ask_once(question, false).await.unwrap_or(false)
    }

    async fn ask_once(&self, question: &str, open: bool) -> Option<bool> {
        let _turn = self.shared.asking.lock().await;
        let (answer, receiver) = oneshot::channel();
        {
            let mut state = self.shared.state();
            if state.reader.is_none() || state.input_closed {
                return None;
            }
            state.pending = Some(answer);
            state.pending_open = open;
        }
        let prompt = block(LOCAL_FIRST, LOCAL_NEXT, &format!("{question} [y/N]"));
        if self.shared.write(&prompt).await.is_err() {
            self.shared.state().pending = None;
            return None;
        }
        receiver.await.ok()
    }
}

impl TerminalTransport {
    /// Starts reading input for the local side only (local commands, questions, `/quit`),
    /// for a run whose chat is a messenger. Harmless when reading already runs.
    pub fn listen_locally(&self) {
        let mut state = self.shared.state();
        if state.reader.is_none() {
            let reader = read_input(Arc::clone(&self.shared));
            state.reader = Some(tokio::spawn(reader));
        }
    }
}

impl TerminalTransport {
    /// The session has started every transport it was going to: if the terminal is not
    /// the chat, chat lines typed meanwhile are answered with the notice that says where
    /// the chat is, instead of waiting for a chat that will not come.
    pub async fn settled(&self) {
        let (early, local_command) = {
            let mut state = self.shared.state();
            state.decided = true;
            if state.is_chat {
                return;
            }
            (
                std::mem::take(&mut state.early),
                state.local_command.clone(),
            )
        };
        if !early.is_empty() {
            let _ = self
                .shared
                .write(&block(
                    LOCAL_FIRST,
                    LOCAL_NEXT,
                    &format!("[bot-connect] {}", not_a_chat(&local_command)),
                ))
                .await;
        }
    }
}

impl Drop for TerminalTransport {
    /// The reader task must not outlive the transport and keep consuming the input.
    fn drop(&mut self) {
        if let Some(reader) = self.shared.state().reader.take() {
            reader.abort();
        }
    }
}

/// What a chat line gets when the terminal is not the chat of this run.
fn not_a_chat(local_command: &str) -> String {
    format!(
        "This terminal is not a chat in this run: messages come from the configured \
         messenger. Type /{local_command} status or /{local_command} doctor to see how it is \
         doing, or /quit to leave."
    )
}

/// Reads input lines until end of input.
async fn read_input(shared: Arc<Shared>) {
    let mut input = shared.input.lock().await;
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        // A read error is treated like end of input: the person can no longer type.
        let read = input.read_until(b'\n', &mut buffer).await.unwrap_or(0);
        if read == 0 {
            {
                let mut state = shared.state();
                state.pending = None;
                state.input_closed = true;
                state.chat = None;
            }
            let _ = shared.events.send(TerminalEvent::Quit).await;
            return;
        }
        let raw = String::from_utf8_lossy(&buffer);
        let line = raw.trim_end_matches(['\n', '\r']);
        let local_command = shared.state().local_command.clone();
        let kind = classify(line, &local_command);
        let pending = {
            let mut state = shared.state();
            if state.pending_open && kind != Line::Quit && !is_yes_or_no(line) {
                None
            } else {
                state.pending.take()
            }
        };
        if let Some(answer) = pending.filter(|answer| !answer.is_closed()) {
            // Quitting must never approve anything; every other line is the answer.
            let yes = kind != Line::Quit && is_yes(line);
            let _ = answer.send(yes);
            if kind != Line::Quit {
                continue;
            }
        }
        match kind {
            Line::Skip => {}
            Line::Quit => {
                // A host that dropped the receiver has already stopped listening.
                let _ = shared.events.send(TerminalEvent::Quit).await;
            }
            Line::Local(args) => {
                let _ = shared.events.send(TerminalEvent::LocalCommand(args)).await;
            }
            Line::Chat(text) => {
                let chat = {
                    let mut state = shared.state();
                    if state.chat.is_none() && !state.decided && state.early.len() < EARLY_LINES {
                        // Typed before the session started its transports: a `hello` piped
                        // in at once used to be refused although the terminal was the chat.
                        state.early.push(text);
                        continue;
                    }
                    state.chat.clone()
                };
                let delivered = match chat {
                    Some(sink) => sink.deliver(chat_envelope(text)).await.is_ok(),
                    None => false,
                };
                if delivered {
                    shared.state().received += 1;
                } else {
                    let _ = shared
                        .write(&block(
                            LOCAL_FIRST,
                            LOCAL_NEXT,
                            &format!("[bot-connect] {}", not_a_chat(&local_command)),
                        ))
                        .await;
                }
            }
        }
    }
}

fn is_yes_or_no(line: &str) -> bool {
    matches!(
        line.trim().to_lowercase().as_str(),
        "y" | "yes" | "n" | "no"
    )
}

fn is_yes(line: &str) -> bool {
    matches!(line.trim().to_lowercase().as_str(), "y" | "yes")
}

/// What a line (without its line ending) is, by its text alone.
fn classify(line: &str, local_command: &str) -> Line {
    let trimmed = line.trim();
    if trimmed == "/quit" || trimmed == "/exit" {
        return Line::Quit;
    }
    if trimmed.is_empty() {
        return Line::Skip;
    }
    if let Some(rest) = trimmed
        .strip_prefix('/')
        .and_then(|rest| rest.strip_prefix(local_command))
        && (rest.is_empty() || rest.starts_with(char::is_whitespace))
    {
        return Line::Local(rest.trim().to_owned());
    }
    Line::Chat(line.to_owned())
}

fn chat_envelope(text: String) -> Envelope {
    Envelope {
        transport: ID.to_owned(),
        conversation_id: ID.to_owned(),
        user_id: "you".to_owned(),
        thread_id: None,
        timestamp: 0,
        text,
        is_direct: true,
        addressed: true,
        attachments: Vec::new(),
        // A typed line is never redelivered, so it needs no id.
        message_id: None,
        press: None,
    }
}

/// Lays `text` out under a prefix: the first line after `first`, every following line
/// after `next`, each line ended by `\n`.
fn block(first: &str, next: &str, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + first.len() + 1);
    for (index, line) in text.split('\n').enumerate() {
        out.push_str(if index == 0 { first } else { next });
        out.extend(visible(line.strip_suffix('\r').unwrap_or(line)));
        out.push('\n');
    }
    out
}

/// Control characters in a message (ANSI escapes, bells, lone carriage returns) would
/// let a message move the cursor or repaint the terminal, e.g. over a local line: they
/// show as U+FFFD. Bidi overrides, zero-width characters and line separators (see
/// [`transport_core::printable::is_invisible`]) would make a line read as something
/// else (`moc.elgoog` shown as `google.com`): they are dropped.
fn visible(line: &str) -> impl Iterator<Item = char> + '_ {
    line.chars().filter_map(|c| {
        if c == '\t' {
            Some(c)
        } else if c.is_control() {
            Some('\u{FFFD}')
        } else if transport_core::printable::is_invisible(c) {
            None
        } else {
            Some(c)
        }
    })
}

/// `t<n>` → `n` when message `n` was posted.
fn posted_number(key: &str, posted: u64) -> Option<u64> {
    key.strip_prefix('t')
        .and_then(|digits| digits.parse::<u64>().ok())
        .filter(|n| (1..=posted).contains(n))
}

#[async_trait]
impl Transport for TerminalTransport {
    fn id(&self) -> &str {
        ID
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            threads: false,
            edit: true,
            attachments: false,
            typing: true,
            max_message_length: 4000,
            length_unit: LengthUnit::Chars,
            markup: Markup::Markdown,
            reactions: false,
            drafts: false,
        }
    }

    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        Ok(BotIdentity {
            bot_id: ID.to_owned(),
            bot_name: ID.to_owned(),
            lock_name: None,
        })
    }

    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        {
            let mut state = self.shared.state();
            if state.is_chat {
                return Err(TransportError::AlreadyStarted(ID.to_owned()));
            }
            state.is_chat = true;
            state.decided = true;
            state.chat = Some(sink.clone());
        }
        self.listen_locally();
        let early = std::mem::take(&mut self.shared.state().early);
        for text in early {
            if sink.deliver(chat_envelope(text)).await.is_ok() {
                self.shared.state().received += 1;
            }
        }
        Ok(())
    }

    /// Stops being the chat; the local side (commands, `/quit`) keeps reading.
    async fn stop(&self) {
        let mut state = self.shared.state();
        state.is_chat = false;
        state.chat = None;
    }

    /// Conversation and thread are ignored: the terminal is one conversation.
    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        let mut output = self.shared.output.lock().await;
        let posted = {
            let state = self.shared.state();
            if !state.is_chat {
                return Err(TransportError::NotStarted(ID.to_owned()));
            }
            state.posted
        };
        // The terminal hands out no presses, so none can be answered privately; posting
        // the answer in the chat instead is the bridge's choice, never the transport's.
        if let Some(press) = &message.answers_press {
            return Err(TransportError::Failed(format!(
                "the terminal has no button press {press} to answer privately"
            )));
        }
        let receipt = match message.edit_key {
            Some(key) => {
                let n = posted_number(&key, posted).ok_or_else(|| {
                    TransportError::EditRejected(format!("terminal has no message {key} to edit"))
                })?;
                let first = format!("  chat │ bot (edited #{n}): ");
                write_flushed(&mut output, &block(&first, CHAT_NEXT, &message.text)).await?;
                SendReceipt {
                    message_id: key.clone(),
                    edit_key: Some(key),
                }
            }
            None => {
                // Numbered, so a later `(edited #n)` line says which message it replaces.
                let first = format!("  chat │ bot #{}: ", posted + 1);
                write_flushed(&mut output, &block(&first, CHAT_NEXT, &message.text)).await?;
                self.shared.state().posted += 1;
                let id = format!("t{}", posted + 1);
                SendReceipt {
                    message_id: id.clone(),
                    edit_key: Some(id),
                }
            }
        };
        self.shared.state().sent += 1;
        Ok(receipt)
    }

    async fn typing(
        &self,
        _conversation_id: &str,
        _thread_id: Option<&str>,
    ) -> Result<(), TransportError> {
        if !self.shared.state().is_chat {
            return Err(TransportError::NotStarted(ID.to_owned()));
        }
        if self.verbose_typing {
            self.shared.write("  chat │ bot is typing…\n").await?;
        }
        Ok(())
    }

    fn diagnose(&self) -> String {
        // The state itself is shown by `doctor` beside this line; only the counters here.
        let state = self.shared.state();
        let role = if state.is_chat {
            "the chat"
        } else {
            "local commands only"
        };
        format!("{role}, sent {}, received {}", state.sent, state.received)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_classified_by_text() {
        let cases = [
            ("/connect", Line::Local(String::new())),
            ("/connect pair", Line::Local("pair".to_owned())),
            ("  /connect   status  ", Line::Local("status".to_owned())),
            ("/connectx", Line::Chat("/connectx".to_owned())),
            ("/help", Line::Chat("/help".to_owned())),
            ("/quit", Line::Quit),
            (" /exit ", Line::Quit),
            ("", Line::Skip),
            ("   ", Line::Skip),
            ("hello there", Line::Chat("hello there".to_owned())),
        ];
        for (line, expected) in cases {
            assert_eq!(classify(line, "connect"), expected, "line {line:?}");
        }
        assert_eq!(
            classify("/bc doctor", "bc"),
            Line::Local("doctor".to_owned())
        );
        assert_eq!(
            classify("/connect doctor", "bc"),
            Line::Chat("/connect doctor".to_owned())
        );
    }

    #[test]
    fn only_posted_terminal_ids_are_editable() {
        assert_eq!(posted_number("t2", 3), Some(2));
        assert_eq!(posted_number("t3", 3), Some(3));
        assert_eq!(posted_number("t4", 3), None);
        assert_eq!(posted_number("t0", 3), None);
        assert_eq!(posted_number("fake-m1", 3), None);
        assert_eq!(posted_number("t", 3), None);
    }

    #[test]
    fn control_characters_cannot_reach_the_terminal() {
        assert_eq!(
            block("> ", "  ", "a\u{1b}[2Jb\u{7}\tc\rd\r\ne"),
            "> a\u{FFFD}[2Jb\u{FFFD}\tc\u{FFFD}d\n  e\n"
        );
    }

    #[tokio::test]
    async fn a_notice_naming_a_hostile_id_shows_no_escape_bidi_override_or_separator() {
        let (output, mut written) = tokio::io::duplex(4096);
        let (terminal, _events) = TerminalTransport::new(tokio::io::empty(), output);
        terminal
            .notify(
                "warning",
                "robo_claw room \u{1b}]52;c;ZXZpbA==\u{7} from ad\u{202E}nimda\u{200B}\u{2028}x\u{FEFF}\u{2066}",
            )
            .await
            .expect("written");
        // `notify` flushed the line, so one read returns all of it.
        let mut buffer = vec![0u8; 4096];
        let read = tokio::io::AsyncReadExt::read(&mut written, &mut buffer)
            .await
            .expect("read");
        let shown = String::from_utf8_lossy(&buffer[..read]).into_owned();
        assert!(shown.contains("from adnimdax"), "{shown:?}");
        for hidden in [
            '\u{1b}', '\u{7}', '\u{202E}', '\u{200B}', '\u{2028}', '\u{FEFF}', '\u{2066}',
        ] {
            assert!(!shown.contains(hidden), "{hidden:?} in {shown:?}");
        }
    }
}
