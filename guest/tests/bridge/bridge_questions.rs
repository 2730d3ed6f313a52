//! Scenarios: the agent's questions answered from the phone (docs/pi.md#questions-pi-asks). A question is asked
//! in the turn's chats, with buttons for a short select and a confirm; the first fitting
//! answer from a trusted identity in an asked chat (button, `/answer`, plain reply, or the
//! terminal's `/connect answer`) goes back to the agent exactly once; the deadline dismisses
//! it and the chats hear so.

use guest::bridge::Bridge;
use guest::model::{AgentEvent, AgentQuestion, Level, QuestionAnswer, QuestionKind, TurnOrigin};

use crate::support::{FakeHost, dm, pair, press_in_group, started};

/// A bridge with two paired chats, `tg:c1` (u1) and `dc:c2` (u2), in a remote turn.
fn in_remote_turn(host: &mut FakeHost) -> Bridge {
    let (mut bridge, _, _) = started(host, "{}", &["tg", "dc"]);
    pair(&mut bridge, host, "tg", "c1", "u1");
    pair(&mut bridge, host, "dc", "c2", "u2");
    bridge.on_agent_event(host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.clear_records();
    bridge
}

fn question(kind: QuestionKind, timeout_ms: Option<u64>) -> AgentQuestion {
    AgentQuestion {
        id: "pi-uuid-1".into(),
        kind,
        title: "Deploy where?".into(),
        message: String::new(),
        timeout_ms,
    }
}

/// Asks `question` and returns the short id the chats were given.
fn ask(bridge: &mut Bridge, host: &mut FakeHost, question: AgentQuestion) -> String {
    bridge.on_question(host, question);
    let text = host
        .texts_to("tg", "c1")
        .into_iter()
        .last()
        .expect("the chat is asked");
    let start = text.find('(').expect("an id") + 1;
    let end = text[start..].find(')').expect("an id") + start;
    text[start..end].to_string()
}

fn buttons(host: &FakeHost, transport: &str) -> Vec<(String, String)> {
    host.sent
        .iter()
        .filter(|m| m.transport == transport)
        .flat_map(|m| {
            m.buttons
                .iter()
                .map(|b| (b.label.clone(), b.command.clone()))
        })
        .collect()
}

fn options(n: usize) -> QuestionKind {
    QuestionKind::Select((1..=n).map(|i| format!("env-{i}")).collect())
}

#[test]
fn a_select_gets_one_button_per_option_and_a_press_answers_it_once() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, question(options(3), Some(30_000)));

    let asked = format!(
        "Question from the agent ({id}): Deploy where?\n1. env-1\n2. env-2\n3. env-3\nTap an option, or reply with its number (or /answer {id} <number>) within 30s. The terminal can answer too; the first answer counts."
    );
    assert_eq!(host.texts_to("tg", "c1"), vec![asked.clone()]);
    assert_eq!(host.texts_to("dc", "c2"), vec![asked]);
    let expected: Vec<(String, String)> = (1..=3)
        .map(|n| (format!("env-{n}"), format!("/answer {id} {n}")))
        .collect();
    assert_eq!(buttons(&host, "tg"), expected);
    assert!(host.answered.is_empty(), "nothing answered yet");
    // The terminal is asked too, and told how to answer there.
    assert!(
        host.note_texts()
            .iter()
            .any(|n| n.contains(&format!("/connect answer {id} <answer>"))),
        "{:?}",
        host.notes
    );

    host.clear_records();
    // A press is the command it stands for, from the presser.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/answer {id} 2")));
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", &format!("/answer {id} 1")));
    assert_eq!(
        host.answered,
        vec![(
            "pi-uuid-1".to_string(),
            QuestionAnswer::Value("env-2".into())
        )]
    );
    let told = format!("Question {id} ('Deploy where?'): answered 'env-2' by tg:u1 from the chat.");
    assert_eq!(host.texts_to("tg", "c1"), vec![told.clone()]);
    assert_eq!(
        host.texts_to("dc", "c2"),
        vec![
            told.clone(),
            format!("Question {id} was already closed; your answer changed nothing. {told}")
        ]
    );
    assert!(host.notes.contains(&(Level::Info, told)));
    assert!(host.prompts.is_empty(), "an answer is never a prompt");
}

