//! Scenarios: start, tool policy, local commands, state and shutdown (I15, I16, I34, I39,
//! docs/architecture.md#the-original-module-by-module,
//! docs/decisions.md#decision-7-local-and-remote-disconnect-clear-the-same-state).

use guest::bridge::Bridge;
use guest::model::{AgentEvent, Level, Note, ToolDecision, TurnOrigin};

use crate::support;
use crate::support::{
    FakeHost, LockEvent, caps, default_bridge, dm, identity, pair, platforms, source, started,
};

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[test]
fn a_failing_transport_is_reported_and_the_others_start() {
    let mut host = FakeHost::new();
    let with_lock = |lock: &str| {
        let mut id = identity(caps(
            true,
            guest::model::Markup::Markdown,
            guest::model::LengthUnit::Chars,
            4096,
        ));
        id.lock_name = Some(lock.to_string());
        Ok(id)
    };
    host.identities.insert("tg".into(), with_lock("tg-lock"));
    host.identities
        .insert("dc".into(), Err("401 Unauthorized".into()));
    host.identities.insert("sl".into(), with_lock("sl-lock"));
    host.listen_errors
        .insert("sl".into(), "socket mode closed".into());
    host.identities.insert("rc".into(), with_lock("rc-lock"));
    host.refused_locks
        .insert("rc-lock".into(), "held by pid 4242 since 10:02".into());
    let mut bridge = Bridge::new();
    bridge.configure(&mut host, &[], &platforms());

    let ids: Vec<String> = ["dc", "sl", "rc", "tg"].map(String::from).to_vec();
    let notes = bridge.start(&mut host, &ids);

    assert_eq!(
        notes,
        vec![
            Note::new(Level::Error, "dc failed to start: 401 Unauthorized"),
            Note::new(Level::Error, "sl failed to start: socket mode closed"),
            Note::new(
                Level::Error,
                "rc failed to start: held by pid 4242 since 10:02"
            ),
        ]
    );
    // The listen failure gave its lock back; only the running transport holds one.
    assert_eq!(
        host.lock_events,
        vec![
            LockEvent::Acquired("sl-lock".into()),
            LockEvent::Released("sl-lock".into()),
            LockEvent::Acquired("tg-lock".into()),
        ]
    );
    assert_eq!(host.locks_held.iter().collect::<Vec<_>>(), vec!["tg-lock"]);

    let doctor = bridge.on_local_command(&mut host, "doctor");
    assert_eq!(doctor.level, Level::Warning);
    let lines: Vec<&str> = doctor.text.lines().collect();
    for line in [
        "- dc: failed to start — 401 Unauthorized",
        "- rc: failed to start — held by pid 4242 since 10:02",
        "- sl: failed to start — socket mode closed",
        "- tg: running — tg connected",
        "Why a message got no answer: /connect explain",
    ] {
        assert!(lines.contains(&line), "missing {line:?} in {lines:?}");
    }

    // The running transport works; a message from a failed one is dropped with a log line.
    host.clear_records();
    bridge.on_envelope(&mut host, dm("dc", "c1", "u1", "hello"));
    assert!(host.sent.is_empty());
    assert_eq!(
        host.logs_named("message from a transport that is not running")
            .len(),
        1
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
    assert_eq!(host.sent.len(), 1);
}

#[test]
fn doctor_does_not_repeat_a_diagnosis_that_only_names_the_state() {
    let mut host = FakeHost::new();
    let chat = identity(caps(
        false,
        guest::model::Markup::Markdown,
        guest::model::LengthUnit::Chars,
        4000,
    ));
    host.identities.insert("tm".into(), Ok(chat));
    host.diagnoses.insert("tm".into(), "running".into());
    let (mut bridge, _, _) = started(&mut host, "{}", &["tm"]);
    let doctor = bridge.on_local_command(&mut host, "doctor");
    let lines: Vec<&str> = doctor.text.lines().collect();
    assert!(lines.contains(&"- tm: running"), "{lines:?}");
}

#[test]
fn shutdown_releases_locks_once() {
    let mut host = FakeHost::new();
    let mut id = identity(caps(
        true,
        guest::model::Markup::Markdown,
        guest::model::LengthUnit::Chars,
        4096,
    ));
    id.lock_name = Some("tg-lock".into());
    host.identities.insert("tg".into(), Ok(id));
    let mut bridge = started(&mut host, "{}", &["tg"]).0;

    bridge.shutdown(&mut host);
    bridge.shutdown(&mut host);

    assert_eq!(
        host.lock_events,
        vec![LockEvent::Released("tg-lock".into())]
    );
    assert!(host.locks_held.is_empty());
    // Nothing changed since the state was loaded: nothing is written (a `doctor` run on a
    // fresh machine must not leave a state file behind).
    assert!(host.saved.is_empty(), "shutdown wrote an unchanged state");
    let doctor = bridge.on_local_command(&mut host, "doctor");
    assert!(
        doctor.text.lines().any(|l| l == "- tg: stopped"),
        "{}",
        doctor.text
    );
}

fn remote_turn(bridge: &mut Bridge, host: &mut FakeHost, origin: TurnOrigin) {
    bridge.on_agent_event(host, AgentEvent::TurnStarted(origin));
}

#[test]
fn read_only_blocks_bash_on_remote_turns_only() {
    let mut host = FakeHost::new();
    let config = r#"{"bridge":{"remoteToolPolicy":"read-only","remoteToolApproval":"each"}}"#;
    let mut bridge = started(&mut host, config, &["tg"]).0;

    remote_turn(&mut bridge, &mut host, TurnOrigin::Remote);
    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))),
        ToolDecision::Block(
            "Tool 'bash' is not allowed for messenger-originated turns (read-only mode). Ask the operator to run it locally."
                .into()
        )
    );
    // A policy block does not bother the operator.
    assert!(host.confirms.is_empty());
    host.confirm_answers.push_back(true);
    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("read"))),
        ToolDecision::Allow
    );
    assert_eq!(host.confirms.len(), 1);
    assert_eq!(host.logs_named("remote tool call blocked").len(), 1);

    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    host.clear_records();
    remote_turn(&mut bridge, &mut host, TurnOrigin::Local);
    for tool in ["bash", "write", "read"] {
        assert_eq!(
            support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named(tool))),
            ToolDecision::Allow
        );
    }
    assert!(host.confirms.is_empty(), "a local turn asked for approval");
}

