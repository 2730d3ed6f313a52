//! Scenarios: the agent's notices (an extension's notify, status or widget,
//! docs/pi.md#questions-pi-asks) are one line on the turn's card, the latest replacing the
//! last and throttled like every card update, never messages of their own.

use guest::model::{AgentEvent, TurnOrigin};

use crate::support::{FakeHost, pair, started};

fn texts(host: &FakeHost) -> Vec<String> {
    host.sent.iter().map(|m| m.text.clone()).collect()
}

#[test]
fn a_burst_of_notices_is_one_line_on_the_card_and_the_latest_wins() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(
        &mut host,
        r#"{"bridge":{"progressMinIntervalMs":1000}}"#,
        &["tg"],
    );
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let start = host.now;
    host.clear_records();

    host.now = start + 10;
    bridge.on_agent_event(&mut host, AgentEvent::Notice("indexing 1/100".into()));
    for n in 2..=100 {
        bridge.on_agent_event(&mut host, AgentEvent::Notice(format!("indexing {n}/100")));
    }
    // The first shows at once (the start card reopened the throttle); the other 99 wait.
    assert_eq!(
        texts(&host),
        vec!["thinking…\nℹ indexing 1/100".to_string()]
    );
    host.now = start + 1_010;
    bridge.tick(&mut host);
    assert_eq!(
        texts(&host),
        vec![
            "thinking…\nℹ indexing 1/100".to_string(),
            "thinking…\nℹ indexing 100/100".to_string()
        ],
        "a hundred notices, two card edits"
    );
    // Every one of them is an edit of the card: no message of its own.
    assert!(host.sent.iter().all(|m| m.edit_key.is_some()));

    // A blank notice (a status cleared) takes the line away; steps stay above it.
    host.now = start + 3_000;
    bridge.on_agent_event(&mut host, AgentEvent::ToolStarted("bash".into()));
    bridge.on_agent_event(&mut host, AgentEvent::Notice(String::new()));
    host.now = start + 5_000;
    bridge.tick(&mut host);
    assert_eq!(texts(&host).last().map(String::as_str), Some("▶ bash"));
}

#[test]
fn a_notice_with_no_turn_sends_nothing_and_a_long_one_is_one_short_line() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, "{}", &["tg"]);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    host.clear_records();
    bridge.on_agent_event(&mut host, AgentEvent::Notice("idle chatter".into()));
    assert!(host.sent.is_empty(), "{:?}", texts(&host));

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 10;
    let long = format!("{}\nsecond line", "x".repeat(300));
    bridge.on_agent_event(&mut host, AgentEvent::Notice(long));
    let card = texts(&host).pop().expect("the card");
    let line = card.lines().last().expect("the notice line");
    assert!(line.starts_with("ℹ x"), "{card}");
    assert_eq!(line.chars().count(), 2 + 120, "{line}");
    assert!(!card.contains("second line"), "{card}");
}

#[test]
fn a_notice_is_redacted_like_every_card() {
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, "{}", &["tg"]);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 10;
    bridge.on_agent_event(&mut host, AgentEvent::Notice(format!("using {secret}")));
    assert!(host.sent.iter().any(|m| m.text.contains("ℹ using")));
    assert!(host.sent.iter().all(|m| !m.text.contains(secret)));
}
