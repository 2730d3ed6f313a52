//! Scenarios: trusted input — prompts, commands, pause, rate limits, attachments
//! (I2, I8, I9, I13, I19, I25, I37, I38).

use guest::bridge::Bridge;
use guest::model::{DeliverAs, Envelope, FetchedAttachment, Level, PromptImage};

use crate::support::{FakeHost, caps, chatter, default_bridge, dm, image, pair, started};

const PAUSED: &str = "Delivery is paused. Send /resume to continue.";
const RATE_LIMITED: &str = "Too many messages. Please wait a moment before sending more.";

fn paired(host: &mut FakeHost) -> Bridge {
    let mut bridge = default_bridge(host);
    pair(&mut bridge, host, "tg", "c1", "u1");
    bridge
}

#[test]
fn prompts_reach_the_agent_now_when_idle_and_as_follow_up_when_busy() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "fix the build"));
    host.idle = false;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "and then the docs"));

    let got: Vec<(&str, DeliverAs)> = host
        .prompts
        .iter()
        .map(|p| (p.text.as_str(), p.deliver_as))
        .collect();
    assert_eq!(
        got,
        vec![
            ("fix the build", DeliverAs::Immediate),
            ("and then the docs", DeliverAs::FollowUp)
        ]
    );
    // A prompt that starts a turn gets no reply (its card shows); a queued one is
    // acknowledged with its place (docs/decisions.md#decision-20-work-cut-short-is-reported).
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["Queued, 1 ahead. The agent is busy; this runs when its turn comes."]
    );
    assert_eq!(host.typing.len(), 2, "no typing hint on a forwarded prompt");
    let forwarded: Vec<Vec<(String, String)>> = host
        .logs_named("prompt forwarded")
        .iter()
        .map(|l| l.fields.clone())
        .collect();
    let fields = |deliver: &str| {
        vec![
            ("transport".to_string(), "tg".to_string()),
            ("deliverAs".to_string(), deliver.to_string()),
            ("images".to_string(), "0".to_string()),
            ("files".to_string(), "0".to_string()),
            ("voice".to_string(), "0".to_string()),
        ]
    };
    assert_eq!(forwarded, vec![fields("immediate"), fields("followUp")]);
    for value in host.all_log_strings() {
        assert!(
            !value.contains("fix the build") && !value.contains("the docs"),
            "prompt body logged: {value:?}"
        );
    }
}

#[test]
fn commands_answer_while_the_agent_is_busy() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.idle = false;
    host.now += 90_000;

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/status"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/stop"));

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "pi-bot-connect status\n- transport: tg\n- identity: tg:u1\n- session: demo\n- cwd: /work/demo\n- agent: busy\n- delivery: active\n- terminal turns: shown here\n- paired: 1m ago",
            "Abort requested."
        ]
    );
    assert_eq!(host.aborts, 1);
    assert!(host.prompts.is_empty(), "a command was queued as a prompt");
    let audit: Vec<Vec<(String, String)>> = host
        .logs_named("remote command")
        .iter()
        .map(|l| l.fields.clone())
        .collect();
    let row = |command: &str| {
        vec![
            ("transport".to_string(), "tg".to_string()),
            ("identity".to_string(), "tg:u1".to_string()),
            ("command".to_string(), command.to_string()),
        ]
    };
    assert_eq!(audit, vec![row("status"), row("abort")]);
}

#[test]
fn a_refused_prompt_is_told_to_the_chat_and_the_terminal() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.prompt_error = Some("session is compacting".into());

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "The pi session did not accept that message. The local terminal shows why; try again later."
        ]
    );
    assert_eq!(
        host.notes,
        vec![(
            Level::Error,
            "failed to inject prompt: session is compacting".to_string()
        )]
    );
}

#[test]
fn a_paused_conversation_gets_the_notice_and_no_prompt_until_resumed() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/pause"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "do the thing"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/resume"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "do the thing"));

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "Delivery paused. Send /resume to continue.",
            PAUSED,
            "Delivery resumed."
        ]
    );
    assert_eq!(host.prompts.len(), 1, "{:?}", host.prompts);
}

