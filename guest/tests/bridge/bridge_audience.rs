//! Scenarios: who sees what (docs/security.md#who-sees-what). A remote turn's card, answer and
//! approval requests go to the chat that started it (and chats that steered into it); local turns
//! and `/connect digest` go to the chats that follow the terminal: DMs by default, a group only
//! after `/follow`. Written the way the finding was found: one `/status` in a team group must not
//! put a DM user's private answers in front of the team.

use guest::bridge::Bridge;
use guest::model::{AgentEvent, DeliverAs, Envelope, ToolAnswer, ToolCall, TurnOrigin};

use crate::support::{FakeHost, dm, pair, started};

/// Remote approval on, so a remote turn's `bash` waits for an answer from the phone.
const CONFIG: &str = r#"{"bridge":{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":{"enabled":true,"timeoutMs":60000}}}"#;

/// A message in the team group `tg:team`, addressed to the bot (a mention or a reply).
fn in_group(user: &str, text: &str) -> Envelope {
    Envelope {
        is_direct: false,
        addressed: true,
        ..dm("tg", "team", user, text)
    }
}

/// u1 paired in its DM `tg:dm1`, u2 in `tg:dm2`; u1 then ran `/status` in the team group,
/// so the bot remembers the group. Records cleared.
fn dm_users_and_a_team_group(host: &mut FakeHost) -> Bridge {
    let (mut bridge, _, _) = started(host, CONFIG, &["tg", "dc"]);
    pair(&mut bridge, host, "tg", "dm1", "u1");
    pair(&mut bridge, host, "tg", "dm2", "u2");
    bridge.on_envelope(host, in_group("u1", "/status"));
    assert_eq!(
        host.texts_to("tg", "team").len(),
        1,
        "the group got its status"
    );
    host.clear_records();
    bridge
}

/// A whole turn: started with `origin`, asks for `bash` (approval for a remote turn),
/// answers `answer`. Returns the approval id, if one was asked.
fn run_turn(
    bridge: &mut Bridge,
    host: &mut FakeHost,
    origin: TurnOrigin,
    answer: &str,
) -> Option<String> {
    bridge.on_agent_event(host, AgentEvent::TurnStarted(origin));
    let id = match bridge.on_tool_call(host, &ToolCall::named("bash")) {
        ToolAnswer::Pending(request) => Some(request.id),
        ToolAnswer::Decided(_) => None,
    };
    bridge.on_agent_event(host, AgentEvent::AssistantMessage(answer.into()));
    bridge.on_agent_event(host, AgentEvent::TurnSettled);
    id
}

/// Everything sent to `tg:<conversation>`, joined (cards, answers, requests, notices).
fn seen_in(host: &FakeHost, conversation: &str) -> String {
    host.texts_to("tg", conversation).join("\n---\n")
}

#[test]
fn a_dm_users_private_prompt_never_reaches_the_group_that_ran_status() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);

    bridge.on_envelope(&mut host, dm("tg", "dm1", "u1", "read my private notes"));
    let id = run_turn(
        &mut bridge,
        &mut host,
        TurnOrigin::Remote,
        "PRIVATE ANSWER for u1",
    )
    .expect("bash waits for approval in a remote turn");

    // The group saw nothing of the turn: no card, no approval request, no answer.
    assert_eq!(
        seen_in(&host, "team"),
        "",
        "the DM's turn leaked to the group"
    );
    // Nor did the other DM user.
    assert_eq!(
        seen_in(&host, "dm2"),
        "",
        "the DM's turn leaked to another DM"
    );
    // The chat that started it saw all of it.
    let own = seen_in(&host, "dm1");
    assert!(own.contains("thinking…"), "{own}");
    assert!(own.contains(&format!("Approval needed ({id})")), "{own}");
    assert!(own.contains("PRIVATE ANSWER for u1"), "{own}");
}

#[test]
fn the_groups_own_prompt_is_answered_in_the_group_only() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);

    bridge.on_envelope(&mut host, in_group("u1", "summarise the build"));
    let id = run_turn(&mut bridge, &mut host, TurnOrigin::Remote, "TEAM ANSWER")
        .expect("approval asked");

    let group = seen_in(&host, "team");
    assert!(
        group.contains(&format!("Approval needed ({id})")),
        "{group}"
    );
    assert!(group.contains("TEAM ANSWER"), "{group}");
    assert_eq!(seen_in(&host, "dm1"), "");
    assert_eq!(seen_in(&host, "dm2"), "");
}

