//! One bot, many sessions (docs/decisions.md#decision-14-one-host-one-bot-many-sessions): real
//! components behind one broker and one fake bot. Each chat talks to the session it is bound to,
//! strangers learn nothing, pairing stays per session, and bindings outlive the broker.

use std::sync::Arc;

use host_shim::broker::bindings::{self, Bindings};
use host_shim::broker::routing::PAIRING_ANSWER;
use host_shim::broker::{Broker, BrokerOptions};
use host_shim::commands::operator;
use host_shim::local::clock::ManualClock;
use host_shim::local::log_output::{self, Captured, Format};
use host_shim::local::logging::{LogSink, MemoryLog, TracingLog};
use host_shim::local::ui::RecordingUi;
use host_shim::ops::metrics::Metrics;
use host_shim::sandbox::runtime::{Limits, Runtime};
use host_shim::sandbox::session::{Built, Session, SessionSpec};
use host_shim::wit::session::{AgentEvent, TurnOrigin};
use transport_core::{Envelope, Transport};
use transport_testing::fake::FakeTransport;

use crate::common::{
    Dirs, ScriptAgent, WAIT, browser, editable_fake, http_get, runtime, user_config,
};

/// One attached session.
struct Attached {
    session: Session,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
}

struct World {
    dirs: Dirs,
    fake: FakeTransport,
    broker: Arc<Broker>,
    clock: Arc<ManualClock>,
    runtime: Arc<Runtime>,
    /// The operator's metrics, counted by the broker and every session attached after
    /// they are set (`World::counted`).
    metrics: Option<Arc<Metrics>>,
    /// The broker's and every session's log.
    log: Arc<dyn LogSink>,
}

impl World {
    async fn new() -> World {
        let dirs = Dirs::new();
        let fake = editable_fake();
        World::with(dirs, fake).await
    }

    /// A broker over `dirs` (a restart reuses them) whose one bot is `fake`.
    async fn with(dirs: Dirs, fake: FakeTransport) -> World {
        World::with_log(dirs, fake, Arc::new(MemoryLog::default())).await
    }

