//! Component glue (wasm32 only): the WIT imports as a [`Host`], the WIT exports as calls
//! into the one [`Bridge`] of this instance. Conversions only; no rules live here.

// The bindings wit-bindgen generates below are the canonical ABI's glue: exported `unsafe`
// functions and raw-pointer reads are how a component is called. Nothing written by hand in
// this module uses `unsafe`.
#![allow(unsafe_code)]

use std::cell::RefCell;

use crate::bridge::Bridge;
use crate::host::Host;
use crate::model;

wit_bindgen::generate!({ path: "../wit", world: "bridge" });

use exports::pi::bot_connect::session as wit_session;
use pi::bot_connect::{agent, clock, lock, log, pairing, rng, speech, store, transport, types, ui};

use crate::core::pairing_budget::{BudgetView, FailureOutcome};

thread_local! {
    // One instance serves one session and the host never overlaps calls, so a single
    // bridge behind a RefCell is enough; a re-entrant call would be a host bug and
    // fails loudly (a trap) instead of corrupting state.
    static BRIDGE: RefCell<Bridge> = RefCell::new(Bridge::new());
}

fn with_bridge<R>(f: impl FnOnce(&mut Bridge, &mut dyn Host) -> R) -> R {
    BRIDGE.with(|cell| f(&mut cell.borrow_mut(), &mut Imports))
}

/// The WIT imports, seen as the bridge's [`Host`].
struct Imports;

impl Host for Imports {
    fn identify(&mut self, id: &str) -> Result<model::BotIdentity, String> {
        transport::identify(id).map(|i| model::BotIdentity {
            bot_id: i.bot_id,
            bot_name: i.bot_name,
            capabilities: capabilities_from_wit(i.capabilities),
            lock_name: i.lock_name,
        })
    }

    fn listen(&mut self, id: &str) -> Result<(), String> {
        transport::listen(id)
    }

    fn send(&mut self, m: &model::Outbound) -> Result<model::Receipt, model::SendError> {
        let message = transport::Outbound {
            transport: m.transport.clone(),
            conversation_id: m.conversation_id.clone(),
            thread_id: m.thread_id.clone(),
            kind: match m.kind {
                model::OutboundKind::Reply => transport::OutboundKind::Reply,
                model::OutboundKind::Progress => transport::OutboundKind::Progress,
                model::OutboundKind::Digest => transport::OutboundKind::Digest,
                model::OutboundKind::Notice => transport::OutboundKind::Notice,
            },
            text: m.text.clone(),
            edit_key: m.edit_key.clone(),
            buttons: m
                .buttons
                .iter()
                .map(|b| transport::Button {
                    label: b.label.clone(),
                    command: b.command.clone(),
                })
                .collect(),
            answers_press: m.answers_press.clone(),
            reply_to: m.reply_to.clone(),
        };
        transport::send(&message)
            .map(|r| model::Receipt {
                message_id: r.message_id,
                edit_key: r.edit_key,
            })
            .map_err(send_error_from_wit)
    }

    fn typing(&mut self, id: &str, conversation_id: &str, thread_id: Option<&str>) {
        transport::typing(id, conversation_id, thread_id);
    }

    fn react(
        &mut self,
        id: &str,
        conversation_id: &str,
        message_id: &str,
        reaction: model::Reaction,
        replaces: Option<model::Reaction>,
    ) -> Result<(), String> {
        let wit = |r: model::Reaction| match r {
            model::Reaction::Received => transport::Reaction::Received,
            model::Reaction::Done => transport::Reaction::Done,
            model::Reaction::Failed => transport::Reaction::Failed,
        };
        transport::react(
            id,
            conversation_id,
            message_id,
            wit(reaction),
            replaces.map(wit),
        )
    }

    fn draft(
        &mut self,
        id: &str,
        conversation_id: &str,
        thread_id: Option<&str>,
        draft_id: u64,
        text: &str,
    ) -> Result<(), model::SendError> {
        transport::draft(id, conversation_id, thread_id, draft_id, text)
            .map_err(send_error_from_wit)
    }

    fn fetch_attachment(
        &mut self,
        id: &str,
        reference: &str,
        max_bytes: u64,
    ) -> Result<model::FetchedAttachment, String> {
        transport::fetch_attachment(id, reference, max_bytes).map(|f| model::FetchedAttachment {
            media_type: f.media_type,
            data: f.data,
        })
    }

