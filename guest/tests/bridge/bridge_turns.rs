//! Scenarios: progress cards, replies and the outbound pipeline (I3, I9, I20–I23, I30, I36,
//! docs/decisions.md#decision-4-progress-is-throttled-per-conversation-with-a-trailing-edge).

use guest::bridge::Bridge;
use guest::model::{AgentEvent, LengthUnit, Level, Markup, OutboundKind, SendError, TurnOrigin};

use crate::support::{self, FakeHost, caps, default_bridge, dm, pair, started};

fn tool_started(name: &str) -> AgentEvent {
    AgentEvent::ToolStarted(name.into())
}

fn tool_finished(name: &str) -> AgentEvent {
    AgentEvent::ToolFinished {
        name: name.into(),
        ok: true,
    }
}

/// Two paired conversations: `tg:c1` and `dc:c2`.
fn two_chats(host: &mut FakeHost) -> Bridge {
    let mut bridge = default_bridge(host);
    pair(&mut bridge, host, "tg", "c1", "u1");
    pair(&mut bridge, host, "dc", "c2", "u2");
    bridge
}

/// `(text, edit_key)` of every send to `conversation`.
fn sends(host: &FakeHost, conversation: &str) -> Vec<(String, Option<String>)> {
    host.sent
        .iter()
        .filter(|m| m.conversation_id == conversation)
        .map(|m| (m.text.clone(), m.edit_key.clone()))
        .collect()
}

fn post(text: &str) -> (String, Option<String>) {
    (text.to_string(), None)
}

fn edit(text: &str, key: &str) -> (String, Option<String>) {
    (text.to_string(), Some(key.to_string()))
}

#[test]
fn a_turn_without_tools_still_shows_thinking_everywhere() {
    let mut host = FakeHost::new();
    let mut bridge = two_chats(&mut host);

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);

    assert_eq!(sends(&host, "c1"), vec![post("thinking…")]);
    assert_eq!(sends(&host, "c2"), vec![post("thinking…")]);
    assert!(host.sent.iter().all(|m| m.kind == OutboundKind::Progress));
    assert_eq!(host.typing.len(), 2, "no typing hint with the card");
}

#[test]
fn tool_events_edit_the_same_card() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 1_000;
    bridge.on_agent_event(&mut host, tool_started("bash"));
    host.now += 1_000;
    bridge.on_agent_event(&mut host, tool_finished("bash"));
    host.now += 1_000;
    bridge.on_agent_event(
        &mut host,
        AgentEvent::ToolFinished {
            name: "read".into(),
            ok: false,
        },
    );

    assert_eq!(
        sends(&host, "c1"),
        vec![
            post("thinking…"),
            edit("▶ bash", "m3"),
            edit("✓ bash", "m3"),
            edit("✓ bash\n✕ read", "m3"),
        ]
    );
}

#[test]
fn a_refused_edit_posts_a_new_card_and_drops_the_old_handle() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.fail_edits = true;
    host.now += 1_000;
    bridge.on_agent_event(&mut host, tool_started("bash"));
    host.fail_edits = false;
    host.now += 1_000;
    bridge.on_agent_event(&mut host, tool_finished("bash"));

    assert_eq!(
        host.failed
            .iter()
            .map(|(m, _)| m.edit_key.clone())
            .collect::<Vec<_>>(),
        vec![Some("m3".to_string())]
    );
    assert_eq!(
        sends(&host, "c1"),
        vec![post("thinking…"), post("▶ bash"), edit("✓ bash", "m4")]
    );
    assert_eq!(host.logs_named("card edit refused, posting anew").len(), 1);
}

#[test]
fn a_rate_limited_edit_keeps_the_card_and_retries_after_the_wait() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    let start = host.now;

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now = start + 1_000;
    host.rate_limit_next = Some(2_000);
    bridge.on_agent_event(&mut host, tool_started("bash"));
    assert_eq!(host.ticks, vec![start + 3_000]);
    host.now = start + 2_000;
    bridge.on_agent_event(&mut host, tool_finished("bash"));
    host.now = start + 3_000;
    bridge.tick(&mut host);

    // No duplicate card: the same message is edited once the platform allows it.
    assert_eq!(
        sends(&host, "c1"),
        vec![post("thinking…"), edit("✓ bash", "m3")]
    );
}

