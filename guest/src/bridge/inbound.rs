//! Inbound: route one envelope and carry out the decision (as the original's `bridge.ts` did:
//! docs/architecture.md#the-original-module-by-module).

use super::Bridge;
use super::approvals::ChatAnswer;
use crate::core::commands::{
    self, CommandEffect, ParsedCommand, QueueView, RemoteCommand, StatusView,
};
use crate::core::explain::{Decision, Outcome};
use crate::core::inbox;
use crate::core::notices;
use crate::core::rate_limit::{InputKind, RateVerdict};
use crate::core::reactions;
use crate::core::router::{self, IgnoreReason, Route, RouteInput};
use crate::core::session_commands;
use crate::core::state::{ConversationTarget, PromptMark};
use crate::core::voice;
use crate::host::Host;
use crate::keys::Identity;
use crate::model::{
    Attachment, DeliverAs, Envelope, InboxError, Level, OutboundKind, PromptImage, Reaction,
    SessionCommand, SessionReply,
};

impl Bridge {
    /// Handles one inbound message.
    pub fn on_envelope(&mut self, host: &mut dyn Host, envelope: Envelope) {
        if self.capabilities(&envelope.transport).is_none() {
            // Only a running transport delivers; anything else is a host bug worth a line.
            host.log(
                Level::Warning,
                "message from a transport that is not running",
                &[("transport", envelope.transport.clone())],
            );
            return;
        }
        let identity = envelope.identity();
        let conversation = envelope.conversation_key();
        let now = host.now_ms();
        let trusted = self.state.is_trusted(&identity);
        let authenticated = router::is_authenticated(&identity, &self.config, trusted);
        let pending = self.state.pending(&conversation).cloned();
        let busy = !host.is_idle();
        let transport_fetches = self
            .capabilities(&envelope.transport)
            .is_some_and(|c| c.attachments);
        let accepts_images = self.session.accepts_images && transport_fetches;
        let route = router::route(&RouteInput {
            envelope: &envelope,
            config: &self.config,
            authenticated,
            pending: pending.as_ref(),
            busy,
            attachments_accepted: accepts_images,
            transport_fetches,
            now,
        });
        let target = ConversationTarget {
            transport: envelope.transport.clone(),
            conversation_id: envelope.conversation_id.clone(),
            thread_id: envelope.thread_id.clone(),
        };
        let asked_for_a_prompt = matches!(
            route,
            Route::Prompt { .. } | Route::TooLong { .. } | Route::Unsupported(_)
        );
        let outcome = match route {
            Route::Ignore(reason) => {
                host.log(
                    Level::Info,
                    "ignored message",
                    &[
                        ("reason", ignore_reason(reason).into()),
                        ("transport", envelope.transport.clone()),
                    ],
                );
                Outcome::Ignored(reason)
            }
            // A press is never a pairing attempt: its text is a button's command, and a
            // code made for it would be minted (and a public "not paired" said in a group)
            // for someone who only tapped a button.
            Route::Pair if envelope.press.is_some() => {
                self.refuse_press(host, &envelope, &target, now)
            }
            Route::Pair => self.pair(host, &envelope, &target, pending, now),
            Route::Command(command) => {
                self.remember(host, &target, envelope.is_direct);
                self.command(host, &envelope, &target, command, busy, now)
            }
            Route::Unsupported(feature) => {
                self.remember(host, &target, envelope.is_direct);
                self.reply(host, &target, feature.notice());
                Outcome::Unsupported(feature)
            }
            Route::TooLong { chars, limit } => {
                self.remember(host, &target, envelope.is_direct);
                self.too_long(host, &envelope, &target, chars, limit, now)
            }
            Route::Prompt {
                text,
                deliver_as,
                attachments,
            } => {
                self.remember(host, &target, envelope.is_direct);
                // While the agent waits for an answer asked in this chat, a plain message
                // is that answer ("reply with your answer"), not a prompt queued behind it.
                if self.question_waits_for(host, &identity, &conversation) {
                    if self.admit(host, InputKind::Command, &identity, &target, now) {
                        let reply = self.reply_as_answer(host, &text, &identity, &conversation);
                        self.reply(host, &target, &reply);
                        Outcome::Command(RemoteCommand::Answer.name())
                    } else {
                        Outcome::RateLimited
                    }
                } else {
                    self.prompt(host, &envelope, &target, text, deliver_as, attachments, now)
                }
            }
        };
        // Set after the message was handled, so "taken" never shows on a prompt that then
        // failed; only a prompt's own message, never a command's or a stranger's.
        if asked_for_a_prompt
            && let Some(reaction) = reactions::for_outcome(&outcome)
            && let Some(message_id) = envelope.message_id.clone()
        {
            let mark = PromptMark {
                target: target.clone(),
                message_id,
            };
            self.react(host, &[mark], reaction, None);
        }
        self.decisions.record(Decision {
            at_ms: now,
            conversation,
            identity,
            outcome,
        });
    }

