//! A fake host for bridge scenario tests: implements [`Host`] natively and records every
//! effect, with switches to make each capability fail the way a real host can.

// Each test module uses only some helpers, and the strangers benchmark includes this file.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use guest::bridge::Bridge;
use guest::core::pairing_budget::{BudgetView, FailureBudget, FailureOutcome};
use guest::host::Host;
use guest::model::{
    Attachment, AttachmentKind, BotIdentity, Capabilities, ConfigContent, ConfigScope,
    ConfigSource, Configuration, DeliverAs, Envelope, FetchedAttachment, LengthUnit, Level, Markup,
    Note, Outbound, PromptImage, Reaction, Receipt, SavedState, SendError, SessionInfo,
    StateChanges, ToolAnswer, ToolDecision, WorkFacts,
};
use guest::model::{Platform, Setting, SettingKind, SettingValue};

/// One `log.write` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: Level,
    pub event: String,
    pub fields: Vec<(String, String)>,
}

/// One `agent.send-prompt` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub text: String,
    pub deliver_as: DeliverAs,
    pub images: Vec<PromptImage>,
}

/// A lock event, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockEvent {
    Acquired(String),
    Released(String),
}

/// Records everything the bridge does to the world.
#[derive(Debug)]
pub struct FakeHost {
    pub now: u64,
    pub idle: bool,
    pub session: SessionInfo,
    /// Per transport: what `identify` answers.
    pub identities: BTreeMap<String, Result<BotIdentity, String>>,
    /// Per transport: `listen` fails with this message.
    pub listen_errors: BTreeMap<String, String>,
    /// Successful sends, in order.
    pub sent: Vec<Outbound>,
    /// Per message id, the buttons that message shows now (an edit replaces them). The
    /// world's state, not a record: `clear_records` keeps it.
    pub live_buttons: BTreeMap<String, Vec<guest::model::Button>>,
    /// Messages that answered a press privately (`answers_press`), in order; never in
    /// `sent`, since the conversation never saw them.
    pub private: Vec<Outbound>,
    /// Private answers to presses fail (a transport without them, or a press too old).
    pub fail_private: bool,
    /// Refused sends, in order, with the error returned.
    pub failed: Vec<(Outbound, SendError)>,
    /// Every send fails with this error.
    pub fail_all_sends: Option<SendError>,
    /// Every edit (a send with an edit key) is refused with `EditRejected`.
    pub fail_edits: bool,
    /// Sends to this transport fail with this error.
    pub fail_transport: BTreeMap<String, SendError>,
    /// The next send fails with `RateLimited(ms)`, once.
    pub rate_limit_next: Option<u64>,
    /// Sends to this conversation id fail with this error.
    pub fail_conversation: BTreeMap<String, SendError>,
    /// The send attempt with this number (counted from 1 over `sent` and `failed`) fails
    /// with this error, once.
    pub fail_attempt: BTreeMap<usize, SendError>,
    next_message: u64,
    pub notes: Vec<(Level, String)>,
    pub logs: Vec<LogLine>,
    /// Saved documents, in order.
    pub saved: Vec<String>,
    /// `save_state` fails with this message.
    pub save_error: Option<String>,
    /// The stored document `load_state` returns.
    pub stored: Option<String>,
    /// The stored queue entries, oldest first: what the host keeps after each save.
    pub stored_queue: Vec<String>,
    /// Every save's changes, in order.
    pub changes: Vec<StateChanges>,
    pub typing: Vec<(String, String, Option<String>)>,
    pub prompts: Vec<Prompt>,
    /// `send_prompt` fails with this message.
    pub prompt_error: Option<String>,
    pub aborts: usize,
    /// `session_command` calls, in order.
    pub session_commands: Vec<guest::model::SessionCommand>,
    /// What `session_command` answers, in order; an empty script refuses.
    pub session_replies: VecDeque<Result<guest::model::SessionReply, String>>,
    /// `resolve_tool_call` verdicts, in order.
    pub resolved: Vec<(String, ToolDecision)>,
    /// `answer_question` answers (host id, answer), in order.
    pub answered: Vec<(String, guest::model::QuestionAnswer)>,
    /// How often the bridge asked for the session's facts.
    pub session_info_calls: usize,
    /// Answers `confirm` gives, in order; an empty script answers `false` (fail closed).
    pub confirm_answers: VecDeque<bool>,
    pub confirms: Vec<(String, String)>,
    /// What `work_snapshot` answers.
    pub work: WorkFacts,
    pub ticks: Vec<u64>,
    /// Values `random_bytes(4)` yields as little-endian words; empty → zeros.
    pub random_words: VecDeque<u32>,
    /// How many other-length draws (salts) were made.
    pub salts_drawn: u64,
    pub lock_events: Vec<LockEvent>,
    pub locks_held: BTreeSet<String>,
    /// The host's pairing budget; two fake hosts given the same one are two sessions of
    /// one broker.
    pub pairing: Rc<RefCell<FailureBudget>>,
    /// What `diagnose` says per transport (default: `<id> connected`).
    pub diagnoses: BTreeMap<String, String>,
    /// The stale-after time each lock was last asked for with.
    pub lock_stale_after: BTreeMap<String, u64>,
    /// Lock names `acquire_lock` refuses, with the holder text.
    pub refused_locks: BTreeMap<String, String>,
    /// Per reference: what `fetch_attachment` serves.
    pub attachments: BTreeMap<String, Result<FetchedAttachment, String>>,
    /// `(transport, reference, max_bytes)` per fetch.
    pub fetches: Vec<(String, String, u64)>,
    /// The inbox: `dir/name` -> bytes, as `save_to_inbox` wrote them.
    pub inbox: BTreeMap<String, Vec<u8>>,
    /// When set, every `save_to_inbox` fails with this.
    pub inbox_error: Option<String>,
    /// Every `(dir, name)` asked for, in order (taken names too).
    pub inbox_tries: Vec<(String, String)>,
    /// What `transcribe` answers next (default: an error saying none was scripted).
    pub transcripts: VecDeque<Result<String, String>>,
    /// Every `(engine, media type, name, bytes, timeout)` transcribed.
    pub transcribed: Vec<(guest::model::VoiceEngine, String, String, usize, u32)>,
    /// Every reaction set: `(transport, conversation, message id, reaction, replaces)`.
    pub reactions: Vec<(String, String, String, Reaction, Option<Reaction>)>,
    /// When set, every `react` fails with this (as a bot without the right to react).
    pub reaction_error: Option<String>,
    /// Every draft shown: `(transport, conversation, draft id, text)`.
    pub drafts: Vec<(String, String, u64, String)>,
    /// Conversations where `draft` fails (a Telegram group).
    pub no_drafts_in: BTreeSet<String>,
    /// Per path as the agent wrote it: what `read_file` answers (absent: no such file).
    pub files: BTreeMap<String, Result<guest::model::OutgoingFile, guest::model::FileReadError>>,
    /// Every `(path, max_bytes)` read, in order.
    pub reads: Vec<(String, u64)>,
    /// Per transport: what `upload_limit` answers (absent: 0, cannot upload).
    pub upload_limits: BTreeMap<String, u64>,
    /// Files uploaded, in order.
    pub uploads: Vec<guest::model::OutboundFile>,
}