#[test]
fn a_transport_that_cannot_edit_gets_new_messages() {
    let mut host = FakeHost::new();
    host.set_capabilities("dc", caps(false, Markup::Markdown, LengthUnit::Chars, 2000));
    let mut bridge = two_chats(&mut host);

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 1_000;
    bridge.on_agent_event(&mut host, tool_started("grep"));

    assert_eq!(sends(&host, "c2"), vec![post("thinking…"), post("▶ grep")]);
    assert_eq!(sends(&host, "c1")[1].1.as_deref(), Some("m5"));
}

#[test]
fn throttled_updates_wait_for_the_tick_and_the_card_ends_on_the_latest_state() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    let start = host.now;

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now = start + 100;
    // The first tool of the turn lands at once (the turn-start card re-opened the
    // throttle); the next update waits an interval after it.
    bridge.on_agent_event(&mut host, tool_started("bash"));
    host.now = start + 200;
    bridge.on_agent_event(&mut host, tool_finished("bash"));

    assert_eq!(
        sends(&host, "c1"),
        vec![post("thinking…"), edit("▶ bash", "m3")]
    );
    assert_eq!(host.ticks, vec![start + 1_100]);

    // An early tick changes nothing and asks again.
    host.now = start + 500;
    bridge.tick(&mut host);
    assert_eq!(sends(&host, "c1").len(), 2);
    assert_eq!(host.ticks.last(), Some(&(start + 1_100)));

    host.now = start + 1_100;
    bridge.tick(&mut host);
    assert_eq!(
        sends(&host, "c1"),
        vec![
            post("thinking…"),
            edit("▶ bash", "m3"),
            edit("✓ bash", "m3")
        ]
    );
    // Nothing left to show: a further tick sends nothing.
    host.now = start + 5_000;
    bridge.tick(&mut host);
    assert_eq!(sends(&host, "c1").len(), 3);
}

#[test]
fn the_first_tool_of_a_turn_lands_at_once_even_with_a_minute_throttle() {
    let mut host = FakeHost::new();
    host.set_capabilities("dc", caps(false, Markup::Markdown, LengthUnit::Chars, 2000));
    let (mut bridge, _, _) = started(
        &mut host,
        r#"{"bridge":{"progressMinIntervalMs":60000}}"#,
        &["tg", "dc"],
    );
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    pair(&mut bridge, &mut host, "dc", "c2", "u2");
    let start = host.now;

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now = start + 10;
    bridge.on_agent_event(&mut host, tool_started("bash"));

    // Old behaviour: both cards sat on "thinking…" for a minute.
    assert_eq!(sends(&host, "c1")[1].0, "▶ bash");
    // A transport without edits gets the first tool's line as a message of its own.
    assert_eq!(sends(&host, "c2"), vec![post("thinking…"), post("▶ bash")]);

    // The second update is throttled again (trailing edge,
    // docs/decisions.md#decision-4-progress-is-throttled-per-conversation-with-a-trailing-edge).
    host.now = start + 20;
    bridge.on_agent_event(&mut host, tool_finished("bash"));
    assert_eq!(sends(&host, "c1").len(), 2);
    assert_eq!(host.ticks.last(), Some(&(start + 60_010)));
    host.now = start + 60_010;
    bridge.tick(&mut host);
    assert_eq!(sends(&host, "c1").last().unwrap().0, "✓ bash");
    assert_eq!(sends(&host, "c2").last().unwrap(), &post("✓ bash"));
}

