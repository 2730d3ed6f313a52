//! The local terminal of a session: notifications (the only place a pairing code is
//! shown, I1) and yes/no questions for local tool approval.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use transports::terminal::TerminalTransport;

use crate::logging::level_name;
use crate::runtime::bindings::pi::bot_connect::types::Level;

/// The person at the terminal.
#[async_trait]
pub trait Ui: Send + Sync {
    /// Shows a notification locally.
    async fn notify(&self, level: Level, text: &str);
    /// Asks a yes/no question; false on no, on timeout and when nobody can answer.
    async fn confirm(&self, title: &str, message: &str) -> bool;
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
}

/// Notifications on stderr, for sessions without a terminal (e.g. `doctor`). Questions
/// cannot be answered there, so approval fails closed.
#[derive(Debug, Default)]
pub struct StderrUi;

#[async_trait]
impl Ui for StderrUi {
    async fn notify(&self, level: Level, text: &str) {
        eprintln!("[bot-connect] {}: {text}", level_name(level));
    }

    async fn confirm(&self, _title: &str, _message: &str) -> bool {
        false
    }
}

/// Records notifications and answers questions from a script (tests).
#[derive(Debug, Default)]
pub struct RecordingUi {
    notes: Mutex<Vec<(Level, String)>>,
    answers: Mutex<Vec<bool>>,
}

impl RecordingUi {
    /// Queues answers for the next `confirm` calls; an empty queue answers no.
    pub fn answer(&self, yes: bool) {
        if let Ok(mut answers) = self.answers.lock() {
            answers.push(yes);
        }
    }

    /// Every notification so far.
    pub fn notes(&self) -> Vec<(Level, String)> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
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
}
