//! What a transcript line may hold: redacted text, and no pairing code in any form.
//!
//! Secrets are replaced by the bridge's own engine (`guest::core::redact`), so there is
//! one list of secret shapes: a shape added for chat replies is kept out of transcripts
//! too, and the two can never disagree about what a token looks like.
//!
//! Pairing codes are digits, which no secret shape can tell from an issue number, so they
//! are masked by shape, digit by digit (`•`), wherever free text is written:
//! - in local texts (notifications, questions, local notes), where the bridge shows codes,
//!   every group of 4 to 10 digits (the range `pairingDigits` allows), even split by
//!   spaces, dots or dashes; such a group is remembered as a code this session showed;
//! - in every other free text (chat in and out, prompts, replies, log values), every group
//!   of the configured code length or of a length a shown code had, and every group whose
//!   digits hold a shown code (`123 456 7`: the code with a digit too many, no attempt);
//! - in an inbound message whose digits, counted over the whole text, are as many as a
//!   code has (that is how the bridge reads an attempt: `code: 12 34 56` is one), every
//!   digit. The line then says which shown code it was, if any, by position, never by
//!   value: replay types the code its own run showed at that position, so a pairing
//!   replays although neither run's code is in the file.
//!
//! Identifiers (user, conversation, message ids), paths and the saved state document are
//! only redacted: the bridge keys its state on them, a code never travels in them, and a
//! masked id would make replay talk about another conversation.

use crate::transcript::line::{Event, FileReadMeta};
use crate::wit::agent::{FileReadError, InboxError, SessionCommand, SessionReply};
use crate::wit::session::{AgentEvent, ConfigContent, ConfigSource, SettingValue, ToolAnswer};
use crate::wit::types::{Envelope, ToolDecision};

/// What a masked digit becomes.
pub const MASK: char = '•';

/// The code length when no config says otherwise (the bridge's default).
const DEFAULT_CODE_DIGITS: usize = 6;

/// The lengths `bridge.pairingDigits` accepts: local texts mask all of them.
const CODE_DIGITS_RANGE: std::ops::RangeInclusive<usize> = 4..=10;

/// Codes remembered for telling an attempt with a shown code from another number.
const REMEMBERED_CODES: usize = 64;

/// Draws shorter than this are withheld from `rng` lines: the bridge draws codes 4 bytes
/// at a time, while ids and salts take 8 bytes or more.
pub const RNG_KEEP_MIN: u32 = 8;

/// Redacts and masks the text of transcript lines for one session.
#[derive(Debug, Clone)]
pub struct Scrubber {
    /// The configured code length.
    code_digits: usize,
    /// Codes shown locally, oldest first (digits only).
    shown: Vec<String>,
}

impl Default for Scrubber {
    fn default() -> Self {
        Scrubber {
            code_digits: DEFAULT_CODE_DIGITS,
            shown: Vec::new(),
        }
    }
}

/// Char positions of the digits of each group: digits, optionally split by single
/// separators (`123 456`, `123-456`, `1.2.3.4.5.6`).
fn digit_groups(chars: &[char]) -> Vec<Vec<usize>> {
    let is_separator = |c: char| matches!(c, ' ' | '-' | '.' | '_' | '\u{a0}' | '\u{2009}');
    let mut groups = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let mut group = vec![i];
        let mut j = i + 1;
        loop {
            if j < chars.len() && chars[j].is_ascii_digit() {
                group.push(j);
                j += 1;
            } else if j + 1 < chars.len() && is_separator(chars[j]) && chars[j + 1].is_ascii_digit()
            {
                group.push(j + 1);
                j += 2;
            } else {
                break;
            }
        }
        groups.push(group);
        i = j;
    }
    groups
}

/// Most text holds no digit at all: it then needs no char-by-char pass.
fn has_digit(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_digit())
}

fn redact(text: &str) -> String {
    guest::core::redact::redact(text).text
}

