//! The broker on Telegram's real wire: two sessions, one bot, one loopback Bot API server
//! on 127.0.0.1. One poller for both (no 409 conflict), the broker's own replies are valid
//! Telegram HTML, each chat reaches the session it picked, and an update is confirmed (the
//! `getUpdates` offset moves past it) once the session it went to has handled it.

use std::sync::Arc;

use host_shim::broker::bindings::Bindings;
use host_shim::broker::{Broker, BrokerOptions};
use host_shim::factory::{self, Environment};
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::session::{Session, SessionSpec};
use serde_json::json;
use transport_testing::telegram::{BotApiServer, parse_telegram_html, private_text};

use crate::common::{Dirs, ScriptAgent, WAIT, runtime, user_config};

const USER: i64 = 4242;

struct Attached {
    session: Session,
    agent: Arc<ScriptAgent>,
}

fn broker(server: &BotApiServer, dirs: &Dirs) -> Arc<Broker> {
    let token = server.token();
    let state_dir = dirs.dir.path().to_path_buf();
    Broker::new(BrokerOptions {
        locks: dirs.locks(),
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        log: Arc::new(MemoryLog::default()),
        // The token comes from the "environment" only, as in production.
        build: Arc::new(move |request| {
            let var = |name: &str| (name == "TG_TEST_TOKEN").then(|| token.clone());
            factory::build(
                std::slice::from_ref(request),
                None,
                &Environment {
                    var: &var,
                    state_dir: Some(state_dir.clone()),
                },
            )
        }),
        state_file: Some(dirs.dir.path().join("state.json")),
        bindings: Bindings::in_memory(),
        status_file: None,
        pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
    })
}

async fn attach(broker: &Arc<Broker>, server: &BotApiServer, dirs: &Dirs, name: &str) -> Attached {
    let key = format!("key-{name}");
    let config = json!({
        "bridge": {"allowUsers": [format!("telegram:{USER}")]},
        "transports": {"telegram": {
            "enabled": true,
            "tokenEnv": "TG_TEST_TOKEN",
            "baseUrl": server.base_url(),
            "pollTimeoutSeconds": 1,
        }}
    });
    let sources = vec![user_config(&config.to_string())];
    let agent = Arc::new(ScriptAgent::default());
    broker
        .attach(
            &key,
            name,
            &format!("/work/{name}"),
            &sources,
            agent.clone(),
        )
        .expect("attaches");
    let spec = SessionSpec {
        key: key.clone(),
        config_sources: sources,
        platforms: factory::declarations(),
        transports: broker.transports(&key),
        agent: agent.clone(),
        ui: Arc::new(RecordingUi::default()),
        state: dirs.state.clone(),
        locks: dirs.locks(),
        pairing: broker.pairing(),
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        log: Arc::new(MemoryLog::default()),
        exclusive: true,
        transcript: None,
    };
    let session = Session::spawn(runtime(), spec)
        .await
        .expect("session starts");
    Attached { session, agent }
}

/// Queues an update and waits for a sent message containing `expect`; returns its text.
async fn say(server: &BotApiServer, message_id: i64, text: &str, expect: &str) -> String {
    let before = server.sent().len();
    server.queue_update(private_text(USER, message_id, text));
    let found = server
        .wait_until(WAIT, |s| {
            s.sent()[before..].iter().any(|m| m.text.contains(expect))
        })
        .await;
    assert!(found, "no {expect:?} after {text:?}: {:#?}", server.sent());
    server.sent()[before..]
        .iter()
        .find(|m| m.text.contains(expect))
        .map(|m| m.text.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn two_sessions_on_one_telegram_bot_share_one_poller_and_keep_the_receipts() {
    let server = BotApiServer::start().await;
    let dirs = Dirs::new();
    let broker = broker(&server, &dirs);
    let api = attach(&broker, &server, &dirs, "api").await;
    let web = attach(&broker, &server, &dirs, "web").await;

    let list = say(&server, 1, "hello", "not bound to a session yet").await;
    // The broker's own text goes through the bridge's renderer: `<number or name>` is
    // escaped, so Telegram would accept it.
    parse_telegram_html(&list).expect("valid Telegram HTML");
    assert!(list.contains("&lt;number or name&gt;"), "{list}");
    assert!(list.contains("1. api") && list.contains("2. web"), "{list}");

    say(&server, 2, "/switch 2", "This chat now talks to web").await;
    server.queue_update(private_text(USER, 3, "build it"));
    web.agent.wait_for_prompts(1).await;
    assert!(api.agent.prompts.lock().unwrap().is_empty());

    // Every update was confirmed once handled, by one poller: a second poller on the
    // same token would have drawn a 409 conflict.
    let confirmed = server.wait_until(WAIT, |s| s.pending_updates() == 0).await;
    assert!(
        confirmed,
        "{} updates left unconfirmed",
        server.pending_updates()
    );
    assert_eq!(
        server.conflicts(),
        0,
        "one getUpdates poller for both sessions"
    );

    api.session.shutdown().await.expect("shutdown");
    web.session.shutdown().await.expect("shutdown");
    broker.shutdown().await;
}