    /// [`World::with`], the broker and its sessions logging to `log`.
    async fn with_log(dirs: Dirs, fake: FakeTransport, log: Arc<dyn LogSink>) -> World {
        let state_file = dirs.dir.path().join("state.json");
        let (bindings, warnings) =
            Bindings::kept_in(dirs.state.clone(), &bindings::path_beside(&state_file))
                .await
                .expect("bindings");
        assert_eq!(warnings, Vec::<String>::new());
        let bot = fake.handle();
        let broker = Broker::new(BrokerOptions {
            locks: dirs.locks(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            log: log.clone(),
            build: Arc::new(move |_request| Built {
                transports: vec![Arc::new(bot.handle()) as Arc<dyn Transport>],
                notes: Vec::new(),
            }),
            state_file: Some(state_file.clone()),
            bindings,
            status_file: Some(host_shim::broker::status_path_beside(&state_file)),
            pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
        });
        World {
            dirs,
            fake,
            broker,
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            runtime: runtime(),
            metrics: None,
            log,
        }
    }

    /// Counts the broker's traffic and the log of every session attached from now on in
    /// fresh metrics (as `serve --metrics` does), which it returns.
    fn counted(&mut self) -> Arc<Metrics> {
        let metrics = Arc::new(Metrics::with_clock(["fake"], self.clock.clone()));
        self.broker.count_in(metrics.clone());
        self.metrics = Some(metrics.clone());
        metrics
    }

    /// `stranger-77` in chat `dm-s` asks for `web` by name, sends one wrong code and then
    /// the one `web`'s terminal showed; returns that code.
    /// Sessions `api` (which lets user-1 in) and `web` (which lets nobody in), with
    /// user-1's chat `dm-1` switched to `api`: where the operator tests (metrics, logs,
    /// the dashboard, a flood of strangers) start.
    async fn api_and_web(&self) -> (Attached, Attached) {
        let api = self.attach("api", &["user-1"]).await;
        let web = self.attach("web", &[]).await;
        self.say(
            "user-1",
            "dm-1",
            "/switch api",
            "This chat now talks to api",
        )
        .await;
        (api, web)
    }

    async fn pair_stranger_after_a_wrong_code(&self, web: &Attached) -> String {
        self.say(
            "stranger-77",
            "dm-s",
            "/switch web",
            "If a session of that name",
        )
        .await;
        self.send("stranger-77", "dm-s", "let me in").await;
        shown(&web.ui, "Messenger pairing code:").await;
        let code: String = web
            .ui
            .notes()
            .iter()
            .rev()
            .find(|(_, t)| t.starts_with("Messenger pairing code:"))
            .map(|(_, t)| t.chars().filter(char::is_ascii_digit).take(6).collect())
            .expect("a code");
        let wrong = if code == "000000" { "111111" } else { "000000" };
        self.say("stranger-77", "dm-s", wrong, "That code did not match")
            .await;
        self.say("stranger-77", "dm-s", &code, "Paired").await;
        code
    }

    /// Attaches a session named `name` whose config lets `allowed` in without pairing.
    /// Its one transport request (the terminal's) is answered by the broker's fake bot.
    async fn attach(&self, name: &str, allowed: &[&str]) -> Attached {
        let key = format!("key-{name}");
        let users: Vec<String> = allowed.iter().map(|u| format!("\"fake:{u}\"")).collect();
        let config = vec![user_config(&format!(
            r#"{{"bridge": {{"allowUsers": [{}]}}, "transports": {{"terminal": {{"enabled": true}}}}}}"#,
            users.join(", ")
        ))];
        let agent = Arc::new(ScriptAgent::default());
        let ui = Arc::new(RecordingUi::default());
        let shown = self
            .broker
            .attach(&key, name, &format!("/work/{name}"), &config, agent.clone())
            .expect("attaches");
        assert_eq!(shown, name);
        let spec = SessionSpec {
            key: key.clone(),
            config_sources: config,
            platforms: host_shim::factory::declarations(),
            transports: self.broker.transports(&key),
            agent: agent.clone(),
            ui: ui.clone(),
            state: self.dirs.state.clone(),
            locks: self.dirs.locks(),
            pairing: self.broker.pairing(),
            clock: self.clock.clone(),
            log: operator::counted(self.log.clone(), self.metrics.as_ref()),
            exclusive: true,
            transcript: None,
        };
        let session = Session::spawn(self.runtime.clone(), spec)
            .await
            .expect("session starts");
        Attached { session, agent, ui }
    }

    fn message(&self, user: &str, conversation: &str, text: &str) -> Envelope {
        let mut envelope = self.fake.envelope(text);
        envelope.user_id = user.into();
        envelope.conversation_id = conversation.into();
        envelope
    }

    async fn send(&self, user: &str, conversation: &str, text: &str) {
        self.fake
            .inject(self.message(user, conversation, text))
            .await
            .expect("the bot is running");
    }

    /// Sends and waits for the next message in `conversation`; returns its text.
    async fn answer(&self, user: &str, conversation: &str, text: &str) -> String {
        let in_chat = |sent: &[transport_testing::fake::SentMessage]| {
            sent.iter()
                .filter(|m| m.message.conversation_id == conversation)
                .count()
        };
        let before = in_chat(&self.fake.sent());
        self.send(user, conversation, text).await;
        let answered = self
            .fake
            .wait_for(WAIT, |sent, _| in_chat(sent) > before)
            .await;
        assert!(answered, "no answer in {conversation} to {text:?}");
        self.fake
            .sent()
            .into_iter()
            .filter(|m| m.message.conversation_id == conversation)
            .nth(before)
            .map(|m| m.message.text)
            .unwrap_or_default()
    }

    /// Sends and waits for a message in `conversation` containing `expect`; returns it.
    async fn say(&self, user: &str, conversation: &str, text: &str, expect: &str) -> String {
        let before = self.fake.sent().len();
        self.send(user, conversation, text).await;
        let found = self
            .fake
            .wait_for(WAIT, |sent, _| {
                sent[before.min(sent.len())..].iter().any(|m| {
                    m.message.conversation_id == conversation && m.message.text.contains(expect)
                })
            })
            .await;
        let texts: Vec<String> = self
            .fake
            .sent()
            .into_iter()
            .map(|m| m.message.text)
            .collect();
        assert!(
            found,
            "no {expect:?} in {conversation} after {text:?}: {texts:#?}"
        );
        self.fake.sent()[before..]
            .iter()
            .find(|m| m.message.conversation_id == conversation && m.message.text.contains(expect))
            .map(|m| m.message.text.clone())
            .unwrap_or_default()
    }
}

/// Waits until the terminal `ui` has shown a note containing `needle`; fails the test,
/// naming every note, when none does in time.
async fn shown(ui: &RecordingUi, needle: &str) {
    let wait = async {
        while !ui.notes().iter().any(|(_, t)| t.contains(needle)) {
            tokio::task::yield_now().await;
        }
    };
    if tokio::time::timeout(WAIT, wait).await.is_err() {
        panic!("no note containing {needle:?}: {:#?}", ui.notes());
    }
}

fn prompts(agent: &ScriptAgent) -> Vec<String> {
    agent.prompts.lock().unwrap().clone()
}

#[tokio::test]
async fn two_sessions_share_one_bot_and_a_chat_talks_to_the_one_it_picked() {
    let world = World::new().await;
    let api = world.attach("api", &["user-1"]).await;
    let web = world.attach("web", &["user-1", "user-2"]).await;
    assert!(
        world.fake.is_running(),
        "the bot was started once, for both"
    );
    // The broker holds the bot's lock for both sessions; neither contends for it.
    let holder = world
        .dirs
        .locks()
        .holder("fake-fake-bot", 1_700_000_000_000);
    assert!(holder.is_some(), "the broker holds the bot's lock");

    let list = world
        .say("user-1", "dm-1", "hello", "not bound to a session yet")
        .await;
    assert!(list.contains("1. api"), "{list}");
    assert!(list.contains("2. web"), "{list}");
    assert!(prompts(&api.agent).is_empty() && prompts(&web.agent).is_empty());

    world
        .say(
            "user-1",
            "dm-1",
            "/switch web",
            "This chat now talks to web",
        )
        .await;
    world.send("user-1", "dm-1", "build it").await;
    web.agent.wait_for_prompts(1).await;
    assert!(prompts(&web.agent)[0].contains("build it"));
    assert!(prompts(&api.agent).is_empty(), "api never sees web's chat");

    // Another person's chat is bound on its own.
    let other = world
        .say(
            "user-2",
            "dm-2",
            "/sessions",
            "Sessions you are paired with",
        )
        .await;
    assert!(other.contains("1. web"), "{other}");
    assert!(
        !other.contains("api"),
        "user-2 is not paired with api: {other}"
    );

    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_stranger_learns_nothing_and_pairs_with_the_session_it_names() {
    let world = World::new().await;
    let api = world.attach("api", &[]).await;
    let web = world.attach("web", &[]).await;
    let help = world
        .say("stranger", "dm-s", "hello", "This bot serves several")
        .await;
    for hidden in ["api", "web", "/work"] {
        assert!(!help.contains(hidden), "{help}");
    }
    // Naming a session hands the chat to that session's own pairing: its code shows in
    // its terminal only. The answer is the same for a name that does not exist.
    let missing = world
        .say(
            "stranger",
            "dm-x",
            "/switch nope",
            "If a session of that name",
        )
        .await;
    let existing = world
        .say(
            "stranger",
            "dm-s",
            "/switch web",
            "If a session of that name",
        )
        .await;
    assert_eq!(missing, existing);
    assert_eq!(existing, PAIRING_ANSWER);
    world.send("stranger", "dm-s", "let me in").await;
    shown(&web.ui, "Messenger pairing code:").await;
    assert!(
        !api.ui
            .notes()
            .iter()
            .any(|(_, t)| t.contains("pairing code")),
        "api's terminal shows nothing"
    );
    let code = web
        .ui
        .notes()
        .iter()
        .rev()
        .find(|(_, t)| t.starts_with("Messenger pairing code:"))
        .map(|(_, t)| t.chars().filter(char::is_ascii_digit).collect::<String>())
        .expect("a code");
    let code = &code[..6.min(code.len())];
    world.say("stranger", "dm-s", code, "Paired").await;
    // Bound in memory only until now: nothing of the stranger's reached the file before
    // it paired; its next message writes its chat down.
    let state = world.dirs.state.clone();
    let kept = || async {
        state.committed().await.expect("committed");
        state
            .bindings()
            .expect("bindings")
            .into_iter()
            .filter(|(conversation, _, _)| conversation == "fake:dm-s")
            .map(|(_, _, name)| name)
            .next()
    };
    assert_eq!(kept().await, None);
    let mine = world
        .say(
            "stranger",
            "dm-s",
            "/sessions",
            "Sessions you are paired with",
        )
        .await;
    assert!(mine.contains("web") && !mine.contains("api"), "{mine}");
    assert_eq!(kept().await, Some("web".to_owned()));
    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn group_chatter_in_an_unbound_chat_is_never_answered() {
    let world = World::new().await;
    let api = world.attach("api", &[]).await;
    let web = world.attach("web", &[]).await;
    // People talking in a group the bot is in: with several sessions, an answer to each
    // message (the help text) would flood the group.
    for text in ["lunch?", "/switch nope", "sure"] {
        let mut chatter = world.message("someone", "group-1", text);
        chatter.is_direct = false;
        chatter.addressed = false;
        world
            .fake
            .inject(chatter)
            .await
            .expect("the bot is running");
    }
    // Messages are handled in order: once the addressed one is answered, the chatter
    // before it has been handled.
    let mut addressed = world.message("someone", "group-1", "hello");
    addressed.is_direct = false;
    addressed.addressed = true;
    world
        .fake
        .inject(addressed)
        .await
        .expect("the bot is running");
    assert!(
        world
            .fake
            .wait_for(WAIT, |sent, _| sent
                .iter()
                .any(|m| m.message.conversation_id == "group-1"))
            .await
    );
    let answers: Vec<String> = world
        .fake
        .sent()
        .into_iter()
        .filter(|m| m.message.conversation_id == "group-1")
        .map(|m| m.message.text)
        .collect();
    assert_eq!(answers.len(), 1, "{answers:#?}");
    assert!(
        answers[0].contains("This bot serves several"),
        "{answers:#?}"
    );
    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn the_only_session_gets_an_unbound_chat_and_keeps_it_but_never_posts_after_a_switch() {
    let world = World::new().await;
    let api = world.attach("api", &["user-1"]).await;
    world.send("user-1", "dm-1", "first").await;
    api.agent.wait_for_prompts(1).await;
    // A second session arrives; the chat stays with the first.
    let web = world.attach("web", &["user-1"]).await;
    world.send("user-1", "dm-1", "second").await;
    api.agent.wait_for_prompts(2).await;
    assert!(prompts(&web.agent).is_empty());

    // api's turn for that chat is running when the chat switches to web: api's answer
    // must not land in a chat that now talks to web, and api's terminal hears of it.
    api.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    world
        .say(
            "user-1",
            "dm-1",
            "/switch web",
            "This chat now talks to web",
        )
        .await;
    api.agent
        .emit(AgentEvent::AssistantMessage("the answer from api".into()))
        .await;
    api.agent.emit(AgentEvent::TurnSettled).await;
    shown(&api.ui, "another session (web)").await;
    assert!(
        !world
            .fake
            .sent()
            .iter()
            .any(|m| m.message.text.contains("the answer from api")),
        "api's answer went to web's chat"
    );
    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_detached_session_keeps_its_chats_which_hear_it_is_away_and_bindings_survive_a_restart() {
    let world = World::new().await;
    let api = world.attach("api", &["user-1"]).await;
    let web = world.attach("web", &["user-1"]).await;
    world
        .say(
            "user-1",
            "dm-1",
            "/switch api",
            "This chat now talks to api",
        )
        .await;
    api.session.shutdown().await.expect("shutdown");
    world.broker.detach("key-api");
    let away = world
        .say(
            "user-1",
            "dm-1",
            "are you there",
            "is not attached right now",
        )
        .await;
    assert!(
        away.contains("(api)") && away.contains("not delivered"),
        "{away}"
    );
    assert!(prompts(&web.agent).is_empty(), "never silently rerouted");
    web.session.shutdown().await.expect("shutdown");
    world.broker.shutdown().await;

    // A new broker on the same state directory: the chat still talks to api.
    let World { dirs, fake, .. } = world;
    assert!(!fake.is_running(), "the broker stopped the bot");
    let again = World::with(dirs, fake).await;
    let api = again.attach("api", &["user-1"]).await;
    let _web = again.attach("web", &["user-1"]).await;
    again.send("user-1", "dm-1", "back again").await;
    api.agent.wait_for_prompts(1).await;
    assert!(prompts(&api.agent)[0].contains("back again"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_in_one_attached_session_is_not_seen_by_the_other() {
    let mut world = World::new().await;
    let limits = Limits {
        memory_bytes: 24 << 20,
        ..Limits::default()
    };
    world.runtime = crate::common::compiled::runtime(limits);
    let metrics = world.counted();
    let api = world.attach("api", &["user-1"]).await;
    let web = world.attach("web", &["user-1"]).await;
    world
        .say(
            "user-1",
            "dm-1",
            "/switch api",
            "This chat now talks to api",
        )
        .await;
    world
        .say(
            "user-1",
            "dm-2",
            "/switch web",
            "This chat now talks to web",
        )
        .await;
    // Larger than the instance's memory cap: lowering it into api's guest traps.
    world.send("user-1", "dm-1", &"x".repeat(40 << 20)).await;
    shown(
        &api.ui,
        "The bridge failed while handling an inbound message",
    )
    .await;
    let health = api.session.health().await.expect("health");
    assert_eq!(
        health.restarts, 1,
        "api's instance was replaced: {health:?}"
    );
    assert_eq!(web.session.health().await.expect("health").restarts, 0);
    assert_eq!(
        sample(
            &parse(&metrics.render()),
            "botconnect_component_traps_total",
            &[]
        ),
        Some(1.0),
        "the operator's metrics count the trap"
    );
    // Both still answer through the one bot, each in its own chat.
    world.send("user-1", "dm-2", "for web").await;
    web.agent.wait_for_prompts(1).await;
    world.send("user-1", "dm-1", "for api").await;
    api.agent.wait_for_prompts(1).await;
    assert_eq!(prompts(&api.agent), ["for api"]);
    assert_eq!(prompts(&web.agent), ["for web"]);
}

#[tokio::test]
async fn a_flood_of_strangers_neither_delays_a_paired_user_nor_leaves_bindings() {
    use host_shim::broker::strangers::{ANSWERS_PER_MINUTE, QUEUE};
    let world = World::new().await;
    let (api, web) = world.api_and_web().await;
    // 200 strangers, each in its own chat, then the paired user. The world's clock does
    // not move, so after the first 20 the strangers' answers wait for ever: if the
    // paired user's message waited behind them, it would never arrive.
    let strangers = 200;
    for n in 0..strangers {
        world
            .send(&format!("stranger-{n}"), &format!("dm-s{n}"), "hello")
            .await;
    }
    world.send("user-1", "dm-1", "status please").await;
    api.agent.wait_for_prompts(1).await;
    assert!(prompts(&api.agent)[0].contains("status please"));
    assert!(prompts(&web.agent).is_empty());

    // At most the limit's burst was answered; the queue holds its fill; the rest were
    // dropped, counted and logged, never sent.
    let answered = world
        .fake
        .sent()
        .iter()
        .filter(|m| m.message.conversation_id.starts_with("dm-s"))
        .count();
    assert!(answered as u64 <= ANSWERS_PER_MINUTE, "{answered} answered");
    let dropped = world.broker.strangers_dropped();
    assert!(
        dropped >= (strangers - ANSWERS_PER_MINUTE as usize - QUEUE - 1) as u64,
        "{dropped} dropped"
    );

    // No stranger's chat was written down; the database holds the paired chat only.
    let state = world.dirs.state.clone();
    state.committed().await.expect("committed");
    let kept: Vec<String> = state
        .bindings()
        .expect("bindings")
        .into_iter()
        .map(|(conversation, _, _)| conversation)
        .collect();
    assert_eq!(kept, vec!["fake:dm-1".to_owned()]);
    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
}

/// A six-digit code that no terminal of `uis` has shown, so a guess made of it is wrong
/// by construction of the test, never by luck.
fn unshown_code(uis: &[&RecordingUi]) -> String {
    let shown: Vec<String> = uis
        .iter()
        .flat_map(|ui| ui.notes())
        .filter(|(_, t)| t.starts_with("Messenger pairing code:"))
        .map(|(_, t)| t.chars().filter(char::is_ascii_digit).take(6).collect())
        .collect();
    (1..)
        .map(|n: u32| format!("{n:06}"))
        .find(|code| !shown.contains(code))
        .expect("a code nobody was shown")
}

#[tokio::test]
async fn strangers_guessing_at_two_sessions_draw_on_one_pairing_budget() {
    const CLOSED: &str = "Pairing is closed after too many wrong codes. The person at the local pi terminal can run /connect pair for a fresh code.";
    let world = World::new().await;
    let api = world.attach("api", &[]).await;
    let web = world.attach("web", &[]).await;
    for (chat, name) in [("dm-a", "api"), ("dm-w", "web")] {
        world
            .say(
                "guesser",
                chat,
                &format!("/switch {name}"),
                "If a session of that name",
            )
            .await;
        let first = world.answer("guesser", chat, "let me in").await;
        assert!(first.starts_with("This chat is not paired"), "{first}");
    }
    // Twelve wrong codes at each session, alternating: with a budget per session both
    // would judge ten (20 in all); one budget for the broker judges ten in all.
    let (mut judged, mut refused) = (0, 0);
    for _ in 0..12 {
        for chat in ["dm-a", "dm-w"] {
            let guess = unshown_code(&[&api.ui, &web.ui]);
            let reply = world.answer("guesser", chat, &guess).await;
            if reply.starts_with("That code did not match.")
                || reply.starts_with("Too many wrong attempts.")
            {
                judged += 1;
            } else if reply == CLOSED {
                refused += 1;
            } else {
                panic!("unexpected answer in {chat}: {reply}");
            }
        }
    }
    assert_eq!((judged, refused), (10, 14));
    // Each terminal hears of the closing once, the one whose guesser did not close it too.
    for attached in [&api, &web] {
        shown(&attached.ui, "Pairing is closed: 10 wrong pairing codes").await;
        let told = attached
            .ui
            .notes()
            .iter()
            .filter(|(_, t)| t.starts_with("Pairing is closed: "))
            .count();
        assert_eq!(told, 1, "{:#?}", attached.ui.notes());
        assert!(
            !attached
                .ui
                .notes()
                .iter()
                .any(|(_, t)| t.starts_with("Paired ")),
            "a guess paired"
        );
    }
    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
}

/// The value of the sample `metric` whose labels are exactly `labels`, parsed by a
/// Prometheus text-format parser (not by matching strings: a malformed line fails here).
fn sample(scrape: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == metric
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

/// How many observations a histogram holds (its `+Inf` bucket).
fn histogram_count(scrape: &prometheus_parse::Scrape, metric: &str) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric)
        .and_then(|s| match &s.value {
            prometheus_parse::Value::Histogram(buckets) => buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .map(|b| b.count),
            _ => None,
        })
}

fn parse(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses")
}

#[tokio::test]
async fn metrics_after_a_scripted_flow_count_what_happened_and_name_nobody() {
    let mut world = World::new().await;
    let metrics = world.counted();
    let listener =
        operator::listen_for_broker("127.0.0.1:0".parse().unwrap(), metrics, &world.broker, None)
            .await
            .expect("listens");
    let (api, web) = world.api_and_web().await;
    world.send("user-1", "dm-1", "build it").await;
    api.agent.wait_for_prompts(1).await;
    let code = world.pair_stranger_after_a_wrong_code(&web).await;

    // Replies may still be on their way when the last answer arrived: scrape until the
    // sent count has caught up with what the bot recorded (bounded by WAIT).
    let deadline = tokio::time::Instant::now() + WAIT;
    let (text, scrape) = loop {
        let (status, text) = http_get(listener.addr(), "/metrics").await;
        assert_eq!(status, 200, "{text}");
        let scrape = parse(&text);
        let sent = sample(
            &scrape,
            "botconnect_envelopes_sent_total",
            &[("transport", "fake"), ("outcome", "sent")],
        );
        if sent == Some(world.fake.sent().len() as f64) || tokio::time::Instant::now() > deadline {
            break (text, scrape);
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(
        sample(
            &scrape,
            "botconnect_envelopes_sent_total",
            &[("transport", "fake"), ("outcome", "sent")]
        ),
        Some(world.fake.sent().len() as f64),
        "{text}"
    );
    assert_eq!(
        sample(
            &scrape,
            "botconnect_envelopes_received_total",
            &[("transport", "fake")]
        ),
        // Two switches, a prompt, the stranger's first message, a wrong code, the code.
        Some(6.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &scrape,
            "botconnect_pairing_total",
            &[("outcome", "paired")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&scrape, "botconnect_pairing_total", &[("outcome", "wrong")]),
        Some(1.0),
        "{text}"
    );
    // Every call into either component was measured: starts, envelopes, agent events.
    let calls = histogram_count(&scrape, "botconnect_component_call_fuel").expect("fuel");
    assert!(calls >= 6.0, "{text}");
    assert_eq!(
        histogram_count(&scrape, "botconnect_component_memory_bytes"),
        Some(calls),
        "{text}"
    );
    let active = sample(&scrape, "botconnect_sessions", &[("state", "active")]).expect("active");
    let idle = sample(&scrape, "botconnect_sessions", &[("state", "idle")]).expect("idle");
    assert_eq!(active + idle, 2.0, "{text}");
    assert!(
        scrape.docs.contains_key("botconnect_envelopes_received"),
        "{text}"
    );
    // No user, chat, session key or code anywhere in the scrape.
    for secret in ["user-1", "stranger-77", "dm-", "key-", code.as_str()] {
        assert!(!text.contains(secret), "{secret:?} in {text}");
    }
    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
}

// Current-thread runtime: the capturing subscriber is this thread's default, and every task
// of the flow (the broker's router, each session's actor and its guest calls) runs here.
#[tokio::test]
async fn a_scripted_flow_logs_no_token_no_chat_body_and_no_code() {
    let captured = Captured::default();
    let _default = log_output::capture_on_this_thread(Format::Json, "info", captured.clone());
    let world = World::with_log(Dirs::new(), editable_fake(), Arc::new(TracingLog::new())).await;
    let (api, web) = world.api_and_web().await;
    let token = "ghp_PLANTEDa1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6";
    world
        .send(
            "user-1",
            "dm-1",
            &format!("deploy-PLANTED-BODY with {token} and password=Hunter2Planted!"),
        )
        .await;
    api.agent.wait_for_prompts(1).await;
    world
        .say(
            "stranger-77",
            "dm-s",
            "/switch web",
            "If a session of that name",
        )
        .await;
    world
        .send("stranger-77", "dm-s", "let me in STRANGER-PLANTED-BODY")
        .await;
    shown(&web.ui, "Messenger pairing code:").await;
    let code: String = web
        .ui
        .notes()
        .iter()
        .rev()
        .find(|(_, t)| t.starts_with("Messenger pairing code:"))
        .map(|(_, t)| t.chars().filter(char::is_ascii_digit).take(6).collect())
        .expect("a code");
    world.say("stranger-77", "dm-s", &code, "Paired").await;
    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");

    let output = captured.text();
    // The scan reads real lines: the broker's, and the guest's through its log import.
    for event in ["session attached", "paired remote identity"] {
        assert!(output.contains(event), "no {event:?} line in:\n{output}");
    }
    for line in output.lines() {
        let value: serde_json::Value = serde_json::from_str(line).expect("one JSON object a line");
        assert!(
            value["spans"].as_array().is_some_and(|s| !s.is_empty()),
            "{line}"
        );
    }
    for planted in [
        token,
        "Hunter2Planted",
        "PLANTED-BODY",
        "deploy",
        code.as_str(),
    ] {
        assert!(
            !output.contains(planted),
            "{planted:?} reached the log:\n{output}"
        );
    }
}

/// Drives the dashboard like a person: without the token, with a wrong one, then with the
/// link printed at the terminal; prints what it saw as one JSON object.
const DASHBOARD_SCRIPT: &str = r#"
const { chromium } = require(process.env.PLAYWRIGHT);
(async () => {
  const context = await chromium.launchPersistentContext(process.env.PROFILE, {
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await context.newPage();
  const base = process.env.BASE;
  const bare = await page.goto(base + '/dashboard');
  const bareStatus = bare.status();
  const bareText = await page.innerText('body');
  const wrong = await page.goto(base + '/dashboard?token=0000');
  const wrongStatus = wrong.status();
  const linked = await page.goto(base + '/dashboard?token=' + process.env.TOKEN);
  const status = linked.status();
  const url = page.url();
  const html = await page.content();
  const sessions = await page.$$eval('[data-session]', rows => rows.map(r => r.getAttribute('data-session')));
  const figures = await page.$$eval('[data-figure]', gs => gs.map(g => g.textContent));
  const checks = await page.$$eval('[data-check]', rows => rows.map(r => r.textContent));
  const scripts = await page.$$eval('script', s => s.length);
  const chats = await page.$$eval('[data-chat]', spans => spans.map(s => s.textContent));
  const paired = await page.$$eval('[data-paired]', spans => spans.map(s => s.textContent));
  const decisions = await page.$$eval('[data-decision]', rows => rows.map(r => r.getAttribute('data-decision')));
  const decidedAt = await page.$$eval('[data-decision] [data-at]', cells => cells.map(c => c.textContent));
  // The picture in the docs: BOT_CONNECT_DASHBOARD_SCREENSHOT=<file.png> takes it.
  if (process.env.SHOT) await page.screenshot({ path: process.env.SHOT, fullPage: true });
  const cookies = (await context.cookies()).map(c => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite }));
  await context.close();
  console.log(JSON.stringify({ bareStatus, bareText, wrongStatus, status, url, html, sessions, figures, checks, scripts, cookies, chats, paired, decisions, decidedAt }));
})().catch(error => { console.error(error); process.exit(1); });
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_real_browser_needs_its_token_and_shows_no_secret() {
    const TEST: &str =
        "broker::the_dashboard_in_a_real_browser_needs_its_token_and_shows_no_secret";
    let Some(browser) = browser::require_browser(TEST).await else {
        return;
    };
    let mut world = World::new().await;
    let metrics = world.counted();
    let addr: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let dashboard =
        operator::broker_dashboard(addr, &metrics, &world.broker).expect("loopback is allowed");
    let token = dashboard.token.clone();
    let listener = operator::listen_for_broker(addr, metrics, &world.broker, Some(dashboard))
        .await
        .expect("listens");
    let (api, web) = world.api_and_web().await;
    world
        .send(
            "user-1",
            "dm-1",
            "ship it with ghp_PLANTEDa1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6",
        )
        .await;
    api.agent.wait_for_prompts(1).await;
    // A stranger pairs with web after one wrong code: its chat, its pairing and both
    // decisions are what the page is for.
    let code = world.pair_stranger_after_a_wrong_code(&web).await;

    let seen = browser::run(
        &browser,
        DASHBOARD_SCRIPT,
        &[
            ("BASE", format!("http://{}", listener.addr())),
            ("TOKEN", token.clone()),
            (
                "SHOT",
                std::env::var("BOT_CONNECT_DASHBOARD_SCREENSHOT").unwrap_or_default(),
            ),
        ],
    )
    .await
    .expect("the browser ran");
    let seen: serde_json::Value = serde_json::from_str(seen.trim()).expect("one JSON object");
    assert_eq!(seen["bareStatus"], 401, "{seen}");
    assert!(
        seen["bareText"]
            .as_str()
            .unwrap_or_default()
            .contains("link printed at the terminal"),
        "{seen}"
    );
    assert_eq!(seen["wrongStatus"], 401, "{seen}");
    assert_eq!(seen["status"], 200, "{seen}");
    // The token went into an HttpOnly cookie and out of the address bar.
    assert!(
        seen["url"]
            .as_str()
            .is_some_and(|u| u.ends_with("/dashboard")),
        "{seen}"
    );
    assert_eq!(seen["cookies"][0]["httpOnly"], true, "{seen}");
    assert_eq!(seen["cookies"][0]["sameSite"], "Strict", "{seen}");
    assert_eq!(
        seen["sessions"],
        serde_json::json!(["api", "web"]),
        "{seen}"
    );
    assert_eq!(seen["scripts"], 0, "{seen}");
    let figures = seen["figures"].to_string();
    assert!(
        figures.contains("received") && figures.contains("sent"),
        "{figures}"
    );
    // The chats each session talks to, and who paired: the operator's to see.
    assert_eq!(
        seen["chats"],
        serde_json::json!(["fake:dm-1 (kept)", "fake:dm-s (new)"]),
        "{seen}"
    );
    assert_eq!(
        seen["paired"],
        serde_json::json!(["fake:stranger-77"]),
        "{seen}"
    );
    let decisions = seen["decisions"].to_string();
    for decision in [
        "paired remote identity",
        "wrong pairing code",
        "prompt forwarded",
    ] {
        assert!(decisions.contains(decision), "{decision} in {decisions}");
    }
    // Each decision with its time, from the world's clock (1,700,000,000 s after the epoch
    // is 22:13:20 UTC on 14 November 2023; the clock does not move in this flow).
    let decided_at = seen["decidedAt"].as_array().expect("times");
    assert_eq!(
        decided_at.len(),
        seen["decisions"].as_array().map_or(0, Vec::len),
        "{seen}"
    );
    assert!(
        decided_at
            .iter()
            .all(|at| at == "Tue, 14 Nov 2023 22:13:20 GMT"),
        "{seen}"
    );
    let page = seen["html"].as_str().expect("the page");
    // Never a credential, a message's text, the code, a session's key or its directory.
    for secret in [
        token.as_str(),
        "ghp_PLANTED",
        "ship it",
        "let me in",
        code.as_str(),
        "key-api",
        "/work/",
    ] {
        assert!(!page.contains(secret), "{secret:?} on the page: {page}");
    }
    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
}
