//! `/sessions` across machines (docs/scaling.md#sessions-across-machines), on a real
//! nats-server with the Telegram wire on a loopback Bot API: two sessions named `api` on two
//! machines are told apart and `/switch api` offers both; a machine that dies shows its
//! session offline with when it was last seen, its chat is told once that its messages wait,
//! the ingress's metrics count it offline, and the messages are answered when the machine
//! comes back.

use std::sync::Arc;
use std::time::Duration;

use host_shim::agent::{Agent, DemoAgent, RecentWork, SignalSender};
use host_shim::broker::routing::SessionState;
use host_shim::cluster::directory::{Directory, PresenceReader, SessionEntry, state_of};
use host_shim::cluster::placement;
use host_shim::cluster::session_node::{SessionNode, Wanted};
use host_shim::cluster::state_store::STATE_FORMAT;
use host_shim::ops::metrics::Metrics;
use host_shim::wit::agent::{
    DeliverAs, PromptImage, SessionCommand, SessionInfo, SessionReply, TokenUse, UsageReport,
};
use transport_testing::telegram::private_text;

use crate::common::WAIT;
use crate::common::cluster::{self, eventually, nats_or_skip};
use crate::common::cluster_world::Cluster;

const MACHINES: [&str; 2] = ["laptop", "build"];
/// The paired user (the cluster's config lets it in), and someone paired with nothing.
const USER: i64 = 4242;
const STRANGER: i64 = 777;

/// A session called `api` that placement gives to `machine` among [`MACHINES`], so each
/// machine runs its own `api` (a real cluster: pi on each machine, each its own session).
fn api_on(machine: &str, cwd: &str) -> Wanted {
    let live: Vec<String> = MACHINES.iter().map(|m| m.to_string()).collect();
    let key = (0..)
        .map(|i| format!("serve:api-{machine}-{i}"))
        .find(|key| placement::owner(key, &live) == Some(machine))
        .expect("some key lands on each machine");
    Wanted {
        key,
        name: "api".into(),
        cwd: cwd.into(),
    }
}

/// A demo agent that reports its usage as pi does (the demo itself has no session
/// commands), once it has taken a prompt.
struct Reporting(DemoAgent);

/// What [`Reporting`] reports: `1.2k in, 300 out, $0.0050` in `/sessions`.
const USAGE: TokenUse = TokenUse {
    input: 1_000,
    output: 300,
    cache_read: 200,
    cache_write: 0,
    cost_micros: Some(5_000),
};

#[async_trait::async_trait]
impl Agent for Reporting {
    fn attach(&self, signals: SignalSender) {
        self.0.attach(signals);
    }
    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        self.0.send_prompt(text, deliver_as, images).await
    }
    fn abort(&self) {
        self.0.abort();
    }
    fn is_idle(&self) -> bool {
        self.0.is_idle()
    }
    fn session_info(&self) -> SessionInfo {
        self.0.session_info()
    }
    fn recent_work(&self) -> RecentWork {
        self.0.recent_work()
    }
    async fn session_command(&self, command: SessionCommand) -> Result<SessionReply, String> {
        match command {
            SessionCommand::Usage if self.0.recent_work().last_prompt.is_some() => {
                Ok(SessionReply::Usage(UsageReport {
                    session: USAGE,
                    last_turn: Some(USAGE),
                    context_tokens: None,
                    context_window: None,
                }))
            }
            _ => Err("no usage yet".into()),
        }
    }
}

async fn machine(cluster: &Cluster, name: &str, session: &Wanted) -> SessionNode {
    let mut options = cluster.node_options(name, &[], Duration::ZERO);
    options.sessions = vec![session.clone()];
    options.agent = Arc::new(|wanted: &Wanted| {
        Arc::new(Reporting(DemoAgent::new(
            Duration::ZERO,
            SessionInfo {
                id: wanted.key.clone(),
                name: Some(wanted.name.clone()),
                cwd: wanted.cwd.clone(),
                accepts_images: true,
            },
        ))) as Arc<dyn Agent>
    });
    cluster
        .start_node(options)
        .await
        .expect("session node starts")
}

