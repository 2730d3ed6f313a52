//! Scenarios: queued prompts are acknowledged, and work cut short by a stop or a restart is
//! reported to each chat concerned (docs/decisions.md#decision-20-work-cut-short-is-reported).
//! Before, the card stayed at "thinking…" and queued follow-ups were dropped without a word.

use guest::bridge::Bridge;
use guest::model::{AgentEvent, OutboundKind, TurnOrigin};

use crate::support::{FakeHost, default_bridge, dm, pair, platforms, source, started};

const STOPPED: &str = "⊘ stopped: the pi session ended before this turn finished";
const LOST: &str = "⊘ interrupted: the pi session restarted before this turn finished; send the request again if it is still needed";

fn cards_to(host: &FakeHost, conversation: &str) -> Vec<(String, Option<String>)> {
    host.sent
        .iter()
        .filter(|m| m.kind == OutboundKind::Progress && m.conversation_id == conversation)
        .map(|m| (m.text.clone(), m.edit_key.clone()))
        .collect()
}

/// Two paired chats; `tg:c1` started a remote turn (its card is `m…`) and, while it runs,
/// sent two more prompts; `dc:c2` sent one.
fn busy_with_a_queue(host: &mut FakeHost) -> Bridge {
    let mut bridge = default_bridge(host);
    pair(&mut bridge, host, "tg", "c1", "u1");
    pair(&mut bridge, host, "dc", "c2", "u2");
    bridge.on_envelope(host, dm("tg", "c1", "u1", "fix the build"));
    bridge.on_agent_event(host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(host, dm("tg", "c1", "u1", "then the docs"));
    bridge.on_envelope(host, dm("dc", "c2", "u2", "and the changelog"));
    bridge.on_envelope(host, dm("tg", "c1", "u1", "and push"));
    bridge
}

#[test]
fn queued_prompts_are_acknowledged_with_their_place() {
    let mut host = FakeHost::new();
    let mut bridge = busy_with_a_queue(&mut host);
    let acks = |host: &FakeHost, c: &str| -> Vec<String> {
        host.texts_to(if c == "c1" { "tg" } else { "dc" }, c)
            .into_iter()
            .filter(|t| t.starts_with("Queued"))
            .collect()
    };
    assert_eq!(
        acks(&host, "c1"),
        vec![
            "Queued, 1 ahead. The agent is busy; this runs when its turn comes.",
            "Queued, 3 ahead. The agent is busy; this runs when its turn comes.",
        ]
    );
    assert_eq!(
        acks(&host, "c2"),
        vec!["Queued, 2 ahead. The agent is busy; this runs when its turn comes."]
    );
    // The next remote turn takes the oldest: a new prompt now has 3 ahead (the turn, 2 left).
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", "one more"));
    assert_eq!(
        acks(&host, "c2").last().map(String::as_str),
        Some("Queued, 3 ahead. The agent is busy; this runs when its turn comes.")
    );
    // An idle agent has nothing queued: the next busy prompt is 1 ahead again.
    host.idle = true;
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    host.idle = false;
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", "last"));
    assert_eq!(
        acks(&host, "c2").last().map(String::as_str),
        Some("Queued, 1 ahead. The agent is busy; this runs when its turn comes.")
    );
}

#[test]
fn a_steer_is_acknowledged_as_joining_the_running_turn() {
    let mut host = FakeHost::new();
    let mut bridge = started(&mut host, r#"{"bridge":{"busyDelivery":"steer"}}"#, &["tg"]).0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    host.idle = false;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "use tabs"));
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["The agent is busy; it reads this in its current turn, after the step it is on."]
    );
}

#[test]
fn at_shutdown_the_card_ends_on_stopped_and_queued_chats_are_told() {
    let mut host = FakeHost::new();
    let mut bridge = busy_with_a_queue(&mut host);
    host.clear_records();

    bridge.shutdown(&mut host);

    // The turn's card is edited in place to its final state: no "thinking…" left. Only
    // `tg:c1` started the turn, so only it ever had a card (docs/security.md#who-sees-what).
    let cards = cards_to(&host, "c1");
    assert_eq!(cards.len(), 1, "{cards:?}");
    assert_eq!(cards[0].0, STOPPED);
    assert!(cards[0].1.is_some(), "the card was not edited in place");
    assert_eq!(
        cards_to(&host, "c2"),
        vec![],
        "a chat that did not start the turn"
    );
    assert!(host.texts_to("tg", "c1").contains(
        &"The pi session stopped before it ran 2 queued message(s) from this chat. Send them again when it is back."
            .to_string()
    ));
    assert!(host.texts_to("dc", "c2").contains(
        &"The pi session stopped before it ran 1 queued message(s) from this chat. Send them again when it is back."
            .to_string()
    ));
    // Told once: the saved document no longer holds the turn or the queue.
    let doc: serde_json::Value =
        serde_json::from_str(host.saved.last().expect("saved")).expect("JSON");
    assert!(
        doc.get("turn").is_none() && host.stored_queue.is_empty(),
        "{doc} {:?}",
        host.stored_queue
    );
}

#[test]
fn the_card_shows_how_far_the_turn_got_before_the_stop() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(&mut host, AgentEvent::ToolStarted("read".into()));
    bridge.shutdown(&mut host);
    assert_eq!(
        cards_to(&host, "c1").last().map(|c| c.0.as_str()),
        Some(format!("▶ read\n{STOPPED}").as_str())
    );
}