    fn diagnose(&mut self, id: &str) -> String {
        transport::diagnose(id)
    }

    fn send_prompt(
        &mut self,
        text: &str,
        deliver_as: model::DeliverAs,
        images: &[model::PromptImage],
    ) -> Result<(), String> {
        let deliver_as = match deliver_as {
            model::DeliverAs::Immediate => agent::DeliverAs::Immediate,
            model::DeliverAs::Steer => agent::DeliverAs::Steer,
            model::DeliverAs::FollowUp => agent::DeliverAs::FollowUp,
        };
        let images: Vec<agent::PromptImage> = images
            .iter()
            .map(|i| agent::PromptImage {
                media_type: i.media_type.clone(),
                data: i.data.clone(),
            })
            .collect();
        agent::send_prompt(text, deliver_as, &images)
    }

    fn resolve_tool_call(&mut self, id: &str, decision: &model::ToolDecision) {
        agent::resolve_tool_call(id, &decision_to_wit(decision.clone()));
    }

    fn answer_question(&mut self, id: &str, answer: &model::QuestionAnswer) {
        let answer = match answer {
            model::QuestionAnswer::Value(text) => agent::QuestionAnswer::Value(text.clone()),
            model::QuestionAnswer::Confirmed(yes) => agent::QuestionAnswer::Confirmed(*yes),
            model::QuestionAnswer::Cancelled => agent::QuestionAnswer::Cancelled,
        };
        agent::answer_question(id, &answer);
    }

    fn abort(&mut self) {
        agent::abort();
    }

    fn is_idle(&mut self) -> bool {
        agent::is_idle()
    }

    fn session_info(&mut self) -> model::SessionInfo {
        let info = agent::info();
        model::SessionInfo {
            id: info.id,
            name: info.name,
            cwd: info.cwd,
            accepts_images: info.accepts_images,
        }
    }

    fn save_to_inbox(
        &mut self,
        dir: &str,
        name: &str,
        data: &[u8],
    ) -> Result<String, model::InboxError> {
        agent::save_to_inbox(dir, name, data).map_err(|error| match error {
            agent::InboxError::Exists => model::InboxError::Exists,
            agent::InboxError::Failed(text) => model::InboxError::Failed(text),
        })
    }

    fn read_file(
        &mut self,
        path: &str,
        max_bytes: u64,
    ) -> Result<model::OutgoingFile, model::FileReadError> {
        agent::read_file(path, max_bytes)
            .map(|file| model::OutgoingFile {
                resolved_path: file.resolved_path,
                size_bytes: file.size_bytes,
                data: file.data,
            })
            .map_err(|error| match error {
                agent::FileReadError::TooLarge(size) => model::FileReadError::TooLarge(size),
                agent::FileReadError::Failed(text) => model::FileReadError::Failed(text),
            })
    }

    fn upload_limit(&mut self, id: &str) -> u64 {
        transport::upload_limit(id)
    }

    fn send_file(&mut self, file: model::OutboundFile) -> Result<model::Receipt, model::SendError> {
        let file = transport::OutboundFile {
            transport: file.transport,
            conversation_id: file.conversation_id,
            thread_id: file.thread_id,
            name: file.name,
            media_type: file.media_type,
            as_image: file.as_image,
            caption: file.caption,
            data: file.data,
        };
        transport::send_file(&file)
            .map(|r| model::Receipt {
                message_id: r.message_id,
                edit_key: r.edit_key,
            })
            .map_err(send_error_from_wit)
    }

    fn transcribe(
        &mut self,
        engine: &model::VoiceEngine,
        media_type: &str,
        name: &str,
        data: &[u8],
        timeout_ms: u32,
    ) -> Result<String, String> {
        let engine = match engine.clone() {
            model::VoiceEngine::Http {
                base_url,
                api_key_env,
                model,
                language,
            } => speech::Engine::Http(speech::HttpEngine {
                base_url,
                api_key_env,
                model,
                language,
            }),
            model::VoiceEngine::Command { argv } => {
                speech::Engine::Command(speech::CommandEngine { argv })
            }
        };
        speech::transcribe(
            &engine,
            &speech::Audio {
                media_type: media_type.to_owned(),
                name: name.to_owned(),
                data: data.to_vec(),
            },
            timeout_ms,
        )
    }