    /// Remembers the chat; a DM follows the terminal from its first message, a group only
    /// after `/follow` (docs/security.md#who-sees-what).
    fn remember(&mut self, host: &mut dyn Host, target: &ConversationTarget, direct: bool) {
        // A chat already remembered changes nothing; asked through the read-only view so
        // the state is not marked changed on every message.
        if self.state.conversations.contains(target) {
            return;
        }
        if self.state.remember_chat(target.clone(), direct) {
            self.save(host);
        }
    }

    fn command(
        &mut self,
        host: &mut dyn Host,
        envelope: &Envelope,
        target: &ConversationTarget,
        parsed: ParsedCommand,
        busy: bool,
        now: u64,
    ) -> Outcome {
        let identity = envelope.identity();
        if !self.admit(host, InputKind::Command, &identity, target, now) {
            return Outcome::RateLimited;
        }
        let conversation = envelope.conversation_key();
        // A press by someone who may prompt (requirePairing off) but is not trusted to
        // decide: refused like an unpaired one, to the presser alone.
        if envelope.press.is_some() && parsed.command.decides() && !self.may_decide(&identity) {
            return self.refuse_press(host, envelope, target, now);
        }
        if self.config.deny_commands.contains(&parsed.command) {
            host.log(
                Level::Info,
                "remote command turned off",
                &[
                    ("transport", envelope.transport.clone()),
                    ("identity", identity.to_string()),
                    ("command", parsed.command.name().into()),
                ],
            );
            let text = session_commands::denied_text(parsed.command);
            self.answer_press(host, target, envelope.press.as_deref(), &text);
            return Outcome::Command(parsed.command.name());
        }
        if let Some(command) = session_commands::session_command(parsed.command, &parsed.args) {
            self.session_command(host, envelope, target, &parsed, command, busy);
            return Outcome::Command(parsed.command.name());
        }
        let info = self.session.clone();
        let view = StatusView {
            transport: envelope.transport.clone(),
            identity: identity.clone(),
            session_name: info.name,
            cwd: info.cwd,
            busy,
            paused: self.state.is_paused(&conversation),
            following: self.state.is_following(&conversation),
            paired_for_ms: self
                .state
                .paired_at(&identity)
                .map(|at| now.saturating_sub(at)),
        };
        if matches!(
            parsed.command,
            RemoteCommand::Approve
                | RemoteCommand::Deny
                | RemoteCommand::Details
                | RemoteCommand::Scope
                | RemoteCommand::Answer
                | RemoteCommand::Queue
        ) {
            let mut to_answerer = false;
            let text = match parsed.command {
                RemoteCommand::Scope => self.scope_text(),
                RemoteCommand::Answer => {
                    self.answer_question_from_chat(host, &parsed.args, &identity, &conversation)
                }
                RemoteCommand::Queue => commands::queue_text(&QueueView {
                    waiting: self.queue.len(),
                    from_here: self
                        .queue
                        .iter()
                        .filter(|queued| queued.key() == conversation)
                        .count(),
                    turn_running: self.turn.is_some(),
                    busy_delivery: self.config.busy_delivery,
                    limit: self.config.max_queued_prompts,
                }),
                _ => match self.answer_from_chat(
                    host,
                    parsed.command,
                    &parsed.args,
                    &identity,
                    &conversation,
                ) {
                    ChatAnswer::Said(text) => text,
                    ChatAnswer::ToAnswerer(text) => {
                        to_answerer = true;
                        text
                    }
                },
            };
            host.log(
                Level::Info,
                "remote command",
                &[
                    ("transport", envelope.transport.clone()),
                    ("identity", identity.to_string()),
                    ("command", parsed.command.name().into()),
                ],
            );
            // A press on a decided request, say, changed nothing: the presser alone is told
            // (a typed command has no press, and is answered in the chat as before).
            if to_answerer {
                self.answer_press(host, target, envelope.press.as_deref(), &text);
            } else {
                self.reply(host, target, &text);
            }
            return Outcome::Command(parsed.command.name());
        }
        let (mut text, effect) = commands::run_remote_command(parsed.command, &view);
        if parsed.command == RemoteCommand::Help {
            text = commands::help_text_denying(&self.config.deny_commands);
        }
        match effect {
            CommandEffect::None => {}
            CommandEffect::Pause => {
                self.state.set_paused(&conversation, true);
                self.save(host);
            }
            CommandEffect::Resume => {
                self.state.set_paused(&conversation, false);
                self.save(host);
            }
            CommandEffect::Follow | CommandEffect::Unfollow => {
                self.state
                    .set_following(&conversation, effect == CommandEffect::Follow);
                self.save(host);
            }
            CommandEffect::Abort => host.abort(),
            CommandEffect::Disconnect => {
                self.state.disconnect(&identity, &conversation);
                self.trust.live_codes.remove(&conversation);
                self.trust.reissued.remove(&conversation);
                self.save(host);
                host.log(
                    Level::Info,
                    "revoked remote pairing",
                    &[
                        ("transport", envelope.transport.clone()),
                        ("identity", identity.to_string()),
                    ],
                );
            }
        }
        // Audit: who ran what, never the arguments (I38).
        host.log(
            Level::Info,
            "remote command",
            &[
                ("transport", envelope.transport.clone()),
                ("identity", identity.to_string()),
                ("command", parsed.command.name().into()),
            ],
        );
        self.reply(host, target, &text);
        Outcome::Command(parsed.command.name())
    }