/// The ingress's metrics line for sessions in `state`.
fn sessions_in(metrics: &Metrics, state: &str) -> Option<u64> {
    let wanted = format!("botconnect_sessions{{state=\"{state}\"}} ");
    metrics
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(&wanted).and_then(|n| n.parse().ok()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_across_machines_are_told_apart_and_a_dead_machines_session_is_offline_until_it_is_back()
 {
    let nats = nats_or_skip!();
    let cluster = Cluster::new(nats, "sessions").await;
    let ingress = cluster.ingress().await;
    let metrics = Arc::new(Metrics::new(["telegram"]));
    ingress.count_in(metrics.clone());
    let on_laptop = api_on("laptop", "/work/api");
    let on_build = api_on("build", "/srv/api");
    let laptop = machine(&cluster, "laptop", &on_laptop).await;
    let build = machine(&cluster, "build", &on_build).await;
    eventually("each machine runs its api", || async {
        (laptop.running() == [on_laptop.key.clone()] && build.running() == [on_build.key.clone()])
            .then_some(())
    })
    .await;

    // Both listed, told apart by machine, each with its state and last activity.
    let list = cluster
        .say(1, "/sessions", "Sessions you are paired with")
        .await;
    for line in [
        "api@build — /srv/api · idle, active just now",
        "api@laptop — /work/api · idle, active just now",
    ] {
        assert!(list.contains(line), "{line} missing from {list}");
    }
    // A shared name picks neither: the choices come back.
    let choices = cluster
        .say(2, "/switch api", "Several of your sessions are called api")
        .await;
    assert!(
        choices.contains("api@laptop") && choices.contains("api@build"),
        "{choices}"
    );
    cluster
        .say(3, "/switch api@build", "now talks to api@build (/srv/api)")
        .await;
    cluster.say(4, "hello", "You asked").await;
    // Its node writes the prompt down as activity, with the usage its agent reports, at its
    // next look (a turn shorter than a look is activity all the same).
    let directory = Directory::open(
        &cluster.nats.jetstream().await,
        &cluster.prefix,
        &cluster.gate,
    )
    .await
    .expect("directory");
    eventually("build's entry has the usage", || async {
        let listed = directory.session(&on_build.key).await.ok()??;
        listed.entry.usage.map(|_| ())
    })
    .await;
    let list = cluster
        .say(40, "/sessions", "Sessions you are paired with")
        .await;
    assert!(
        list.contains(
            "api@build — /srv/api · idle, active just now · 1.2k in, 300 out, $0.0050 ← this chat"
        ),
        "{list}"
    );
    assert!(
        list.contains("api@laptop — /work/api · idle, active just now\n"),
        "laptop's session took no prompt and reports none: {list}"
    );
    eventually("the metrics count two idle sessions", || async {
        (sessions_in(&metrics, "idle") == Some(2) && sessions_in(&metrics, "offline") == Some(0))
            .then_some(())
    })
    .await;

    // The build machine dies: after the TTL its session is offline, decided by presence.
    build.kill().await;
    eventually("the metrics count one offline session", || async {
        (sessions_in(&metrics, "offline") == Some(1)).then_some(())
    })
    .await;
    let list = cluster
        .say(5, "/sessions", "Sessions you are paired with")
        .await;
    assert!(
        list.contains(
            "api@build — /srv/api · offline, last seen just now · 1.2k in, 300 out, $0.0050 ← \
             this chat"
        ),
        "{list}"
    );
    assert!(list.contains("api@laptop — /work/api · idle"), "{list}");

    // A message to it waits, and the chat is told so once for this offline period.
    let notice = cluster
        .say(6, "are you back?", "is offline (last seen")
        .await;
    assert!(
        notice.contains("⏸ api on build is offline (last seen just now); your message waits and is delivered when it is back."),
        "{notice}"
    );
    cluster
        .bot
        .queue_update(private_text(USER, 7, "still there?"));
    // The second message was confirmed (published).
    cluster.confirmed().await;
    assert_eq!(
        cluster.sent_with("is offline"),
        1,
        "told once: {:#?}",
        cluster.bot.sent()
    );
    assert_eq!(
        cluster.sent_with("You asked"),
        1,
        "nothing answered meanwhile"
    );
    // A stranger who names the session is bound to it for its pairing, and learns nothing of
    // its machine or when it was last seen: its message waits, unanswered.
    let before = cluster.bot.sent().len();
    cluster
        .bot
        .queue_update(private_text(STRANGER, 100, "/switch api@build"));
    assert!(
        cluster
            .bot
            .wait_until(WAIT, |s| s.sent()[before..]
                .iter()
                .any(|m| m.text.contains("If a session of that name is attached")))
            .await,
        "{:#?}",
        cluster.bot.sent()
    );
    cluster
        .bot
        .queue_update(private_text(STRANGER, 101, "let me in"));
    cluster.confirmed().await;
    assert_eq!(
        cluster.sent_with("is offline"),
        1,
        "{:#?}",
        cluster.bot.sent()
    );
    assert!(
        cluster.bot.sent()[before..]
            .iter()
            .all(|m| !m.text.contains("build") && !m.text.contains("last seen")),
        "{:#?}",
        cluster.bot.sent()
    );

    // The machine comes back: what waited is delivered, in order, and it is listed idle.
    let back = machine(&cluster, "build", &on_build).await;
    for prompt in ["are you back?", "still there?"] {
        cluster.answered(prompt).await;
    }
    let answers: Vec<String> = cluster
        .bot
        .sent()
        .iter()
        .filter(|m| m.text.contains("You asked"))
        .map(|m| m.text.clone())
        .collect();
    assert!(
        answers[1].contains("are you back?") && answers[2].contains("still there?"),
        "{answers:#?}"
    );
    eventually("the metrics count it idle again", || async {
        (sessions_in(&metrics, "offline") == Some(0)).then_some(())
    })
    .await;
    // The ingress's look at one session (before telling a chat) agrees with its look at all.
    let reader = PresenceReader::new(cluster.nats.jetstream().await, &cluster.prefix);
    let entry = SessionEntry {
        key: on_build.key.clone(),
        ..SessionEntry::default()
    };
    let one = reader.of(&on_build.key).await.expect("presence of one");
    let all = reader.read().await.expect("presence");
    assert_eq!(state_of(&entry, &one), SessionState::Idle, "{one:?}");
    assert_eq!(state_of(&entry, &all), SessionState::Idle, "{all:?}");
    let list = cluster
        .say(8, "/sessions", "Sessions you are paired with")
        .await;
    assert!(list.contains("api@build — /srv/api · idle"), "{list}");
    // Offline again later is a new period: the chat would be told again.
    back.shutdown().await;
    laptop.shutdown().await;
    ingress.shutdown().await;
}

/// A machine whose host-shim is older than a session's state does not run the session (it
/// would drop what it cannot read at its next save): its log and the chat say which
/// versions and to upgrade host-shim there, and the state is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_machine_older_than_a_sessions_state_does_not_run_it_and_the_chat_hears_why() {
    let nats = nats_or_skip!();
    let cluster = Cluster::new(nats, "newer").await;
    let session = api_on("build", "/srv/api");
    let newer = STATE_FORMAT + 1;
    cluster::plant_state(
        &cluster.nats,
        &cluster.prefix,
        &session.key,
        &format!(r#"{{"stateFormat":{newer},"trusted":{{}},"fromTheFuture":true}}"#),
    )
    .await;
    let ingress = cluster.ingress().await;
    let metrics = Arc::new(Metrics::new(["telegram"]));
    ingress.count_in(metrics.clone());
    let build = machine(&cluster, "build", &session).await;
    eventually("the node refuses the session", || async {
        cluster
            .log_lines()
            .iter()
            .any(|line| line.starts_with("build: session refused"))
            .then_some(())
    })
    .await;
    // Listed (the refusal is its entry), offline: several looks later, still not run.
    eventually("the metrics count it offline", || async {
        (sessions_in(&metrics, "offline") == Some(1)).then_some(())
    })
    .await;
    assert!(build.running().is_empty(), "{:?}", build.running());
    let refusals: Vec<String> = cluster
        .log_lines()
        .into_iter()
        .filter(|line| line.starts_with("build: session refused"))
        .collect();
    assert_eq!(refusals.len(), 1, "said once: {refusals:#?}");
    for needed in [
        format!("state format {newer}"),
        format!("reads up to {STATE_FORMAT}"),
        "upgrade host-shim".to_owned(),
        "\"build\"".to_owned(),
    ] {
        assert!(refusals[0].contains(&needed), "{needed}: {}", refusals[0]);
    }

    let why = format!(
        "⚠ its state was written by a newer host-shim (state format {newer}; host-shim on build \
         reads up to {STATE_FORMAT}): upgrade host-shim on build"
    );
    let list = cluster
        .say(1, "/sessions", "Sessions you are paired with")
        .await;
    assert!(
        list.contains(&format!(
            "1. api on build — /srv/api · offline, last seen just now · {why}"
        )),
        "{list}"
    );
    cluster
        .say(
            2,
            "/switch api",
            "now talks to api (/srv/api). It is offline",
        )
        .await;
    let notice = cluster.say(3, "hello", "is offline").await;
    assert!(
        notice.contains(&format!(
            "your message waits and is delivered when it is back. {why}."
        )),
        "{notice}"
    );
    // Nothing was written over the newer state.
    let kept = cluster.kept_state(&session.key).await;
    assert_eq!(kept.format, newer);
    assert!(
        kept.document
            .as_deref()
            .is_some_and(|d| d.contains("fromTheFuture")),
        "{kept:?}"
    );
    build.shutdown().await;
    ingress.shutdown().await;
}

/// A message sent while the ingress's last look still saw its session online (its node had
/// just died: the lease has most of a TTL to go) waits like any other, and the look that
/// finds the session gone tells the chat, with nothing more sent; later messages are not
/// told again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_sent_as_its_session_dies_is_told_at_the_next_look_and_only_once() {
    let nats = nats_or_skip!();
    let cluster = Cluster::new(nats, "justgone").await;
    let ingress = cluster.ingress().await;
    let node = cluster.node_running("node-a", &["api"]).await;
    cluster.say(1, "hello", "You asked").await;
    node.kill().await;
    cluster
        .bot
        .queue_update(private_text(USER, 2, "are you there?"));
    cluster.posted("is offline").await;
    let notice = cluster
        .bot
        .sent()
        .into_iter()
        .find(|m| m.text.contains("is offline"))
        .map(|m| m.text)
        .unwrap_or_default();
    assert!(
        notice.starts_with("⏸ api on node-a is offline (last seen"),
        "{notice}"
    );
    cluster.bot.queue_update(private_text(USER, 3, "hello?"));
    cluster.confirmed().await;
    cluster
        .not_posted_again("is offline", Duration::from_secs(1))
        .await;
    ingress.shutdown().await;
}

/// The chats told that a session is offline are marked in the cluster's KV, not in one
/// ingress's memory: the standby that takes the bot after the holder dies does not tell a
/// chat a second time in the same offline period.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_an_ingress_failover_a_chat_told_its_session_is_offline_is_not_told_again() {
    let nats = nats_or_skip!();
    let cluster = Cluster::new(nats, "toldonce").await;
    let first = cluster.ingress().await;
    let metrics = Arc::new(Metrics::new(["telegram"]));
    first.count_in(metrics.clone());
    let node = cluster.node_running("node-a", &["api"]).await;
    cluster.say(1, "hello", "You asked").await;
    node.shutdown().await;
    // Once the holder's look has seen it offline, the chat is told at its message.
    eventually("the holder counts it offline", || async {
        (sessions_in(&metrics, "offline") == Some(1)).then_some(())
    })
    .await;
    cluster.say(2, "there?", "is offline").await;

    let standby = cluster.ingress().await;
    first.kill().await;
    cluster.bot.queue_update(private_text(USER, 3, "and now?"));
    // The standby took the bot and published the message.
    cluster.confirmed().await;
    cluster
        .not_posted_again("is offline", Duration::from_secs(2))
        .await;
    standby.shutdown().await;
}
