//! Scenarios: the bot's reaction on a prompt's message as it moves (taken, done, failed) and
//! the done message as a reply to the prompt (docs/pi.md#reactions-and-the-done-message).
//! Before, a card edit was the only sign, and edits make no phone buzz; the done message
//! stood alone in the chat, far from the prompt in a busy group.

use guest::bridge::Bridge;
use guest::model::{AgentEvent, Envelope, OutboundKind, Reaction, TurnOrigin};

use crate::support::{FakeHost, dm, pair, platforms, source, started};

const ON: &str = r#"{"bridge":{"reactions":true,"doneNoticeAfterMs":60000}}"#;

/// A direct message with the platform's message id `id`.
fn said(conversation: &str, user: &str, text: &str, id: &str) -> Envelope {
    Envelope {
        message_id: Some(id.into()),
        ..dm("tg", conversation, user, text)
    }
}

/// The reactions set so far, as `(message id, reaction, replaces)`.
fn marks(host: &FakeHost) -> Vec<(String, Reaction, Option<Reaction>)> {
    host.reactions
        .iter()
        .map(|(_, _, id, reaction, replaces)| (id.clone(), *reaction, *replaces))
        .collect()
}

use crate::support::paired_in_c1 as paired;

#[test]
fn a_prompt_is_marked_taken_then_done_and_the_done_message_replies_to_it() {
    let (mut bridge, mut host) = paired(ON);
    bridge.on_envelope(&mut host, said("c1", "u1", "fix the build", "501"));
    assert_eq!(marks(&host), [("501".into(), Reaction::Received, None)]);
    assert_eq!(host.reactions[0].0, "tg");
    assert_eq!(host.reactions[0].1, "c1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.now += 90_000;
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("Fixed.".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert_eq!(
        marks(&host).last(),
        Some(&("501".into(), Reaction::Done, Some(Reaction::Received)))
    );
    let done = host
        .sent
        .iter()
        .find(|m| m.text.starts_with("Done in"))
        .expect("a done message");
    assert_eq!(done.reply_to.as_deref(), Some("501"));
    let answer = host
        .sent
        .iter()
        .find(|m| m.kind == OutboundKind::Reply)
        .expect("the answer");
    assert_eq!(answer.reply_to, None, "only the done message replies");
}

#[test]
fn queued_prompts_are_done_with_the_turn_that_ran_them_or_failed_when_thrown_away() {
    let (mut bridge, mut host) = paired(ON);
    bridge.on_envelope(&mut host, said("c1", "u1", "one", "1"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(&mut host, said("c1", "u1", "two", "2"));
    bridge.on_envelope(&mut host, said("c1", "u1", "three", "3"));
    host.clear_records();
    // The first turn ends with the agent still busy: only its own prompt is done.
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert_eq!(
        marks(&host),
        [("1".into(), Reaction::Done, Some(Reaction::Received))]
    );
    // The next turn takes "two"; it ends with the agent idle, which ran "three" too.
    host.clear_records();
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = true;
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert_eq!(
        marks(&host),
        [
            ("2".into(), Reaction::Done, Some(Reaction::Received)),
            ("3".into(), Reaction::Done, Some(Reaction::Received)),
        ]
    );
    // `/new` throws the waiting prompts away: each is marked failed.
    bridge.on_envelope(&mut host, said("c1", "u1", "four", "4"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(&mut host, said("c1", "u1", "five", "5"));
    host.clear_records();
    host.session_replies
        .push_back(Ok(guest::model::SessionReply::Done("New session".into())));
    host.confirm_answers.push_back(true);
    bridge.on_envelope(&mut host, said("c1", "u1", "/new yes", "6"));
    assert!(
        marks(&host).contains(&("5".into(), Reaction::Failed, Some(Reaction::Received))),
        "{:?} {:#?}",
        marks(&host),
        host.all_send_texts()
    );
    assert!(
        !marks(&host).iter().any(|(id, _, _)| id == "6"),
        "a command's message gets no reaction"
    );
}

#[test]
fn a_restart_marks_the_lost_turn_and_the_waiting_prompts_failed() {
    let mut host = FakeHost::new();
    {
        let mut crashed = started(&mut host, ON, &["tg"]).0;
        pair(&mut crashed, &mut host, "tg", "c1", "u1");
        crashed.on_envelope(&mut host, said("c1", "u1", "fix", "10"));
        crashed.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
        host.idle = false;
        crashed.on_envelope(&mut host, said("c1", "u1", "then this", "11"));
    }
    host.idle = true;
    host.clear_records();
    let mut bridge = Bridge::new();
    bridge.configure(&mut host, &[source(ON)], &platforms());
    bridge.start(&mut host, &["tg".to_string()]);
    assert_eq!(
        marks(&host),
        [
            ("10".into(), Reaction::Failed, Some(Reaction::Received)),
            ("11".into(), Reaction::Failed, Some(Reaction::Received)),
        ],
        "the message ids were kept in the saved state"
    );
}

#[test]
fn a_steer_is_done_with_the_turn_it_joined() {
    let (mut bridge, mut host) = paired(r#"{"bridge":{"reactions":true,"busyDelivery":"steer"}}"#);
    bridge.on_envelope(&mut host, said("c1", "u1", "fix", "20"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(&mut host, said("c1", "u1", "and the tests", "21"));
    host.idle = true;
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    let done: Vec<String> = marks(&host)
        .into_iter()
        .filter(|(_, r, _)| *r == Reaction::Done)
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(done, ["20", "21"]);
}

#[test]
fn a_refused_prompt_is_marked_failed_and_commands_and_strangers_get_nothing() {
    let (mut bridge, mut host) = paired(r#"{"bridge":{"reactions":true,"maxInboundChars":100}}"#);
    bridge.on_envelope(&mut host, said("c1", "u1", &"x".repeat(101), "30"));
    bridge.on_envelope(&mut host, said("c1", "u1", "/status", "31"));
    bridge.on_envelope(&mut host, said("c9", "stranger", "hello", "32"));
    assert_eq!(marks(&host), [("30".into(), Reaction::Failed, None)]);
}

#[test]
fn reactions_are_off_unless_turned_on_and_a_failing_one_is_logged_once() {
    let (mut bridge, mut host) = paired("{}");
    bridge.on_envelope(&mut host, said("c1", "u1", "hello", "40"));
    assert!(host.reactions.is_empty(), "off by default");

    let (mut bridge, mut host) = paired(ON);
    host.reaction_error = Some("Bad Request: REACTION_INVALID".into());
    bridge.on_envelope(&mut host, said("c1", "u1", "one", "41"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("ok".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    let warned = host.logs_named("reaction not set (said once per transport; the turn goes on)");
    assert_eq!(warned.len(), 1, "{:?}", host.logs);
    assert!(
        host.all_send_texts().iter().any(|t| t.contains("ok")),
        "the answer went out all the same"
    );
}