    /// Runs a session command (`/new`, `/compact`, `/model`, `/thinking`, `/usage`) on the
    /// agent and says what came of it. `/new` asks first while a turn runs or prompts
    /// wait: starting over from a phone must not throw away work by a slip of the thumb.
    fn session_command(
        &mut self,
        host: &mut dyn Host,
        envelope: &Envelope,
        target: &ConversationTarget,
        parsed: &ParsedCommand,
        command: SessionCommand,
        busy: bool,
    ) {
        // Audit: who ran what, never the arguments (I38).
        host.log(
            Level::Info,
            "remote command",
            &[
                ("transport", envelope.transport.clone()),
                ("identity", envelope.identity().to_string()),
                ("command", parsed.command.name().into()),
            ],
        );
        if command == SessionCommand::NewSession {
            if let Some((text, button)) =
                session_commands::new_needs_confirmation(&parsed.args, busy, self.queue.len())
            {
                let _ = self.deliver_with_buttons(
                    host,
                    target,
                    OutboundKind::Notice,
                    &text,
                    None,
                    &[button],
                );
                return;
            }
            if busy {
                host.abort();
            }
        }
        let (text, buttons) = match host.session_command(&command) {
            Ok(SessionReply::Done(text)) if command == SessionCommand::NewSession => {
                // The prompts waiting as follow-ups went with the old session (pi replaces
                // the whole session, its queue included); a record of them left here would
                // show in /queue and end the next turns' replies in the wrong chats.
                let dropped = self.queue.len();
                if dropped > 0 {
                    let gone = self.queue.clear();
                    self.react(host, &gone, Reaction::Failed, Some(Reaction::Received));
                    self.save(host);
                }
                (
                    session_commands::new_session_text(&text, dropped),
                    Vec::new(),
                )
            }
            Ok(SessionReply::Done(text)) => (text, Vec::new()),
            Ok(SessionReply::Models { current, available }) => {
                session_commands::models_reply(current.as_deref(), &available)
            }
            Ok(SessionReply::Usage(report)) => (session_commands::usage_text(&report), Vec::new()),
            Err(why) => (
                format!("/{} failed: {why}", parsed.command.name()),
                Vec::new(),
            ),
        };
        let _ =
            self.deliver_with_buttons(host, target, OutboundKind::Notice, &text, None, &buttons);
    }