fn mask_positions(chars: &mut [char], positions: &[usize]) {
    for &p in positions {
        chars[p] = MASK;
    }
}

impl Scrubber {
    /// Reads the code length from the config files the bridge is configured with, with
    /// the bridge's own reader: a transcript masks what this config makes a code.
    pub fn configure(&mut self, sources: &[ConfigSource]) {
        let loaded = crate::native_guest::read_config_natively(sources);
        self.code_digits = loaded.bridge.pairing_digits as usize;
    }

    /// The lengths free text masks: the configured one and those of codes shown.
    fn code_lengths(&self) -> Vec<usize> {
        let mut lengths = vec![self.code_digits];
        lengths.extend(self.shown.iter().map(String::len));
        lengths
    }

    /// Redaction only: identifiers, paths, the state document.
    pub fn plain(&self, text: &str) -> String {
        redact(text)
    }

    /// Whether a group of free text could be or hold a code.
    fn masks_group(&self, lengths: &[usize], chars: &[char], group: &[usize]) -> bool {
        if lengths.contains(&group.len()) {
            return true;
        }
        let digits: String = group.iter().map(|&p| chars[p]).collect();
        self.shown.iter().any(|code| digits.contains(code.as_str()))
    }

    /// Free text that is not local: groups that could be or hold a code are masked.
    pub fn text(&self, text: &str) -> String {
        let redacted = redact(text);
        if !has_digit(&redacted) {
            return redacted;
        }
        let lengths = self.code_lengths();
        let mut chars: Vec<char> = redacted.chars().collect();
        for group in digit_groups(&chars) {
            if self.masks_group(&lengths, &chars, &group) {
                mask_positions(&mut chars, &group);
            }
        }
        chars.into_iter().collect()
    }

    /// Local text, where the bridge shows codes: every group a code could be is masked
    /// and remembered as shown.
    pub fn local(&mut self, text: &str) -> String {
        let redacted = redact(text);
        if !has_digit(&redacted) {
            return redacted;
        }
        let mut chars: Vec<char> = redacted.chars().collect();
        for group in digit_groups(&chars) {
            if CODE_DIGITS_RANGE.contains(&group.len()) {
                let digits: String = group.iter().map(|&p| chars[p]).collect();
                self.remember(digits);
                mask_positions(&mut chars, &group);
            }
        }
        chars.into_iter().collect()
    }

    fn remember(&mut self, code: String) {
        self.shown.retain(|c| c != &code);
        self.shown.push(code);
        if self.shown.len() > REMEMBERED_CODES {
            self.shown.remove(0);
        }
    }

    /// An inbound message's text: masked text, masked positions, and which shown code
    /// (0 = the latest) an attempt typed, if any.
    pub fn inbound(&self, text: &str) -> (String, Vec<usize>, Option<usize>) {
        let redacted = redact(text);
        if !has_digit(&redacted) {
            return (redacted, Vec::new(), None);
        }
        let lengths = self.code_lengths();
        let mut chars: Vec<char> = redacted.chars().collect();
        let digits: Vec<usize> = (0..chars.len())
            .filter(|&p| chars[p].is_ascii_digit())
            .collect();
        let mut masked: Vec<usize> = Vec::new();
        let mut code = None;
        if lengths.contains(&digits.len()) {
            let typed: String = digits.iter().map(|&p| chars[p]).collect();
            code = self.shown.iter().rev().position(|c| *c == typed);
            masked = digits;
        } else {
            for group in digit_groups(&chars) {
                if self.masks_group(&lengths, &chars, &group) {
                    masked.extend(group);
                }
            }
        }
        mask_positions(&mut chars, &masked);
        (chars.into_iter().collect(), masked, code)
    }