#[test]
fn a_prompt_burst_gets_one_notice_a_minute() {
    let mut host = FakeHost::new();
    let mut bridge = started(
        &mut host,
        r#"{"bridge":{"rateLimit":{"promptsPerMinute":2,"commandsPerMinute":1}}}"#,
        &["tg"],
    )
    .0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");

    for i in 0..5 {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("prompt {i}")));
    }
    assert_eq!(host.prompts.len(), 2);
    assert_eq!(host.texts_to("tg", "c1"), vec![RATE_LIMITED]);
    assert_eq!(host.logs_named("remote input rate limited").len(), 3);
    for line in host.logs_named("remote input rate limited") {
        assert_eq!(
            line.fields,
            vec![
                ("kind".to_string(), "prompt".to_string()),
                ("identity".to_string(), "tg:u1".to_string())
            ]
        );
    }

    // Commands have their own budget: the first one still runs.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/whoami"));
    assert_eq!(
        host.texts_to("tg", "c1").last().map(String::as_str),
        Some("tg:u1 (tg)")
    );
    // The second exhausts it; the notice was already given this minute, so silence.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/whoami"));
    assert_eq!(host.texts_to("tg", "c1").len(), 2);

    // Later but within 60 s of the notice: still silent.
    host.now += 59_999;
    for i in 0..3 {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("again {i}")));
    }
    // 59 999 ms refilled just under two tokens: one prompt runs.
    assert_eq!(host.prompts.len(), 3, "the refilled budget was not used");
    assert_eq!(host.texts_to("tg", "c1").len(), 2, "{:?}", host.sent);

    // 60 s after the first notice: a denial notifies again.
    host.now += 1;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "one more"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "and another"));
    assert_eq!(host.prompts.len(), 4);
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![RATE_LIMITED, "tg:u1 (tg)", RATE_LIMITED]
    );
}

fn with_image(text: &str, reference: &str) -> Envelope {
    Envelope {
        attachments: vec![image(reference)],
        ..dm("tg", "c1", "u1", text)
    }
}

#[test]
fn a_transport_without_attachments_refuses_them() {
    let mut host = FakeHost::new();
    let mut plain = caps(
        true,
        guest::model::Markup::Plain,
        guest::model::LengthUnit::Chars,
        4096,
    );
    plain.attachments = false;
    host.set_capabilities("tg", plain);
    let mut bridge = paired(&mut host);

    bridge.on_envelope(&mut host, with_image("look", "ref-1"));

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["Attachments are not supported yet. Please describe what you need in text instead."]
    );
    assert!(host.fetches.is_empty() && host.prompts.is_empty());
}

#[test]
fn an_agent_without_images_refuses_attachments() {
    let mut host = FakeHost::new();
    host.session.accepts_images = false;
    let mut bridge = paired(&mut host);

    bridge.on_envelope(&mut host, with_image("look", "ref-1"));

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["Attachments are not supported yet. Please describe what you need in text instead."]
    );
    assert!(host.prompts.is_empty());
}

#[test]
fn served_bytes_are_rechecked_and_nothing_is_forwarded_on_a_problem() {
    let cases = [
        (
            Ok(FetchedAttachment {
                media_type: "text/html".into(),
                data: b"<html>".to_vec(),
            }),
            "Only images can be forwarded right now. Please describe that file in text instead.",
        ),
        (
            Ok(FetchedAttachment {
                media_type: "image/png".into(),
                data: vec![0; 1025],
            }),
            "That image is too large to forward. Please send a smaller one.",
        ),
        (
            Err("404".to_string()),
            "I could not download that image, so I did not send it. Try again or describe it in text.",
        ),
    ];
    for (served, notice) in cases {
        let mut host = FakeHost::new();
        let mut bridge = started(
            &mut host,
            r#"{"bridge":{"attachments":{"maxBytes":1024}}}"#,
            &["tg"],
        )
        .0;
        pair(&mut bridge, &mut host, "tg", "c1", "u1");
        host.attachments.insert("ref-1".into(), served);

        bridge.on_envelope(&mut host, with_image("look", "ref-1"));

        assert_eq!(host.texts_to("tg", "c1"), vec![notice]);
        assert!(host.prompts.is_empty(), "forwarded despite: {notice}");
        assert_eq!(host.fetches, vec![("tg".into(), "ref-1".into(), 1024)]);
    }
}