    /// A message over `maxInboundChars`: never forwarded (docs/security.md#remote-input). It is
    /// held to the same pause and prompt budget as a prompt, so a paused chat hears why nothing
    /// happens and a stream of huge messages cannot earn a stream of replies.
    fn too_long(
        &mut self,
        host: &mut dyn Host,
        envelope: &Envelope,
        target: &ConversationTarget,
        chars: usize,
        limit: u32,
        now: u64,
    ) -> Outcome {
        if self.state.is_paused(&envelope.conversation_key()) {
            self.reply(host, target, notices::PAUSED_NOTICE);
            return Outcome::Paused;
        }
        if !self.admit(host, InputKind::Prompt, &envelope.identity(), target, now) {
            return Outcome::RateLimited;
        }
        host.log(
            Level::Info,
            "inbound message too long",
            &[
                ("transport", envelope.transport.clone()),
                ("chars", chars.to_string()),
                ("limit", limit.to_string()),
            ],
        );
        self.reply(host, target, &notices::too_long_notice(chars, limit));
        Outcome::TooLong { limit }
    }

    #[allow(clippy::too_many_arguments)]
    fn prompt(
        &mut self,
        host: &mut dyn Host,
        envelope: &Envelope,
        target: &ConversationTarget,
        text: String,
        deliver_as: Option<DeliverAs>,
        attachments: Vec<Attachment>,
        now: u64,
    ) -> Outcome {
        if self.state.is_paused(&envelope.conversation_key()) {
            self.reply(host, target, notices::PAUSED_NOTICE);
            return Outcome::Paused;
        }
        let identity = envelope.identity();
        if !self.admit(host, InputKind::Prompt, &identity, target, now) {
            return Outcome::RateLimited;
        }
        // Every prompt the agent takes is recorded until its turn starts; at the limit the
        // next is refused before it reaches the agent, so the queue (and the document every
        // save writes) stays bounded and nothing has to be cut later.
        let limit = self.config.max_queued_prompts;
        if self.queue.len() >= limit as usize {
            host.log(
                Level::Warning,
                "prompt not queued",
                &[
                    ("transport", envelope.transport.clone()),
                    ("limit", limit.to_string()),
                ],
            );
            self.reply(host, target, &notices::queue_full_notice(limit));
            return Outcome::QueueFull { limit };
        }
        let (voices, others): (Vec<&Attachment>, Vec<&Attachment>) =
            attachments.iter().partition(|a| voice::is_voice(a));
        let (images, files): (Vec<&Attachment>, Vec<&Attachment>) = others
            .into_iter()
            .partition(|a| inbox::is_model_image(a, &self.config.attachments));
        // Speech first: its refusals (no engine, too long) come before anything is fetched.
        if let Some(notice) = voices
            .iter()
            .find_map(|v| voice::voice_problem(v, &envelope.transport, &self.config.voice))
        {
            self.reply(host, target, &notice);
            return Outcome::AttachmentRefused;
        }
        let today = inbox::day_of(now);
        // Judged before anything is downloaded, on what the platform declared, with the
        // file's name in the reply (Telegram's 20 MB download limit said as such).
        if let Some(notice) = inbox::files_problem(
            &files,
            &envelope.transport,
            &self.config.inbox,
            self.state.inbox.used_on(today),
        ) {
            self.reply(host, target, &notice);
            return Outcome::AttachmentRefused;
        }
        let mut fetched_images = Vec::new();
        for attachment in images {
            match self.fetch_image(host, &envelope.transport, attachment) {
                Ok(image) => fetched_images.push(image),
                Err(notice) => {
                    // Nothing is forwarded when any attachment fails: a prompt without the
                    // picture it talks about would mislead the agent.
                    self.reply(host, target, notice);
                    return Outcome::AttachmentRefused;
                }
            }
        }
        let images = fetched_images;
        let mut saved = Vec::new();
        for file in files {
            match self.save_file(host, &envelope.transport, file, today) {
                Ok(file) => saved.push(file),
                Err(notice) => {
                    // The same rule as for images: the agent is not handed half of what
                    // was sent. Files saved before this one stay (their names are in the
                    // inbox), and the chat is told which one failed and why.
                    self.reply(host, target, &notice);
                    return Outcome::AttachmentRefused;
                }
            }
        }
        let mut transcripts = Vec::new();
        for attachment in voices {
            match self.transcribe(host, &envelope.transport, attachment) {
                Ok(transcript) => transcripts.push(transcript),
                Err(notice) => {
                    self.reply(host, target, &notice);
                    return Outcome::AttachmentRefused;
                }
            }
        }
        let text = if transcripts.is_empty() {
            text
        } else {
            // A transcript is remote input like typed text: the same length limit.
            let chars: usize = transcripts.iter().map(|t| t.chars().count()).sum();
            let limit = self.config.max_inbound_chars;
            if chars > limit as usize {
                self.reply(host, target, &notices::too_long_notice(chars, limit));
                return Outcome::TooLong { limit };
            }
            // The sender sees what the agent gets before the agent answers it.
            for transcript in &transcripts {
                self.reply(host, target, &voice::echo(transcript));
            }
            voice::prompt_with_transcript(&text, &transcripts)
        };
        let text = inbox::prompt_with_files(&text, &saved);
        let deliver_as = deliver_as.unwrap_or(DeliverAs::Immediate);
        if let Err(error) = host.send_prompt(&text, deliver_as, &images) {
            host.notify(Level::Error, &format!("failed to inject prompt: {error}"));
            self.reply(host, target, notices::PROMPT_NOT_DELIVERED_NOTICE);
            return Outcome::PromptFailed;
        }
        host.typing(
            &target.transport,
            &target.conversation_id,
            target.thread_id.as_deref(),
        );
        match deliver_as {
            DeliverAs::FollowUp => self.queued(host, target, envelope.message_id.clone()),
            DeliverAs::Steer => {
                // The steer changes the running turn's answer: this chat sees it.
                let mark = envelope.message_id.clone().map(|message_id| PromptMark {
                    target: target.clone(),
                    message_id,
                });
                self.join_turn(target, mark);
                self.save(host);
                self.reply(host, target, notices::STEERED_NOTICE);
            }
            // Recorded until its turn starts (like a follow-up): a restart between the agent taking
            // the prompt and its turn starting is then reported to the chat, not lost without a
            // word (found by the fault soak, docs/architecture.md#how-it-is-tested).
            DeliverAs::Immediate => {
                self.queue.push(target.clone(), envelope.message_id.clone());
                self.save(host);
            }
        }
        // The prompt text is never logged (I2).
        host.log(
            Level::Info,
            "prompt forwarded",
            &[
                ("transport", envelope.transport.clone()),
                ("deliverAs", deliver_as.as_str().into()),
                ("images", images.len().to_string()),
                ("files", saved.len().to_string()),
                ("voice", transcripts.len().to_string()),
            ],
        );
        Outcome::Prompt {
            images: images.len(),
        }
    }