#[test]
fn the_throttle_is_per_conversation() {
    let mut host = FakeHost::new();
    let mut bridge = two_chats(&mut host);
    let start = host.now;

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    // c2 misses one update while paused, so its card is due when c1's is not: each
    // conversation keeps its own interval.
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", "/pause"));
    host.now = start + 1_000;
    bridge.on_agent_event(&mut host, tool_started("bash"));
    host.now = start + 1_100;
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", "/resume"));
    bridge.on_agent_event(&mut host, tool_finished("bash"));

    let cards = |host: &FakeHost, c: &str| {
        host.sent
            .iter()
            .filter(|m| m.conversation_id == c && m.kind == OutboundKind::Progress)
            .map(|m| m.text.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(cards(&host, "c1"), vec!["thinking…", "▶ bash"]);
    assert_eq!(cards(&host, "c2"), vec!["thinking…", "✓ bash"]);
}

#[test]
fn the_settled_turn_publishes_the_last_assistant_message_to_unpaused_chats() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    pair(&mut bridge, &mut host, "dc", "c2", "u2");
    pair(&mut bridge, &mut host, "tg", "c3", "u3");
    bridge.on_envelope(&mut host, dm("tg", "c3", "u3", "/pause"));
    host.clear_records();

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 100;
    bridge.on_agent_event(&mut host, tool_started("bash"));
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage("Working on it".into()),
    );
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage("All tests pass.".into()),
    );
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("   ".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);

    for (conversation, key) in [("c1", "m8"), ("c2", "m9")] {
        assert_eq!(
            sends(&host, conversation),
            vec![
                post("thinking…"),
                edit("▶ bash", key),
                post("All tests pass.")
            ],
            "{conversation}"
        );
    }
    assert!(
        sends(&host, "c3").is_empty(),
        "a paused chat got a broadcast"
    );
    let kinds: Vec<OutboundKind> = host
        .sent
        .iter()
        .filter(|m| m.conversation_id == "c1")
        .map(|m| m.kind)
        .collect();
    assert_eq!(
        kinds,
        vec![
            OutboundKind::Progress,
            OutboundKind::Progress,
            OutboundKind::Reply
        ]
    );
}

#[test]
fn replies_off_sends_no_reply() {
    let mut host = FakeHost::new();
    let mut bridge = started(
        &mut host,
        r#"{"bridge":{"broadcast":{"replies":false}}}"#,
        &["tg"],
    )
    .0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("done".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);

    assert_eq!(host.texts_to("tg", "c1"), vec!["thinking…"]);
}

#[test]
fn a_long_reply_is_capped_and_the_overflow_announced() {
    let mut host = FakeHost::new();
    host.set_capabilities("tg", caps(true, Markup::Plain, LengthUnit::Chars, 5));
    let config = r#"{"bridge":{"maxChunks":2,"broadcast":{"progress":false}}}"#;
    let mut bridge = started(&mut host, config, &["tg"]).0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage("abcdefghijklmno".into()),
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "abcde",
            "fghij",
            "[truncated: 1 more message(s) were not sent]"
        ]
    );
    assert!(host.sent.iter().all(|m| m.kind == OutboundKind::Reply));
}

#[test]
fn a_secret_in_a_reply_is_redacted_and_only_the_rule_is_logged() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    let secret = "ghp_abcdefghijklmnopqrstuvwxyz012345";

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage(format!("Use token {secret} to push.")),
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["thinking…", "Use token [redacted:github-token] to push."]
    );
    let lines = host.logs_named("redacted outbound text");
    assert_eq!(lines.len(), 1);
    assert_eq!(
        lines[0].fields,
        vec![
            ("transport".to_string(), "tg".to_string()),
            ("kind".to_string(), "reply".to_string()),
            ("rules".to_string(), "github-token".to_string())
        ]
    );
    for value in host.all_log_strings() {
        assert!(!value.contains("ghp_"), "secret logged: {value:?}");
    }
}

#[test]
fn a_failed_send_to_one_chat_does_not_stop_the_others() {
    let cases = [(
        SendError::Failed("chat not found".into()),
        "The reply could not be delivered to tg:c1: chat not found",
    )];
    for (error, notice) in cases {
        let mut host = FakeHost::new();
        let mut bridge = two_chats(&mut host);
        host.fail_conversation.insert("c1".into(), error);

        bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
        host.now += 1_000;
        bridge.on_agent_event(&mut host, tool_started("bash"));
        bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("Done.".into()));
        bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);

        assert_eq!(
            host.texts_to("dc", "c2"),
            vec!["thinking…", "▶ bash", "Done."]
        );
        assert!(host.texts_to("tg", "c1").is_empty());
        // Cards are best effort; only the owed reply is reported locally, once.
        assert_eq!(host.notes, vec![(Level::Warning, notice.to_string())]);
    }
}