#[test]
fn approval_each_asks_and_a_no_blocks() {
    let mut host = FakeHost::new();
    let mut bridge = started(
        &mut host,
        // Unrestricted so that approval alone decides (the default is read-only now).
        r#"{"bridge":{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each"}}"#,
        &["tg"],
    )
    .0;
    remote_turn(&mut bridge, &mut host, TurnOrigin::Remote);
    host.confirm_answers.extend([true, false]);

    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))),
        ToolDecision::Allow
    );
    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("edit"))),
        ToolDecision::Block(
            "The operator declined 'edit' for this messenger-originated turn.".into()
        )
    );
    // No scripted answer left: the prompt fails closed.
    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("write"))),
        ToolDecision::Block(
            "The operator declined 'write' for this messenger-originated turn.".into()
        )
    );
    assert_eq!(
        host.confirms[..2],
        [
            (
                "Remote tool call: bash".to_string(),
                "A messenger-originated turn wants to run 'bash'. Allow it?".to_string()
            ),
            (
                "Remote tool call: edit".to_string(),
                "A messenger-originated turn wants to run 'edit'. Allow it?".to_string()
            ),
        ]
    );
}

#[test]
fn local_status_lists_transports_and_counts() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/pause"));

    let status = bridge.on_local_command(&mut host, "status");

    assert_eq!(
        status,
        Note::new(
            Level::Info,
            format!(
                "bot-connect status\n- extension: bot-connect {VERSION}\n- transports: dc, tg\n- paired chats: 1\n- conversations: 1\n- paused: tg:c1\n- terminal turns go to: tg:c1\n- pending codes: 0\n\nLocal commands: /connect status|doctor|version|pair|digest|explain|pause|resume|disconnect|config|help"
            )
        )
    );
}

#[test]
fn an_expired_code_is_not_counted_as_pending() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    bridge.on_envelope(&mut host, dm("tg", "c9", "u9", "hi"));
    host.now += 300_000;

    let status = bridge.on_local_command(&mut host, "status");
    let pair = bridge.on_local_command(&mut host, "pair");

    assert!(
        status.text.lines().any(|l| l == "- pending codes: 0"),
        "{}",
        status.text
    );
    assert_eq!(
        pair.text,
        "No pending pairing. Have the remote user send any message; the code appears here."
    );
}

