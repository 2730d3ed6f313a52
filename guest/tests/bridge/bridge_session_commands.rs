//! Scenarios: session commands from a chat (`/new`, `/compact`, `/model`, `/thinking`,
//! `/usage`; docs/pi.md#session-commands-from-the-chat). Before them `/new` reached the
//! agent as a plain prompt; now each is the agent's own operation, the owner can turn any of
//! them off (`bridge.denyCommands`), and `/new` asks first when it would throw work away.

use guest::model::{AgentEvent, SessionCommand, SessionReply, TokenUse, TurnOrigin, UsageReport};

use crate::support::{FakeHost, caps, dm, identity, pair, started};

use crate::support::paired_in_c1 as paired;

#[test]
fn model_without_a_name_lists_the_models_with_buttons_and_with_one_switches() {
    let (mut bridge, mut host) = paired("{}");
    host.session_replies.push_back(Ok(SessionReply::Models {
        current: Some("fake/fake-model".into()),
        available: vec!["fake/fake-model".into(), "fake/fake-model-2".into()],
    }));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/model"));
    assert_eq!(host.session_commands, [SessionCommand::ListModels]);
    let sent = host.sent.last().expect("a reply");
    assert!(
        sent.text.contains("fake/fake-model (in use)"),
        "{}",
        sent.text
    );
    let commands: Vec<&str> = sent.buttons.iter().map(|b| b.command.as_str()).collect();
    assert_eq!(commands, ["/model fake/fake-model-2"]);
    assert!(host.prompts.is_empty(), "never a prompt");

    host.session_replies
        .push_back(Ok(SessionReply::Done("Model: fake/fake-model-2".into())));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/model fake/fake-model-2"));
    assert_eq!(
        host.session_commands.last(),
        Some(&SessionCommand::SetModel("fake/fake-model-2".into()))
    );
    assert!(
        host.all_send_texts()
            .iter()
            .any(|t| t.contains("Model: fake/fake-model-2"))
    );
    // The agent's refusal reaches the chat with the command named.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/thinking max"));
    let last = host.sent.last().expect("a reply").text.clone();
    assert!(
        last.contains("/thinking failed: the fake host has no answer scripted"),
        "{last}"
    );
    assert!(host.prompts.is_empty());
}

#[test]
fn new_asks_first_while_a_turn_runs_and_goes_ahead_when_confirmed() {
    let (mut bridge, mut host) = paired("{}");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "work"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/new"));
    assert!(host.session_commands.is_empty(), "nothing started over yet");
    assert_eq!(host.aborts, 0);
    let ask = host.sent.last().expect("a question");
    assert!(ask.text.contains("A turn is running"), "{}", ask.text);
    assert_eq!(ask.buttons[0].command, "/new confirm");

    host.session_replies
        .push_back(Ok(SessionReply::Done("New session started".into())));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/new confirm"));
    assert_eq!(host.aborts, 1, "the running turn is aborted first");
    assert_eq!(host.session_commands, [SessionCommand::NewSession]);
    assert!(
        host.all_send_texts()
            .iter()
            .any(|t| t.contains("New session started"))
    );
}

#[test]
fn the_prompts_waiting_when_new_goes_ahead_leave_the_queue_with_the_old_session() {
    let (mut bridge, mut host) = paired("{}");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "work"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "then this"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "and this"));
    assert_eq!(host.stored_queue.len(), 2, "two follow-ups wait");
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/new"));
    let ask = host.sent.last().expect("a question");
    assert!(ask.text.contains("2 prompt(s) wait"), "{}", ask.text);

    host.session_replies
        .push_back(Ok(SessionReply::Done("New session started.".into())));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/new confirm"));
    assert!(host.stored_queue.is_empty(), "{:?}", host.stored_queue);
    assert!(
        host.all_send_texts()
            .iter()
            .any(|t| t == "New session started. 2 waiting prompt(s) went with the old session."),
        "{:?}",
        host.all_send_texts()
    );
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/queue"));
    assert!(
        host.all_send_texts()
            .iter()
            .any(|t| t.starts_with("No prompt waits for the agent.")),
        "{:?}",
        host.all_send_texts()
    );
}

#[test]
fn new_while_idle_starts_at_once() {
    let (mut bridge, mut host) = paired("{}");
    host.session_replies
        .push_back(Ok(SessionReply::Done("New session started".into())));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/new"));
    assert_eq!(host.session_commands, [SessionCommand::NewSession]);
    assert_eq!(host.aborts, 0);
}