#[test]
fn a_long_select_is_a_numbered_list_answered_by_a_plain_number() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, question(options(7), None));
    assert!(buttons(&host, "tg").is_empty(), "too many for buttons");
    let asked = host.texts_to("tg", "c1").remove(0);
    assert!(
        asked.contains("\n7. env-7\nReply with the number of your choice"),
        "{asked}"
    );
    // No timeout from the agent: the bridge's own ten minutes.
    assert!(asked.contains("within 10m"), "{asked}");

    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "9"));
    assert!(host.answered.is_empty(), "out of range: still open");
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![format!("Answer with a number from 1 to 7. (question {id})")]
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "6"));
    assert_eq!(
        host.answered,
        vec![(
            "pi-uuid-1".to_string(),
            QuestionAnswer::Value("env-6".into())
        )]
    );
    assert!(
        host.prompts.is_empty(),
        "the replies were answers, not prompts"
    );
    // Once answered, a plain message is a prompt again.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "thanks, now run the tests"));
    assert_eq!(host.prompts.len(), 1);
}

#[test]
fn a_confirm_gets_yes_and_no_buttons() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let mut confirm = question(QuestionKind::Confirm, Some(60_000));
    confirm.message = "This drops the table.".into();
    let id = ask(&mut bridge, &mut host, confirm);
    assert_eq!(
        buttons(&host, "dc"),
        vec![
            ("Yes".to_string(), format!("/answer {id} yes")),
            ("No".to_string(), format!("/answer {id} no")),
        ]
    );
    assert!(host.texts_to("dc", "c2")[0].contains("\nThis drops the table.\nReply yes or no"));
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", &format!("/answer {id} no")));
    assert_eq!(
        host.answered,
        vec![("pi-uuid-1".to_string(), QuestionAnswer::Confirmed(false))]
    );
}

#[test]
fn an_input_takes_the_next_message_or_an_answer_command() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, question(QuestionKind::Input, None));
    assert!(buttons(&host, "tg").is_empty());
    assert!(host.texts_to("tg", "c1")[0].contains("your next message in this chat is taken as it"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "  staging-eu  "));
    assert_eq!(
        host.answered,
        vec![(
            "pi-uuid-1".to_string(),
            QuestionAnswer::Value("staging-eu".into())
        )]
    );
    // Typed text is repeated nowhere: not to the other chat, not to the log (I2).
    let told =
        format!("Question {id} ('Deploy where?'): answered with a text by tg:u1 from the chat.");
    assert_eq!(host.texts_to("dc", "c2").last(), Some(&told));
    assert!(
        !host
            .all_log_strings()
            .iter()
            .any(|l| l.contains("staging-eu")),
        "{:?}",
        host.all_log_strings()
    );

    let mut editor = question(QuestionKind::Editor, None);
    editor.id = "pi-uuid-2".into();
    let second = ask(&mut bridge, &mut host, editor);
    assert_ne!(second, id);
    bridge.on_envelope(
        &mut host,
        dm(
            "dc",
            "c2",
            "u2",
            &format!("/answer {second} line one\nline two"),
        ),
    );
    assert_eq!(
        host.answered.last(),
        Some(&(
            "pi-uuid-2".to_string(),
            QuestionAnswer::Value("line one\nline two".into())
        ))
    );
}

#[test]
fn the_deadline_dismisses_it_and_the_chats_are_told() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, question(options(2), Some(5_000)));
    host.clear_records();
    host.now += 4_999;
    bridge.tick(&mut host);
    assert!(host.answered.is_empty(), "not yet");
    host.now += 1;
    bridge.tick(&mut host);
    assert_eq!(
        host.answered,
        vec![("pi-uuid-1".to_string(), QuestionAnswer::Cancelled)]
    );
    let told = format!(
        "Question {id} ('Deploy where?'): no answer in time, so the agent went on without one."
    );
    assert_eq!(host.texts_to("tg", "c1"), vec![told.clone()]);
    assert_eq!(host.texts_to("dc", "c2"), vec![told]);
    // A late press changes nothing, and a later plain message is a prompt again.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/answer {id} 1")));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "1"));
    assert_eq!(host.answered.len(), 1);
    assert_eq!(host.prompts.len(), 1);
}

