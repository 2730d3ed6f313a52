//! End to end through the real component: pairing → prompt → reply, commands while
//! busy, pairing across a restart, and a bad config that never stops the session.

use std::sync::Arc;

use crate::common::{self, Dirs, GatedAgent, Setup, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_then_prompt_then_reply() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "session-a");
    setup.config = vec![common::demo_runs_tools()];
    let h = setup.start().await;

    h.say(
        "user-1",
        "hello",
        "This chat is not paired with a pi session yet.",
    )
    .await;
    let code = h.code_shown_locally();
    assert_eq!(code.len(), 6, "the terminal shows a 6-digit code");
    // I1: the code travels only to the terminal, never to the chat.
    for text in h.texts() {
        assert!(
            !text
                .chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
                .contains(&code),
            "code leaked: {text}"
        );
    }

    h.say(
        "user-1",
        &format!("{}-{}", &code[..3], &code[3..]),
        "Paired as fake:user-1.",
    )
    .await;
    assert!(h.ui.notes().iter().any(|(_, t)| t == "Paired fake:user-1"));

    let secret_prompt = "summarize the quarterly plan";
    h.say("user-1", secret_prompt, "You asked").await;
    let texts = h.texts();
    let card = texts
        .iter()
        .position(|t| t == "thinking…")
        .expect("a thinking card was posted (I23)");
    let reply = texts
        .iter()
        .position(|t| t.contains("You asked"))
        .expect("the reply arrived");
    assert!(card < reply, "the card comes before the reply");
    let edits: Vec<String> = h.fake.edits().into_iter().map(|m| m.text).collect();
    assert!(
        edits.iter().any(|t| t.contains("✓ read")),
        "the card was edited in place (I20): {edits:?}"
    );
    // The typing hint is best effort and never waited for (I24), yet it reaches the chat.
    let mut typed = false;
    for _ in 0..10_000 {
        if h.fake.typing_calls().iter().any(|c| c == "dm-user-1") {
            typed = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(typed, "no typing hint was sent");
    // `explain` tells the story of those messages without their text (I2).
    let explain = h
        .session
        .local_command("explain")
        .await
        .expect("session alive");
    let lines: Vec<&str> = explain.text.lines().collect();
    assert_eq!(
        lines.get(1..4),
        Some(
            &[
                "- 0s ago in fake:dm-user-1 from fake:user-1: forwarded to the agent.",
                "- 0s ago in fake:dm-user-1 from fake:user-1: paired with the code from this terminal.",
                "- 0s ago in fake:dm-user-1 from fake:user-1: not paired: a new pairing code was shown on this terminal. See it with /connect pair.",
            ][..]
        ),
        "{}",
        explain.text
    );
    assert!(!explain.text.contains(secret_prompt));
    // I2: the prompt body never reaches a log line.
    for (_, line) in h.log.lines() {
        for (_, value) in &line.fields {
            assert!(
                !value.contains(secret_prompt),
                "prompt logged in {}: {value}",
                line.event
            );
        }
    }

    h.say("user-1", "long", "fn part_12()").await;
    let long_parts = h.texts().iter().filter(|t| t.contains("## Part ")).count();
    assert!(
        long_parts >= 2,
        "a long reply is split into several messages"
    );
    for text in h.texts() {
        assert!(
            text.chars().count() <= 4000,
            "every message fits the fake's limit"
        );
    }
    h.session.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_answer_while_the_agent_is_busy() {
    let dirs = Dirs::new();
    let agent = Arc::new(GatedAgent::default());
    let mut setup = Setup::new(&dirs, "session-busy");
    setup.agent = agent.clone();
    setup.config = vec![common::user_config(
        r#"{"bridge": {"allowUsers": ["fake:user-1"]}}"#,
    )];
    let h = setup.start().await;

    h.say("user-1", "first task", "thinking…").await;
    h.say("user-1", "/status", "- agent: busy").await;
    h.say("user-1", "/whoami", "fake:user-1 (fake)").await;
    h.fake.inject(h.dm("user-1", "second task")).await.unwrap();
    h.say("user-1", "/help", "pi-bot-connect commands:").await;
    {
        let prompts = agent.prompts.lock().unwrap();
        assert_eq!(prompts.len(), 2, "both prompts reached the agent");
        assert_eq!(
            format!("{:?}", prompts[1].1),
            "DeliverAs::FollowUp",
            "busy prompts are follow-ups (I8)"
        );
    }
    agent.finish();
    assert!(
        h.fake
            .wait_for(WAIT, |sent, _| sent
                .iter()
                .any(|m| m.message.text == "answer to: first task"))
            .await
    );
    h.session.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_survives_a_restart_and_stays_in_its_session() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "session-a");
    setup.config = vec![common::demo_runs_tools()];
    let h = setup.start().await;
    h.pair("user-1").await;
    h.session.shutdown().await.unwrap();

    // A new process: the state file is opened again from disk.
    let mut setup = Setup::new(&dirs, "session-a");
    setup.config = vec![common::demo_runs_tools()];
    setup.state = Dirs::open_state(&dirs.dir);
    let state = setup.state.clone();
    let h = setup.start().await;
    h.say("user-1", "are you still there", "You asked").await;
    assert!(
        !h.texts().iter().any(|t| t.contains("not paired")),
        "no pairing prompt after restart"
    );
    h.session.shutdown().await.unwrap();

    // I17: the same identity is a stranger to another session.
    let mut other = Setup::new(&dirs, "session-b");
    other.state = state;
    let b = other.start().await;
    b.say("user-1", "hello", "not paired").await;
    b.session.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_config_is_reported_and_the_session_still_starts() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "session-bad-config");
    setup.config = vec![common::project_config(
        "{ \"bridge\": { \"pairingDigits\": 6, }",
    )];
    let h = setup.start().await;
    let notes = h.ui.notes();
    assert!(
        notes
            .iter()
            .any(|(_, t)| t.contains("project config: invalid JSON in /work/.pi/bot-connect.json")),
        "the note names the file and the problem: {notes:?}"
    );
    h.say("user-1", "hello", "not paired").await;
    h.session.shutdown().await.unwrap();
}
