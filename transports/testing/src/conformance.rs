//! The conformance kit (I41): the contract every transport's tests run.
//!
//! The bridge treats all transports alike, so a transport that, say, posts a new message
//! where it should edit, or leaks its token into `doctor`, breaks the product in a way no
//! bridge test can see. Each transport's tests call [`run_all`] with a factory that builds
//! a fresh [`Subject`]: the transport plus a [`ConformancePlatform`], the test's view of
//! the messenger side. For the fake that view is the fake's own records; for an HTTP
//! transport it is a loopback server's record of what was posted, edited and failed.
//!
//! Rules (docs/architecture.md#transports-and-their-shared-core; 1–7 as the original had
//! them, plus 8–10): 1 send before start fails with `NotStarted`; 2 stop twice is safe and
//! stops; 3 send returns a non-empty message id and posts the text; 4 a platform send
//! failure surfaces as an error; 5 an edit key edits on an editable transport (nothing new
//! posted), otherwise posts anew; 6 a thread id is accepted without thread support; 7
//! `diagnose` never contains the secret; 8 start twice fails with `AlreadyStarted`; 9
//! identify gives a non-empty bot id and a lock name without the secret; 10 inbound
//! messages reach the sink in order; 11 a message answering a press the transport never
//! handed out fails and posts nothing (an answer meant for one person must never land in
//! the conversation because the transport could not find the press).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use transport_core::{
    Inbound, InboundStream, OutboundKind, OutboundMessage, SendReceipt, Transport, TransportError,
};

/// Longest a rule may take; a hung transport becomes a violation instead of a hung test.
const RULE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many rules there are.
pub const RULES: u8 = 11;
/// Sink room in the rules; more than rule 10 delivers, so no rule blocks on it.
const SINK_CAPACITY: usize = 16;

/// The messenger side of a transport under test.
#[async_trait]
pub trait ConformancePlatform: Send + Sync {
    /// Texts of the messages the platform shows as newly posted, oldest first.
    async fn posted(&self) -> Vec<String>;
    /// Texts of the edits the platform applied, oldest first.
    async fn edited(&self) -> Vec<String>;
    /// Makes every later send fail on the platform side (an HTTP error, a closed pipe).
    async fn fail_sends(&self);
    /// Delivers an inbound chat message with this text, as the platform would.
    async fn deliver(&self, text: &str) -> Result<(), String>;
    /// The credential the transport was built with; it must never show.
    fn secret(&self) -> &str;
    /// A conversation the platform accepts messages for.
    fn conversation_id(&self) -> String {
        "conformance-chat".to_owned()
    }
}

/// A fresh transport and its platform, built for one rule.
pub struct Subject {
    /// The transport under test, stopped.
    pub transport: Arc<dyn Transport>,
    /// The test's view of the messenger.
    pub platform: Box<dyn ConformancePlatform>,
}

/// A broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Rule number (1–11, see the module docs).
    pub rule: u8,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conformance rule {}: {}", self.rule, self.message)
    }
}

/// Outcome of one rule: `Err` says what the transport did wrong.
pub type RuleResult = Result<(), String>;

/// Runs every rule, each on a fresh subject from `make`, and returns the violations
/// (empty when the transport conforms). A rule that panics or takes longer than 10 s is
/// reported as a violation, so one bad rule does not hide the others.
pub async fn run_all<F, Fut>(make: F) -> Vec<Violation>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Subject>,
{
    let mut violations = Vec::new();
    for rule in 1..=RULES {
        let subject = make().await;
        let outcome = tokio::spawn(async move {
            tokio::time::timeout(RULE_TIMEOUT, run_rule(rule, subject)).await
        })
        .await;
        let message = match outcome {
            Ok(Ok(Ok(()))) => continue,
            Ok(Ok(Err(message))) => message,
            Ok(Err(_)) => format!("did not finish within {} s", RULE_TIMEOUT.as_secs()),
            Err(error) => format!("panicked: {}", panic_text(error)),
        };
        violations.push(Violation { rule, message });
    }
    violations
}

/// Runs one rule by number (1–11) on `subject`.
pub async fn run_rule(rule: u8, subject: Subject) -> RuleResult {
    match rule {
        1 => send_before_start_fails(subject).await,
        2 => stop_twice_is_safe(subject).await,
        3 => send_posts_the_text(subject).await,
        4 => platform_failure_surfaces(subject).await,
        5 => edit_key_edits_or_posts(subject).await,
        6 => thread_id_is_accepted(subject).await,
        7 => diagnose_hides_the_secret(subject).await,
        8 => start_twice_fails(subject).await,
        9 => identify_names_the_bot(subject).await,
        10 => inbound_arrives_in_order(subject).await,
        11 => unknown_press_is_not_answered(subject).await,
        other => Err(format!("there is no rule {other}; rules are 1 to {RULES}")),
    }
}

