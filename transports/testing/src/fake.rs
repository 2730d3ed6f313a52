//! `FakeTransport`: an in-memory messenger for the host's and the end-to-end tests.
//!
//! It records everything the bridge posts and lets a test play the platform: inject
//! inbound envelopes, make sends, edits, `start` or `identify` fail at any moment, and
//! serve attachment bytes. State lives behind an `Arc`, so a test keeps a
//! [`FakeTransport::handle`] after handing the transport to the host as
//! `Arc<dyn Transport>`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use transport_core::sync::lock;
use transport_core::{
    BotIdentity, Capabilities, Envelope, FetchedAttachment, InboundSink, LengthUnit, Markup,
    OutboundFile, OutboundMessage, Reaction, SendReceipt, Topic, TopicError, Transport,
    TransportError,
};

/// One reaction the fake was asked to set: `(conversation, message id, reaction, replaces)`.
pub type SetReaction = (String, String, Reaction, Option<Reaction>);

/// The most one upload to the fake may hold: Telegram's 50 MB, so a test sees the
/// bridge's own 20 MiB cap bind first, as it does on the real platforms.
pub const FAKE_UPLOAD_LIMIT: u64 = 50 * 1024 * 1024;

/// How a [`FakeTransport`] is set up. Switches that tests flip mid-run are methods on
/// the transport instead, so they work through a shared handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeConfig {
    /// Transport id; also the prefix of message ids and texts (default `fake`).
    pub id: String,
    /// What the fake claims to support (default: markdown, 4000 chars, no edit, no
    /// threads, attachments, typing).
    pub capabilities: Capabilities,
    /// Attachment bytes by reference: reference → (served media type, bytes).
    pub attachments: HashMap<String, (String, Vec<u8>)>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            id: "fake".to_owned(),
            capabilities: Capabilities {
                threads: false,
                edit: false,
                attachments: true,
                typing: true,
                max_message_length: 4000,
                length_unit: LengthUnit::Chars,
                markup: Markup::Markdown,
                reactions: false,
                drafts: false,
            },
            attachments: HashMap::new(),
        }
    }
}

/// A message the fake posted, with the id its receipt carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    /// `<id>-m<n>`, counted from 1.
    pub message_id: String,
    /// The message as the bridge sent it.
    pub message: OutboundMessage,
}

/// The in-memory transport. Cloning (or [`FakeTransport::handle`]) shares the state.
#[derive(Debug, Clone)]
pub struct FakeTransport {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: FakeConfig,
    state: Mutex<State>,
    /// Woken after every post or edit, so tests wait for the bridge's asynchronous
    /// answers instead of sleeping.
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct State {
    /// `Some` while running: the fake is started exactly when it has somewhere to deliver.
    sink: Option<InboundSink>,
    fail_sends: bool,
    fail_edits: bool,
    /// One-shot faults, see [`FakeTransport::queue_faults`].
    faults: VecDeque<TransportError>,
    refuse_start: Option<String>,
    fail_identify: Option<String>,
    posted: u64,
    sent: Vec<SentMessage>,
    edits: Vec<OutboundMessage>,
    files: Vec<OutboundFile>,
    typing: Vec<String>,
    reactions: Vec<SetReaction>,
    drafts: Vec<(String, u64, String)>,
    sent_count: u64,
    received: u64,
    /// `Some(place)`: the fake makes a topic per session there ([`FakeTransport::set_topic_place`]).
    topic_place: Option<String>,
    /// Topics made, by thread id: their current name and whether they are ended.
    topics: std::collections::BTreeMap<String, (String, bool)>,
    /// Topics deleted by hand: a send into one fails with [`FAKE_TOPIC_GONE`].
    deleted_topics: std::collections::HashSet<String>,
}

/// What a send into a deleted topic fails with (and what `topic_gone` recognizes).
pub const FAKE_TOPIC_GONE: &str = "topic not found";

impl Default for FakeTransport {
    fn default() -> Self {
        Self::new(FakeConfig::default())
    }
}

impl FakeTransport {
    /// A stopped fake with this setup and every switch off.
    pub fn new(config: FakeConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(State::default()),
                changed: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Gives the fake a place for a topic per session (`None`: no topics, the default).
    /// Topics are threads `t<n>` of conversation `place`.
    pub fn set_topic_place(&self, place: Option<&str>) {
        self.state().topic_place = place.map(str::to_owned);
    }

    /// The topics made so far: thread id, current name, ended.
    pub fn topics(&self) -> Vec<(String, String, bool)> {
        self.state()
            .topics
            .iter()
            .map(|(thread, (name, ended))| (thread.clone(), name.clone(), *ended))
            .collect()
    }

    /// Deletes topic `thread`, as a person does by hand.
    pub fn delete_topic(&self, thread: &str) {
        let mut state = self.state();
        state.topics.remove(thread);
        state.deleted_topics.insert(thread.to_owned());
    }

    fn change_topic(&self, topic: &Topic, name: &str, ended: bool) -> Result<(), TopicError> {
        let mut state = self.state();
        let thread = topic.thread_id.clone().unwrap_or_default();
        match state.topics.get_mut(&thread) {
            Some(kept) => {
                *kept = (name.to_owned(), ended);
                Ok(())
            }
            None => Err(TopicError::Gone(format!("{FAKE_TOPIC_GONE}: {thread}"))),
        }
    }

    /// Another handle on the same fake; named so call sites show that state is shared.
    pub fn handle(&self) -> FakeTransport {
        self.clone()
    }

    /// Waits until `done` holds for what has been posted and edited so far, or until
    /// `timeout`; returns whether it held. Tests use it to wait for replies that arrive
    /// asynchronously (after an agent turn) without sleeping.
    pub async fn wait_for(
        &self,
        timeout: std::time::Duration,
        done: impl Fn(&[SentMessage], &[OutboundMessage]) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            // Register before checking, so a send between the check and the wait is seen.
            changed.as_mut().enable();
            {
                let state = self.state();
                if done(&state.sent, &state.edits) {
                    return true;
                }
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return false;
            }
        }
    }