#[test]
fn an_unpaired_identity_cannot_answer_and_its_message_stays_what_it_was() {
    // requirePairing off lets anyone prompt, but answering the agent needs real trust: an
    // answer steers what the agent does next, as an approval does.
    let mut host = FakeHost::new();
    let config = r#"{"bridge":{"requirePairing":false,"allowUsers":["tg:u1"]}}"#;
    let (mut bridge, _, _) = started(&mut host, config, &["tg"]);
    // u1's prompt starts the turn in c1 (a group both write in).
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "deploy"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let id = ask(
        &mut bridge,
        &mut host,
        question(QuestionKind::Confirm, None),
    );
    host.clear_records();
    // Someone else in the same chat (a group) presses Yes, then types it.
    bridge.on_envelope(
        &mut host,
        dm("tg", "c1", "stranger", &format!("/answer {id} yes")),
    );
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["Only a paired identity can answer the agent's questions. Pair this chat first."]
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "stranger", "yes"));
    assert!(host.answered.is_empty(), "{:?}", host.answered);
    // Their plain message is what it would have been without the question: a prompt.
    assert_eq!(host.prompts.len(), 1);
    // The paired user still can.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "yes"));
    assert_eq!(
        host.answered,
        vec![("pi-uuid-1".to_string(), QuestionAnswer::Confirmed(true))]
    );
}

/// A press on a question's button by someone who may not answer (here: allowed to prompt,
/// not trusted) is refused to the presser alone, and the question stays open.
#[test]
fn a_press_by_someone_who_may_not_answer_is_refused_privately() {
    let mut host = FakeHost::new();
    let config = r#"{"bridge":{"requirePairing":false,"allowUsers":["tg:u1"]}}"#;
    let (mut bridge, _, _) = started(&mut host, config, &["tg"]);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "deploy"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let id = ask(
        &mut bridge,
        &mut host,
        question(QuestionKind::Confirm, None),
    );
    host.clear_records();
    bridge.on_envelope(
        &mut host,
        press_in_group(
            "tg",
            "c1",
            "stranger",
            &format!("/answer {id} yes"),
            "press:3",
        ),
    );
    assert!(host.answered.is_empty(), "{:?}", host.answered);
    assert!(
        host.texts_to("tg", "c1").is_empty(),
        "the group hears nothing"
    );
    let private: Vec<(Option<&str>, &str)> = host
        .private
        .iter()
        .map(|m| (m.answers_press.as_deref(), m.text.as_str()))
        .collect();
    assert_eq!(
        private,
        vec![(Some("press:3"), guest::core::notices::PRESS_REFUSED_NOTICE)]
    );
    // The one asked still answers.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "yes"));
    assert_eq!(
        host.answered,
        vec![("pi-uuid-1".to_string(), QuestionAnswer::Confirmed(true))]
    );
}

#[test]
fn a_chat_that_was_not_asked_cannot_answer() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, "{}", &["tg", "dc"]);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    pair(&mut bridge, &mut host, "dc", "c2", "u2");
    // The turn is c1's: its prompt started it, so only c1 is asked.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "deploy it"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.clear_records();
    let id = ask(
        &mut bridge,
        &mut host,
        question(QuestionKind::Confirm, None),
    );
    assert!(host.texts_to("dc", "c2").is_empty(), "c2 never sees it");

    host.clear_records();
    bridge.on_envelope(
        &mut host,
        dm("dc", "c2", "u2", &format!("/answer {id} yes")),
    );
    assert!(host.answered.is_empty());
    assert_eq!(
        host.texts_to("dc", "c2"),
        vec![format!(
            "Question {id} was not asked in this chat. Only the chat of the turn, or the terminal, can answer it."
        )]
    );
    // c2's plain message is its own prompt, not an answer to c1's question.
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", "yes"));
    assert!(host.answered.is_empty());
    assert_eq!(host.prompts.len(), 1, "{:?}", host.texts_to("dc", "c2"));
}