/// Capabilities of a chat that fetches attachments and types.
pub fn caps(edit: bool, markup: Markup, unit: LengthUnit, limit: u32) -> Capabilities {
    Capabilities {
        edit,
        attachments: true,
        typing: true,
        reactions: true,
        ..Capabilities::text_only(markup, unit, limit)
    }
}

/// A bot identity with `capabilities` and no lock.
pub fn identity(capabilities: Capabilities) -> BotIdentity {
    BotIdentity {
        bot_id: "bot-1".into(),
        bot_name: "pibot".into(),
        capabilities,
        lock_name: None,
    }
}

impl Default for FakeHost {
    fn default() -> Self {
        FakeHost::new()
    }
}

impl FakeHost {
    /// Transports `tg` and `dc`: editable, Markdown as written (so bridge texts arrive
    /// verbatim), 4096 chars; idle agent
    /// that accepts images; clock at 1 000 000.
    pub fn new() -> Self {
        let mut identities = BTreeMap::new();
        for id in ["tg", "dc"] {
            identities.insert(
                id.to_string(),
                Ok(identity(caps(
                    true,
                    Markup::Markdown,
                    LengthUnit::Chars,
                    4096,
                ))),
            );
        }
        FakeHost {
            now: 1_000_000,
            idle: true,
            session: SessionInfo {
                id: "session-1".into(),
                name: Some("demo".into()),
                cwd: "/work/demo".into(),
                accepts_images: true,
            },
            identities,
            listen_errors: BTreeMap::new(),
            sent: Vec::new(),
            live_buttons: BTreeMap::new(),
            private: Vec::new(),
            fail_private: false,
            failed: Vec::new(),
            fail_all_sends: None,
            fail_edits: false,
            fail_transport: BTreeMap::new(),
            fail_conversation: BTreeMap::new(),
            rate_limit_next: None,
            next_message: 0,
            notes: Vec::new(),
            logs: Vec::new(),
            saved: Vec::new(),
            save_error: None,
            stored: None,
            stored_queue: Vec::new(),
            changes: Vec::new(),
            typing: Vec::new(),
            prompts: Vec::new(),
            prompt_error: None,
            aborts: 0,
            session_commands: Vec::new(),
            session_replies: VecDeque::new(),
            resolved: Vec::new(),
            answered: Vec::new(),
            session_info_calls: 0,
            confirm_answers: VecDeque::new(),
            confirms: Vec::new(),
            work: WorkFacts::default(),
            ticks: Vec::new(),
            random_words: VecDeque::new(),
            salts_drawn: 0,
            lock_events: Vec::new(),
            locks_held: BTreeSet::new(),
            pairing: Rc::default(),
            diagnoses: BTreeMap::new(),
            lock_stale_after: BTreeMap::new(),
            refused_locks: BTreeMap::new(),
            attachments: BTreeMap::new(),
            fetches: Vec::new(),
            inbox: BTreeMap::new(),
            inbox_error: None,
            inbox_tries: Vec::new(),
            transcripts: VecDeque::new(),
            transcribed: Vec::new(),
            reactions: Vec::new(),
            reaction_error: None,
            drafts: Vec::new(),
            no_drafts_in: BTreeSet::new(),
            files: BTreeMap::new(),
            reads: Vec::new(),
            upload_limits: BTreeMap::new(),
            uploads: Vec::new(),
            fail_attempt: BTreeMap::new(),
        }
    }