#[test]
fn local_turns_go_to_dms_and_to_a_group_only_once_it_follows() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);

    run_turn(&mut bridge, &mut host, TurnOrigin::Local, "LOCAL ONE");
    assert!(seen_in(&host, "dm1").contains("LOCAL ONE"));
    assert!(seen_in(&host, "dm2").contains("LOCAL ONE"));
    assert_eq!(
        seen_in(&host, "team"),
        "",
        "a group that never followed saw a local turn"
    );

    bridge.on_envelope(&mut host, in_group("u1", "/follow"));
    assert_eq!(
        host.texts_to("tg", "team"),
        vec![guest::core::commands::FOLLOW_REPLY.to_string()]
    );
    host.clear_records();
    run_turn(&mut bridge, &mut host, TurnOrigin::Local, "LOCAL TWO");
    assert!(
        seen_in(&host, "team").contains("LOCAL TWO"),
        "{}",
        seen_in(&host, "team")
    );

    // `/connect unfollow` typed in a chat (the terminal's habit) is the same command.
    bridge.on_envelope(&mut host, in_group("u1", "/connect unfollow"));
    bridge.on_envelope(&mut host, dm("tg", "dm2", "u2", "/unfollow"));
    host.clear_records();
    run_turn(&mut bridge, &mut host, TurnOrigin::Local, "LOCAL THREE");
    assert_eq!(seen_in(&host, "team"), "");
    assert_eq!(seen_in(&host, "dm2"), "");
    assert!(seen_in(&host, "dm1").contains("LOCAL THREE"));
}

#[test]
fn a_group_that_followed_still_never_sees_a_dm_users_remote_turn() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);
    bridge.on_envelope(&mut host, in_group("u1", "/follow"));
    host.clear_records();

    bridge.on_envelope(&mut host, dm("tg", "dm2", "u2", "private"));
    run_turn(&mut bridge, &mut host, TurnOrigin::Remote, "PRIVATE for u2");
    assert_eq!(seen_in(&host, "team"), "");
    assert_eq!(seen_in(&host, "dm1"), "");
    assert!(seen_in(&host, "dm2").contains("PRIVATE for u2"));
}