    /// A test panicking while holding the lock must not turn every later assertion into a
    /// poison error that hides the real failure.
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// While on, every `send` fails with `<id> rejected the send`.
    pub fn set_fail_sends(&self, on: bool) {
        self.state().fail_sends = on;
    }

    /// While on, an edit (edit key present on an editable fake) fails with
    /// [`TransportError::EditRejected`] `<id> rejected the edit`.
    pub fn set_fail_edits(&self, on: bool) {
        self.state().fail_edits = on;
    }

    /// Makes the next sends fail once each, in order, with these errors: a platform's 429
    /// (`RateLimited`), a 5xx or a dropped connection (`Failed`). An `EditRejected` waits
    /// for the next edit, letting new posts through meanwhile. The soak test injects its
    /// faults this way.
    pub fn queue_faults(&self, faults: impl IntoIterator<Item = TransportError>) {
        self.state().faults.extend(faults);
    }

    /// Faults queued and not yet hit.
    pub fn faults_pending(&self) -> usize {
        self.state().faults.len()
    }

    /// While `Some`, `start` fails with this message.
    pub fn set_refuse_start(&self, message: Option<String>) {
        self.state().refuse_start = message;
    }

    /// While `Some`, `identify` fails with this message.
    pub fn set_fail_identify(&self, message: Option<String>) {
        self.state().fail_identify = message;
    }

    /// Messages posted as new messages, in order.
    pub fn sent(&self) -> Vec<SentMessage> {
        self.state().sent.clone()
    }

    /// Files uploaded (`send_file`), oldest first.
    pub fn files(&self) -> Vec<OutboundFile> {
        self.state().files.clone()
    }

    /// Posts and edits so far, forgotten here: a long soak checks them as it goes instead
    /// of keeping every message of a thousand sessions.
    pub fn take_records(&self) -> (Vec<SentMessage>, Vec<OutboundMessage>) {
        let mut state = self.state();
        state.typing.clear();
        (
            std::mem::take(&mut state.sent),
            std::mem::take(&mut state.edits),
        )
    }

    /// Messages applied as edits (each carries the edit key it targeted), in order.
    pub fn edits(&self) -> Vec<OutboundMessage> {
        self.state().edits.clone()
    }

    /// The drafts shown, `(conversation, draft id, text)`, in order.
    pub fn drafts(&self) -> Vec<(String, u64, String)> {
        self.state().drafts.clone()
    }

    /// The reactions set, in order.
    pub fn reactions(&self) -> Vec<SetReaction> {
        self.state().reactions.clone()
    }

    /// Conversation ids `typing` was called with, in order.
    pub fn typing_calls(&self) -> Vec<String> {
        self.state().typing.clone()
    }

    /// Whether the fake is between `start` and `stop`.
    pub fn is_running(&self) -> bool {
        self.state().sink.is_some()
    }