#[test]
fn local_pair_lists_live_codes() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    assert_eq!(
        bridge.on_local_command(&mut host, "pair"),
        Note::new(
            Level::Info,
            "No pending pairing. Have the remote user send any message; the code appears here."
        )
    );
    host.script_code("482913");
    bridge.on_envelope(&mut host, dm("tg", "c9", "u9", "hi"));
    host.now += 60_000;

    assert_eq!(
        bridge.on_local_command(&mut host, "pair"),
        Note::new(
            Level::Info,
            "Pending pairing codes:\n- tg:c9: 482 913 (expires in 4m)"
        )
    );
}

#[test]
fn local_pause_and_resume_cover_every_conversation() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    pair(&mut bridge, &mut host, "dc", "c2", "u2");

    assert_eq!(
        bridge.on_local_command(&mut host, "pause"),
        Note::new(Level::Info, "Paused 2 conversation(s).")
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "do it"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    assert!(host.prompts.is_empty());
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["Delivery is paused. Send /resume to continue."]
    );
    assert!(host.texts_to("dc", "c2").is_empty());

    assert_eq!(
        bridge.on_local_command(&mut host, "resume"),
        Note::new(Level::Info, "Resumed 2 conversation(s).")
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "do it"));
    assert_eq!(host.prompts.len(), 1);
}

/// `tg:c1` and `dc:c2` paired, `tg:c1` paused, and a live code for the group `tg:g1`.
fn busy_state(host: &mut FakeHost) -> Bridge {
    let mut bridge = default_bridge(host);
    pair(&mut bridge, host, "tg", "c1", "u1");
    pair(&mut bridge, host, "dc", "c2", "u2");
    bridge.on_envelope(host, dm("tg", "c1", "u1", "/pause"));
    bridge.on_envelope(host, support::chatter("tg", "g1", "u5", "/help"));
    host.clear_records();
    bridge
}

#[test]
fn local_disconnect_revokes_all_and_clears_pause_and_pending() {
    let mut host = FakeHost::new();
    let mut bridge = busy_state(&mut host);

    assert_eq!(
        bridge.on_local_command(&mut host, "disconnect"),
        Note::new(Level::Info, "Revoked 2 pairing(s).")
    );
    let status = bridge.on_local_command(&mut host, "status").text;
    for line in ["- paired chats: 0", "- paused: none", "- pending codes: 0"] {
        assert!(
            status.lines().any(|l| l == line),
            "missing {line:?}:\n{status}"
        );
    }
    assert_eq!(host.saved.len(), 1);

    host.script_code("135790");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "still there?"));
    assert!(host.prompts.is_empty());
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "This chat is not paired with a pi session yet.\nIn the local pi terminal, run /connect to see the 6-digit code, then send it here."
        ]
    );
}

#[test]
fn remote_disconnect_clears_trust_pause_and_pending_for_that_chat() {
    let mut host = FakeHost::new();
    let mut bridge = busy_state(&mut host);
    // u1 is trusted everywhere; disconnecting from the group clears the group's code.
    bridge.on_envelope(&mut host, support::chatter("tg", "g1", "u1", "/disconnect"));

    assert_eq!(
        host.texts_to("tg", "g1"),
        vec!["This chat is no longer paired."]
    );
    assert_eq!(host.logs_named("revoked remote pairing").len(), 1);
    let status = bridge.on_local_command(&mut host, "status").text;
    for line in ["- paired chats: 1", "- pending codes: 0"] {
        assert!(
            status.lines().any(|l| l == line),
            "missing {line:?}:\n{status}"
        );
    }
    // c1's pause belongs to another conversation: the group's disconnect leaves it.
    assert!(status.lines().any(|l| l == "- paused: tg:c1"), "{status}");

    let mut host = FakeHost::new();
    let mut bridge = busy_state(&mut host);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/disconnect"));
    let status = bridge.on_local_command(&mut host, "status").text;
    for line in ["- paired chats: 1", "- paused: none", "- pending codes: 1"] {
        assert!(
            status.lines().any(|l| l == line),
            "missing {line:?}:\n{status}"
        );
    }
}