    /// The text replay types for a masked inbound message: the code this run showed at
    /// the recorded position, or digits that are no code this run showed.
    pub fn unmask(&self, text: &str, masked: &[usize], code: Option<usize>) -> String {
        let mut chars: Vec<char> = text.chars().collect();
        let shown = code
            .and_then(|k| self.shown.len().checked_sub(k + 1))
            .map(|i| self.shown[i].clone())
            .filter(|c| c.len() == masked.len());
        let digits: Vec<char> = match shown {
            Some(code) => code.chars().collect(),
            None => {
                let filler = ('0'..='9')
                    .map(|d| std::iter::repeat_n(d, masked.len()).collect::<String>())
                    .find(|candidate| !self.shown.contains(candidate))
                    .unwrap_or_default();
                filler.chars().collect()
            }
        };
        for (&p, d) in masked.iter().zip(digits) {
            // A position that is out of range or holds no mask came from an edited line;
            // it is left alone rather than guessed at.
            if chars.get(p) == Some(&MASK) {
                chars[p] = d;
            }
        }
        chars.into_iter().collect()
    }

    fn envelope(&self, mut envelope: Envelope) -> (Envelope, Vec<usize>, Option<usize>) {
        let (text, masked, code) = self.inbound(&envelope.text);
        envelope.text = text;
        envelope.transport = self.plain(&envelope.transport);
        envelope.conversation_id = self.plain(&envelope.conversation_id);
        envelope.user_id = self.plain(&envelope.user_id);
        envelope.thread_id = envelope.thread_id.map(|t| self.plain(&t));
        for attachment in &mut envelope.attachments {
            attachment.reference = self.plain(&attachment.reference);
            attachment.name = attachment.name.as_deref().map(|n| self.text(n));
        }
        (envelope, masked, code)
    }

    fn decision(&self, decision: ToolDecision) -> ToolDecision {
        match decision {
            ToolDecision::Allow => ToolDecision::Allow,
            ToolDecision::Block(reason) => ToolDecision::Block(self.text(&reason)),
            // Globs the bridge wrote from the protected paths: nothing of the user's.
            narrowed @ ToolDecision::Narrowed(_) => narrowed,
        }
    }

    /// An answer to an agent question: typed text is redacted like any text.
    fn answer(
        &self,
        answer: crate::wit::agent::QuestionAnswer,
    ) -> crate::wit::agent::QuestionAnswer {
        match answer {
            crate::wit::agent::QuestionAnswer::Value(text) => {
                crate::wit::agent::QuestionAnswer::Value(self.text(&text))
            }
            other => other,
        }
    }