#[test]
fn events_after_a_restart_mid_turn_still_deliver_the_reply() {
    let mut host = FakeHost::new();
    // The fake host keeps one holder per lock; the real host keeps a trapped session's
    // locks for its next instance, so letting go of them here stands for that.
    two_chats(&mut host).shutdown(&mut host);
    // A fresh bridge (as after a trap) loads the saved state and then sees the rest of a
    // turn it never saw start.
    let (mut restarted, _, _) = started(&mut host, "{}", &["tg", "dc"]);
    restarted.on_agent_event(&mut host, tool_finished("bash"));
    restarted.on_agent_event(&mut host, AgentEvent::AssistantMessage("done".into()));
    restarted.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert!(
        sends(&host, "c1").contains(&post("done")),
        "{:?}",
        host.sent
    );
    assert!(
        sends(&host, "c2").contains(&post("done")),
        "{:?}",
        host.sent
    );
}

#[test]
fn a_tool_call_outside_any_turn_fails_closed() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(
        &mut host,
        r#"{"bridge": {"remoteToolPolicy": "no-tools"}}"#,
        &["tg"],
    );
    assert!(
        matches!(
            support::verdict(
                bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))
            ),
            guest::model::ToolDecision::Block(_)
        ),
        "no turn known: treated as remote"
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))),
        guest::model::ToolDecision::Allow
    );
}

#[test]
fn a_chat_that_disconnected_gets_no_more_broadcasts() {
    let mut host = FakeHost::new();
    let mut bridge = two_chats(&mut host);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/disconnect"));
    host.clear_records();
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage("secret plan".into()),
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert!(
        sends(&host, "c1").is_empty(),
        "unpaired chat still got {:?}",
        sends(&host, "c1")
    );
    assert!(sends(&host, "c2").contains(&post("secret plan")));
}

#[test]
fn a_rate_limited_reply_waits_and_later_messages_queue_behind_it() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("Done.".into()));
    let start = host.now;
    host.rate_limit_next = Some(3_000);
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);

    assert_eq!(host.texts_to("tg", "c1"), vec!["thinking…"]);
    assert_eq!(host.ticks.last(), Some(&(start + 3_000)));
    assert!(
        host.notes.is_empty(),
        "a wait is not a failure: {:?}",
        host.notes
    );
    // A command answered meanwhile must not overtake the reply.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/whoami"));
    assert_eq!(host.texts_to("tg", "c1"), vec!["thinking…"]);

    host.now = start + 2_999;
    bridge.tick(&mut host);
    assert_eq!(
        host.texts_to("tg", "c1").len(),
        1,
        "sent before the wait was over"
    );
    host.now = start + 3_000;
    bridge.tick(&mut host);
    let texts = host.texts_to("tg", "c1");
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert_eq!(texts[1], "Done.");
    assert!(texts[2].contains("tg:u1"), "{texts:?}");
    assert!(host.notes.is_empty());
    // The operator's count of deliveries that needed a retry: the reply and the answer
    // queued behind it, each once.
    let kinds: Vec<String> = host
        .logs_named("outbound sent after waiting")
        .iter()
        .flat_map(|line| line.fields.iter())
        .filter(|(key, _)| key == "kind")
        .map(|(_, value)| value.clone())
        .collect();
    assert_eq!(kinds, ["reply", "notice"]);
}

#[test]
fn a_reply_the_platform_keeps_refusing_is_reported_locally_and_the_other_chat_gets_it() {
    let mut host = FakeHost::new();
    let mut bridge = two_chats(&mut host);
    host.fail_conversation
        .insert("c1".into(), SendError::RateLimited(3_000));

    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("Done.".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    for _ in 0..10 {
        host.now += 3_000;
        bridge.tick(&mut host);
    }

    assert_eq!(host.texts_to("dc", "c2"), vec!["thinking…", "Done."]);
    assert!(host.texts_to("tg", "c1").is_empty());
    assert_eq!(
        host.notes,
        vec![(
            Level::Warning,
            "The reply could not be delivered to tg:c1: rate limited, retry after 3000 ms"
                .to_string()
        )],
        "told once, after the platform kept refusing"
    );
}

#[test]
fn a_card_rate_limited_as_the_turn_ends_leaves_no_tick_behind() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(&mut host, tool_started("bash"));
    // The final card update is refused with a wait; then the turn is over.
    host.rate_limit_next = Some(2_000);
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    host.now += 2_000;
    host.ticks.clear();

    bridge.tick(&mut host);

    // Nothing waits any more: asking for a tick now would make the host call again at once,
    // and again, for ever.
    assert!(
        host.ticks.iter().all(|t| *t > host.now),
        "a tick for nothing was requested: {:?} at {}",
        host.ticks,
        host.now
    );
}

