//! `FakeTransport` rules (docs/architecture.md#transports-and-their-shared-core): ids,
//! switches, records, attachments.

use std::collections::HashMap;
use std::sync::Arc;

use transport_core::InboundStream;
use transport_core::inbound::channel;
use transport_core::{
    BotIdentity, Capabilities, Envelope, FetchedAttachment, LengthUnit, Markup, OutboundKind,
    OutboundMessage, SendReceipt, Transport, TransportError,
};
use transport_testing::fake::{FakeConfig, FakeTransport, SentMessage};

fn message(text: &str, edit_key: Option<&str>) -> OutboundMessage {
    OutboundMessage {
        conversation_id: "conv-1".to_owned(),
        thread_id: None,
        kind: OutboundKind::Reply,
        text: text.to_owned(),
        edit_key: edit_key.map(str::to_owned),
        buttons: Vec::new(),
        answers_press: None,
        reply_to: None,
    }
}

fn editable() -> FakeTransport {
    let defaults = FakeConfig::default();
    FakeTransport::new(FakeConfig {
        capabilities: Capabilities {
            edit: true,
            ..defaults.capabilities
        },
        ..defaults
    })
}

async fn started(fake: &FakeTransport) -> InboundStream {
    let (sink, receiver) = channel(8);
    fake.start(sink).await.expect("a fresh fake starts");
    receiver
}

#[test]
fn defaults_match_the_transport_table() {
    let fake = FakeTransport::default();
    assert_eq!(fake.id(), "fake");
    assert_eq!(
        fake.capabilities(),
        Capabilities {
            threads: false,
            edit: false,
            attachments: true,
            typing: true,
            max_message_length: 4000,
            length_unit: LengthUnit::Chars,
            markup: Markup::Markdown,
            reactions: false,
            drafts: false,
        }
    );
}

#[tokio::test]
async fn identify_derives_everything_from_the_id() {
    let fake = FakeTransport::new(FakeConfig {
        id: "alpha".to_owned(),
        ..FakeConfig::default()
    });
    assert_eq!(
        fake.identify().await,
        Ok(BotIdentity {
            bot_id: "alpha-bot".to_owned(),
            bot_name: "alpha bot".to_owned(),
            lock_name: Some("alpha-alpha-bot".to_owned()),
        })
    );
    fake.set_fail_identify(Some("bad token for alpha".to_owned()));
    assert_eq!(
        fake.identify().await,
        Err(TransportError::Failed("bad token for alpha".to_owned()))
    );
}

#[tokio::test]
async fn sends_are_numbered_and_recorded() {
    let fake = FakeTransport::default();
    let _inbound = started(&fake).await;
    let first = fake.send(message("one", None)).await;
    let second = fake.send(message("two", Some("fake-m1"))).await;
    assert_eq!(
        first,
        Ok(SendReceipt {
            message_id: "fake-m1".to_owned(),
            edit_key: None
        })
    );
    // Without edit support an edit key is ignored and the message is posted anew.
    assert_eq!(
        second,
        Ok(SendReceipt {
            message_id: "fake-m2".to_owned(),
            edit_key: None
        })
    );
    assert_eq!(
        fake.sent(),
        vec![
            SentMessage {
                message_id: "fake-m1".to_owned(),
                message: message("one", None)
            },
            SentMessage {
                message_id: "fake-m2".to_owned(),
                message: message("two", Some("fake-m1"))
            },
        ]
    );
    assert_eq!(fake.edits(), vec![]);
}

#[tokio::test]
async fn an_editable_fake_edits_in_place() {
    let fake = editable();
    let _inbound = started(&fake).await;
    let first = fake.send(message("v1", None)).await;
    assert_eq!(
        first,
        Ok(SendReceipt {
            message_id: "fake-m1".to_owned(),
            edit_key: Some("fake-m1".to_owned())
        })
    );
    let edit = fake.send(message("v2", Some("fake-m1"))).await;
    assert_eq!(
        edit,
        Ok(SendReceipt {
            message_id: "fake-m1".to_owned(),
            edit_key: Some("fake-m1".to_owned())
        })
    );
    assert_eq!(fake.edits(), vec![message("v2", Some("fake-m1"))]);
    assert_eq!(fake.sent().len(), 1);
}

