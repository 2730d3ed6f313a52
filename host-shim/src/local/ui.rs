//! The local terminal of a session: notifications (the only place a pairing code is
//! shown, I1) and yes/no questions for local tool approval.

use std::sync::Mutex;
use std::time::Duration;

use crate::local::terminal::TerminalTransport;
use async_trait::async_trait;

use crate::local::logging::level_name;
use crate::wit::types::Level;
use transport_core::printable::strip_invisible_keep_lines;

/// The person at the terminal.
#[async_trait]
pub trait Ui: Send + Sync {
    /// Shows a notification locally.
    async fn notify(&self, level: Level, text: &str);
    /// Asks a yes/no question; false on no, on timeout and when nobody can answer.
    async fn confirm(&self, title: &str, message: &str) -> bool;

    /// Asks the local question of an approval the chats may also answer (remote
    /// approval): no deadline of its own (the bridge holds the deadline), and the caller
    /// drops the future once the approval is decided elsewhere. `None` when nobody can
    /// answer here: the decision is then left to the chats and the deadline.
    async fn ask_approval(&self, title: &str, message: &str) -> Option<bool> {
        Some(self.confirm(title, message).await)
    }
}

/// How long a local approval question waits before failing closed.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(60);

/// The terminal of `host-shim run`: notifications print apart from the chat.
pub struct TerminalUi(pub std::sync::Arc<TerminalTransport>);

#[async_trait]
impl Ui for TerminalUi {
    async fn notify(&self, level: Level, text: &str) {
        // A closed terminal has nobody left to read the note; the session goes on.
        let _ = self.0.notify(level_name(level), text).await;
    }

    async fn confirm(&self, title: &str, message: &str) -> bool {
        self.0
            .ask(&format!("{title}: {message}"), CONFIRM_TIMEOUT)
            .await
    }

    async fn ask_approval(&self, title: &str, message: &str) -> Option<bool> {
        self.0.ask_open(&format!("{title}: {message}")).await
    }
}

/// Notifications on stderr, for sessions without a terminal (e.g. `doctor`). Questions
/// cannot be answered there, so approval fails closed.
#[derive(Debug, Default)]
pub struct StderrUi;

#[async_trait]
impl Ui for StderrUi {
    async fn notify(&self, level: Level, text: &str) {
        let text = strip_invisible_keep_lines(text);
        eprintln!("[bot-connect] {}: {text}", level_name(level));
    }

    async fn confirm(&self, _title: &str, _message: &str) -> bool {
        false
    }

    async fn ask_approval(&self, _title: &str, _message: &str) -> Option<bool> {
        None
    }
}

/// Notifications on stderr labelled with a session's name: the terminal of the demo
/// sessions a broker runs (`host-shim serve --demo <name>`), where several share one
/// stderr. Nobody answers questions there, so approval fails closed.
#[derive(Debug)]
pub struct LabelledStderrUi {
    label: String,
}

impl LabelledStderrUi {
    /// A terminal whose lines start with `[label]`.
    pub fn new(label: &str) -> Self {
        LabelledStderrUi {
            label: label.to_owned(),
        }
    }
}

#[async_trait]
impl Ui for LabelledStderrUi {
    async fn notify(&self, level: Level, text: &str) {
        let text = strip_invisible_keep_lines(text);
        eprintln!("[{}] {}: {text}", self.label, level_name(level));
    }

    async fn confirm(&self, _title: &str, _message: &str) -> bool {
        false
    }

    async fn ask_approval(&self, _title: &str, _message: &str) -> Option<bool> {
        None
    }
}

/// Records notifications and answers questions from a script (tests).
#[derive(Debug, Default)]
pub struct RecordingUi {
    notes: Mutex<Vec<(Level, String)>>,
    answers: Mutex<Vec<bool>>,
    /// Answers meant for one tool's approval question, by the end of its title.
    approvals_for: Mutex<Vec<(String, bool)>>,
    approval_queued: tokio::sync::Notify,
}

impl RecordingUi {
    /// Queues answers for the next `confirm` calls; an empty queue answers no.
    pub fn answer(&self, yes: bool) {
        if let Ok(mut answers) = self.answers.lock() {
            answers.push(yes);
        }
    }

    /// Queues the answer to the approval question about `tool`, and only that one.
    /// The host asks each question from a task of its own, so an answer queued with
    /// [`RecordingUi::answer`] goes to whichever question is asked first: a test whose
    /// earlier question is still open when it queues would have it taken there.
    pub fn answer_approval_of(&self, tool: &str, yes: bool) {
        if let Ok(mut answers) = self.approvals_for.lock() {
            answers.push((tool.to_owned(), yes));
        }
        self.approval_queued.notify_waiters();
    }

    fn take_approval_for(&self, title: &str) -> Option<bool> {
        let mut answers = self.approvals_for.lock().ok()?;
        let at = answers
            .iter()
            .position(|(tool, _)| title.ends_with(&format!(": {tool}")))?;
        Some(answers.remove(at).1)
    }

    /// Every notification so far.
    pub fn notes(&self) -> Vec<(Level, String)> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// Every notification so far, forgotten here: a long soak checks them as it goes
    /// instead of keeping them all.
    pub fn take_notes(&self) -> Vec<(Level, String)> {
        self.notes
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default()
    }
}

#[async_trait]
impl Ui for RecordingUi {
    async fn notify(&self, level: Level, text: &str) {
        if let Ok(mut notes) = self.notes.lock() {
            notes.push((level, text.to_string()));
        }
    }

    async fn confirm(&self, _title: &str, _message: &str) -> bool {
        match self.answers.lock() {
            Ok(mut answers) if !answers.is_empty() => answers.remove(0),
            _ => false,
        }
    }

    /// A queued answer answers at once. Without one, the question waits for an answer
    /// queued for its tool ([`RecordingUi::answer_approval_of`]); with none ever queued
    /// the person never answers, so a test can let the chat or the deadline decide.
    async fn ask_approval(&self, title: &str, _message: &str) -> Option<bool> {
        let queued = match self.answers.lock() {
            Ok(mut answers) if !answers.is_empty() => Some(answers.remove(0)),
            _ => None,
        };
        if queued.is_some() {
            return queued;
        }
        loop {
            let queued_later = self.approval_queued.notified();
            tokio::pin!(queued_later);
            // Registered before looking, so an answer queued in between still wakes it.
            queued_later.as_mut().enable();
            if let Some(answer) = self.take_approval_for(title) {
                return Some(answer);
            }
            queued_later.await;
        }
    }
}