    /// Sets what `identify` answers for `transport`.
    pub fn set_capabilities(&mut self, transport: &str, capabilities: Capabilities) {
        self.identities
            .insert(transport.to_string(), Ok(identity(capabilities)));
    }

    /// Makes the next pairing code `digits` (one random word per digit).
    pub fn script_code(&mut self, digits: &str) {
        for d in digits.chars() {
            self.random_words.push_back(d.to_digit(10).unwrap_or(0));
        }
    }

    /// Texts successfully sent to `transport:conversation`, in order.
    pub fn texts_to(&self, transport: &str, conversation: &str) -> Vec<String> {
        self.sent
            .iter()
            .filter(|m| m.transport == transport && m.conversation_id == conversation)
            .map(|m| m.text.clone())
            .collect()
    }

    /// Every text any send carried (successful or not).
    pub fn all_send_texts(&self) -> Vec<String> {
        self.sent
            .iter()
            .map(|m| m.text.clone())
            .chain(self.failed.iter().map(|(m, _)| m.text.clone()))
            .collect()
    }

    /// Every log event name and field value, flattened.
    pub fn all_log_strings(&self) -> Vec<String> {
        self.logs
            .iter()
            .flat_map(|l| {
                std::iter::once(l.event.clone())
                    .chain(l.fields.iter().flat_map(|(k, v)| [k.clone(), v.clone()]))
            })
            .collect()
    }

