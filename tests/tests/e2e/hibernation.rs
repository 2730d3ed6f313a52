//! Idle sessions cost nothing (docs/scaling.md#idle-sessions): a session quiet for the
//! configured time, by its own clock, gives its instance back to the pool, and its next
//! message boots a fresh one from the store, unseen by the chat. It stays awake while a
//! turn runs, a prompt waits or an approval is pending: those live only in memory.

use std::sync::Arc;
use std::time::Duration;

use host_shim::sandbox::hibernation::{HibernatedCount, Hibernation};
use host_shim::sandbox::runtime::Limits;
use host_shim::wit::session::{AgentEvent, TurnOrigin};

use crate::common::{self, Dirs, ScriptAgent, Setup, WAIT};

const AFTER: Duration = Duration::from_secs(600);
const LATER_MS: u64 = 11 * 60 * 1000;

/// A session hibernating after [`AFTER`], on a runtime of its own so the pool's count of
/// live instances is this session's alone.
fn setup(dirs: &Dirs, key: &str, count: &HibernatedCount) -> Setup {
    let mut setup = Setup::new(dirs, key);
    setup.runtime = common::compiled::runtime(Limits::default());
    setup.config = vec![common::demo_runs_tools()];
    setup.hibernation = Hibernation::after(AFTER, count.clone());
    setup
}

/// Lets `ms` pass on the session's clock, and runs the timers that came due meanwhile (as
/// the real clock would have: a throttled card edit, say).
async fn pass(h: &common::Harness, ms: u64) {
    h.clock.advance(ms);
    h.session.tick().await.expect("session alive");
}

/// Returns once every agent signal sent so far went in: the session takes them before
/// any command.
async fn settled(h: &common::Harness) {
    h.session.health().await.expect("session alive");
}

fn logged(h: &common::Harness, event: &str) -> usize {
    h.log
        .lines()
        .into_iter()
        .filter(|(_, line)| line.event == event)
        .count()
}

/// What kept the session awake, each time it was asked to hibernate and would not.
fn kept_awake_for(h: &common::Harness) -> Vec<String> {
    h.log
        .lines()
        .into_iter()
        .filter(|(_, line)| line.event == "session kept awake")
        .flat_map(|(_, line)| line.fields)
        .map(|(_, value)| value)
        .collect()
}