    /// `event` as a transcript may hold it. Inputs learn first (a `configure` sets the
    /// code length, a local text remembers the codes it showed).
    pub fn event(&mut self, event: Event) -> Event {
        use crate::wit::transport::SendError;
        match event {
            Event::Configure { sources, platforms } => {
                self.configure(&sources);
                let sources = sources
                    .into_iter()
                    .map(|mut s| {
                        if let ConfigContent::Text(text) = &s.content {
                            s.content = ConfigContent::Text(self.plain(text));
                        }
                        s
                    })
                    .collect();
                Event::Configure { sources, platforms }
            }
            Event::Envelope { envelope, .. } => {
                let (envelope, masked, code) = self.envelope(envelope);
                Event::Envelope {
                    envelope,
                    masked,
                    code,
                }
            }
            Event::Preview { envelope, .. } => {
                let (envelope, masked, code) = self.envelope(envelope);
                Event::Preview {
                    envelope,
                    masked,
                    code,
                }
            }
            Event::AgentEvent { event } => Event::AgentEvent {
                event: match event {
                    AgentEvent::AssistantMessage(text) => {
                        AgentEvent::AssistantMessage(self.text(&text))
                    }
                    AgentEvent::Notice(text) => AgentEvent::Notice(self.text(&text)),
                    AgentEvent::AssistantDraft(text) => {
                        AgentEvent::AssistantDraft(self.text(&text))
                    }
                    other => other,
                },
            },
            Event::LocalCommand { args } => Event::LocalCommand {
                args: self.plain(&args),
            },
            // A path and a caption are the agent's text, which may quote what a chat said.
            Event::SendFile { path, caption } => Event::SendFile {
                path: self.plain(&path),
                caption: caption.map(|c| self.text(&c)),
            },
            Event::FileSendAnswer { result } => Event::FileSendAnswer {
                result: match result {
                    Ok(text) => Ok(self.text(&text)),
                    Err(text) => Err(self.text(&text)),
                },
            },
            Event::ReadFile { path, max_bytes } => Event::ReadFile {
                path: self.plain(&path),
                max_bytes,
            },
            Event::FileRead { result } => Event::FileRead {
                result: match result {
                    Ok(meta) => Ok(FileReadMeta {
                        resolved_path: self.plain(&meta.resolved_path),
                        bytes: meta.bytes,
                    }),
                    Err(FileReadError::Failed(text)) => {
                        Err(FileReadError::Failed(self.plain(&text)))
                    }
                    Err(other) => Err(other),
                },
            },
            Event::SendUpload {
                transport,
                conversation_id,
                name,
                media_type,
                bytes,
                caption,
            } => Event::SendUpload {
                transport,
                conversation_id,
                name: self.text(&name),
                media_type,
                bytes,
                caption: self.text(&caption),
            },
            Event::Configured { mut configuration } => {
                for note in &mut configuration.notes {
                    note.text = self.local(&note.text);
                }
                for entry in configuration
                    .transports
                    .iter_mut()
                    .flat_map(|request| request.settings.iter_mut())
                {
                    if let SettingValue::Text(text) = &mut entry.value {
                        *text = self.plain(text);
                    }
                }
                Event::Configured { configuration }
            }
            Event::Started { mut notes } => {
                for note in &mut notes {
                    note.text = self.local(&note.text);
                }
                Event::Started { notes }
            }
            Event::Send { mut message } => {
                message.text = self.text(&message.text);
                message.conversation_id = self.plain(&message.conversation_id);
                for button in &mut message.buttons {
                    button.label = self.text(&button.label);
                    button.command = self.text(&button.command);
                }
                Event::Send { message }
            }
            Event::Draft {
                transport,
                conversation_id,
                draft_id,
                text,
            } => Event::Draft {
                transport,
                conversation_id: self.plain(&conversation_id),
                draft_id,
                text: self.text(&text),
            },
            Event::React {
                transport,
                conversation_id,
                message_id,
                reaction,
                replaces,
            } => Event::React {
                transport,
                conversation_id: self.plain(&conversation_id),
                message_id: self.plain(&message_id),
                reaction,
                replaces,
            },
            Event::Prompt {
                text,
                deliver_as,
                images,
            } => Event::Prompt {
                text: self.text(&text),
                deliver_as,
                images,
            },
            Event::Question { mut question } => {
                question.title = self.text(&question.title);
                question.message = self.text(&question.message);
                if let crate::wit::agent::QuestionKind::Select(options) = &mut question.kind {
                    for option in options.iter_mut() {
                        *option = self.text(option);
                    }
                }
                Event::Question { question }
            }
            Event::QuestionAnswered { id, answer } => Event::QuestionAnswered {
                id,
                answer: self.answer(answer),
            },
            Event::LocalQuestionAnswer { id, answer } => Event::LocalQuestionAnswer {
                id,
                answer: self.answer(answer),
            },
            Event::Verdict { id, decision } => Event::Verdict {
                id,
                decision: self.decision(decision),
            },
            Event::ToolAnswer { answer } => Event::ToolAnswer {
                answer: match answer {
                    ToolAnswer::Decided(decision) => ToolAnswer::Decided(self.decision(decision)),
                    ToolAnswer::Pending(mut request) => {
                        request.title = self.local(&request.title);
                        request.message = self.local(&request.message);
                        ToolAnswer::Pending(request)
                    }
                },
            },
            Event::Notify { level, text } => Event::Notify {
                level,
                text: self.local(&text),
            },
            Event::Confirm { title, message } => Event::Confirm {
                title: self.local(&title),
                message: self.local(&message),
            },
            Event::Log {
                level,
                event,
                fields,
            } => Event::Log {
                level,
                event: self.text(&event),
                fields: fields
                    .into_iter()
                    .map(|(k, v)| (k, self.text(&v)))
                    .collect(),
            },
            Event::Note { mut note } => {
                note.text = self.local(&note.text);
                Event::Note { note }
            }
            Event::PreviewText { text } => Event::PreviewText {
                text: self.text(&text),
            },
            Event::DiagnosticsReport { mut report } => {
                for status in &mut report.transports {
                    status.detail = status.detail.as_deref().map(|d| self.text(d));
                }
                Event::DiagnosticsReport { report }
            }
            Event::Trap { call, cause } => Event::Trap {
                call,
                cause: self.text(&cause),
            },
            Event::Loaded { document, queued } => Event::Loaded {
                document: document.map(|d| self.plain(&d)),
                queued: queued.iter().map(|entry| self.plain(entry)).collect(),
            },
            Event::Saved { result } => Event::Saved {
                result: result.map_err(|e| self.text(&e)),
            },
            Event::Identified { transport, result } => Event::Identified {
                transport,
                result: result.map_err(|e| self.text(&e)),
            },
            Event::Listened { transport, result } => Event::Listened {
                transport,
                result: result.map_err(|e| self.text(&e)),
            },
            Event::Sent { result } => Event::Sent {
                result: result.map_err(|e| match e {
                    SendError::EditRejected(m) => SendError::EditRejected(self.text(&m)),
                    SendError::Failed(m) => SendError::Failed(self.text(&m)),
                    other => other,
                }),
            },
            Event::Fetched { result } => Event::Fetched {
                result: result.map_err(|e| self.text(&e)),
            },
            Event::Reacted { result } => Event::Reacted {
                result: result.map_err(|e| self.text(&e)),
            },
            Event::Drafted { result } => Event::Drafted {
                result: result.map_err(|e| match e {
                    SendError::EditRejected(m) => SendError::EditRejected(self.text(&m)),
                    SendError::Failed(m) => SendError::Failed(self.text(&m)),
                    other => other,
                }),
            },
            Event::Diagnosed { transport, text } => Event::Diagnosed {
                transport,
                text: self.text(&text),
            },
            Event::Prompted { result } => Event::Prompted {
                result: result.map_err(|e| self.text(&e)),
            },
            // Compaction instructions and the agent's answers are typed or written text:
            // scrubbed like a prompt.
            Event::SessionCommand {
                command: SessionCommand::Compact(Some(text)),
            } => Event::SessionCommand {
                command: SessionCommand::Compact(Some(self.text(&text))),
            },
            Event::SessionReplied { result } => Event::SessionReplied {
                result: match result {
                    Ok(SessionReply::Done(text)) => Ok(SessionReply::Done(self.text(&text))),
                    Ok(other) => Ok(other),
                    Err(e) => Err(self.text(&e)),
                },
            },
            Event::Work { mut facts } => {
                facts.numstat = facts.numstat.map(|n| self.plain(&n));
                facts.last_prompt = facts.last_prompt.map(|p| self.text(&p));
                if let Some(run) = &mut facts.last_shell {
                    run.command = self.text(&run.command);
                    run.output = self.text(&run.output);
                }
                Event::Work { facts }
            }
            // A file name is what a person chose to call their file: scrubbed like text.
            Event::SaveToInbox { dir, name, bytes } => Event::SaveToInbox {
                dir,
                name: self.text(&name),
                bytes,
            },
            Event::InboxSaved { result } => Event::InboxSaved {
                result: match result {
                    Ok(path) => Ok(self.text(&path)),
                    Err(InboxError::Failed(e)) => Err(InboxError::Failed(self.text(&e))),
                    Err(InboxError::Exists) => Err(InboxError::Exists),
                },
            },
            // What someone said is scrubbed like what they typed.
            Event::Transcribed { result } => Event::Transcribed {
                result: match result {
                    Ok(text) => Ok(self.text(&text)),
                    Err(e) => Err(self.text(&e)),
                },
            },
            Event::Acquired { result } => Event::Acquired {
                result: result.map_err(|e| self.text(&e)),
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wit::session::ConfigScope;

    #[test]
    fn a_shown_code_is_masked_and_an_attempt_names_it_by_position() {
        let mut s = Scrubber::default();
        let note = s.local("Messenger pairing code: 123 456 (valid 5 min).");
        assert_eq!(note, "Messenger pairing code: ••• ••• (valid 5 min).");
        let (text, masked, code) = s.inbound("code: 123-456");
        assert_eq!(text, "code: •••-•••");
        assert_eq!(masked.len(), 6);
        assert_eq!(code, Some(0), "the latest code shown");
        // A wrong attempt is masked too, and names no code.
        let (text, _, code) = s.inbound("654321");
        assert_eq!((text.as_str(), code), ("••••••", None));
    }

    #[test]
    fn replay_types_its_own_code_or_a_number_that_is_none() {
        let mut replay = Scrubber::default();
        replay.local("Messenger pairing code: 999 000 (valid 5 min).");
        assert_eq!(
            replay.unmask("code: •••-•••", &[6, 7, 8, 10, 11, 12], Some(0)),
            "code: 999-000"
        );
        replay.local("code 000 000");
        // Not a shown code: digits that are no code this run showed.
        assert_eq!(replay.unmask("••••••", &[0, 1, 2, 3, 4, 5], None), "111111");
    }

    #[test]
    fn a_shown_code_inside_a_longer_number_is_masked_too() {
        let mut s = Scrubber::default();
        s.local("Messenger pairing code: 123 456 (valid 5 min).");
        // Seven digits: no attempt for the bridge, but the code is in there.
        let (text, masked, code) = s.inbound("123 456 7");
        assert_eq!((text.as_str(), masked.len(), code), ("••• ••• •", 7, None));
        assert_eq!(s.text("id 91234567"), "id ••••••••");
        assert_eq!(s.text("id 9123457"), "id 9123457");
    }

    #[test]
    fn an_attempt_spread_over_the_text_is_masked_whole() {
        let s = Scrubber::default();
        let (text, masked, _) = s.inbound("a1b2c3d4e5f6");
        assert_eq!(text, "a•b•c•d•e•f•");
        assert_eq!(masked, vec![1, 3, 5, 7, 9, 11]);
        // Chatter with other digit counts keeps its numbers (I33: no attempt either).
        assert_eq!(s.inbound("meeting at 3pm").0, "meeting at 3pm");
    }

    #[test]
    fn free_text_masks_code_sized_groups_only() {
        let s = Scrubber::default();
        assert_eq!(
            s.text("fix issue 123456 by 2026"),
            "fix issue •••••• by 2026"
        );
    }

    #[test]
    fn the_configured_code_length_is_read_with_the_bridges_reader() {
        let mut s = Scrubber::default();
        s.configure(&[ConfigSource {
            // The user's own file: a project file may not set pairing
            // (docs/security.md#project-files-only-narrow).
            scope: ConfigScope::Global,
            path: "/home/u/.pi/agent/bot-connect.json".into(),
            content: ConfigContent::Text(r#"{"bridge": {"pairingDigits": 8}}"#.into()),
        }]);
        assert_eq!(s.text("12345678 and 123456"), "•••••••• and 123456");
    }

    #[test]
    fn tokens_are_redacted_by_the_bridges_engine() {
        let s = Scrubber::default();
        let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        let out = s.text(&format!("my token {token}"));
        assert!(!out.contains(token), "{out}");
        assert_eq!(
            out,
            guest::core::redact::redact(&format!("my token {token}")).text
        );
    }
}
