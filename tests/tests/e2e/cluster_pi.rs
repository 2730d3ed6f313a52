//! A session lives where its agent lives (docs/scaling.md#a-second-machine-a-session-lives-where-its-agent-lives): the ingress of
//! "machine A" holds the Telegram bot (the real wire on a loopback Bot API), and on "machine B"
//! a real pi with the bot-connect extension, in its own home, attaches to B's session node,
//! which runs its bridge session next to it. The chat pairs with the code only pi shows and
//! gets the tool card and the reply through A's bot. A session whose pi goes away stays in
//! the cluster's directory without a node, and what its chat sends meanwhile is answered when
//! it attaches again.

use std::sync::Arc;
use std::time::Duration;

use host_shim::agent::{Agent, DemoAgent};
use host_shim::cluster::session_node::{Attach, Wanted};
use host_shim::commands::operator;
use host_shim::local::ui::{RecordingUi, Ui};
use host_shim::pi::attach::{self, Link};
use host_shim::wit::agent::SessionInfo;

use crate::common::cluster::{NatsServer, Unavailable, eventually};
use crate::common::cluster_world::{Cluster, USER, runs};
use crate::common::fake_model::FakeModel;
use crate::common::pi::{PiHome, extension_path, private_link_socket, require_pi, start_linked};
use crate::common::{Dirs, WAIT};

/// A cluster whose chats must pair: nobody is let in by config.
async fn pairing_cluster(name: &str) -> Option<Cluster> {
    let nats = match NatsServer::start() {
        Ok(server) => server,
        Err(Unavailable(reason)) => {
            eprintln!("SKIPPED (no nats-server): {reason}");
            return None;
        }
    };
    Some(
        Cluster::configured(nats, name, Duration::from_secs(2), |config| {
            config["bridge"]
                .as_object_mut()
                .expect("the test config has a bridge object")
                .remove("allowUsers");
        })
        .await,
    )
}