#[test]
fn a_command_the_owner_turned_off_is_refused_and_never_reaches_the_agent() {
    let (mut bridge, mut host) = paired(r#"{"bridge":{"denyCommands":["model","new"]}}"#);
    for text in ["/model fake/x", "/models", "/new confirm"] {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", text));
    }
    assert!(
        host.session_commands.is_empty(),
        "{:?}",
        host.session_commands
    );
    assert!(host.prompts.is_empty(), "not a prompt either");
    let texts = host.all_send_texts();
    assert_eq!(
        texts
            .iter()
            .filter(
                |t| t.contains("turned off for the chats here by the owner (bridge.denyCommands)")
            )
            .count(),
        3,
        "{texts:#?}"
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/help"));
    let help = host.sent.last().expect("help").text.clone();
    assert!(help.contains("(turned off here)"), "{help}");
    // Those left on still work.
    host.session_replies
        .push_back(Ok(SessionReply::Usage(UsageReport {
            session: TokenUse {
                input: 10,
                output: 5,
                ..TokenUse::default()
            },
            ..UsageReport::default()
        })));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/usage"));
    assert_eq!(host.session_commands, [SessionCommand::Usage]);
    assert!(
        host.sent
            .last()
            .expect("usage")
            .text
            .contains("10 in, 5 out")
    );
}

fn usage(input: u64, output: u64, cost_micros: Option<u64>) -> SessionReply {
    SessionReply::Usage(UsageReport {
        last_turn: Some(TokenUse {
            input,
            output,
            cost_micros,
            ..TokenUse::default()
        }),
        context_tokens: Some(8_000),
        context_window: Some(32_000),
        ..UsageReport::default()
    })
}

fn a_turn(bridge: &mut guest::bridge::Bridge, host: &mut FakeHost) {
    bridge.on_envelope(host, dm("tg", "c1", "u1", "work"));
    bridge.on_agent_event(host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.on_agent_event(host, AgentEvent::AssistantMessage("All done.".into()));
    bridge.on_agent_event(host, AgentEvent::TurnSettled);
}

#[test]
fn the_final_answer_carries_the_usage_footer_the_owner_chose() {
    let rows = [
        ("tokens", "All done.\n\nTokens: 1.2k in, 340 out"),
        (
            "tokens-cost",
            "All done.\n\nTokens: 1.2k in, 340 out · $0.0123",
        ),
        ("context", "All done.\n\nContext: 8k of 32k (25%)"),
    ];
    for (mode, expected) in rows {
        let (mut bridge, mut host) = paired(&format!(r#"{{"bridge":{{"usageFooter":"{mode}"}}}}"#));
        host.session_replies
            .push_back(Ok(usage(1_200, 340, Some(12_300))));
        a_turn(&mut bridge, &mut host);
        assert_eq!(host.session_commands, [SessionCommand::Usage], "{mode}");
        let texts = host.all_send_texts();
        assert!(
            texts.iter().any(|t| t.contains(expected)),
            "{mode}: {texts:#?}"
        );
    }
}

#[test]
fn no_footer_when_off_or_when_the_agent_cannot_say() {
    let (mut bridge, mut host) = paired("{}");
    a_turn(&mut bridge, &mut host);
    assert!(
        host.session_commands.is_empty(),
        "off by default: the agent is not asked"
    );
    assert!(
        host.all_send_texts()
            .iter()
            .any(|t| t.ends_with("All done."))
    );
    let (mut bridge, mut host) = paired(r#"{"bridge":{"usageFooter":"tokens"}}"#);
    // No answer scripted: the agent refuses, and the answer goes out without a footer.
    a_turn(&mut bridge, &mut host);
    let texts = host.all_send_texts();
    assert!(texts.iter().any(|t| t.ends_with("All done.")), "{texts:#?}");
    assert!(!texts.iter().any(|t| t.contains("Tokens:")));
}

/// A long remote turn ends with one new message saying so (docs/pi.md#reactions-and-the-done-message);
/// a short one, a local one, or one with the notice off does not.
#[test]
fn a_long_remote_turn_ends_with_one_done_message() {
    let (mut bridge, mut host) = paired(r#"{"bridge":{"doneNoticeAfterMs":60000}}"#);
    host.work.numstat = Some("3\t1\tsrc/a.rs\n10\t0\tsrc/b.rs\n".into());
    host.work.last_shell = Some(guest::model::ShellRun {
        command: "cargo test".into(),
        failed: false,
        output: "test result: ok. 12 passed; 0 failed; 0 ignored".into(),
    });
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "work"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 252_000;
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("All done.".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    let done: Vec<String> = host
        .all_send_texts()
        .into_iter()
        .filter(|t| t.starts_with("Done in"))
        .collect();
    assert_eq!(
        done,
        ["Done in 4m12s: 2 files changed, tests: 12 passed, 0 failed."],
        "once, after the answer"
    );
    assert!(
        host.all_send_texts()
            .last()
            .is_some_and(|t| t.starts_with("Done in")),
        "the ping comes after the answer"
    );

    // Short: no ping.
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "quick"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 59_000;
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    // A turn typed at the terminal: nobody on a phone asked for it.
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    host.now += 600_000;
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert!(
        !host
            .all_send_texts()
            .iter()
            .any(|t| t.starts_with("Done in")),
        "{:#?}",
        host.all_send_texts()
    );

    // Off by default.
    let (mut bridge, mut host) = paired("{}");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "work"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 3_600_000;
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert!(
        !host
            .all_send_texts()
            .iter()
            .any(|t| t.starts_with("Done in"))
    );
}

/// With `bridge.streamPreview` the card shows the answer as it is written
/// (docs/pi.md#streaming-preview): a token streamed in pieces never shows, not even in one
/// edit, and the final answer replaces the preview.
#[test]
fn the_streamed_preview_never_shows_a_secret_and_gives_way_to_the_answer() {
    let (mut bridge, mut host) =
        paired(r#"{"bridge":{"streamPreview":true,"progressMinIntervalMs":0}}"#);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "work"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let answer = format!("Use the key {token} to push, then run the tests.");
    let mut end = 0;
    while end < answer.len() {
        end = (end + 7).min(answer.len());
        bridge.on_agent_event(&mut host, AgentEvent::AssistantDraft(answer[..end].into()));
    }
    let texts = host.all_send_texts();
    assert!(
        texts.iter().any(|t| t.contains("✎ Use the key")),
        "the preview shows: {texts:#?}"
    );
    for text in &texts {
        assert!(
            !text.contains("abcdefghij") && !text.contains("ghp_a"),
            "{text}"
        );
    }
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage(answer.clone()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    let last_card = host
        .sent
        .iter()
        .rev()
        .find(|m| m.kind == guest::model::OutboundKind::Progress)
        .expect("a card");
    assert!(
        !last_card.text.contains('✎'),
        "the card ends on its steps: {}",
        last_card.text
    );
    for text in host.all_send_texts() {
        assert!(!text.contains("abcdefghij"), "{text}");
    }
}

/// Where the platform streams drafts (Telegram's `sendMessageDraft`) the answer being
/// written goes there instead of onto the card, redacted and held back the same way; a chat
/// where drafts fail (a group) gets the card's preview from then on, after one refused call.
#[test]
fn a_platform_draft_carries_the_preview_where_it_can_and_never_a_secret() {
    let mut host = FakeHost::new();
    let mut drafting = caps(
        true,
        guest::model::Markup::Markdown,
        guest::model::LengthUnit::Chars,
        4096,
    );
    drafting.drafts = true;
    host.identities.insert("tg".into(), Ok(identity(drafting)));
    let config =
        r#"{"bridge":{"streamPreview":true,"progressMinIntervalMs":0,"busyDelivery":"steer"}}"#;
    let mut bridge = started(&mut host, config, &["tg"]).0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    pair(&mut bridge, &mut host, "tg", "g2", "u2");
    host.no_drafts_in.insert("g2".into());
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "work"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    // Both chats see this turn: g2's prompt steers into it.
    bridge.on_envelope(&mut host, dm("tg", "g2", "u2", "and this"));
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let answer = format!("Use the key {token} to push, then run the tests.");
    let mut end = 0;
    while end < answer.len() {
        end = (end + 7).min(answer.len());
        bridge.on_agent_event(&mut host, AgentEvent::AssistantDraft(answer[..end].into()));
    }
    let drafts: Vec<&str> = host
        .drafts
        .iter()
        .filter(|(_, chat, _, _)| chat == "c1")
        .map(|(_, _, _, text)| text.as_str())
        .collect();
    assert!(
        drafts.iter().any(|t| t.starts_with("Use the key")),
        "{drafts:#?}"
    );
    let ids: std::collections::BTreeSet<u64> = host.drafts.iter().map(|d| d.2).collect();
    assert_eq!(ids.len(), 1, "one stream per turn");
    assert!(!ids.contains(&0), "a draft id is never 0");
    for text in drafts
        .iter()
        .copied()
        .chain(host.all_send_texts().iter().map(String::as_str))
    {
        assert!(
            !text.contains("abcdefghij") && !text.contains("ghp_a"),
            "{text}"
        );
    }
    let cards_to = |chat: &str| -> Vec<String> {
        host.sent
            .iter()
            .filter(|m| m.kind == guest::model::OutboundKind::Progress && m.conversation_id == chat)
            .map(|m| m.text.clone())
            .collect()
    };
    assert!(
        cards_to("c1").iter().all(|t| !t.contains('✎')),
        "the draft chat's card keeps to its steps: {:#?}",
        cards_to("c1")
    );
    assert!(
        cards_to("g2").iter().any(|t| t.contains("✎ Use the key")),
        "the group gets the preview on its card: {:#?}",
        cards_to("g2")
    );
    assert!(
        host.drafts.iter().all(|(_, chat, _, _)| chat != "g2"),
        "nothing was drafted in the group"
    );
}

#[test]
fn no_preview_unless_switched_on() {
    let (mut bridge, mut host) = paired(r#"{"bridge":{"progressMinIntervalMs":0}}"#);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "work"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.on_agent_event(&mut host, AgentEvent::AssistantDraft("Hello there ".into()));
    assert!(!host.all_send_texts().iter().any(|t| t.contains('✎')));
}