    /// Log lines with event `event`.
    pub fn logs_named(&self, event: &str) -> Vec<&LogLine> {
        self.logs.iter().filter(|l| l.event == event).collect()
    }

    /// Texts of notifications, in order.
    pub fn note_texts(&self) -> Vec<String> {
        self.notes.iter().map(|(_, t)| t.clone()).collect()
    }

    /// Forgets everything recorded so far (switches and clock stay).
    pub fn clear_records(&mut self) {
        self.sent.clear();
        self.private.clear();
        self.failed.clear();
        self.notes.clear();
        self.logs.clear();
        self.saved.clear();
        self.changes.clear();
        self.typing.clear();
        self.prompts.clear();
        self.confirms.clear();
        self.ticks.clear();
        self.fetches.clear();
        self.lock_events.clear();
        self.reactions.clear();
        self.drafts.clear();
    }

    fn send_error(&mut self, message: &Outbound) -> Option<SendError> {
        if let Some(ms) = self.rate_limit_next.take() {
            return Some(SendError::RateLimited(ms));
        }
        let attempt = self.sent.len() + self.failed.len() + 1;
        if let Some(error) = self.fail_attempt.remove(&attempt) {
            return Some(error);
        }
        if let Some(error) = &self.fail_all_sends {
            return Some(error.clone());
        }
        if let Some(error) = self.fail_transport.get(&message.transport) {
            return Some(error.clone());
        }
        if let Some(error) = self.fail_conversation.get(&message.conversation_id) {
            return Some(error.clone());
        }
        if self.fail_edits && message.edit_key.is_some() {
            return Some(SendError::EditRejected("message can't be edited".into()));
        }
        None
    }
}

impl Host for FakeHost {
    fn identify(&mut self, transport: &str) -> Result<BotIdentity, String> {
        self.identities
            .get(transport)
            .cloned()
            .unwrap_or_else(|| Err(format!("unknown transport {transport}")))
    }