fn panic_text(error: tokio::task::JoinError) -> String {
    if !error.is_panic() {
        return error.to_string();
    }
    let payload = error.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".to_owned())
}

fn message(platform: &dyn ConformancePlatform, text: &str) -> OutboundMessage {
    OutboundMessage {
        conversation_id: platform.conversation_id(),
        thread_id: None,
        kind: OutboundKind::Reply,
        text: text.to_owned(),
        edit_key: None,
        buttons: Vec::new(),
        answers_press: None,
        reply_to: None,
    }
}

/// Starts the transport; the receiver must stay alive for the rule's duration.
async fn start(transport: &dyn Transport) -> Result<InboundStream, String> {
    let (sink, receiver) = transport_core::inbound::channel(SINK_CAPACITY);
    transport
        .start(sink)
        .await
        .map_err(|error| format!("start failed: {error}"))?;
    Ok(receiver)
}

async fn send(transport: &dyn Transport, message: OutboundMessage) -> Result<SendReceipt, String> {
    let text = message.text.clone();
    transport
        .send(message)
        .await
        .map_err(|error| format!("sending {text:?} failed: {error}"))
}

fn expect_not_started(result: Result<SendReceipt, TransportError>, when: &str) -> RuleResult {
    match result {
        Err(TransportError::NotStarted(_)) => Ok(()),
        Err(other) => Err(format!(
            "send {when} failed with {other:?}, expected NotStarted"
        )),
        Ok(receipt) => Err(format!(
            "send {when} succeeded ({receipt:?}); it must fail with NotStarted"
        )),
    }
}

/// Rule 1: a transport that is not running must not post.
pub async fn send_before_start_fails(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let result = transport
        .send(message(platform.as_ref(), "too early"))
        .await;
    expect_not_started(result, "before start")?;
    ensure_posted(platform.as_ref(), &[]).await
}

/// Rule 2: `stop` is idempotent, works before `start`, and really stops sending.
pub async fn stop_twice_is_safe(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    transport.stop().await;
    let _receiver = start(transport.as_ref()).await?;
    transport.stop().await;
    transport.stop().await;
    let result = transport
        .send(message(platform.as_ref(), "after stop"))
        .await;
    expect_not_started(result, "after stop")
}

/// Rule 3: a send posts exactly its text and returns an id to refer to it.
pub async fn send_posts_the_text(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let _receiver = start(transport.as_ref()).await?;
    let text = "hello from the conformance kit";
    let receipt = send(transport.as_ref(), message(platform.as_ref(), text)).await?;
    transport.stop().await;
    if receipt.message_id.is_empty() {
        return Err("send returned an empty message id".to_owned());
    }
    ensure_posted(platform.as_ref(), &[text]).await
}

/// Rule 4: a failure on the platform side reaches the caller (I30 relies on it).
pub async fn platform_failure_surfaces(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let _receiver = start(transport.as_ref()).await?;
    platform.fail_sends().await;
    let result = transport.send(message(platform.as_ref(), "refused")).await;
    transport.stop().await;
    match result {
        Err(_) => Ok(()),
        Ok(receipt) => Err(format!(
            "the platform refused the send but send succeeded ({receipt:?})"
        )),
    }
}

/// Rule 5: an edit key edits in place on an editable transport (progress cards rely on
/// it, I20); elsewhere the message is posted anew.
pub async fn edit_key_edits_or_posts(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let editable = transport.capabilities().edit;
    let _receiver = start(transport.as_ref()).await?;
    let first = send(transport.as_ref(), message(platform.as_ref(), "version 1")).await?;
    let key = match (editable, first.edit_key) {
        (true, Some(key)) => key,
        (true, None) => {
            return Err("an editable transport returned a receipt without an edit key".to_owned());
        }
        (false, Some(key)) => {
            return Err(format!(
                "a transport without edit support returned edit key {key:?}"
            ));
        }
        (false, None) => first.message_id,
    };
    let edit = OutboundMessage {
        edit_key: Some(key),
        ..message(platform.as_ref(), "version 2")
    };
    send(transport.as_ref(), edit).await?;
    transport.stop().await;
    if editable {
        ensure_posted(platform.as_ref(), &["version 1"]).await?;
        let edited = platform.edited().await;
        if edited != ["version 2"] {
            return Err(format!(
                "expected the edit \"version 2\", the platform saw edits {edited:?}"
            ));
        }
        Ok(())
    } else {
        ensure_posted(platform.as_ref(), &["version 1", "version 2"]).await
    }
}

/// Rule 6: the bridge passes thread ids regardless of support; they must not break sends.
pub async fn thread_id_is_accepted(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let _receiver = start(transport.as_ref()).await?;
    let threaded = OutboundMessage {
        thread_id: Some("conformance-thread".to_owned()),
        ..message(platform.as_ref(), "in a thread")
    };
    send(transport.as_ref(), threaded).await?;
    transport.stop().await;
    ensure_posted(platform.as_ref(), &["in a thread"]).await
}

