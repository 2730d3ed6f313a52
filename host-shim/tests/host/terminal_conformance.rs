//! Runs the conformance kit (I41) against the terminal: its platform is the person at it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use host_shim::local::terminal::TerminalEvent;
use tokio::sync::mpsc;
use transport_testing::conformance::{ConformancePlatform, Subject, Violation, run_all};

use crate::common::{self, Person};

const SECRET: &str = "test-token";

/// The terminal's platform is the person at it: the screen shows what was posted, the
/// keyboard delivers, and a closed screen is a failing platform.
struct TerminalPlatform {
    person: tokio::sync::Mutex<Person>,
    _events: Mutex<mpsc::Receiver<TerminalEvent>>,
}

/// Posted and edited texts as drawn on the screen.
fn chat_on_screen(screen: &str) -> (Vec<String>, Vec<String>) {
    let (mut posted, mut edited) = (Vec::new(), Vec::new());
    let mut last: Option<&mut Vec<String>> = None;
    for line in screen.lines() {
        if let Some((_, text)) = line
            .strip_prefix("  chat │ bot #")
            .and_then(|rest| rest.split_once(": "))
        {
            posted.push(text.to_owned());
            last = Some(&mut posted);
        } else if let Some((_, text)) = line
            .strip_prefix("  chat │ bot (edited #")
            .and_then(|rest| rest.split_once("): "))
        {
            edited.push(text.to_owned());
            last = Some(&mut edited);
        } else if let (Some(more), Some(texts)) = (line.strip_prefix("       │ "), last.as_mut())
            && let Some(text) = texts.last_mut()
        {
            text.push('\n');
            text.push_str(more);
        } else {
            last = None;
        }
    }
    (posted, edited)
}

#[async_trait]
impl ConformancePlatform for TerminalPlatform {
    async fn posted(&self) -> Vec<String> {
        chat_on_screen(&self.person.lock().await.screen()).0
    }

    async fn edited(&self) -> Vec<String> {
        chat_on_screen(&self.person.lock().await.screen()).1
    }

    async fn fail_sends(&self) {
        self.person.lock().await.close_screen();
    }

    async fn deliver(&self, text: &str) -> Result<(), String> {
        self.person.lock().await.type_line(text).await;
        Ok(())
    }

    fn secret(&self) -> &str {
        SECRET
    }
}

#[tokio::test]
async fn terminal_conforms() {
    let violations = run_all(|| async {
        let (terminal, events, person) = common::terminal();
        Subject {
            transport: Arc::new(terminal),
            platform: Box::new(TerminalPlatform {
                person: tokio::sync::Mutex::new(person),
                _events: Mutex::new(events),
            }),
        }
    })
    .await;
    assert_eq!(violations, Vec::<Violation>::new());
}

#[test]
fn the_terminal_screen_parser_reads_multi_line_chat() {
    let screen = "  chat │ bot #1: a\n       │ b\n local ▌ [bot-connect] x\n       ▌ y\n  chat │ bot (edited #1): c\n       │ d\n";
    assert_eq!(
        chat_on_screen(screen),
        (vec!["a\nb".to_owned()], vec!["c\nd".to_owned()])
    );
}