    fn session_command(
        &mut self,
        command: &model::SessionCommand,
    ) -> Result<model::SessionReply, String> {
        let command = match command.clone() {
            model::SessionCommand::NewSession => agent::SessionCommand::NewSession,
            model::SessionCommand::Compact(text) => agent::SessionCommand::Compact(text),
            model::SessionCommand::SetModel(name) => agent::SessionCommand::SetModel(name),
            model::SessionCommand::ListModels => agent::SessionCommand::ListModels,
            model::SessionCommand::Thinking(level) => agent::SessionCommand::Thinking(level),
            model::SessionCommand::Usage => agent::SessionCommand::Usage,
        };
        let tokens = |t: agent::TokenUse| model::TokenUse {
            input: t.input,
            output: t.output,
            cache_read: t.cache_read,
            cache_write: t.cache_write,
            cost_micros: t.cost_micros,
        };
        Ok(match agent::run_session_command(&command)? {
            agent::SessionReply::Done(text) => model::SessionReply::Done(text),
            agent::SessionReply::Models(list) => model::SessionReply::Models {
                current: list.current,
                available: list.available,
            },
            agent::SessionReply::Usage(report) => model::SessionReply::Usage(model::UsageReport {
                session: tokens(report.session),
                last_turn: report.last_turn.map(tokens),
                context_tokens: report.context_tokens,
                context_window: report.context_window,
            }),
        })
    }

    fn confirm(&mut self, title: &str, message: &str) -> bool {
        ui::confirm(title, message)
    }

    fn work_snapshot(&mut self) -> model::WorkFacts {
        let facts = agent::work_snapshot();
        model::WorkFacts {
            branch: facts.branch,
            numstat: facts.numstat,
            last_shell: facts.last_shell.map(|run| model::ShellRun {
                command: run.command,
                failed: run.failed,
                output: run.output,
            }),
            last_prompt: facts.last_prompt,
        }
    }

    fn notify(&mut self, level: model::Level, text: &str) {
        ui::notify(level_to_wit(level), text);
    }

    fn load_state(&mut self) -> Option<model::SavedState> {
        store::load().map(|saved| model::SavedState {
            document: saved.document,
            queued: saved.queued,
        })
    }

    fn save_state(&mut self, changes: &model::StateChanges) -> Result<(), String> {
        store::save(&store::StateChanges {
            document: changes.document.clone(),
            dequeued: changes.dequeued,
            enqueued: changes.enqueued.clone(),
        })
    }

    fn now_ms(&mut self) -> u64 {
        clock::now_ms()
    }

    fn request_tick(&mut self, at_ms: u64) {
        clock::request_tick(at_ms);
    }

    fn random_bytes(&mut self, len: u32) -> Vec<u8> {
        rng::random_bytes(len)
    }

    fn acquire_lock(&mut self, name: &str, stale_after_ms: u64) -> Result<(), String> {
        lock::acquire(name, stale_after_ms)
    }

    fn release_lock(&mut self, name: &str) {
        lock::release(name);
    }

    fn pairing_closed_since(&mut self) -> Option<u64> {
        pairing::closed_since()
    }

    fn pairing_record_failure(&mut self, now_ms: u64, per_hour: u32) -> FailureOutcome {
        match pairing::record_failure(now_ms, per_hour) {
            pairing::FailureOutcome::Counted => FailureOutcome::Counted,
            pairing::FailureOutcome::JustClosed => FailureOutcome::JustClosed,
            pairing::FailureOutcome::CountedWhileClosed => FailureOutcome::CountedWhileClosed,
        }
    }

    fn pairing_refused_unjudged(&mut self) {
        pairing::refused_unjudged();
    }

    fn pairing_reopen(&mut self) {
        pairing::reopen();
    }

    fn pairing_view(&mut self, now_ms: u64) -> BudgetView {
        let view = pairing::view(now_ms);
        BudgetView {
            failures_last_hour: view.failures_last_hour,
            closed_at: view.closed_since_ms,
            unjudged: view.unjudged,
        }
    }

    fn log(&mut self, level: model::Level, event: &str, fields: &[(&str, String)]) {
        let fields: Vec<log::Field> = fields
            .iter()
            .map(|(key, value)| log::Field {
                key: (*key).to_string(),
                value: value.clone(),
            })
            .collect();
        log::write(level_to_wit(level), event, &fields);
    }
}