    /// Applies the rate limit for one input; on denial answers with at most one notice
    /// a minute per identity (I37).
    fn admit(
        &mut self,
        host: &mut dyn Host,
        kind: InputKind,
        identity: &Identity,
        target: &ConversationTarget,
        now: u64,
    ) -> bool {
        match self
            .trust
            .rate
            .check(kind, identity, now, &self.config.rate_limit)
        {
            RateVerdict::Allowed => true,
            RateVerdict::Denied { notify } => {
                host.log(
                    Level::Warning,
                    "remote input rate limited",
                    &[
                        ("kind", kind.name().into()),
                        ("identity", identity.to_string()),
                    ],
                );
                if notify {
                    self.reply(host, target, notices::RATE_LIMITED_NOTICE);
                }
                false
            }
        }
    }

    /// Downloads one voice note, re-checks its size on the bytes received, and has the
    /// host's engine transcribe it. The error is the reply for the chat.
    fn transcribe(
        &mut self,
        host: &mut dyn Host,
        transport: &str,
        attachment: &Attachment,
    ) -> Result<String, String> {
        let settings = self.config.voice.clone();
        let Some(engine) = settings.engine.as_ref() else {
            return Err(voice::NO_ENGINE_NOTICE.to_owned());
        };
        let fetched = host
            .fetch_attachment(transport, &attachment.reference, settings.max_bytes)
            .map_err(|reason| {
                format!("I could not download that voice note, so nothing was sent to pi: {reason}")
            })?;
        let size = fetched.data.len() as u64;
        if size > settings.max_bytes {
            return Err(voice::too_large_notice(size, settings.max_bytes));
        }
        let media_type = fetched.media_type.to_ascii_lowercase();
        // The platform's declared type names the format better than a generic served one.
        let media_type = if media_type.starts_with("audio/") {
            media_type
        } else {
            attachment.media_type.to_ascii_lowercase()
        };
        let raw = host
            .transcribe(
                engine,
                &media_type,
                &voice::audio_name(&media_type),
                &fetched.data,
                settings.timeout_ms,
            )
            .map_err(|reason| {
                host.log(
                    Level::Warning,
                    "transcription failed",
                    &[
                        ("transport", transport.to_owned()),
                        ("error", reason.clone()),
                    ],
                );
                voice::failed_notice(&reason)
            })?;
        voice::judge_transcript(&raw)
    }

