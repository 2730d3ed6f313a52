//! The broker on Telegram's real wire: two sessions, one bot, one loopback Bot API server
//! on 127.0.0.1. One poller for both (no 409 conflict), the broker's own replies are valid
//! Telegram HTML, each chat reaches the session it picked, and an update is confirmed (the
//! `getUpdates` offset moves past it) once the session it went to has handled it.

use serde_json::json;
use transport_testing::telegram::{BotApiServer, parse_telegram_html, private_text};

use crate::common::broker_world::World;
use crate::common::{Dirs, WAIT};

const USER: i64 = 4242;

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
    let transports = json!({"telegram": {
        "enabled": true,
        "tokenEnv": "TG_TEST_TOKEN",
        "baseUrl": server.base_url(),
        "pollTimeoutSeconds": 1,
    }});
    let world = World::new(
        Dirs::new(),
        transports,
        vec![("TG_TEST_TOKEN", server.token())],
    )
    .await;
    let users = [format!("telegram:{USER}")];
    let api = world.attach("api", &users).await;
    let web = world.attach("web", &users).await;

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
    world.broker.shutdown().await;
}