#[test]
fn a_retry_without_a_prompt_answers_the_chat_of_the_turn_it_continues() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);

    bridge.on_envelope(&mut host, in_group("u1", "build it"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    host.clear_records();
    // The provider failed; the host retries with no new prompt from any chat.
    run_turn(&mut bridge, &mut host, TurnOrigin::Remote, "RETRIED ANSWER");
    assert!(seen_in(&host, "team").contains("RETRIED ANSWER"));
    assert_eq!(seen_in(&host, "dm1"), "", "the retry went to the followers");
    assert_eq!(seen_in(&host, "dm2"), "");

    // A local turn ends the inheritance: a remote turn with no prompt after it goes to
    // the followers (the DMs), not to the group.
    run_turn(&mut bridge, &mut host, TurnOrigin::Local, "local");
    host.clear_records();
    run_turn(&mut bridge, &mut host, TurnOrigin::Remote, "ORPHAN");
    assert_eq!(seen_in(&host, "team"), "");
    assert!(seen_in(&host, "dm1").contains("ORPHAN"));
}

#[test]
fn a_steer_joins_the_running_turn_and_a_follow_up_waits_for_its_own() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(
        &mut host,
        r#"{"bridge":{"busyDelivery":"steer"}}"#,
        &["tg", "dc"],
    );
    pair(&mut bridge, &mut host, "tg", "dm1", "u1");
    pair(&mut bridge, &mut host, "tg", "dm2", "u2");
    bridge.on_envelope(&mut host, dm("tg", "dm1", "u1", "start"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(&mut host, dm("tg", "dm2", "u2", "also do this"));
    assert_eq!(
        host.prompts.last().map(|p| p.deliver_as),
        Some(DeliverAs::Steer)
    );
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("BOTH".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert!(seen_in(&host, "dm1").contains("BOTH"));
    assert!(
        seen_in(&host, "dm2").contains("BOTH"),
        "the steering chat missed the answer"
    );

    // Follow-ups (the default): the running turn stays the first chat's; the follow-up's
    // chat joins at the turn its prompt starts.
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, "{}", &["tg", "dc"]);
    pair(&mut bridge, &mut host, "tg", "dm1", "u1");
    pair(&mut bridge, &mut host, "tg", "dm2", "u2");
    bridge.on_envelope(&mut host, dm("tg", "dm1", "u1", "first"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(&mut host, dm("tg", "dm2", "u2", "second"));
    assert_eq!(
        host.prompts.last().map(|p| p.deliver_as),
        Some(DeliverAs::FollowUp)
    );
    host.clear_records();
    bridge.on_agent_event(&mut host, AgentEvent::AssistantMessage("FIRST".into()));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    run_turn(&mut bridge, &mut host, TurnOrigin::Remote, "SECOND");
    let (one, two) = (seen_in(&host, "dm1"), seen_in(&host, "dm2"));
    assert!(one.contains("FIRST") && !one.contains("SECOND"), "{one}");
    assert!(two.contains("SECOND") && !two.contains("FIRST"), "{two}");
}

#[test]
fn a_chat_that_was_not_asked_cannot_answer_the_approval() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);

    bridge.on_envelope(&mut host, dm("tg", "dm1", "u1", "private"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let ToolAnswer::Pending(request) = bridge.on_tool_call(&mut host, &ToolCall::named("bash"))
    else {
        panic!("expected a pending approval");
    };
    host.clear_records();
    // u2 is paired, but the request was never shown in its chat (the id leaked, or was
    // guessed): refused, nothing decided.
    bridge.on_envelope(
        &mut host,
        dm("tg", "dm2", "u2", &format!("/approve {}", request.id)),
    );
    assert!(
        host.resolved.is_empty(),
        "another chat decided: {:?}",
        host.resolved
    );
    assert_eq!(
        host.texts_to("tg", "dm2"),
        vec![format!(
            "Approval {} was not asked in this chat. Only the chat that started the turn, or the terminal, can answer it.",
            request.id
        )]
    );
    // The chat that was asked decides, and the verdict goes there only.
    host.clear_records();
    bridge.on_envelope(
        &mut host,
        dm("tg", "dm1", "u1", &format!("/approve {}", request.id)),
    );
    assert_eq!(host.resolved.len(), 1);
    assert_eq!(seen_in(&host, "team"), "");
    assert_eq!(seen_in(&host, "dm2"), "");
}

#[test]
fn a_timed_out_approval_is_told_only_where_it_was_asked() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);
    bridge.on_envelope(&mut host, dm("tg", "dm1", "u1", "private"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let _ = bridge.on_tool_call(&mut host, &ToolCall::named("bash"));
    host.clear_records();
    host.now += 61_000;
    bridge.tick(&mut host);
    assert_eq!(host.resolved.len(), 1, "the deadline decided");
    assert!(
        seen_in(&host, "dm1").contains("no answer"),
        "{}",
        seen_in(&host, "dm1")
    );
    assert_eq!(seen_in(&host, "team"), "");
    assert_eq!(seen_in(&host, "dm2"), "");
}

#[test]
fn the_digest_goes_to_followers_only() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);
    let note = bridge.on_local_command(&mut host, "digest");
    assert!(
        note.text.starts_with("Digest sent to 2 conversation(s)"),
        "{}",
        note.text
    );
    assert_eq!(seen_in(&host, "team"), "");
    assert_eq!(host.texts_to("tg", "dm1").len(), 1);

    bridge.on_envelope(&mut host, in_group("u1", "/follow"));
    host.clear_records();
    bridge.on_local_command(&mut host, "digest");
    assert_eq!(host.texts_to("tg", "team").len(), 1);
}

#[test]
fn status_says_whether_the_chat_sees_terminal_turns() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);
    bridge.on_envelope(&mut host, in_group("u1", "/status"));
    bridge.on_envelope(&mut host, dm("tg", "dm1", "u1", "/status"));
    assert!(seen_in(&host, "team").contains("- terminal turns: not shown here (send /follow)"));
    assert!(seen_in(&host, "dm1").contains("- terminal turns: shown here"));
}

#[test]
fn disconnect_in_a_group_stops_it_following() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);
    bridge.on_envelope(&mut host, in_group("u1", "/follow"));
    bridge.on_envelope(&mut host, in_group("u1", "/disconnect"));
    // u1 paired again in its DM; the group is remembered again by a new message from u2.
    pair(&mut bridge, &mut host, "tg", "dm1", "u1");
    bridge.on_envelope(&mut host, in_group("u2", "/status"));
    host.clear_records();
    run_turn(&mut bridge, &mut host, TurnOrigin::Local, "LOCAL");
    assert_eq!(
        seen_in(&host, "team"),
        "",
        "the follow outlived /disconnect"
    );
}

#[test]
fn a_restart_mid_turn_keeps_answering_only_the_turns_chat() {
    let mut host = FakeHost::new();
    let mut bridge = dm_users_and_a_team_group(&mut host);
    bridge.on_envelope(&mut host, in_group("u1", "/follow"));
    bridge.on_envelope(&mut host, dm("tg", "dm2", "u2", "private"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    // The bridge is replaced while the agent keeps working on the turn.
    host.idle = false;
    let (mut bridge, _, _) = started(&mut host, CONFIG, &["tg", "dc"]);
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage("AFTER RESTART".into()),
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    assert!(seen_in(&host, "dm2").contains("AFTER RESTART"));
    assert_eq!(seen_in(&host, "team"), "");
    assert_eq!(seen_in(&host, "dm1"), "");
}