    /// A direct message from `user-1` in `conv-1` with this text, stamped with this
    /// transport's id: the reference fake's inject defaults.
    pub fn envelope(&self, text: &str) -> Envelope {
        Envelope {
            transport: self.inner.config.id.clone(),
            conversation_id: "conv-1".to_owned(),
            user_id: "user-1".to_owned(),
            timestamp: 0,
            text: text.to_owned(),
            is_direct: true,
            ..Envelope::default()
        }
    }

    /// Delivers `envelope` to the sink given at `start`, as the platform would. Waits while
    /// the sink is full (the same back-pressure a real transport feels).
    pub async fn inject(&self, envelope: Envelope) -> Result<(), TransportError> {
        let sink = self
            .state()
            .sink
            .clone()
            .ok_or_else(|| TransportError::NotStarted(self.inner.config.id.clone()))?;
        sink.deliver(envelope).await.map_err(|_| {
            TransportError::Failed(format!(
                "{} cannot deliver: the receiver of inbound envelopes was dropped; keep it alive while injecting",
                self.inner.config.id
            ))
        })?;
        self.state().received += 1;
        Ok(())
    }
}

/// What a real transport reports as the served media type: the part before `;`,
/// trimmed and lower-cased, so the fake matches the contract of [`FetchedAttachment`].
fn served_media_type(raw: &str) -> String {
    raw.split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_lowercase()
}

#[async_trait]
impl Transport for FakeTransport {
    fn id(&self) -> &str {
        &self.inner.config.id
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.config.capabilities
    }

    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        if let Some(message) = self.state().fail_identify.clone() {
            return Err(TransportError::Failed(message));
        }
        let id = &self.inner.config.id;
        let bot_id = format!("{id}-bot");
        Ok(BotIdentity {
            bot_name: format!("{id} bot"),
            lock_name: Some(format!("{id}-{bot_id}")),
            bot_id,
        })
    }

    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        let mut state = self.state();
        if let Some(message) = state.refuse_start.clone() {
            return Err(TransportError::Failed(message));
        }
        if state.sink.is_some() {
            return Err(TransportError::AlreadyStarted(self.inner.config.id.clone()));
        }
        state.sink = Some(sink);
        Ok(())
    }

    async fn stop(&self) {
        self.state().sink = None;
    }

    /// An edit key on a fake without edit support is ignored and the message is posted
    /// as new, as a real non-editable platform would.
    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        let id = &self.inner.config.id;
        let editable = self.inner.config.capabilities.edit;
        let mut state = self.state();
        if state.sink.is_none() {
            return Err(TransportError::NotStarted(id.clone()));
        }
        // The fake hands out no presses, so it has none to answer privately.
        if let Some(press) = &message.answers_press {
            return Err(TransportError::Failed(format!(
                "{id} has no button press {press} to answer privately"
            )));
        }
        if state.fail_sends {
            return Err(TransportError::Failed(format!("{id} rejected the send")));
        }
        if let Some(thread) = message.thread_id.as_deref()
            && state.deleted_topics.contains(thread)
        {
            return Err(TransportError::Failed(format!("{id}: {FAKE_TOPIC_GONE}")));
        }
        let is_edit = editable && message.edit_key.is_some();
        let due = state
            .faults
            .iter()
            .position(|f| is_edit || !matches!(f, TransportError::EditRejected(_)));
        if let Some(fault) = due.and_then(|i| state.faults.remove(i)) {
            return Err(fault);
        }
        let receipt = match message.edit_key.clone().filter(|_| editable) {
            Some(key) => {
                if state.fail_edits {
                    return Err(TransportError::EditRejected(format!(
                        "{id} rejected the edit"
                    )));
                }
                state.edits.push(message);
                SendReceipt {
                    message_id: key.clone(),
                    edit_key: Some(key),
                }
            }
            None => {
                state.posted += 1;
                let message_id = format!("{id}-m{}", state.posted);
                state.sent.push(SentMessage {
                    message_id: message_id.clone(),
                    message,
                });
                SendReceipt {
                    edit_key: editable.then(|| message_id.clone()),
                    message_id,
                }
            }
        };
        state.sent_count += 1;
        drop(state);
        self.inner.changed.notify_waiters();
        Ok(receipt)
    }

    async fn typing(
        &self,
        conversation_id: &str,
        _thread_id: Option<&str>,
    ) -> Result<(), TransportError> {
        let mut state = self.state();
        if state.sink.is_none() {
            return Err(TransportError::NotStarted(self.inner.config.id.clone()));
        }
        state.typing.push(conversation_id.to_owned());
        Ok(())
    }

    async fn draft(
        &self,
        conversation_id: &str,
        _thread_id: Option<&str>,
        draft_id: u64,
        text: &str,
    ) -> Result<(), TransportError> {
        // A fake that claims no drafts answers as a real transport without them does.
        if !self.inner.config.capabilities.drafts {
            return Err(TransportError::Unsupported(format!(
                "{} cannot stream drafts",
                self.inner.config.id
            )));
        }
        let mut state = self.state();
        if state.sink.is_none() {
            return Err(TransportError::NotStarted(self.inner.config.id.clone()));
        }
        state
            .drafts
            .push((conversation_id.to_owned(), draft_id, text.to_owned()));
        Ok(())
    }

    async fn react(
        &self,
        conversation_id: &str,
        message_id: &str,
        reaction: Reaction,
        replaces: Option<Reaction>,
    ) -> Result<(), TransportError> {
        // A fake that claims no reactions answers as a real transport without them does.
        if !self.inner.config.capabilities.reactions {
            return Err(TransportError::Unsupported(format!(
                "{} cannot react to messages",
                self.inner.config.id
            )));
        }
        let mut state = self.state();
        if state.sink.is_none() {
            return Err(TransportError::NotStarted(self.inner.config.id.clone()));
        }
        state.reactions.push((
            conversation_id.to_owned(),
            message_id.to_owned(),
            reaction,
            replaces,
        ));
        Ok(())
    }

    async fn fetch_attachment(
        &self,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        let id = &self.inner.config.id;
        if !self.inner.config.capabilities.attachments {
            return Err(TransportError::Unsupported(format!(
                "{id} cannot download attachments"
            )));
        }
        if self.state().sink.is_none() {
            return Err(TransportError::NotStarted(id.clone()));
        }
        let (media_type, data) = self
            .inner
            .config
            .attachments
            .get(reference)
            .ok_or_else(|| {
                TransportError::Failed(format!(
                    "{id} has no attachment {reference}; give its bytes in FakeConfig::attachments"
                ))
            })?;
        let size = u64::try_from(data.len()).unwrap_or(u64::MAX);
        if size > max_bytes {
            return Err(TransportError::Failed(format!(
                "attachment is {size} bytes, over the {max_bytes} byte limit"
            )));
        }
        Ok(FetchedAttachment {
            media_type: served_media_type(media_type),
            data: data.clone(),
        })
    }

    fn max_upload_bytes(&self) -> u64 {
        FAKE_UPLOAD_LIMIT
    }

    async fn send_file(&self, file: OutboundFile) -> Result<SendReceipt, TransportError> {
        let id = self.inner.config.id.clone();
        let mut state = self.state();
        if state.sink.is_none() {
            return Err(TransportError::NotStarted(id));
        }
        if state.fail_sends {
            return Err(TransportError::Failed(format!("{id} rejected the upload")));
        }
        if let Some(thread) = file.thread_id.as_deref()
            && state.deleted_topics.contains(thread)
        {
            return Err(TransportError::Failed(format!("{id}: {FAKE_TOPIC_GONE}")));
        }
        if file.data.len() as u64 > FAKE_UPLOAD_LIMIT {
            return Err(TransportError::Failed(format!(
                "{id} takes files of up to {FAKE_UPLOAD_LIMIT} bytes"
            )));
        }
        state.posted += 1;
        let message_id = format!("{id}-file-{}", state.posted);
        state.files.push(file);
        drop(state);
        self.inner.changed.notify_waiters();
        Ok(SendReceipt {
            message_id,
            edit_key: None,
        })
    }

    fn topic_place(&self) -> Option<String> {
        self.state().topic_place.clone()
    }

    async fn create_topic(&self, name: &str) -> Result<Topic, TopicError> {
        let mut state = self.state();
        let Some(place) = state.topic_place.clone() else {
            return Err(TopicError::Unsupported("no topic place set".into()));
        };
        let thread = format!("t{}", state.topics.len() + state.deleted_topics.len() + 1);
        state
            .topics
            .insert(thread.clone(), (name.to_owned(), false));
        Ok(Topic {
            conversation_id: place,
            thread_id: Some(thread),
        })
    }

    async fn resume_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.change_topic(topic, name, false)
    }

    async fn end_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.change_topic(topic, name, true)
    }

    fn topic_gone(&self, error: &TransportError) -> bool {
        matches!(error, TransportError::Failed(text) if text.ends_with(FAKE_TOPIC_GONE))
    }

    fn diagnose(&self) -> String {
        let state = self.state();
        let status = if state.sink.is_some() {
            "running"
        } else {
            "stopped"
        };
        format!(
            "{status}, sent {}, received {}",
            state.sent_count, state.received
        )
    }
}