#[tokio::test]
async fn switches_work_through_a_handle_after_boxing() {
    let fake = editable();
    let boxed: Arc<dyn Transport> = Arc::new(fake.handle());
    let (sink, _inbound) = channel(8);
    boxed.start(sink).await.expect("a fresh fake starts");

    fake.set_fail_edits(true);
    assert_eq!(
        boxed.send(message("v2", Some("fake-m1"))).await,
        Err(TransportError::EditRejected(
            "fake rejected the edit".to_owned()
        ))
    );
    assert!(
        boxed.send(message("plain", None)).await.is_ok(),
        "only edits fail"
    );

    fake.set_fail_sends(true);
    let refused = boxed.send(message("refused", None)).await;
    assert_eq!(
        refused,
        Err(TransportError::Failed("fake rejected the send".to_owned()))
    );
    assert_eq!(
        refused.map_err(|e| e.to_string()),
        Err("fake rejected the send".to_owned())
    );

    fake.set_fail_sends(false);
    fake.set_fail_edits(false);
    assert!(boxed.send(message("v3", Some("fake-m1"))).await.is_ok());
    assert_eq!(fake.edits(), vec![message("v3", Some("fake-m1"))]);
}

#[tokio::test]
async fn start_can_be_refused_and_runs_once() {
    let fake = FakeTransport::default();
    fake.set_refuse_start(Some("fake failed to start: no network".to_owned()));
    let (sink, _inbound) = channel(8);
    assert_eq!(
        fake.start(sink.clone()).await,
        Err(TransportError::Failed(
            "fake failed to start: no network".to_owned()
        ))
    );
    assert!(!fake.is_running());
    fake.set_refuse_start(None);
    assert_eq!(fake.start(sink.clone()).await, Ok(()));
    assert_eq!(
        fake.start(sink).await,
        Err(TransportError::AlreadyStarted("fake".to_owned()))
    );
}

#[tokio::test]
async fn nothing_works_before_start_or_after_stop() {
    let fake = FakeTransport::default();
    let not_started = Err(TransportError::NotStarted("fake".to_owned()));
    assert_eq!(fake.send(message("early", None)).await, not_started);
    assert_eq!(
        fake.send(message("early", None))
            .await
            .map_err(|e| e.to_string()),
        Err("fake transport is not started".to_owned())
    );
    assert_eq!(
        fake.inject(fake.envelope("early")).await,
        Err(TransportError::NotStarted("fake".to_owned()))
    );
    assert_eq!(
        fake.typing("conv-1", None).await,
        Err(TransportError::NotStarted("fake".to_owned()))
    );

    let _inbound = started(&fake).await;
    fake.stop().await;
    assert_eq!(fake.send(message("late", None)).await, not_started);
    assert_eq!(
        fake.inject(fake.envelope("late")).await,
        Err(TransportError::NotStarted("fake".to_owned()))
    );
}

#[tokio::test]
async fn inject_delivers_and_diagnose_counts() {
    let fake = FakeTransport::default();
    assert_eq!(fake.diagnose(), "stopped, sent 0, received 0");
    let mut inbound = started(&fake).await;
    fake.inject(fake.envelope("hi")).await.expect("started");
    fake.send(message("hello", None)).await.expect("started");
    fake.send(message("again", None)).await.expect("started");
    assert_eq!(
        inbound.recv().await.and_then(|i| i.into_envelope()),
        Some(Envelope {
            transport: "fake".to_owned(),
            conversation_id: "conv-1".to_owned(),
            user_id: "user-1".to_owned(),
            thread_id: None,
            timestamp: 0,
            text: "hi".to_owned(),
            is_direct: true,
            addressed: false,
            attachments: vec![],
            message_id: None,
            press: None,
        })
    );
    assert_eq!(fake.diagnose(), "running, sent 2, received 1");
    fake.stop().await;
    assert_eq!(fake.diagnose(), "stopped, sent 2, received 1");
}

