//! Runs the conformance kit (I41) against the fake (edit on and off) and the terminal,
//! and proves the kit catches each broken rule.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::mpsc;
use transports::conformance::{ConformancePlatform, Subject, Violation, run_all};
use transports::fake::{FakeConfig, FakeTransport};
use transports::terminal::TerminalEvent;
use transports::{
    BotIdentity, Capabilities, Envelope, InboundSink, OutboundMessage, SendReceipt, Transport,
    TransportError,
};

use common::Person;

const SECRET: &str = "test-token";

/// The fake's own records are its platform.
struct FakePlatform {
    fake: FakeTransport,
}

#[async_trait]
impl ConformancePlatform for FakePlatform {
    async fn posted(&self) -> Vec<String> {
        self.fake
            .sent()
            .into_iter()
            .map(|sent| sent.message.text)
            .collect()
    }

    async fn edited(&self) -> Vec<String> {
        self.fake
            .edits()
            .into_iter()
            .map(|edit| edit.text)
            .collect()
    }

    async fn fail_sends(&self) {
        self.fake.set_fail_sends(true);
    }

    async fn deliver(&self, text: &str) -> Result<(), String> {
        self.fake
            .inject(self.fake.envelope(text))
            .await
            .map_err(|error| error.to_string())
    }

    fn secret(&self) -> &str {
        SECRET
    }
}

fn fake(edit: bool) -> FakeTransport {
    let defaults = FakeConfig::default();
    FakeTransport::new(FakeConfig {
        capabilities: Capabilities {
            edit,
            ..defaults.capabilities
        },
        ..defaults
    })
}

fn fake_subject(edit: bool) -> Subject {
    let fake = fake(edit);
    Subject {
        transport: Arc::new(fake.handle()),
        platform: Box::new(FakePlatform { fake }),
    }
}

#[tokio::test]
async fn editable_fake_conforms() {
    assert_eq!(
        run_all(|| async { fake_subject(true) }).await,
        Vec::<Violation>::new()
    );
}

#[tokio::test]
async fn non_editable_fake_conforms() {
    assert_eq!(
        run_all(|| async { fake_subject(false) }).await,
        Vec::<Violation>::new()
    );
}

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

/// One way to break the contract, each breaking exactly one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    SendsBeforeStart,
    PanicsOnSecondStop,
    EmptyMessageId,
    SwallowsFailures,
    PostsInsteadOfEditing,
    RejectsThreads,
    LeaksSecretInDiagnose,
    RestartsSilently,
    SecretInLockName,
    SwapsInbound,
}

/// An editable fake with one flaw.
struct Flawed {
    fake: FakeTransport,
    flaw: Flaw,
    stops: AtomicU32,
    started: AtomicBool,
}

#[async_trait]
impl Transport for Flawed {
    fn id(&self) -> &str {
        self.fake.id()
    }

    fn capabilities(&self) -> Capabilities {
        self.fake.capabilities()
    }

    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        let mut identity = self.fake.identify().await?;
        if self.flaw == Flaw::SecretInLockName {
            identity.lock_name = Some(format!("bot-{SECRET}"));
        }
        Ok(identity)
    }

    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        self.started.store(true, Ordering::SeqCst);
        if self.flaw == Flaw::RestartsSilently {
            self.fake.stop().await;
        }
        if self.flaw != Flaw::SwapsInbound {
            return self.fake.start(sink).await;
        }
        let (inner, mut from_fake) = mpsc::channel::<Envelope>(16);
        tokio::spawn(async move {
            let (Some(first), Some(second)) = (from_fake.recv().await, from_fake.recv().await)
            else {
                return;
            };
            for envelope in [second, first] {
                let _ = sink.send(envelope).await;
            }
            while let Some(envelope) = from_fake.recv().await {
                let _ = sink.send(envelope).await;
            }
        });
        self.fake.start(inner).await
    }

    async fn stop(&self) {
        let second = self.stops.fetch_add(1, Ordering::SeqCst) >= 1;
        assert!(
            !(self.flaw == Flaw::PanicsOnSecondStop && second),
            "stopped twice"
        );
        self.fake.stop().await;
    }

    async fn send(&self, mut message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        let pretend = SendReceipt {
            message_id: "pretend".to_owned(),
            edit_key: Some("pretend".to_owned()),
        };
        match self.flaw {
            Flaw::SendsBeforeStart if !self.started.load(Ordering::SeqCst) => return Ok(pretend),
            Flaw::RejectsThreads if message.thread_id.is_some() => {
                return Err(TransportError::Failed(
                    "threads are not supported".to_owned(),
                ));
            }
            Flaw::PostsInsteadOfEditing => message.edit_key = None,
            _ => {}
        }
        match self.fake.send(message).await {
            Err(TransportError::Failed(_)) if self.flaw == Flaw::SwallowsFailures => Ok(pretend),
            Ok(receipt) if self.flaw == Flaw::EmptyMessageId => Ok(SendReceipt {
                message_id: String::new(),
                ..receipt
            }),
            other => other,
        }
    }

    fn diagnose(&self) -> String {
        let line = self.fake.diagnose();
        if self.flaw == Flaw::LeaksSecretInDiagnose {
            format!("{line}, token {SECRET}")
        } else {
            line
        }
    }
}

#[tokio::test]
async fn the_kit_catches_each_broken_rule() {
    let cases = [
        (Flaw::SendsBeforeStart, 1),
        (Flaw::PanicsOnSecondStop, 2),
        (Flaw::EmptyMessageId, 3),
        (Flaw::SwallowsFailures, 4),
        (Flaw::PostsInsteadOfEditing, 5),
        (Flaw::RejectsThreads, 6),
        (Flaw::LeaksSecretInDiagnose, 7),
        (Flaw::RestartsSilently, 8),
        (Flaw::SecretInLockName, 9),
        (Flaw::SwapsInbound, 10),
    ];
    for (flaw, rule) in cases {
        let violations = run_all(|| async move {
            let fake = fake(true);
            Subject {
                transport: Arc::new(Flawed {
                    fake: fake.handle(),
                    flaw,
                    stops: AtomicU32::new(0),
                    started: AtomicBool::new(false),
                }),
                platform: Box::new(FakePlatform { fake }),
            }
        })
        .await;
        let rules: Vec<u8> = violations.iter().map(|violation| violation.rule).collect();
        assert_eq!(rules, vec![rule], "{flaw:?}: {violations:?}");
    }
}