#[test]
fn local_config_prints_the_bridge_json_and_unknown_subcommands_warn() {
    let mut host = FakeHost::new();
    let config = r#"{"bridge":{"remoteToolPolicy":"read-only"},"transports":{"telegram":{"tokenEnv":"TG_BOT_TOKEN"}}}"#;
    let mut bridge = started(&mut host, config, &["tg"]).0;

    let note = bridge.on_local_command(&mut host, "config");
    assert_eq!(note.level, Level::Info);
    let json = note
        .text
        .strip_prefix("bot-connect config:\n")
        .unwrap_or_else(|| panic!("no heading: {}", note.text));
    let value: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {json}"));
    assert_eq!(value["remoteToolPolicy"], "read-only");
    assert_eq!(value["localCommand"], "connect");
    assert!(
        json.contains("\n  \"localCommand\""),
        "not 2-space indented"
    );
    assert!(!json.contains("TG_BOT_TOKEN") && !json.contains("transports"));

    assert_eq!(
        bridge.on_local_command(&mut host, "frobnicate now"),
        Note::new(
            Level::Warning,
            "Unknown subcommand 'frobnicate'. Try /connect help."
        )
    );
}

#[test]
fn configure_loads_the_saved_state_and_reports_its_warnings() {
    let mut host = FakeHost::new();
    host.stored = Some(
        r#"{"updatedAt":5,"trusted":{"tg:u1":10,"bogus":3},"paused":["tg:c1"],"following":["tg:c1"],"conversations":[{"transport":"tg","conversationId":"c1"},{"transport":"tg"}]}"#
            .into(),
    );
    let (mut bridge, configuration, _) = started(&mut host, "{}", &["tg"]);

    assert_eq!(
        configuration.notes,
        vec![
            Note::new(
                Level::Warning,
                "sessions.session-1.trusted.bogus: expected a \"transport:userId\" identity, ignored"
            ),
            Note::new(
                Level::Warning,
                "sessions.session-1.conversations[1]: malformed target, ignored"
            ),
        ]
    );
    // Trusted and paused as saved: the prompt is held, not a pairing prompt.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["Delivery is paused. Send /resume to continue."]
    );
}

fn saved_json(host: &FakeHost) -> serde_json::Value {
    let doc = host.saved.last().cloned().unwrap_or_default();
    serde_json::from_str(&doc).unwrap_or_else(|e| panic!("saved state is not JSON ({e}): {doc}"))
}

#[test]
fn every_state_change_is_saved() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hi"));
    assert_eq!(saved_json(&host)["pending"]["tg:c1"]["attempts"], 0);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "000000"));
    assert_eq!(saved_json(&host)["pending"]["tg:c1"]["attempts"], 1);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "482913"));
    let doc = saved_json(&host);
    assert_eq!(doc["trusted"]["tg:u1"], host.now);
    assert_eq!(doc["pending"], serde_json::json!({}));
    assert_eq!(doc["conversations"][0]["conversationId"], "c1");
    assert_eq!(
        doc["following"],
        serde_json::json!(["tg:c1"]),
        "a DM follows once paired"
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/unfollow"));
    assert_eq!(saved_json(&host)["following"], serde_json::json!([]));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/follow"));
    assert_eq!(saved_json(&host)["following"], serde_json::json!(["tg:c1"]));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/pause"));
    assert_eq!(saved_json(&host)["paused"], serde_json::json!(["tg:c1"]));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/resume"));
    assert_eq!(saved_json(&host)["paused"], serde_json::json!([]));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/disconnect"));
    assert_eq!(saved_json(&host)["trusted"], serde_json::json!({}));
    assert_eq!(saved_json(&host)["following"], serde_json::json!([]));
}

#[test]
fn a_failing_save_is_told_once_and_again_after_a_recovery() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    host.save_error = Some("disk full".into());
    let told = "could not save the bridge state: disk full. Pairing will not survive a restart.";

    for command in ["/pause", "/resume", "/pause"] {
        // Time moves, so each command leaves a document that differs from the one on disk
        // (a state back to exactly what was saved is not written again).
        host.now += 1_000;
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", command));
    }
    assert_eq!(host.notes, vec![(Level::Error, told.to_string())]);
    assert_eq!(host.logs_named("state not saved").len(), 3);
    // Commands still answer while the disk is full.
    assert_eq!(host.texts_to("tg", "c1").len(), 3);

    host.save_error = None;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/resume"));
    host.save_error = Some("disk full".into());
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/pause"));
    assert_eq!(host.notes.len(), 2);
}

#[test]
fn configure_uses_the_session_id_for_warnings() {
    let mut host = FakeHost::new();
    host.session.id = "abc".into();
    host.stored = Some("[1,2]".into());
    let mut bridge = Bridge::new();
    let configuration = bridge.configure(&mut host, &[source("{}")], &platforms());
    assert_eq!(
        configuration.notes,
        vec![Note::new(
            Level::Warning,
            "sessions.abc: expected an object, ignored"
        )]
    );
}