#[test]
fn replies_still_waiting_at_shutdown_are_reported_not_dropped() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("Done.".into()));
    host.rate_limit_next = Some(60_000);
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    host.clear_records();

    bridge.shutdown(&mut host);

    assert_eq!(
        host.notes,
        vec![(
            Level::Warning,
            "1 reply message(s) to tg:c1 were still waiting for the platform's rate limit and were not sent."
                .to_string()
        )]
    );
}

/// The card text last sent to `conversation`.
fn last_card(host: &FakeHost, conversation: &str) -> String {
    host.sent
        .iter()
        .filter(|m| m.kind == OutboundKind::Progress && m.conversation_id == conversation)
        .map(|m| m.text.clone())
        .next_back()
        .unwrap_or_default()
}

#[test]
fn a_blocked_tool_is_shown_blocked_not_run() {
    // The demo agent reports no start or end for a blocked call.
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 1_000;
    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("read"))),
        guest::model::ToolDecision::Allow
    );
    bridge.on_agent_event(&mut host, tool_started("read"));
    bridge.on_agent_event(&mut host, tool_finished("read"));
    host.now += 1_000;
    assert!(matches!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))),
        guest::model::ToolDecision::Block(_)
    ));
    host.now += 1_000;
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert_eq!(last_card(&host, "c1"), "✓ read\n⊘ bash (blocked)");
}

#[test]
fn a_host_that_still_reports_a_blocked_call_does_not_turn_it_into_a_run() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    assert!(matches!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))),
        guest::model::ToolDecision::Block(_)
    ));
    bridge.on_agent_event(&mut host, tool_started("bash"));
    bridge.on_agent_event(
        &mut host,
        AgentEvent::ToolFinished {
            name: "bash".into(),
            ok: false,
        },
    );
    // Later the same tool is allowed (a local "yes" under approval): that run shows.
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert_eq!(last_card(&host, "c1"), "⊘ bash (blocked)");

    let mut host = FakeHost::new();
    let mut bridge = started(
        &mut host,
        r#"{"bridge":{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each"}}"#,
        &["tg"],
    )
    .0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.confirm_answers.extend([false, true]);
    assert!(matches!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))),
        guest::model::ToolDecision::Block(_)
    ));
    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))),
        guest::model::ToolDecision::Allow
    );
    bridge.on_agent_event(&mut host, tool_started("bash"));
    bridge.on_agent_event(&mut host, tool_finished("bash"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert_eq!(last_card(&host, "c1"), "⊘ bash (blocked)\n✓ bash");
}

#[test]
fn a_lost_later_part_of_a_split_reply_is_reported_locally() {
    let mut host = FakeHost::new();
    host.set_capabilities("tg", caps(false, Markup::Plain, LengthUnit::Chars, 120));
    let (mut bridge, _, _) = started(&mut host, "{}", &["tg"]);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let sections: Vec<String> = (1..=3)
        .map(|n| format!("## Part {n}\n\n{}", "word ".repeat(15)))
        .collect();
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage(sections.join("\n\n")),
    );
    host.notes.clear();
    // The card went out already; the reply's first part is the next send, its second
    // part the one after.
    let next = host.sent.len() + host.failed.len() + 1;
    host.fail_attempt
        .insert(next + 1, SendError::Failed("HTTP 502 Bad Gateway".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    let replies = host
        .sent
        .iter()
        .filter(|m| m.kind == OutboundKind::Reply)
        .count();
    assert!(replies >= 2, "the other parts still went: {:#?}", host.sent);
    assert_eq!(host.failed.len(), 1, "{:#?}", host.failed);
    let parts = replies + 1;
    assert_eq!(
        host.notes,
        vec![(
            Level::Warning,
            format!(
                "Part 2 of {parts} of the reply could not be delivered to tg:c1: HTTP 502 Bad Gateway"
            )
        )]
    );
}