#[test]
fn the_terminal_can_answer_first_and_the_chats_are_told() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, question(options(2), None));
    host.clear_records();
    let unfit = bridge.on_local_command(&mut host, &format!("answer {id} 3"));
    assert_eq!(unfit.level, Level::Warning);
    assert!(host.answered.is_empty());
    let note = bridge.on_local_command(&mut host, &format!("answer {} env-1", id.to_uppercase()));
    assert_eq!(
        host.answered,
        vec![(
            "pi-uuid-1".to_string(),
            QuestionAnswer::Value("env-1".into())
        )]
    );
    let told = format!("Question {id} ('Deploy where?'): answered 'env-1' at the terminal.");
    assert_eq!(note.text, told);
    assert_eq!(host.texts_to("tg", "c1"), vec![told.clone()]);
    assert_eq!(host.texts_to("dc", "c2"), vec![told]);
    // The phone comes second and learns so.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/answer {id} 2")));
    assert_eq!(host.answered.len(), 1);
    let usage = bridge.on_local_command(&mut host, "answer");
    assert!(
        usage
            .text
            .starts_with("Usage: /connect answer <id> <answer>"),
        "{}",
        usage.text
    );
}

#[test]
fn the_question_and_its_options_are_redacted() {
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let mut asked = question(
        QuestionKind::Select(vec![format!("token {secret}"), "none".into()]),
        None,
    );
    asked.title = format!("Use {secret}?");
    bridge.on_question(&mut host, asked);
    for message in &host.sent {
        assert!(!message.text.contains(secret), "{}", message.text);
        for button in &message.buttons {
            assert!(!button.label.contains(secret), "{}", button.label);
        }
    }
    assert!(!host.sent.is_empty());
}

#[test]
fn the_agents_own_dialog_can_answer_first_and_a_late_one_learns_who_did() {
    // Extension mode: pi's TUI shows the dialog too; its answer comes by the host's id.
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, question(options(2), None));
    host.clear_records();
    bridge.on_local_question_answer(
        &mut host,
        "pi-uuid-1",
        QuestionAnswer::Value("env-2".into()),
    );
    assert_eq!(
        host.answered,
        vec![(
            "pi-uuid-1".to_string(),
            QuestionAnswer::Value("env-2".into())
        )]
    );
    let told = format!("Question {id} ('Deploy where?'): answered 'env-2' at the terminal.");
    assert_eq!(host.texts_to("tg", "c1"), vec![told.clone()]);
    assert_eq!(host.texts_to("dc", "c2"), vec![told.clone()]);

    // The phone's answer to a second question wins; pi's dialog answering after it changes
    // nothing, and the terminal hears who answered.
    let mut second = question(QuestionKind::Confirm, None);
    second.id = "pi-uuid-2".into();
    let second_id = ask(&mut bridge, &mut host, second);
    bridge.on_envelope(
        &mut host,
        dm("tg", "c1", "u1", &format!("/answer {second_id} yes")),
    );
    host.clear_records();
    bridge.on_local_question_answer(&mut host, "pi-uuid-2", QuestionAnswer::Confirmed(false));
    assert_eq!(
        host.answered.last(),
        Some(&("pi-uuid-2".to_string(), QuestionAnswer::Confirmed(true))),
        "answered once, by the phone"
    );
    assert_eq!(host.answered.len(), 2);
    assert!(
        host.note_texts()
            .iter()
            .any(|n| n.starts_with(&format!("Question {second_id} was already closed"))),
        "{:?}",
        host.notes
    );
    // An id the bridge never held is nobody's business.
    bridge.on_local_question_answer(&mut host, "unknown", QuestionAnswer::Cancelled);
    assert!(host.sent.is_empty());
}
