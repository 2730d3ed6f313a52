//! Runs the conformance kit (I41) against the fake (edit on and off) and proves the kit
//! catches each broken rule.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use async_trait::async_trait;
use transport_core::{
    BotIdentity, Capabilities, InboundSink, OutboundMessage, SendReceipt, Transport, TransportError,
};
use transport_testing::conformance::{ConformancePlatform, Subject, Violation, run_all};
use transport_testing::fake::{FakeConfig, FakeTransport};

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
    /// Ignores `answers_press` and posts the private answer in the conversation.
    PostsPressAnswers,
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
        let (inner, mut from_fake) = transport_core::inbound::channel(16);
        tokio::spawn(async move {
            let (Some(first), Some(second)) = (from_fake.recv().await, from_fake.recv().await)
            else {
                return;
            };
            for inbound in [second, first] {
                if let Some(envelope) = inbound.into_envelope() {
                    let _ = sink.deliver(envelope).await;
                }
            }
            while let Some(inbound) = from_fake.recv().await {
                if let Some(envelope) = inbound.into_envelope() {
                    let _ = sink.deliver(envelope).await;
                }
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
            Flaw::PostsPressAnswers => message.answers_press = None,
            _ => {}
        }
        // Only the platform's failures are swallowed: a refused press answer is the
        // transport's own refusal (rule 11's business, not rule 4's).
        let press_answer = message.answers_press.is_some();
        match self.fake.send(message).await {
            Err(TransportError::Failed(_))
                if self.flaw == Flaw::SwallowsFailures && !press_answer =>
            {
                Ok(pretend)
            }
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
        (Flaw::PostsPressAnswers, 11),
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