fn send_error_from_wit(e: transport::SendError) -> model::SendError {
    match e {
        transport::SendError::NotRunning => model::SendError::NotRunning,
        transport::SendError::EditRejected(m) => model::SendError::EditRejected(m),
        transport::SendError::RateLimited(ms) => model::SendError::RateLimited(ms),
        transport::SendError::Failed(m) => model::SendError::Failed(m),
    }
}

fn level_to_wit(level: model::Level) -> types::Level {
    match level {
        model::Level::Info => types::Level::Info,
        model::Level::Warning => types::Level::Warning,
        model::Level::Error => types::Level::Error,
    }
}

fn capabilities_from_wit(c: types::Capabilities) -> model::Capabilities {
    model::Capabilities {
        threads: c.threads,
        edit: c.edit,
        attachments: c.attachments,
        typing: c.typing,
        max_message_length: c.max_message_length,
        length_unit: match c.length_unit {
            types::LengthUnit::Chars => model::LengthUnit::Chars,
            types::LengthUnit::Utf16 => model::LengthUnit::Utf16,
            types::LengthUnit::Bytes => model::LengthUnit::Bytes,
        },
        markup: match c.markup {
            types::Markup::Plain => model::Markup::Plain,
            types::Markup::Markdown => model::Markup::Markdown,
            types::Markup::Html => model::Markup::Html,
            types::Markup::Mrkdwn => model::Markup::Mrkdwn,
        },
        reactions: c.reactions,
        drafts: c.drafts,
    }
}

fn decision_to_wit(decision: model::ToolDecision) -> types::ToolDecision {
    match decision {
        model::ToolDecision::Allow => types::ToolDecision::Allow,
        model::ToolDecision::Block(reason) => types::ToolDecision::Block(reason),
        model::ToolDecision::Narrowed(arguments) => types::ToolDecision::Narrowed(
            arguments
                .into_iter()
                .map(|(name, value)| types::ToolArgument { name, value })
                .collect(),
        ),
    }
}

fn note_to_wit(note: model::Note) -> wit_session::Note {
    wit_session::Note {
        level: level_to_wit(note.level),
        text: note.text,
    }
}

fn envelope_from_wit(e: types::Envelope) -> model::Envelope {
    model::Envelope {
        transport: e.transport,
        conversation_id: e.conversation_id,
        user_id: e.user_id,
        thread_id: e.thread_id,
        timestamp_ms: e.timestamp_ms,
        text: e.text,
        is_direct: e.is_direct,
        addressed: e.addressed,
        attachments: e
            .attachments
            .into_iter()
            .map(|a| model::Attachment {
                kind: match a.kind {
                    types::AttachmentKind::Image => model::AttachmentKind::Image,
                    types::AttachmentKind::File => model::AttachmentKind::File,
                },
                media_type: a.media_type,
                reference: a.reference,
                name: a.name,
                size_bytes: a.size_bytes,
                duration_seconds: a.duration_seconds,
            })
            .collect(),
        press: e.press,
        message_id: e.message_id,
    }
}

fn platform_from_wit(p: wit_session::Platform) -> model::Platform {
    model::Platform {
        id: p.id,
        display_name: p.display_name,
        settings: p
            .settings
            .into_iter()
            .map(|s| model::Setting {
                name: s.name,
                kind: match s.kind {
                    wit_session::SettingKind::Boolean => model::SettingKind::Boolean,
                    wit_session::SettingKind::EnvName => model::SettingKind::EnvName,
                    wit_session::SettingKind::Url(schemes) => model::SettingKind::Url(schemes),
                    wit_session::SettingKind::Integer(range) => model::SettingKind::Integer {
                        min: range.min,
                        max: range.max,
                    },
                    wit_session::SettingKind::Text => model::SettingKind::Text,
                },
                default: s.default.map(|value| match value {
                    wit_session::SettingValue::Boolean(b) => model::SettingValue::Boolean(b),
                    wit_session::SettingValue::Integer(n) => model::SettingValue::Integer(n),
                    wit_session::SettingValue::Text(t) => model::SettingValue::Text(t),
                }),
                summary: s.summary,
            })
            .collect(),
    }
}