/// A hibernating session `key` driven by a script agent, paired with `user-1`, that has
/// taken the prompt `prompt`; with its runtime (the pool this session alone uses).
async fn scripted(
    dirs: &Dirs,
    key: &str,
    prompt: &str,
) -> (
    common::Harness,
    Arc<ScriptAgent>,
    Arc<host_shim::sandbox::runtime::Runtime>,
) {
    let count = HibernatedCount::default();
    let agent = Arc::new(ScriptAgent::default());
    let mut setup = setup(dirs, key, &count);
    setup.agent = agent.clone();
    let runtime = setup.runtime.clone();
    let h = setup.start().await;
    h.pair("user-1").await;
    h.send("user-1", prompt).await;
    agent.wait_for_prompts(1).await;
    (h, agent, runtime)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_hibernates_on_its_clock_and_its_next_message_is_answered_as_before() {
    let dirs = Dirs::new();
    let count = HibernatedCount::default();
    let mut setup = setup(&dirs, "sleeper", &count);
    // A key this version does not know: the start tells the terminal so, once.
    setup.config = vec![common::user_config(
        r#"{"bridge": {"remoteToolPolicy": "unrestricted", "naptime": true}}"#,
    )];
    let runtime = setup.runtime.clone();
    let agent = setup.agent.clone();
    let h = setup.start().await;
    h.pair("user-1").await;
    h.say("user-1", "before the nap", "You asked").await;
    wait_until(|| agent.is_idle(), "the end of the demo turn").await;
    settled(&h).await;
    assert_eq!(runtime.live_instances(), 1);

    // One millisecond short of the idle time: it stays.
    pass(&h, AFTER.as_millis() as u64 - 1).await;
    assert!(!h.session.hibernate_if_idle().await.unwrap());
    assert_eq!(runtime.live_instances(), 1);
    pass(&h, 1).await;
    let hibernated = h.session.hibernate_if_idle().await.unwrap();
    let health = h.session.health().await.unwrap();
    assert!(
        hibernated,
        "{health:?} {:?} {:?}",
        h.log.lines(),
        h.ui.notes()
    );
    assert!(health.hibernated, "{health:?}");
    assert_eq!(health.hibernations, 1);
    assert_eq!(runtime.live_instances(), 0, "its pool slot is free");
    assert_eq!(count.get(), 1, "the metrics see it hibernated");
    assert_eq!(logged(&h, "session hibernated"), 1);

    // The next message wakes it; the chat sees only the answer (the pairing was kept, no
    // code asked again, no restart notice).
    let before = h.texts().len();
    let notes_before = h.ui.notes().len();
    h.say("user-1", "after the nap", "You asked").await;
    let since: Vec<String> = h.texts()[before..].to_vec();
    assert!(
        since
            .iter()
            .all(|t| !t.contains("not paired") && !t.contains("code")),
        "{since:#?}"
    );
    // Nor does the terminal: the configuration's notes told at the start are not told
    // again at each wake.
    let notes = h.ui.notes();
    assert!(
        notes[..notes_before]
            .iter()
            .any(|(_, t)| t.contains("naptime: unknown key")),
        "{notes:?}"
    );
    assert!(
        notes[notes_before..]
            .iter()
            .all(|note| !notes[..notes_before].contains(note)
                && !note.1.contains("failed")
                && !note.1.contains("pairing code")),
        "{notes:?}"
    );
    let health = h.session.health().await.unwrap();
    assert!(!health.hibernated, "{health:?}");
    assert_eq!((health.wakes, health.restarts), (1, 0));
    assert_eq!(runtime.live_instances(), 1);
    assert_eq!(count.get(), 0);
    assert_eq!(logged(&h, "session woke"), 1);

    // Its quiet time started again with that message.
    wait_until(|| agent.is_idle(), "the end of the demo turn").await;
    settled(&h).await;
    pass(&h, AFTER.as_millis() as u64 - 1).await;
    assert!(!h.session.hibernate_if_idle().await.unwrap());
    pass(&h, 1).await;
    assert!(h.session.hibernate_if_idle().await.unwrap());
    // Shutting a hibernated session down needs no instance and leaves the count right.
    h.session.shutdown().await.unwrap();
    assert_eq!(count.get(), 0);
    assert_eq!(runtime.live_instances(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_turn_keeps_the_session_awake_until_it_settles() {
    let dirs = Dirs::new();
    let (h, agent, runtime) = scripted(&dirs, "turn", "refactor the parser").await;
    agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    settled(&h).await;

    // A long turn: no traffic for longer than the idle time. The script agent says it is
    // idle throughout, so only the bridge's own word keeps the turn.
    pass(&h, LATER_MS).await;
    assert!(!h.session.hibernate_if_idle().await.unwrap());
    assert_eq!(runtime.live_instances(), 1);
    let kept = kept_awake_for(&h);
    assert!(
        kept.iter().any(|v| v.contains("a running turn")),
        "{kept:?}"
    );

    // The turn ends and its reply reaches the chat from the same instance.
    agent
        .emit(AgentEvent::AssistantMessage("parser refactored".into()))
        .await;
    agent.emit(AgentEvent::TurnSettled).await;
    h.posted("parser refactored").await;
    settled(&h).await;
    pass(&h, LATER_MS).await;
    assert!(h.session.hibernate_if_idle().await.unwrap());
    assert_eq!(runtime.live_instances(), 0);
    h.session.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_the_agent_took_but_has_not_started_keeps_the_session_awake() {
    let dirs = Dirs::new();
    let (h, agent, runtime) = scripted(&dirs, "queue", "write the release notes").await;
    settled(&h).await;

    // The agent took the prompt and says it is idle; its turn has not started. The bridge
    // keeps the prompt queued until it does (to tell its chat if it is lost): only the
    // queue keeps the session awake.
    pass(&h, LATER_MS).await;
    assert!(!h.session.hibernate_if_idle().await.unwrap());
    assert_eq!(runtime.live_instances(), 1);
    let kept = kept_awake_for(&h);
    assert_eq!(kept, ["queued prompts"], "{kept:?}");

    // Its turn starts and ends; the reply reaches the chat; then the session may sleep.
    agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    agent
        .emit(AgentEvent::AssistantMessage("notes written".into()))
        .await;
    agent.emit(AgentEvent::TurnSettled).await;
    h.posted("notes written").await;
    settled(&h).await;
    pass(&h, LATER_MS).await;
    assert!(h.session.hibernate_if_idle().await.unwrap());
    h.session.shutdown().await.unwrap();
}

/// Polls `done` until it holds; fails the test naming `what` after [`WAIT`].
async fn wait_until(done: impl Fn() -> bool, what: &str) {
    let waited = tokio::time::timeout(WAIT, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "{what} never came");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_keeps_the_session_awake_and_is_still_answerable() {
    let dirs = Dirs::new();
    let count = HibernatedCount::default();
    let mut setup = setup(&dirs, "approval", &count);
    // The approval waits an hour: longer than the quiet time, so only the rule keeps it.
    setup.config = vec![common::user_config(
        r#"{"bridge":{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":{"enabled":true,"timeoutMs":3600000}}}"#,
    )];
    let runtime = setup.runtime.clone();
    let h = setup.start().await;
    h.pair("user-1").await;
    h.send("user-1", "run the tests").await;
    let id = h.approval_id().await;
    settled(&h).await;

    pass(&h, LATER_MS).await;
    assert!(!h.session.hibernate_if_idle().await.unwrap());
    assert_eq!(runtime.live_instances(), 1);

    h.say(
        "user-1",
        &format!("/approve {id}"),
        &format!("Approval {id} ('read'): approved by fake:user-1 from the chat."),
    )
    .await;
    h.session.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_hibernates_by_itself_when_its_idle_time_comes() {
    let dirs = Dirs::new();
    let count = HibernatedCount::default();
    let mut setup = setup(&dirs, "by-itself", &count);
    // Short, so the session's own timer comes within the test; nobody asks it.
    setup.hibernation = Hibernation::after(Duration::from_millis(50), count.clone());
    let runtime = setup.runtime.clone();
    let h = setup.start().await;
    h.clock.advance(50);
    let slept = tokio::time::timeout(WAIT, async {
        while !h.session.health().await.expect("alive").hibernated {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(slept.is_ok(), "the session never hibernated by itself");
    assert_eq!(runtime.live_instances(), 0);
    assert_eq!(count.get(), 1);
    h.session.shutdown().await.unwrap();
}

/// A hibernated session whose message finds the pool full (as many sessions awake as
/// `--max-sessions` allows) says so in the chat, instead of leaving the message unanswered
/// with only its terminal knowing; once a slot is free it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_cannot_wake_for_a_message_says_so_in_the_chat() {
    let dirs = Dirs::new();
    let count = HibernatedCount::default();
    let mut setup = setup(&dirs, "sleeper", &count);
    setup.runtime = common::compiled::runtime(Limits {
        max_instances: 1,
        ..Limits::default()
    });
    let runtime = setup.runtime.clone();
    let agent = setup.agent.clone();
    let h = setup.start().await;
    h.pair("user-1").await;
    h.say("user-1", "before the nap", "You asked").await;
    wait_until(|| agent.is_idle(), "the end of the demo turn").await;
    settled(&h).await;
    pass(&h, AFTER.as_millis() as u64).await;
    assert!(h.session.hibernate_if_idle().await.unwrap());

    // Another session takes the pool's only slot.
    let other_dirs = Dirs::new();
    let mut other = Setup::new(&other_dirs, "awake");
    other.runtime = runtime.clone();
    let awake = other.start().await;
    assert_eq!(runtime.live_instances(), 1);

    h.say("user-1", "wake up", "could not wake for your message")
        .await;
    assert!(h.session.health().await.unwrap().hibernated);

    // A slot frees: the next message wakes it and is answered, paired as before.
    awake.session.shutdown().await.unwrap();
    h.say("user-1", "now", "You asked").await;
    h.session.shutdown().await.unwrap();
}