#[tokio::test]
async fn inject_reports_a_dropped_receiver() {
    let fake = FakeTransport::default();
    drop(started(&fake).await);
    assert!(matches!(
        fake.inject(fake.envelope("lost")).await,
        Err(TransportError::Failed(message)) if message.contains("receiver of inbound envelopes was dropped")
    ));
}

#[tokio::test]
async fn typing_is_recorded() {
    let fake = FakeTransport::default();
    let _inbound = started(&fake).await;
    fake.typing("conv-1", None).await.expect("started");
    fake.typing("conv-2", Some("thread"))
        .await
        .expect("started");
    assert_eq!(
        fake.typing_calls(),
        vec!["conv-1".to_owned(), "conv-2".to_owned()]
    );
}

fn with_attachments(attachments: bool) -> FakeTransport {
    let defaults = FakeConfig::default();
    FakeTransport::new(FakeConfig {
        capabilities: Capabilities {
            attachments,
            ..defaults.capabilities
        },
        attachments: HashMap::from([(
            "file-1".to_owned(),
            ("Image/PNG; charset=binary".to_owned(), vec![1, 2, 3, 4, 5]),
        )]),
        ..defaults
    })
}

#[tokio::test]
async fn attachments_are_served_within_the_limit_on_real_bytes() {
    let fake = with_attachments(true);
    assert_eq!(
        fake.fetch_attachment("file-1", 5).await,
        Err(TransportError::NotStarted("fake".to_owned()))
    );
    let _inbound = started(&fake).await;
    assert_eq!(
        fake.fetch_attachment("file-1", 5).await,
        Ok(FetchedAttachment {
            media_type: "image/png".to_owned(),
            data: vec![1, 2, 3, 4, 5],
        })
    );
    assert_eq!(
        fake.fetch_attachment("file-1", 4).await,
        Err(TransportError::Failed(
            "attachment is 5 bytes, over the 4 byte limit".to_owned()
        ))
    );
    assert_eq!(
        fake.fetch_attachment("file-2", 100).await,
        Err(TransportError::Failed(
            "fake has no attachment file-2; give its bytes in FakeConfig::attachments".to_owned()
        ))
    );
}

#[tokio::test]
async fn attachments_can_be_switched_off() {
    let fake = with_attachments(false);
    let _inbound = started(&fake).await;
    assert_eq!(
        fake.fetch_attachment("file-1", 100).await,
        Err(TransportError::Unsupported(
            "fake cannot download attachments".to_owned()
        ))
    );
}

#[tokio::test]
async fn queued_faults_hit_the_next_sends_once_each_and_edit_faults_wait_for_an_edit() {
    let fake = editable();
    let _inbound = started(&fake).await;
    fake.queue_faults([
        TransportError::EditRejected("edit refused".to_owned()),
        TransportError::RateLimited { retry_after_ms: 50 },
        TransportError::Failed("HTTP 502".to_owned()),
    ]);
    // A new post skips the waiting edit fault and takes the 429, then the 502.
    assert_eq!(
        fake.send(message("a", None)).await,
        Err(TransportError::RateLimited { retry_after_ms: 50 })
    );
    assert_eq!(
        fake.send(message("a", None)).await,
        Err(TransportError::Failed("HTTP 502".to_owned()))
    );
    assert!(fake.send(message("a", None)).await.is_ok());
    assert_eq!(fake.faults_pending(), 1);
    assert_eq!(
        fake.send(message("b", Some("fake-m1"))).await,
        Err(TransportError::EditRejected("edit refused".to_owned()))
    );
    assert!(fake.send(message("b", Some("fake-m1"))).await.is_ok());
    assert_eq!(fake.faults_pending(), 0);
    assert_eq!(fake.sent().len(), 1);
    assert_eq!(fake.edits().len(), 1);
}