/// A setting value as the WIT carries it.
fn setting_value_to_wit(value: model::SettingValue) -> wit_session::SettingValue {
    match value {
        model::SettingValue::Boolean(b) => wit_session::SettingValue::Boolean(b),
        model::SettingValue::Integer(n) => wit_session::SettingValue::Integer(n),
        model::SettingValue::Text(t) => wit_session::SettingValue::Text(t),
    }
}

struct Component;

impl wit_session::Guest for Component {
    fn configure(
        sources: Vec<wit_session::ConfigSource>,
        platforms: Vec<wit_session::Platform>,
    ) -> wit_session::Configuration {
        let sources: Vec<model::ConfigSource> = sources
            .into_iter()
            .map(|s| model::ConfigSource {
                scope: match s.scope {
                    wit_session::ConfigScope::Global => model::ConfigScope::Global,
                    wit_session::ConfigScope::Project => model::ConfigScope::Project,
                    wit_session::ConfigScope::Override => model::ConfigScope::Override,
                },
                path: s.path,
                content: match s.content {
                    wit_session::ConfigContent::Text(text) => model::ConfigContent::Text(text),
                    wit_session::ConfigContent::Unreadable(why) => {
                        model::ConfigContent::Unreadable(why)
                    }
                },
            })
            .collect();
        let platforms: Vec<model::Platform> =
            platforms.into_iter().map(platform_from_wit).collect();
        let configuration =
            with_bridge(|bridge, host| bridge.configure(host, &sources, &platforms));
        wit_session::Configuration {
            notes: configuration.notes.into_iter().map(note_to_wit).collect(),
            transports: configuration
                .transports
                .into_iter()
                .map(|t| wit_session::TransportRequest {
                    id: t.id,
                    required: t.required,
                    settings: t
                        .settings
                        .into_iter()
                        .map(|entry| wit_session::SettingEntry {
                            name: entry.name,
                            value: setting_value_to_wit(entry.value),
                        })
                        .collect(),
                })
                .collect(),
            local_command: configuration.local_command,
        }
    }

    fn start(transports: Vec<String>) -> Vec<wit_session::Note> {
        with_bridge(|bridge, host| bridge.start(host, &transports))
            .into_iter()
            .map(note_to_wit)
            .collect()
    }

    fn on_envelope(envelope: types::Envelope) {
        let envelope = envelope_from_wit(envelope);
        with_bridge(|bridge, host| bridge.on_envelope(host, envelope));
    }

    fn preview_envelope(envelope: types::Envelope) -> String {
        let envelope = envelope_from_wit(envelope);
        with_bridge(|bridge, host| bridge.preview_envelope(host, &envelope))
    }

    fn on_agent_event(event: wit_session::AgentEvent) {
        let event = match event {
            wit_session::AgentEvent::TurnStarted(origin) => {
                model::AgentEvent::TurnStarted(match origin {
                    wit_session::TurnOrigin::Local => model::TurnOrigin::Local,
                    wit_session::TurnOrigin::Remote => model::TurnOrigin::Remote,
                })
            }
            wit_session::AgentEvent::ToolStarted(name) => model::AgentEvent::ToolStarted(name),
            wit_session::AgentEvent::ToolFinished(r) => model::AgentEvent::ToolFinished {
                name: r.name,
                ok: r.ok,
            },
            wit_session::AgentEvent::AssistantMessage(text) => {
                model::AgentEvent::AssistantMessage(text)
            }
            wit_session::AgentEvent::Notice(text) => model::AgentEvent::Notice(text),
            wit_session::AgentEvent::AssistantDraft(text) => {
                model::AgentEvent::AssistantDraft(text)
            }
            wit_session::AgentEvent::TurnSettled => model::AgentEvent::TurnSettled,
        };
        with_bridge(|bridge, host| bridge.on_agent_event(host, event));
    }