/// The pairing code in pi's notice ("Messenger pairing code: 123456 (…)").
fn code_in(notice: &serde_json::Value) -> String {
    let text = notice["message"].as_str().unwrap_or_default();
    text.split("code:")
        .nth(1)
        .and_then(|rest| rest.split('(').next())
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pi_on_a_second_machine_pairs_and_answers_through_the_first_machines_bot() {
    let Some(bin) = require_pi("cluster: a pi on a second machine").await else {
        return;
    };
    let Some(cluster) = pairing_cluster("pi-b").await else {
        return;
    };
    // Machine A: the ingress, holding the bot. Machine B: a session node with no sessions of
    // its own, and a pi in a home of its own.
    let ingress = cluster.ingress().await;
    let node_b = cluster.node("machine-b", &[], Duration::ZERO).await;
    let model = FakeModel::start().await;
    let home = PiHome::new(Some(&model.base_url));
    let dirs = Dirs::new();
    let (socket, listener) = private_link_socket(dirs.dir.path()).await;
    let link = Link::new();
    let connected = link.connected();
    let (agent, ui) = (link.agent(), link.ui());
    let attacher = node_b.attacher();
    let sources = cluster.sources();
    let starter: attach::SessionStarter = Box::new(move |described| {
        Box::pin(async move {
            let attach = Attach {
                wanted: Wanted {
                    key: described.key,
                    name: "laptop".into(),
                    cwd: described.cwd,
                },
                config_sources: sources,
                agent,
                ui,
            };
            Ok(attacher.attach(attach).await?)
        })
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(attach::serve(listener, link, None, starter, async {
        let _ = stopped.await;
    }));
    let mut args = home.args();
    args.extend(["-e".into(), extension_path().display().to_string()]);
    let pi = start_linked(&bin, &home, &args, &socket, &[], connected).await;
    runs(&node_b, 1).await;

    // The only session of the cluster takes the chat; its pairing code shows in pi only.
    cluster.say_now(1, "hello", "not paired").await;
    let code = code_in(&pi.notified("Messenger pairing code:").await);
    assert_eq!(code.len(), 6, "a six-digit code in pi's notice");
    assert_eq!(
        cluster.sent_with(&code),
        0,
        "the code never goes to the chat"
    );
    cluster.say_now(2, &code, "Paired as").await;
    cluster.say_now(3, "please TOOL", "tool said: hi").await;
    let card = cluster
        .bot
        .sent()
        .into_iter()
        .map(|m| m.text)
        .chain(cluster.bot.edited().into_iter().map(|m| m.text))
        .any(|text| text.contains("✓ bash"));
    assert!(
        card,
        "the tool card came through the ingress: {:#?}",
        cluster.bot.sent()
    );
    assert_eq!(model.seen()[0].last_text, "please TOOL");

    let _ = stop.send(());
    server.await.expect("the link's server ends");
    pi.close().await;
    node_b.shutdown().await;
    ingress.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_session_whose_agent_left_keeps_its_chat_and_answers_what_waited() {
    let Some(cluster) = pairing_cluster("pi-away").await else {
        return;
    };
    // The ingress's metrics show when it has seen the session go offline.
    let census = operator::metrics();
    let ingress = cluster.ingress_counted(Some(&census)).await;
    ingress.count_in(census.clone());
    let node = cluster.node("machine-b", &[], Duration::ZERO).await;
    let ui = Arc::new(RecordingUi::default());
    let attach = |ui: Arc<RecordingUi>| {
        let info = SessionInfo {
            id: "pi:laptop-session".into(),
            name: Some("laptop".into()),
            cwd: "/work/laptop".into(),
            accepts_images: true,
        };
        Attach {
            wanted: Wanted {
                key: info.id.clone(),
                name: "laptop".into(),
                cwd: info.cwd.clone(),
            },
            config_sources: cluster.sources(),
            agent: Arc::new(DemoAgent::new(Duration::ZERO, info)) as Arc<dyn Agent>,
            ui: ui as Arc<dyn Ui>,
        }
    };
    let served = node
        .attacher()
        .attach(attach(ui.clone()))
        .await
        .expect("the session attaches");
    cluster.say_now(1, "hello", "not paired").await;
    let code = eventually("the pairing code in the session's terminal", || {
        let ui = ui.clone();
        async move {
            ui.notes()
                .iter()
                .find_map(|(_, text)| text.contains("pairing code").then(|| text.clone()))
        }
    })
    .await;
    let code: String = code
        .split("code:")
        .nth(1)
        .and_then(|rest| rest.split('(').next())
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    cluster.say_now(2, &code, "Paired as").await;
    cluster.say_now(3, "first", "You asked").await;

    // The node's dashboard lists the session it runs with its chat and pairing, read from
    // the saved state (docs/operations.md#dashboard).
    let metrics = operator::metrics();
    let dashboard = operator::node_dashboard(
        "127.0.0.1:9464".parse().expect("an address"),
        &metrics,
        node.dashboard_rows(),
        node.probe(),
    )
    .expect("a loopback dashboard");
    let user = format!("telegram:{USER}");
    let row = eventually("the dashboard lists the pairing", || {
        let view = (dashboard.view)();
        let user = user.clone();
        async move {
            view.sessions
                .into_iter()
                .find(|row| row.name == "laptop" && row.paired == [user.clone()])
        }
    })
    .await;
    assert_eq!(
        row.chats,
        [(user.clone(), true)],
        "its one chat, remembered"
    );

    // Its agent goes (pi exits): the session stops, and the directory keeps it, offline.
    (served.end).await.expect("the session ends");
    assert!(node.running().is_empty(), "nothing runs once its pi left");
    let listed = cluster.say_now(4, "/sessions", "laptop").await;
    assert!(listed.contains("offline"), "listed, offline: {listed}");
    eventually("the ingress's look finds it offline", || {
        let text = census.render();
        async move {
            text.contains("botconnect_sessions{state=\"offline\"} 1")
                .then_some(())
        }
    })
    .await;

    // A message while it is away waits in its stream; the chat is told so…
    let before = cluster.bot.sent().len();
    cluster.say_now(5, "while away", "waits").await;
    assert!(
        !cluster.bot.sent()[before..]
            .iter()
            .any(|m| m.text.contains("You asked")),
        "not answered while away"
    );
    // …and is answered once the session attaches again, paired as before.
    let again = Arc::new(RecordingUi::default());
    let served = node
        .attacher()
        .attach(attach(again.clone()))
        .await
        .expect("the session attaches again");
    let answered = cluster
        .bot
        .wait_until(WAIT, |s| {
            s.sent()[before..]
                .iter()
                .any(|m| m.text.contains("You asked") && m.text.contains("while away"))
        })
        .await;
    assert!(
        answered,
        "what waited is answered: {:#?}",
        cluster.bot.sent()
    );
    assert!(
        !cluster.bot.sent()[before..]
            .iter()
            .any(|m| m.text.contains("not paired")),
        "the pairing survived the agent's absence"
    );
    (served.end).await.expect("the session ends");
    node.shutdown().await;
    ingress.shutdown().await;
}