/// Rule 7: `doctor` output is shared in bug reports; the credential must never be in it,
/// whatever state the transport is in.
pub async fn diagnose_hides_the_secret(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let secret = platform.secret().to_owned();
    if secret.is_empty() {
        return Err(
            "the platform gave an empty secret, so the check would prove nothing".to_owned(),
        );
    }
    let check = |when: &str| {
        let line = transport.diagnose();
        if line.contains(&secret) {
            Err(format!("diagnose {when} contains the secret: {line:?}"))
        } else {
            Ok(())
        }
    };
    check("before start")?;
    let _receiver = start(transport.as_ref()).await?;
    check("while running")?;
    send(transport.as_ref(), message(platform.as_ref(), "diagnosed")).await?;
    check("after a send")?;
    platform.fail_sends().await;
    // The failure itself is rule 4's business; here only the diagnosis after it counts.
    let _ = transport.send(message(platform.as_ref(), "refused")).await;
    check("after a failed send")?;
    transport.stop().await;
    check("after stop")
}

/// Rule 8: a second `start` would mean two receivers of the same messages.
pub async fn start_twice_fails(subject: Subject) -> RuleResult {
    let Subject { transport, .. } = subject;
    let _receiver = start(transport.as_ref()).await?;
    let (sink, _second) = transport_core::inbound::channel(SINK_CAPACITY);
    let result = transport.start(sink).await;
    transport.stop().await;
    match result {
        Err(TransportError::AlreadyStarted(_)) => Ok(()),
        Err(other) => Err(format!(
            "second start failed with {other:?}, expected AlreadyStarted"
        )),
        Ok(()) => Err("second start succeeded; it must fail with AlreadyStarted".to_owned()),
    }
}

/// Rule 9: the lock file is named after the bot, never the token (lock files are visible
/// to every local user).
pub async fn identify_names_the_bot(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let identity = transport
        .identify()
        .await
        .map_err(|error| format!("identify failed: {error}"))?;
    if identity.bot_id.is_empty() {
        return Err("identify returned an empty bot id".to_owned());
    }
    match identity.lock_name {
        Some(lock) if lock.is_empty() => Err("identify returned an empty lock name".to_owned()),
        Some(lock) if lock.contains(platform.secret()) => {
            Err(format!("the lock name contains the secret: {lock:?}"))
        }
        _ => Ok(()),
    }
}

/// Rule 10: a conversation read out of order is a different conversation.
pub async fn inbound_arrives_in_order(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let mut receiver = start(transport.as_ref()).await?;
    let texts = ["first", "second", "third"];
    for text in texts {
        platform
            .deliver(text)
            .await
            .map_err(|error| format!("the platform could not deliver {text:?}: {error}"))?;
    }
    let mut received = Vec::new();
    while received.len() < texts.len() {
        // Dropping the message here tells a redelivering platform it was handled.
        let Some(inbound) = receiver.recv().await else {
            break;
        };
        let Inbound::Message { envelope, .. } = inbound else {
            continue;
        };
        if envelope.transport != transport.id() {
            return Err(format!(
                "an envelope names transport {:?}, expected {:?}",
                envelope.transport,
                transport.id()
            ));
        }
        received.push(envelope.text);
    }
    transport.stop().await;
    if received != texts {
        return Err(format!("delivered {texts:?}, the sink got {received:?}"));
    }
    Ok(())
}

async fn ensure_posted(platform: &dyn ConformancePlatform, expected: &[&str]) -> RuleResult {
    let posted = platform.posted().await;
    if posted != expected {
        return Err(format!(
            "expected the platform to show {expected:?} posted, it shows {posted:?}"
        ));
    }
    Ok(())
}

/// Rule 11: an answer to a press the transport never handed out (or no longer knows)
/// fails and posts nothing: the bridge meant it for one person, and only the bridge may
/// decide to say it in the conversation instead.
pub async fn unknown_press_is_not_answered(subject: Subject) -> RuleResult {
    let Subject {
        transport,
        platform,
    } = subject;
    let _receiver = start(transport.as_ref()).await?;
    let answer = OutboundMessage {
        answers_press: Some("press-never-handed-out".to_owned()),
        reply_to: None,
        ..message(platform.as_ref(), "only for the presser")
    };
    let result = transport.send(answer).await;
    transport.stop().await;
    if let Ok(receipt) = result {
        return Err(format!(
            "answering a press the transport never handed out succeeded ({receipt:?}); it must fail"
        ));
    }
    ensure_posted(platform.as_ref(), &[]).await?;
    let edited = platform.edited().await;
    if !edited.is_empty() {
        return Err(format!(
            "answering an unknown press edited messages: {edited:?}"
        ));
    }
    Ok(())
}