#[test]
fn after_a_crash_the_restarted_session_tells_each_chat_what_was_lost() {
    let mut host = FakeHost::new();
    {
        // The first session dies without a shutdown.
        let _crashed = busy_with_a_queue(&mut host);
    }
    // The handle of `tg:c1`'s card, as the crashed session recorded it.
    let doc: serde_json::Value =
        serde_json::from_str(host.saved.last().expect("saved")).expect("JSON");
    let card_key = doc["turn"]["cards"]
        .as_array()
        .and_then(|cards| cards.iter().find(|c| c["conversationId"] == "c1"))
        .and_then(|c| c["editKey"].as_str())
        .map(String::from);
    assert!(card_key.is_some(), "{doc}");
    host.idle = true;
    host.clear_records();
    let mut bridge = Bridge::new();
    bridge.configure(&mut host, &[source("{}")], &platforms());
    bridge.start(&mut host, &["tg".to_string(), "dc".to_string()]);

    let cards = cards_to(&host, "c1");
    assert_eq!(cards, vec![(LOST.to_string(), card_key)]);
    assert!(host.texts_to("tg", "c1").contains(
        &"The pi session restarted; 2 queued message(s) from this chat were not run. Send them again if they are still needed."
            .to_string()
    ));
    assert!(host.texts_to("dc", "c2").contains(
        &"The pi session restarted; 1 queued message(s) from this chat were not run. Send them again if they are still needed."
            .to_string()
    ));
    // Said once: a second restart has nothing to report.
    let doc: serde_json::Value =
        serde_json::from_str(host.saved.last().expect("saved")).expect("JSON");
    assert!(
        doc.get("turn").is_none() && host.stored_queue.is_empty(),
        "{doc} {:?}",
        host.stored_queue
    );
    host.clear_records();
    let mut again = Bridge::new();
    again.configure(&mut host, &[source("{}")], &platforms());
    again.start(&mut host, &["tg".to_string(), "dc".to_string()]);
    assert!(host.sent.is_empty(), "{:?}", host.sent);
}

#[test]
fn a_replaced_instance_with_the_agent_still_busy_adopts_the_turn_instead() {
    let mut host = FakeHost::new();
    {
        let _replaced = busy_with_a_queue(&mut host);
    }
    host.clear_records();
    let mut bridge = Bridge::new();
    bridge.configure(&mut host, &[source("{}")], &platforms());
    bridge.start(&mut host, &["tg".to_string(), "dc".to_string()]);
    assert!(
        host.sent.is_empty(),
        "the turn goes on; nothing is lost: {:?}",
        host.sent
    );
    bridge.on_agent_event(&mut host, AgentEvent::ToolStarted("bash".into()));
    // The adopted card is edited, not posted anew.
    let cards = cards_to(&host, "c1");
    assert_eq!(cards.last().map(|c| c.0.as_str()), Some("▶ bash"));
    assert!(cards.last().is_some_and(|c| c.1.is_some()), "{cards:?}");
}

#[test]
fn a_session_that_starts_no_transport_reports_nothing_and_keeps_the_record() {
    let mut host = FakeHost::new();
    {
        let _crashed = busy_with_a_queue(&mut host);
    }
    host.idle = true;
    host.clear_records();
    let mut doctor = Bridge::new();
    doctor.configure(&mut host, &[source("{}")], &platforms());
    doctor.start(&mut host, &[]);
    doctor.shutdown(&mut host);
    assert!(host.sent.is_empty() && host.saved.is_empty());
}

#[test]
fn a_prompt_taken_but_not_yet_started_is_reported_when_the_session_stops() {
    // Found by the fault soak: the agent took the prompt, the host stopped before the
    // turn's start arrived, and nothing was said to the chat.
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "fix the build"));
    host.clear_records();
    bridge.shutdown(&mut host);
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "The pi session stopped before it ran 1 queued message(s) from this chat. Send them again when it is back."
        ]
    );
}

#[test]
fn once_its_turn_starts_a_prompt_is_no_longer_waiting() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "fix the build"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = true;
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    host.clear_records();
    bridge.shutdown(&mut host);
    assert!(
        !host
            .texts_to("tg", "c1")
            .iter()
            .any(|t| t.contains("queued message")),
        "{:?}",
        host.texts_to("tg", "c1")
    );
}