    fn listen(&mut self, transport: &str) -> Result<(), String> {
        match self.listen_errors.get(transport) {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    fn send(&mut self, message: &Outbound) -> Result<Receipt, SendError> {
        if let Some(press) = &message.answers_press {
            if self.fail_private {
                let error = SendError::Failed(format!("no private answer to {press}"));
                self.failed.push((message.clone(), error.clone()));
                return Err(error);
            }
            self.private.push(message.clone());
            return Ok(Receipt {
                message_id: press.clone(),
                edit_key: None,
            });
        }
        if let Some(error) = self.send_error(message) {
            self.failed.push((message.clone(), error.clone()));
            return Err(error);
        }
        self.sent.push(message.clone());
        let receipt: Receipt = match &message.edit_key {
            Some(key) => Receipt {
                message_id: key.clone(),
                edit_key: Some(key.clone()),
            },
            None => {
                self.next_message += 1;
                let id = format!("m{}", self.next_message);
                let editable = matches!(
                    self.identities.get(&message.transport),
                    Some(Ok(identity)) if identity.capabilities.edit
                );
                Receipt {
                    message_id: id.clone(),
                    edit_key: editable.then_some(id),
                }
            }
        };
        if message.buttons.is_empty() {
            self.live_buttons.remove(&receipt.message_id);
        } else {
            self.live_buttons
                .insert(receipt.message_id.clone(), message.buttons.clone());
        }
        Ok(receipt)
    }

    fn react(
        &mut self,
        transport: &str,
        conversation_id: &str,
        message_id: &str,
        reaction: Reaction,
        replaces: Option<Reaction>,
    ) -> Result<(), String> {
        if let Some(error) = &self.reaction_error {
            return Err(error.clone());
        }
        self.reactions.push((
            transport.to_string(),
            conversation_id.to_string(),
            message_id.to_string(),
            reaction,
            replaces,
        ));
        Ok(())
    }

    fn draft(
        &mut self,
        transport: &str,
        conversation_id: &str,
        _thread_id: Option<&str>,
        draft_id: u64,
        text: &str,
    ) -> Result<(), SendError> {
        if self.no_drafts_in.contains(conversation_id) {
            return Err(SendError::Failed("drafts go to private chats only".into()));
        }
        self.drafts.push((
            transport.to_string(),
            conversation_id.to_string(),
            draft_id,
            text.to_string(),
        ));
        Ok(())
    }

    fn typing(&mut self, transport: &str, conversation_id: &str, thread_id: Option<&str>) {
        self.typing.push((
            transport.to_string(),
            conversation_id.to_string(),
            thread_id.map(str::to_string),
        ));
    }

    fn fetch_attachment(
        &mut self,
        transport: &str,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, String> {
        self.fetches
            .push((transport.to_string(), reference.to_string(), max_bytes));
        self.attachments
            .get(reference)
            .cloned()
            .unwrap_or_else(|| Err("not found".into()))
    }

    fn read_file(
        &mut self,
        path: &str,
        max_bytes: u64,
    ) -> Result<guest::model::OutgoingFile, guest::model::FileReadError> {
        self.reads.push((path.to_string(), max_bytes));
        let file = self.files.get(path).cloned().unwrap_or_else(|| {
            Err(guest::model::FileReadError::Failed(format!(
                "there is no file at '{path}'"
            )))
        })?;
        if file.size_bytes > max_bytes {
            return Err(guest::model::FileReadError::TooLarge(file.size_bytes));
        }
        Ok(file)
    }

    fn upload_limit(&mut self, transport: &str) -> u64 {
        self.upload_limits.get(transport).copied().unwrap_or(0)
    }

    fn send_file(&mut self, file: guest::model::OutboundFile) -> Result<Receipt, SendError> {
        if let Some(error) = self.fail_transport.get(&file.transport) {
            return Err(error.clone());
        }
        self.uploads.push(file);
        self.next_message += 1;
        Ok(Receipt {
            message_id: format!("file-{}", self.next_message),
            edit_key: None,
        })
    }

    fn save_to_inbox(
        &mut self,
        dir: &str,
        name: &str,
        data: &[u8],
    ) -> Result<String, guest::model::InboxError> {
        self.inbox_tries.push((dir.to_string(), name.to_string()));
        if let Some(error) = &self.inbox_error {
            return Err(guest::model::InboxError::Failed(error.clone()));
        }
        let path = format!("{}/{name}", dir.trim_end_matches('/'));
        if self.inbox.contains_key(&path) {
            return Err(guest::model::InboxError::Exists);
        }
        self.inbox.insert(path.clone(), data.to_vec());
        Ok(path)
    }

    fn transcribe(
        &mut self,
        engine: &guest::model::VoiceEngine,
        media_type: &str,
        name: &str,
        data: &[u8],
        timeout_ms: u32,
    ) -> Result<String, String> {
        self.transcribed.push((
            engine.clone(),
            media_type.to_string(),
            name.to_string(),
            data.len(),
            timeout_ms,
        ));
        self.transcripts
            .pop_front()
            .unwrap_or_else(|| Err("no transcript scripted".into()))
    }

    fn diagnose(&mut self, transport: &str) -> String {
        self.diagnoses
            .get(transport)
            .cloned()
            .unwrap_or_else(|| format!("{transport} connected"))
    }

    fn send_prompt(
        &mut self,
        text: &str,
        deliver_as: DeliverAs,
        images: &[PromptImage],
    ) -> Result<(), String> {
        if let Some(error) = &self.prompt_error {
            return Err(error.clone());
        }
        self.prompts.push(Prompt {
            text: text.to_string(),
            deliver_as,
            images: images.to_vec(),
        });
        Ok(())
    }

    fn resolve_tool_call(&mut self, id: &str, decision: &ToolDecision) {
        self.resolved.push((id.to_string(), decision.clone()));
    }

    fn answer_question(&mut self, id: &str, answer: &guest::model::QuestionAnswer) {
        self.answered.push((id.to_string(), answer.clone()));
    }

    fn abort(&mut self) {
        self.aborts += 1;
    }

    fn is_idle(&mut self) -> bool {
        self.idle
    }

    fn session_command(
        &mut self,
        command: &guest::model::SessionCommand,
    ) -> Result<guest::model::SessionReply, String> {
        self.session_commands.push(command.clone());
        self.session_replies
            .pop_front()
            .unwrap_or_else(|| Err("the fake host has no answer scripted".into()))
    }

    fn session_info(&mut self) -> SessionInfo {
        self.session_info_calls += 1;
        self.session.clone()
    }

    fn confirm(&mut self, title: &str, message: &str) -> bool {
        self.confirms.push((title.to_string(), message.to_string()));
        self.confirm_answers.pop_front().unwrap_or(false)
    }

    fn work_snapshot(&mut self) -> WorkFacts {
        self.work.clone()
    }

    fn notify(&mut self, level: Level, text: &str) {
        self.notes.push((level, text.to_string()));
    }

    fn load_state(&mut self) -> Option<SavedState> {
        if self.stored.is_none() && self.stored_queue.is_empty() {
            return None;
        }
        Some(SavedState {
            document: self.stored.clone().unwrap_or_default(),
            queued: self.stored_queue.clone(),
        })
    }

    fn save_state(&mut self, changes: &StateChanges) -> Result<(), String> {
        if let Some(error) = &self.save_error {
            return Err(error.clone());
        }
        // Applied as the host's store does: the front leaves, the new entries join the end.
        let dequeued = (changes.dequeued as usize).min(self.stored_queue.len());
        assert_eq!(
            dequeued, changes.dequeued as usize,
            "the bridge dequeued more entries than the store holds"
        );
        self.stored_queue.drain(..dequeued);
        self.stored_queue.extend(changes.enqueued.iter().cloned());
        if let Some(document) = &changes.document {
            self.saved.push(document.clone());
            self.stored = Some(document.clone());
        }
        self.changes.push(changes.clone());
        Ok(())
    }

    fn now_ms(&mut self) -> u64 {
        self.now
    }

    fn request_tick(&mut self, at_ms: u64) {
        self.ticks.push(at_ms);
    }

    fn random_bytes(&mut self, len: u32) -> Vec<u8> {
        // Salts (16 bytes) come from their own stream, so scripted codes stay as scripted
        // whatever order the bridge draws in; each salt differs from the last.
        if len != 4 {
            self.salts_drawn += 1;
            return (0..len)
                .map(|i| (self.salts_drawn as u8) ^ (i as u8))
                .collect();
        }
        let word = self.random_words.pop_front().unwrap_or(0);
        word.to_le_bytes()
            .into_iter()
            .cycle()
            .take(len as usize)
            .collect()
    }

    fn acquire_lock(&mut self, name: &str, stale_after_ms: u64) -> Result<(), String> {
        self.lock_stale_after
            .insert(name.to_string(), stale_after_ms);
        if let Some(holder) = self.refused_locks.get(name) {
            return Err(holder.clone());
        }
        self.locks_held.insert(name.to_string());
        self.lock_events.push(LockEvent::Acquired(name.to_string()));
        Ok(())
    }

    fn release_lock(&mut self, name: &str) {
        self.locks_held.remove(name);
        self.lock_events.push(LockEvent::Released(name.to_string()));
    }

    fn pairing_closed_since(&mut self) -> Option<u64> {
        self.pairing.borrow().closed_since()
    }

    fn pairing_record_failure(&mut self, now_ms: u64, per_hour: u32) -> FailureOutcome {
        self.pairing.borrow_mut().record_failure(now_ms, per_hour)
    }

    fn pairing_refused_unjudged(&mut self) {
        self.pairing.borrow_mut().refused_unjudged();
    }

    fn pairing_reopen(&mut self) {
        self.pairing.borrow_mut().reopen();
    }

    fn pairing_view(&mut self, now_ms: u64) -> BudgetView {
        self.pairing.borrow().view(now_ms)
    }

    fn log(&mut self, level: Level, event: &str, fields: &[(&str, String)]) {
        self.logs.push(LogLine {
            level,
            event: event.to_string(),
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        });
    }
}

#[path = "platforms.rs"]
pub mod platforms;
pub use platforms::platforms;
#[path = "redact_reference.rs"]
pub mod redact_reference;
#[path = "secret_tokens.rs"]
pub mod secret_tokens;

/// A config source holding `json`.
pub fn source(json: &str) -> ConfigSource {
    ConfigSource {
        scope: ConfigScope::Global,
        path: "/home/me/.pi/bot-connect.json".into(),
        content: ConfigContent::Text(json.into()),
    }
}

/// A configured bridge with `transports` started; records cleared afterwards.
pub fn started(
    host: &mut FakeHost,
    config_json: &str,
    transports: &[&str],
) -> (Bridge, Configuration, Vec<Note>) {
    let mut bridge = Bridge::new();
    let configuration = bridge.configure(host, &[source(config_json)], &platforms());
    let ids: Vec<String> = transports.iter().map(|t| t.to_string()).collect();
    let notes = bridge.start(host, &ids);
    host.clear_records();
    (bridge, configuration, notes)
}

/// A bridge on `tg` with `config`, and `tg:u1` paired in the DM `c1`; records cleared.
pub fn paired_in_c1(config: &str) -> (Bridge, FakeHost) {
    let mut host = FakeHost::new();
    let mut bridge = started(&mut host, config, &["tg"]).0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    host.clear_records();
    (bridge, host)
}

/// A bridge on `tg` and `dc` with the default configuration.
pub fn default_bridge(host: &mut FakeHost) -> Bridge {
    started(host, "{}", &["tg", "dc"]).0
}

/// A direct message from `user` in `conversation`.
pub fn dm(transport: &str, conversation: &str, user: &str, text: &str) -> Envelope {
    Envelope {
        transport: transport.into(),
        conversation_id: conversation.into(),
        user_id: user.into(),
        text: text.into(),
        is_direct: true,
        ..Envelope::default()
    }
}

/// A press on a button standing for `command`, by `user` in the group `conversation`
/// (`press:<n>` names it, as a transport's reference would).
pub fn press_in_group(
    transport: &str,
    conversation: &str,
    user: &str,
    command: &str,
    press: &str,
) -> Envelope {
    Envelope {
        is_direct: false,
        addressed: true,
        press: Some(press.into()),
        ..dm(transport, conversation, user, command)
    }
}

/// A channel message that neither is direct nor addresses the bot.
pub fn chatter(transport: &str, conversation: &str, user: &str, text: &str) -> Envelope {
    Envelope {
        is_direct: false,
        ..dm(transport, conversation, user, text)
    }
}

/// An image attachment announced with `reference`.
pub fn image(reference: &str) -> Attachment {
    Attachment {
        kind: AttachmentKind::Image,
        media_type: "image/png".into(),
        reference: reference.into(),
        name: Some("shot.png".into()),
        size_bytes: Some(3),
        duration_seconds: None,
    }
}

/// Pairs `user` in the direct chat `conversation` on `transport` through the real flow.
pub fn pair(
    bridge: &mut Bridge,
    host: &mut FakeHost,
    transport: &str,
    conversation: &str,
    user: &str,
) {
    host.script_code("111111");
    bridge.on_envelope(host, dm(transport, conversation, user, "hi"));
    bridge.on_envelope(host, dm(transport, conversation, user, "111111"));
    assert!(
        host.note_texts()
            .contains(&format!("Paired {transport}:{user}")),
        "pairing {transport}:{user} failed: {:?}",
        host.notes
    );
    host.clear_records();
}

/// The verdict of an answer that must be decided at once (remote approval off).
pub fn verdict(answer: ToolAnswer) -> ToolDecision {
    match answer {
        ToolAnswer::Decided(decision) => decision,
        ToolAnswer::Pending(request) => panic!("expected a verdict now, got pending {request:?}"),
    }
}