    /// Downloads one file, re-checks its size on the bytes received (I19) and the day's
    /// cap, and has the host save it under the first free name. Counts it against the
    /// day once saved. The error is the reply for the chat.
    fn save_file(
        &mut self,
        host: &mut dyn Host,
        transport: &str,
        attachment: &Attachment,
        today: u64,
    ) -> Result<inbox::SavedFile, String> {
        let settings = self.config.inbox.clone();
        let shown = inbox::shown_name(attachment);
        // The transport stops reading past the cap (its own error says so); the size is
        // checked again here on what arrived, whatever the transport did.
        let fetched = host
            .fetch_attachment(transport, &attachment.reference, settings.max_file_bytes)
            .map_err(|reason| inbox::fetch_failed_notice(&shown, &reason))?;
        let size = fetched.data.len() as u64;
        if size > settings.max_file_bytes {
            return Err(inbox::too_large_notice(
                &shown,
                size,
                settings.max_file_bytes,
            ));
        }
        if let Some(notice) = inbox::over_day(
            self.state.inbox.used_on(today),
            size,
            settings.max_bytes_per_day,
        ) {
            return Err(notice);
        }
        let name = inbox::file_name(attachment);
        for n in 1..=inbox::MAX_NAME_TRIES {
            let candidate = inbox::candidate(&name, n);
            match host.save_to_inbox(&settings.dir, &candidate, &fetched.data) {
                Ok(path) => {
                    self.state.inbox.add(today, size);
                    self.save(host);
                    return Ok(inbox::SavedFile {
                        path,
                        media_type: fetched.media_type.to_ascii_lowercase(),
                        bytes: size,
                    });
                }
                Err(InboxError::Exists) => continue,
                Err(InboxError::Failed(reason)) => {
                    host.log(
                        Level::Warning,
                        "inbox save failed",
                        &[
                            ("transport", transport.to_owned()),
                            ("error", reason.clone()),
                        ],
                    );
                    return Err(inbox::save_failed_notice(&shown, &reason));
                }
            }
        }
        Err(inbox::save_failed_notice(
            &shown,
            &format!(
                "{} files of that name are there already; clear out {}",
                inbox::MAX_NAME_TRIES,
                settings.dir
            ),
        ))
    }

    /// Downloads one attachment and re-checks what was actually served (I19, I25).
    fn fetch_image(
        &self,
        host: &mut dyn Host,
        transport: &str,
        attachment: &Attachment,
    ) -> Result<PromptImage, &'static str> {
        let policy = &self.config.attachments;
        let fetched = host
            .fetch_attachment(transport, &attachment.reference, policy.max_bytes)
            .map_err(|_| notices::ATTACHMENT_FETCH_FAILED_NOTICE)?;
        let media_type = fetched.media_type.to_ascii_lowercase();
        if !policy
            .allowed_media_types
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&media_type))
        {
            return Err(notices::ATTACHMENT_NOT_AN_IMAGE_NOTICE);
        }
        if fetched.data.len() as u64 > policy.max_bytes {
            return Err(notices::ATTACHMENT_TOO_LARGE_NOTICE);
        }
        Ok(PromptImage {
            media_type,
            data: fetched.data,
        })
    }
}

fn ignore_reason(reason: IgnoreReason) -> &'static str {
    match reason {
        IgnoreReason::Empty => "empty",
        IgnoreReason::Unaddressed => "unaddressed",
        IgnoreReason::StaleUnpaired => "unpaired and older than the pairing window",
    }
}