#[test]
fn a_good_image_reaches_the_agent() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.attachments.insert(
        "ref-1".into(),
        Ok(FetchedAttachment {
            media_type: "IMAGE/PNG".into(),
            data: vec![1, 2, 3],
        }),
    );

    bridge.on_envelope(&mut host, with_image("", "ref-1"));

    assert_eq!(host.prompts.len(), 1);
    assert_eq!(host.prompts[0].text, "Describe the attached image.");
    assert_eq!(
        host.prompts[0].images,
        vec![PromptImage {
            media_type: "image/png".into(),
            data: vec![1, 2, 3]
        }]
    );
    assert!(host.sent.is_empty());
}

#[test]
fn messages_do_not_ask_the_host_for_session_facts_again() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    let before = host.session_info_calls;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "run the tests"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/status"));
    assert_eq!(host.prompts.len(), 1);
    assert!(
        host.texts_to("tg", "c1")
            .iter()
            .any(|t| t.contains("- session: "))
    );
    assert_eq!(
        host.session_info_calls, before,
        "session facts are read once, at configure"
    );
}

#[test]
fn decision_1_an_addressed_group_word_is_a_command_and_an_empty_mention_gets_help() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "dc", "dm-1", "u1");
    // `@bot status` in a group: the transport stripped the mention and set `addressed`.
    let addressed = |text: &str| Envelope {
        addressed: true,
        ..chatter("dc", "general", "u1", text)
    };
    bridge.on_envelope(&mut host, addressed("status"));
    bridge.on_envelope(&mut host, addressed(""));
    assert!(host.prompts.is_empty(), "{:?}", host.prompts);
    let replies = host.texts_to("dc", "general");
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert!(
        replies[0].starts_with("pi-bot-connect status"),
        "{replies:?}"
    );
    assert!(
        replies[1].starts_with("pi-bot-connect commands:"),
        "{replies:?}"
    );
    // In a DM a bare word is still a prompt.
    bridge.on_envelope(&mut host, dm("dc", "dm-1", "u1", "status"));
    assert_eq!(host.prompts.len(), 1);
}

#[test]
fn the_local_command_typed_in_a_chat_runs_the_remote_command() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);

    // The terminal habit: it used to reach the agent as a prompt.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/connect help"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/Connect status"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/connect"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/connect pair"));
    assert!(host.prompts.is_empty(), "{:?}", host.prompts);
    let replies = host.texts_to("tg", "c1");
    assert_eq!(replies.len(), 4, "{replies:?}");
    assert!(
        replies[0].starts_with("pi-bot-connect commands:"),
        "{replies:?}"
    );
    assert!(
        replies[1].starts_with("pi-bot-connect status"),
        "{replies:?}"
    );
    assert!(
        replies[2].starts_with("pi-bot-connect status"),
        "{replies:?}"
    );
    // `pair` is local only: the chat is shown what it can run.
    assert!(
        replies[3].starts_with("pi-bot-connect commands:"),
        "{replies:?}"
    );
    // A word that merely starts with the name stays a prompt.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/connectivity is flaky"));
    assert_eq!(host.prompts.len(), 1);
}

#[test]
fn the_chat_habit_follows_bridge_local_command() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, r#"{"bridge":{"localCommand":"bc"}}"#, &["tg"]);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/bc whoami"));
    assert!(host.prompts.is_empty(), "{:?}", host.prompts);
    assert_eq!(host.texts_to("tg", "c1"), vec!["tg:u1 (tg)"]);
    // `connect` is no longer the local command's name: an unknown `/…` is a prompt.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/connect help"));
    assert_eq!(host.prompts.len(), 1);
}
