//! Ack after effect for prompts (docs/scaling.md). A prompt's effect is its reply, which
//! comes at the end of a turn, long after the bridge handed the prompt to the agent. Acked
//! at hand-over, a prompt whose node died mid-turn would be gone: the new node would only
//! report the turn as stopped, and the reply the person was owed would never come. So the
//! session node holds a prompt's ack until the turn it started has settled *and* the
//! bridge has saved that (the reply is sent by then); a node dying before that leaves the
//! prompt unacked, and the next node runs it again.
//!
//! The ledger learns both halves without reading the bridge's mind:
//! - [`LedgerAgent`] counts the prompts the agent accepted and the turns it settled;
//! - [`LedgerStore`] reads every save for a running turn (the document's `turn`) and
//!   queued prompts (the queue's entries): what the bridge records until a turn's reply is
//!   out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use tokio::sync::Notify;

use crate::agent::{Agent, AgentSignal, RecentWork, SignalSender};
use crate::disk::state_store::{StateChanges, StateStore, StateStoreError, StoredState};
use crate::wit::agent::{DeliverAs, PromptImage, SessionInfo};
use crate::wit::session::AgentEvent;

/// One session's count of prompts taken and turns settled, and what its last saved
/// document recorded.
pub struct TurnLedger {
    agent: Arc<dyn Agent>,
    taken: AtomicU64,
    settled: AtomicU64,
    /// The last saved document had no running turn.
    no_turn: AtomicBool,
    /// The last saved document had no queued prompt.
    no_queue: AtomicBool,
    /// `taken` and `settled` just before the last document was saved: what it speaks for.
    taken_at_save: AtomicU64,
    settled_at_save: AtomicU64,
    changed: Notify,
}

impl TurnLedger {
    /// A ledger for the session of `agent` (the agent itself, not a [`LedgerAgent`]).
    pub fn new(agent: Arc<dyn Agent>) -> Arc<TurnLedger> {
        Arc::new(TurnLedger {
            agent,
            taken: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            no_turn: AtomicBool::new(true),
            no_queue: AtomicBool::new(true),
            taken_at_save: AtomicU64::new(0),
            settled_at_save: AtomicU64::new(0),
            changed: Notify::new(),
        })
    }

    /// Prompts the agent has accepted so far.
    pub fn taken(&self) -> u64 {
        self.taken.load(Ordering::SeqCst)
    }

    /// True once the reply owed for the `prompt`-th accepted prompt is out: its turn (the
    /// `prompt`-th) has settled and a document without a running turn was saved after, or
    /// nothing is owed any more (agent idle, no turn and no queued prompt in a document
    /// saved after the prompt was taken: a `/stop` may drop follow-ups that then never get
    /// a turn).
    ///
    /// Only a document saved after the fact speaks for it. Read from any earlier document,
    /// "no turn" held right after the agent took a prompt and before its turn began (the
    /// agent still idle), and the prompt was acked with its turn not yet run: a node dying
    /// then lost it.
    pub fn is_settled(&self, prompt: u64) -> bool {
        let no_turn = self.no_turn.load(Ordering::SeqCst);
        let after_settle = self.settled_at_save.load(Ordering::SeqCst) >= prompt;
        let after_take = self.taken_at_save.load(Ordering::SeqCst) >= prompt;
        (after_settle && no_turn)
            || (after_take
                && no_turn
                && self.no_queue.load(Ordering::SeqCst)
                && self.agent.is_idle())
    }