    fn on_tool_call(call: wit_session::ToolCall) -> wit_session::ToolAnswer {
        let call = model::ToolCall {
            name: call.name,
            paths: call
                .paths
                .into_iter()
                .map(|p| model::ToolPath {
                    path: p.path,
                    access: match p.access {
                        wit_session::PathAccess::Read => model::PathAccess::Read,
                        wit_session::PathAccess::Write => model::PathAccess::Write,
                        wit_session::PathAccess::Unjudgeable => model::PathAccess::Unjudgeable,
                        wit_session::PathAccess::Glob => model::PathAccess::Glob,
                    },
                    bridge_owned: p.bridge_owned,
                })
                .collect(),
        };
        match with_bridge(|bridge, host| bridge.on_tool_call(host, &call)) {
            model::ToolAnswer::Decided(decision) => {
                wit_session::ToolAnswer::Decided(decision_to_wit(decision))
            }
            model::ToolAnswer::Pending(request) => {
                wit_session::ToolAnswer::Pending(wit_session::ApprovalRequest {
                    id: request.id,
                    title: request.title,
                    message: request.message,
                })
            }
        }
    }

    fn on_question(question: agent::AgentQuestion) {
        let question = model::AgentQuestion {
            id: question.id,
            kind: match question.kind {
                agent::QuestionKind::Select(options) => model::QuestionKind::Select(options),
                agent::QuestionKind::Confirm => model::QuestionKind::Confirm,
                agent::QuestionKind::Input => model::QuestionKind::Input,
                agent::QuestionKind::Editor => model::QuestionKind::Editor,
            },
            title: question.title,
            message: question.message,
            timeout_ms: question.timeout_ms,
        };
        with_bridge(|bridge, host| bridge.on_question(host, question));
    }

    fn on_local_question_answer(id: String, answer: agent::QuestionAnswer) {
        let answer = match answer {
            agent::QuestionAnswer::Value(text) => model::QuestionAnswer::Value(text),
            agent::QuestionAnswer::Confirmed(yes) => model::QuestionAnswer::Confirmed(yes),
            agent::QuestionAnswer::Cancelled => model::QuestionAnswer::Cancelled,
        };
        with_bridge(|bridge, host| bridge.on_local_question_answer(host, &id, answer));
    }

    fn on_local_answer(id: String, approved: bool) {
        with_bridge(|bridge, host| bridge.on_local_answer(host, &id, approved));
    }

    fn on_local_command(args: String) -> wit_session::Note {
        note_to_wit(with_bridge(|bridge, host| {
            bridge.on_local_command(host, &args)
        }))
    }

    fn tick() {
        with_bridge(|bridge, host| bridge.tick(host));
    }

    fn send_file(path: String, caption: Option<String>) -> Result<String, String> {
        with_bridge(|bridge, host| bridge.send_file(host, &path, caption.as_deref()))
    }

    fn diagnostics() -> wit_session::DiagnosticsReport {
        let d = with_bridge(|bridge, host| bridge.diagnostics(host));
        wit_session::DiagnosticsReport {
            transports: d
                .transports
                .into_iter()
                .map(|t| wit_session::TransportStatus {
                    id: t.id,
                    state: match t.state {
                        model::TransportState::Running => wit_session::TransportState::Running,
                        model::TransportState::Stopped => wit_session::TransportState::Stopped,
                        model::TransportState::Failed => wit_session::TransportState::Failed,
                    },
                    detail: t.detail,
                })
                .collect(),
            paired: d.paired,
            conversations: d.conversations,
            pending: d.pending,
            paused: d.paused,
            sandbox: wit_session::SandboxView {
                // Measured from inside: this is what the capability audit checks.
                environment_variables: u32::try_from(std::env::vars_os().count())
                    .unwrap_or(u32::MAX),
                arguments: u32::try_from(std::env::args_os().count()).unwrap_or(u32::MAX),
            },
        }
    }

    fn shutdown() {
        with_bridge(|bridge, host| bridge.shutdown(host));
    }

    fn hibernation_holds() -> Vec<wit_session::Hold> {
        with_bridge(|bridge, host| bridge.hibernation_holds(host))
            .into_iter()
            .map(|hold| match hold {
                model::Hold::Turn => wit_session::Hold::Turn,
                model::Hold::QueuedPrompts => wit_session::Hold::QueuedPrompts,
                model::Hold::Approvals => wit_session::Hold::Approvals,
                model::Hold::Questions => wit_session::Hold::Questions,
                model::Hold::Outbox => wit_session::Hold::Outbox,
                model::Hold::CardEdit => wit_session::Hold::CardEdit,
                model::Hold::Pairing => wit_session::Hold::Pairing,
                model::Hold::Steers => wit_session::Hold::Steers,
                model::Hold::Unsaved => wit_session::Hold::Unsaved,
            })
            .collect()
    }
}

export!(Component);