    /// Returns once [`TurnLedger::is_settled`] holds for `prompt`.
    pub async fn settled(&self, prompt: u64) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change between the check and the wait is
            // not missed.
            changed.as_mut().enable();
            if self.is_settled(prompt) {
                return;
            }
            changed.await;
        }
    }

    fn bump(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// What the ledger has counted (prompts taken, turns settled), taken just before a
    /// save: the document being saved can speak for no more than that. (The guest takes
    /// prompts one call at a time, so none is taken while it saves; a turn's end arrives
    /// from the agent's own task and may be counted meanwhile.)
    fn mark(&self) -> (u64, u64) {
        (
            self.taken.load(Ordering::SeqCst),
            self.settled.load(Ordering::SeqCst),
        )
    }

    #[cfg(test)]
    fn saved(&self, document: &str, queued: u64) {
        self.record(Some(document), queued, self.mark());
    }

    /// A save went through: `document` is the new document (`None`: it did not change),
    /// `queued` the number of queue entries stored now.
    fn record(&self, document: Option<&str>, queued: u64, (taken, settled): (u64, u64)) {
        let no_turn = match document.map(serde_json::from_str::<serde_json::Value>) {
            Some(Ok(value)) => value.get("turn").is_none_or(serde_json::Value::is_null),
            // Not JSON: the store refuses it anyway; nothing is settled by it.
            Some(Err(_)) => false,
            None => self.no_turn.load(Ordering::SeqCst),
        };
        let readable =
            document.is_none_or(|d| serde_json::from_str::<serde_json::Value>(d).is_ok());
        let no_queue = queued == 0 && readable;
        self.taken_at_save.store(taken, Ordering::SeqCst);
        self.settled_at_save.store(settled, Ordering::SeqCst);
        self.no_turn.store(no_turn, Ordering::SeqCst);
        self.no_queue.store(no_queue, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// An agent whose accepted prompts and settled turns the ledger counts.
pub struct LedgerAgent {
    ledger: Arc<TurnLedger>,
}

impl LedgerAgent {
    /// The agent of `ledger`, counted.
    pub fn new(ledger: Arc<TurnLedger>) -> LedgerAgent {
        LedgerAgent { ledger }
    }
}

#[async_trait]
impl Agent for LedgerAgent {
    fn attach(&self, signals: SignalSender) {
        let (tx, mut rx) = crate::agent::signal_channel(64);
        self.ledger.agent.attach(tx);
        // Weak: the ledger owns the agent, which owns this channel's sender, so a strong
        // reference here would keep a stopped session's agent and this task alive for ever.
        let ledger = Arc::downgrade(&self.ledger);
        tokio::spawn(async move {
            while let Some(signal) = rx.recv().await {
                // Counted before the session has it: the save it makes on reading it must
                // find the turn counted, since a document speaks only for what was counted
                // before it was saved. (A save from before the session read it still shows
                // the turn running, so counting early settles nothing early.)
                if matches!(signal, AgentSignal::Event(AgentEvent::TurnSettled))
                    && let Some(ledger) = ledger.upgrade()
                {
                    ledger.bump(&ledger.settled);
                }
                if signals.send(signal).await.is_err() {
                    return;
                }
            }
        });
    }

    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        self.ledger
            .agent
            .send_prompt(text, deliver_as, images)
            .await?;
        self.ledger.bump(&self.ledger.taken);
        Ok(())
    }

    fn abort(&self) {
        self.ledger.agent.abort();
    }

    fn is_idle(&self) -> bool {
        self.ledger.agent.is_idle()
    }

    fn session_info(&self) -> SessionInfo {
        self.ledger.agent.session_info()
    }

    fn recent_work(&self) -> RecentWork {
        self.ledger.agent.recent_work()
    }
}

/// A state store whose saves the ledger reads: the document for a running turn, the
/// queue's length for prompts still waiting.
pub struct LedgerStore {
    inner: Arc<dyn StateStore>,
    ledger: Arc<TurnLedger>,
    /// Queue entries the store holds for this session, followed through each save.
    queued: AtomicU64,
}

impl LedgerStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn StateStore>, ledger: Arc<TurnLedger>) -> LedgerStore {
        LedgerStore {
            inner,
            ledger,
            queued: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl StateStore for LedgerStore {
    async fn load(&self, session_key: &str) -> Result<Option<StoredState>, StateStoreError> {
        let loaded = self.inner.load(session_key).await?;
        let queued = loaded.as_ref().map_or(0, |state| state.queued.len());
        self.queued.store(queued as u64, Ordering::SeqCst);
        Ok(loaded)
    }

    async fn save(&self, session_key: &str, changes: &StateChanges) -> Result<(), StateStoreError> {
        let mark = self.ledger.mark();
        self.inner.save(session_key, changes).await?;
        let queued = self
            .queued
            .load(Ordering::SeqCst)
            .saturating_sub(u64::from(changes.dequeued))
            .saturating_add(changes.enqueued.len() as u64);
        self.queued.store(queued, Ordering::SeqCst);
        self.ledger
            .record(changes.document.as_deref(), queued, mark);
        Ok(())
    }

    fn path(&self) -> Option<std::path::PathBuf> {
        self.inner.path()
    }

    fn hold(&self, session_key: &str) {
        self.inner.hold(session_key);
    }

    fn release(&self, session_key: &str) {
        self.inner.release(session_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(idle: bool) -> Arc<TurnLedger> {
        TurnLedger::new(Arc::new(Fake::new(idle)))
    }

    /// An agent that is idle or not, and hands the test the channel it was attached to.
    struct Fake {
        idle: bool,
        signals: std::sync::Mutex<Option<SignalSender>>,
    }

    impl Fake {
        fn new(idle: bool) -> Fake {
            Fake {
                idle,
                signals: std::sync::Mutex::new(None),
            }
        }
    }

    #[async_trait]
    impl Agent for Fake {
        fn attach(&self, signals: SignalSender) {
            *self.signals.lock().expect("fake agent lock") = Some(signals);
        }
        async fn send_prompt(
            &self,
            _text: String,
            _deliver_as: DeliverAs,
            _images: Vec<PromptImage>,
        ) -> Result<(), String> {
            Ok(())
        }
        fn abort(&self) {}
        fn is_idle(&self) -> bool {
            self.idle
        }
        fn session_info(&self) -> SessionInfo {
            SessionInfo {
                id: "s".into(),
                name: None,
                cwd: "/".into(),
                accepts_images: false,
            }
        }
        fn recent_work(&self) -> RecentWork {
            RecentWork::default()
        }
    }

    #[tokio::test]
    async fn a_settled_turn_is_counted_before_the_session_reads_it() {
        // The session saves on reading the settle, and that document speaks only for what
        // was counted before it: counted after forwarding, the settling save could come
        // first, the prompt's ack would wait for a later save that an idle session never
        // makes, and a node stopping meanwhile would run the prompt again.
        let inner = Arc::new(Fake::new(false));
        let ledger = TurnLedger::new(inner.clone());
        let agent = LedgerAgent::new(ledger.clone());
        // The session's channel is full, so the forwarder waits at its send: what the
        // ledger shows meanwhile was counted before the session could read the settle.
        let (signals, mut session) = crate::agent::signal_channel(1);
        let filler = AgentSignal::Event(AgentEvent::AssistantMessage("earlier".into()));
        signals.send(filler).await.expect("room for one");
        agent.attach(signals);
        let emit = inner.signals.lock().expect("fake agent lock").clone();
        let emit = emit.expect("attached");
        emit.send(AgentSignal::Event(AgentEvent::TurnSettled))
            .await
            .expect("forwarder listening");
        for _ in 0..64 {
            if ledger.settled.load(Ordering::SeqCst) == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(ledger.settled.load(Ordering::SeqCst), 1);
        assert!(matches!(
            session.recv().await,
            Some(AgentSignal::Event(AgentEvent::AssistantMessage(_)))
        ));
        let settle = tokio::time::timeout(std::time::Duration::from_secs(5), session.recv());
        assert!(matches!(
            settle.await.expect("forwarded"),
            Some(AgentSignal::Event(AgentEvent::TurnSettled))
        ));
    }

    const TURN: &str = r#"{"turn":{"startedAt":1,"remote":true,"cards":[]}}"#;

    #[test]
    fn a_prompt_is_settled_only_once_its_turn_ended_and_that_was_saved() {
        let ledger = ledger(false);
        ledger.bump(&ledger.taken);
        ledger.saved(TURN, 0);
        assert!(!ledger.is_settled(1), "turn running");
        ledger.bump(&ledger.settled);
        assert!(
            !ledger.is_settled(1),
            "settled, but the bridge has not saved the end"
        );
        ledger.saved(r#"{"turn":null}"#, 0);
        assert!(ledger.is_settled(1));
    }

    #[test]
    fn the_first_prompt_settles_while_a_follow_up_still_waits_for_its_turn() {
        let ledger = ledger(false);
        ledger.bump(&ledger.taken);
        ledger.bump(&ledger.taken);
        ledger.saved(TURN, 0);
        ledger.bump(&ledger.settled);
        ledger.saved("{}", 1);
        assert!(ledger.is_settled(1), "its reply is out");
        assert!(!ledger.is_settled(2), "the follow-up's turn has not run");
        ledger.saved(TURN, 0);
        assert!(!ledger.is_settled(2));
        ledger.bump(&ledger.settled);
        ledger.saved(r#"{"pairings":{}}"#, 0);
        assert!(ledger.is_settled(2));
    }

    #[test]
    fn follow_ups_a_stop_dropped_are_owed_nothing_once_the_agent_is_idle() {
        let busy = ledger(false);
        busy.bump(&busy.taken);
        busy.bump(&busy.taken);
        busy.saved(r#"{}"#, 0);
        assert!(!busy.is_settled(2), "agent still busy");
        let idle = ledger(true);
        idle.bump(&idle.taken);
        idle.bump(&idle.taken);
        idle.saved("{}", 1);
        assert!(!idle.is_settled(2), "the queue still holds one");
        idle.saved(r#"{}"#, 0);
        assert!(idle.is_settled(2));
    }

    #[test]
    fn a_document_saved_before_a_prompt_was_taken_does_not_settle_it() {
        // The agent took the prompt and has not started its turn: still idle, and the last
        // document (from before) shows no turn. Acked then, a node dying lost the prompt.
        let ledger = ledger(true);
        ledger.saved("{}", 0);
        ledger.bump(&ledger.taken);
        assert!(
            !ledger.is_settled(1),
            "nothing was saved since it was taken"
        );
        ledger.saved(TURN, 0);
        assert!(!ledger.is_settled(1), "turn running");
        // A settle counted after the last save is not spoken for either.
        ledger.bump(&ledger.settled);
        assert!(!ledger.is_settled(1), "the end is not saved yet");
        ledger.saved("{}", 0);
        assert!(ledger.is_settled(1));
    }

    /// A store that takes every save, for the ledger store's own bookkeeping.
    struct Taking;

    #[async_trait]
    impl StateStore for Taking {
        async fn load(&self, _: &str) -> Result<Option<StoredState>, StateStoreError> {
            Ok(Some(StoredState {
                document: TURN.into(),
                queued: vec!["{}".into(), "{}".into()],
            }))
        }
        async fn save(&self, _: &str, _: &StateChanges) -> Result<(), StateStoreError> {
            Ok(())
        }
        fn path(&self) -> Option<std::path::PathBuf> {
            None
        }
        fn hold(&self, _session_key: &str) {}
        fn release(&self, _session_key: &str) {}
    }

    #[tokio::test]
    async fn the_ledger_store_follows_the_queue_through_saves_that_change_only_it() {
        let ledger = ledger(true);
        let store = LedgerStore::new(Arc::new(Taking), ledger.clone());
        store.load("s").await.expect("load");
        ledger.bump(&ledger.taken);
        let dequeue = |n| StateChanges {
            document: None,
            dequeued: n,
            enqueued: vec![],
        };
        store
            .save("s", &StateChanges::document("{}"))
            .await
            .expect("save");
        assert!(!ledger.is_settled(1), "two entries still queued");
        store.save("s", &dequeue(1)).await.expect("save");
        assert!(!ledger.is_settled(1), "one entry still queued");
        store.save("s", &dequeue(1)).await.expect("save");
        assert!(ledger.is_settled(1), "nothing queued, no turn, agent idle");
    }

    #[test]
    fn an_unreadable_document_records_nothing() {
        let ledger = ledger(true);
        ledger.saved("not json", 0);
        assert!(!ledger.is_settled(0));
    }

    #[tokio::test]
    async fn the_wait_ends_when_the_settling_save_comes() {
        let ledger = ledger(false);
        ledger.bump(&ledger.taken);
        ledger.saved(TURN, 0);
        let waiting = tokio::spawn({
            let ledger = ledger.clone();
            async move { ledger.settled(1).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        ledger.bump(&ledger.settled);
        ledger.saved("{}", 0);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .expect("task");
    }
}
