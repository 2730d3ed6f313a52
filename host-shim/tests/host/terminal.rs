//! `TerminalTransport`: input routing, screen layout, edits and local questions.

use std::sync::Arc;
use std::time::Duration;

use host_shim::local::terminal::{TerminalEvent, TerminalTransport};
use tokio::sync::mpsc;
use transport_core::{
    BotIdentity, Capabilities, Envelope, LengthUnit, Markup, OutboundKind, OutboundMessage,
    SendReceipt, Transport, TransportError,
};

use crate::common::{self, Person, within};

fn message(text: &str, edit_key: Option<&str>) -> OutboundMessage {
    OutboundMessage {
        conversation_id: "terminal".to_owned(),
        thread_id: None,
        kind: OutboundKind::Reply,
        text: text.to_owned(),
        edit_key: edit_key.map(str::to_owned),
        buttons: Vec::new(),
        answers_press: None,
        reply_to: None,
    }
}

fn chat(text: &str) -> Envelope {
    Envelope {
        transport: "terminal".to_owned(),
        conversation_id: "terminal".to_owned(),
        user_id: "you".to_owned(),
        thread_id: None,
        timestamp: 0,
        text: text.to_owned(),
        is_direct: true,
        addressed: true,
        attachments: vec![],
        message_id: None,
        press: None,
    }
}

struct Running {
    terminal: Arc<TerminalTransport>,
    events: mpsc::Receiver<TerminalEvent>,
    inbound: transport_core::InboundStream,
    person: Person,
}

async fn running(
    terminal: TerminalTransport,
    events: mpsc::Receiver<TerminalEvent>,
    person: Person,
) -> Running {
    let (sink, inbound) = transport_core::inbound::channel(8);
    terminal.start(sink).await.expect("a fresh terminal starts");
    Running {
        terminal: Arc::new(terminal),
        events,
        inbound,
        person,
    }
}

async fn start() -> Running {
    let (terminal, events, person) = common::terminal();
    running(terminal, events, person).await
}

impl Running {
    async fn next_chat(&mut self) -> Option<Envelope> {
        within(self.inbound.recv())
            .await
            .and_then(|m| m.into_envelope())
    }

    async fn next_event(&mut self) -> Option<TerminalEvent> {
        within(self.events.recv()).await
    }

    fn ask(&self, question: &'static str, timeout: Duration) -> tokio::task::JoinHandle<bool> {
        let terminal = Arc::clone(&self.terminal);
        tokio::spawn(async move { terminal.ask(question, timeout).await })
    }
}

#[test]
fn capabilities_and_identity_are_fixed() {
    let (terminal, _events, _person) = common::terminal();
    assert_eq!(terminal.id(), "terminal");
    assert_eq!(
        terminal.capabilities(),
        Capabilities {
            threads: false,
            edit: true,
            attachments: false,
            typing: true,
            max_message_length: 4000,
            length_unit: LengthUnit::Chars,
            markup: Markup::Markdown,
            reactions: false,
            drafts: false,
        }
    );
}

#[tokio::test]
async fn identify_needs_no_lock() {
    let (terminal, _events, _person) = common::terminal();
    assert_eq!(
        terminal.identify().await,
        Ok(BotIdentity {
            bot_id: "terminal".to_owned(),
            bot_name: "terminal".to_owned(),
            lock_name: None,
        })
    );
}

#[tokio::test]
async fn typed_lines_become_chat_messages() {
    let mut t = start().await;
    t.person.type_line("hello\r").await;
    t.person.type_line("").await;
    t.person.type_line("   ").await;
    t.person.type_line("  spaced  ").await;
    assert_eq!(t.next_chat().await, Some(chat("hello")));
    assert_eq!(t.next_chat().await, Some(chat("  spaced  ")));
    assert_eq!(t.terminal.diagnose(), "the chat, sent 0, received 2");
}

#[tokio::test]
async fn local_commands_never_reach_the_chat() {
    let mut t = start().await;
    t.person.type_line("/connect pair").await;
    t.person.type_line("/connect").await;
    t.person.type_line("/connectivity is bad").await;
    assert_eq!(
        t.next_event().await,
        Some(TerminalEvent::LocalCommand("pair".to_owned()))
    );
    assert_eq!(
        t.next_event().await,
        Some(TerminalEvent::LocalCommand(String::new()))
    );
    assert_eq!(t.next_chat().await, Some(chat("/connectivity is bad")));
}

#[tokio::test]
async fn the_local_command_prefix_is_configurable() {
    let (terminal, events, person) = common::terminal();
    let mut t = running(terminal.with_local_command("bc"), events, person).await;
    t.person.type_line("/connect status").await;
    t.person.type_line("/bc status").await;
    assert_eq!(t.next_chat().await, Some(chat("/connect status")));
    assert_eq!(
        t.next_event().await,
        Some(TerminalEvent::LocalCommand("status".to_owned()))
    );
}

#[tokio::test]
async fn the_prefix_can_follow_the_config_after_reading_started() {
    let mut t = start().await;
    t.person.type_line("/connect status").await;
    assert_eq!(
        t.next_event().await,
        Some(TerminalEvent::LocalCommand("status".to_owned()))
    );
    // The bridge was configured with `bridge.localCommand: "bc"` meanwhile.
    t.terminal.set_local_command("bc");
    t.person.type_line("/connect status").await;
    t.person.type_line("/bc doctor").await;
    assert_eq!(t.next_chat().await, Some(chat("/connect status")));
    assert_eq!(
        t.next_event().await,
        Some(TerminalEvent::LocalCommand("doctor".to_owned()))
    );
}

#[tokio::test]
async fn quit_and_exit_and_end_of_input_quit() {
    let mut t = start().await;
    t.person.type_line("/quit").await;
    t.person.type_line("/exit").await;
    t.person.close_input();
    for _ in 0..3 {
        assert_eq!(t.next_event().await, Some(TerminalEvent::Quit));
    }
    assert_eq!(t.next_chat().await, None, "the reader ends at end of input");
}

#[tokio::test]
async fn chat_messages_are_drawn_as_chat_and_numbered() {
    let mut t = start().await;
    let first = t
        .terminal
        .send(message("hello\nsecond line\r\nthird", None))
        .await;
    let second = t.terminal.send(message("again", None)).await;
    assert_eq!(
        first,
        Ok(SendReceipt {
            message_id: "t1".to_owned(),
            edit_key: Some("t1".to_owned())
        })
    );
    assert_eq!(
        second,
        Ok(SendReceipt {
            message_id: "t2".to_owned(),
            edit_key: Some("t2".to_owned())
        })
    );
    assert_eq!(
        t.person.screen(),
        "  chat │ bot #1: hello\n       │ second line\n       │ third\n  chat │ bot #2: again\n"
    );
}

#[tokio::test]
async fn an_edit_visibly_replaces_its_message() {
    let mut t = start().await;
    t.terminal
        .send(message("working…", None))
        .await
        .expect("started");
    let edit = t
        .terminal
        .send(message("done\nall green", Some("t1")))
        .await;
    assert_eq!(
        edit,
        Ok(SendReceipt {
            message_id: "t1".to_owned(),
            edit_key: Some("t1".to_owned())
        })
    );
    assert_eq!(
        t.person.screen(),
        "  chat │ bot #1: working…\n  chat │ bot (edited #1): done\n       │ all green\n"
    );
    assert_eq!(
        t.terminal.send(message("lost", Some("t9"))).await,
        Err(TransportError::EditRejected(
            "terminal has no message t9 to edit".to_owned()
        ))
    );
}

#[tokio::test]
async fn local_notifications_are_set_apart_from_the_chat() {
    let mut t = start().await;
    t.terminal
        .notify(
            "info",
            "Messenger pairing code: 123 456 (valid 5 min). Type it in the chat to pair.",
        )
        .await
        .expect("screen open");
    t.terminal
        .notify("warning", "two\nlines")
        .await
        .expect("screen open");
    assert_eq!(
        t.person.screen(),
        " local ▌ [bot-connect] Messenger pairing code: 123 456 (valid 5 min). Type it in the chat to pair.\n local ▌ [bot-connect] warning: two\n       ▌ lines\n"
    );
}

#[tokio::test]
async fn typing_shows_only_when_verbose() {
    let mut quiet = start().await;
    quiet
        .terminal
        .typing("terminal", None)
        .await
        .expect("started");
    assert_eq!(quiet.person.screen(), "");

    let (terminal, events, person) = common::terminal();
    let mut verbose = running(terminal.with_verbose_typing(), events, person).await;
    verbose
        .terminal
        .typing("terminal", None)
        .await
        .expect("started");
    assert_eq!(verbose.person.screen(), "  chat │ bot is typing…\n");
}

#[tokio::test]
async fn nothing_is_sent_before_start_or_after_stop() {
    let (terminal, _events, mut person) = common::terminal();
    let not_started = Err(TransportError::NotStarted("terminal".to_owned()));
    assert_eq!(terminal.send(message("early", None)).await, not_started);
    assert_eq!(
        terminal.typing("terminal", None).await,
        not_started.clone().map(|_: SendReceipt| ())
    );
    let (sink, _inbound) = transport_core::inbound::channel(8);
    terminal.start(sink).await.expect("starts");
    terminal.stop().await;
    assert_eq!(terminal.send(message("late", None)).await, not_started);
    assert_eq!(person.screen(), "");
}

#[tokio::test]
async fn a_stopped_terminal_starts_again_and_keeps_reading() {
    let mut t = start().await;
    t.terminal.stop().await;
    let (sink, mut inbound) = transport_core::inbound::channel(8);
    t.terminal.start(sink).await.expect("starts after stop");
    t.person.type_line("back").await;
    assert_eq!(
        within(inbound.recv()).await.and_then(|m| m.into_envelope()),
        Some(chat("back"))
    );
}

#[tokio::test]
async fn a_closed_screen_fails_the_send() {
    let mut t = start().await;
    t.person.close_screen();
    assert!(matches!(
        t.terminal.send(message("unseen", None)).await,
        Err(TransportError::Failed(text)) if text.starts_with("terminal output is closed (")
    ));
}

#[tokio::test]
async fn yes_approves_and_is_not_chat() {
    let mut t = start().await;
    for answer in ["y", "yes", "YES"] {
        let asked = t.ask(
            "Run bash `ls` for the remote user?",
            Duration::from_secs(60),
        );
        t.person.wait_for("[y/N]").await;
        t.person.type_line(answer).await;
        assert!(within(asked).await.expect("ask finished"), "{answer:?}");
    }
    t.person.type_line("after").await;
    assert_eq!(
        t.next_chat().await,
        Some(chat("after")),
        "answers never become chat"
    );
    assert!(
        t.person
            .screen()
            .starts_with(" local ▌ Run bash `ls` for the remote user? [y/N]\n")
    );
}

#[tokio::test]
async fn any_other_answer_denies() {
    let mut t = start().await;
    for answer in ["n", "no", "", "maybe", "/connect pair"] {
        let asked = t.ask("Allow?", Duration::from_secs(60));
        t.person.wait_for("Allow? [y/N]").await;
        t.person.type_line(answer).await;
        assert!(!within(asked).await.expect("ask finished"), "{answer:?}");
    }
    t.person.type_line("after").await;
    assert_eq!(t.next_chat().await, Some(chat("after")));
}

#[tokio::test]
async fn quitting_while_asked_denies_and_quits() {
    let mut t = start().await;
    let asked = t.ask("Allow?", Duration::from_secs(60));
    t.person.wait_for("[y/N]").await;
    t.person.type_line("/quit").await;
    assert!(!within(asked).await.expect("ask finished"));
    assert_eq!(t.next_event().await, Some(TerminalEvent::Quit));
}

#[tokio::test]
async fn closed_input_denies() {
    let mut t = start().await;
    let asked = t.ask("Allow?", Duration::from_secs(60));
    t.person.wait_for("[y/N]").await;
    t.person.close_input();
    assert!(!within(asked).await.expect("ask finished"));
}

#[tokio::test]
async fn a_question_after_end_of_input_is_refused_at_once() {
    let mut t = start().await;
    t.person.close_input();
    assert_eq!(t.next_event().await, Some(TerminalEvent::Quit));
    assert!(!within(t.terminal.ask("Allow?", Duration::from_secs(3600))).await);
}

#[tokio::test]
async fn a_stopped_terminal_cannot_be_asked() {
    let (terminal, _events, mut person) = common::terminal();
    assert!(!within(terminal.ask("Allow?", Duration::from_secs(60))).await);
    assert_eq!(
        person.screen(),
        "",
        "no question is shown that nobody can answer"
    );
}

#[tokio::test(start_paused = true)]
async fn no_answer_in_time_denies_and_the_next_line_is_chat() {
    let mut t = start().await;
    let asked = t.ask("Allow?", Duration::from_secs(30));
    assert!(!asked.await.expect("ask finished"));
    assert_eq!(
        t.person.screen(),
        " local ▌ Allow? [y/N]\n local ▌ no answer within 30 s; taken as no\n"
    );
    t.person.type_line("y").await;
    assert_eq!(
        t.next_chat().await,
        Some(chat("y")),
        "a late answer is not taken"
    );
}

#[tokio::test]
async fn without_a_chat_the_local_side_still_answers_and_chat_lines_are_told_where_the_chat_is() {
    let (terminal, mut events, mut person) = common::terminal();
    terminal.listen_locally();
    // Typed while the session starts: it waits until the session says what it started.
    person.type_line("hello bot").await;
    person.type_line("/connect status").await;
    assert_eq!(
        within(events.recv()).await,
        Some(TerminalEvent::LocalCommand("status".to_owned()))
    );
    assert!(!person.screen().contains("not a chat"));
    terminal.settled().await;
    person
        .wait_for("This terminal is not a chat in this run")
        .await;
    person.type_line("hello again").await;
    person
        .wait_for("This terminal is not a chat in this run")
        .await;
    person.type_line("/quit").await;
    assert_eq!(within(events.recv()).await, Some(TerminalEvent::Quit));
    // Not being the chat, it refuses to post.
    assert_eq!(
        terminal.send(message("x", None)).await,
        Err(TransportError::NotStarted("terminal".to_owned()))
    );
}

#[tokio::test]
async fn chat_lines_typed_while_the_session_starts_reach_the_chat_once_it_starts() {
    let (terminal, mut events, mut person) = common::terminal();
    terminal.listen_locally();
    person.type_line("hello").await;
    person.type_line("fix the parser").await;
    // The local command behind them proves both lines were read before the chat started.
    person.type_line("/connect status").await;
    assert_eq!(
        within(events.recv()).await,
        Some(TerminalEvent::LocalCommand("status".to_owned()))
    );
    let mut t = running(terminal, events, person).await;
    assert_eq!(t.next_chat().await, Some(chat("hello")));
    assert_eq!(t.next_chat().await, Some(chat("fix the parser")));
    t.terminal.settled().await;
    assert!(!t.person.screen().contains("not a chat"));
}

#[tokio::test]
async fn an_open_approval_question_lets_other_lines_through_as_chat() {
    let mut t = start().await;
    let terminal = Arc::clone(&t.terminal);
    let asked = tokio::spawn(async move { terminal.ask_open("Allow bash? (approval ab3k)").await });
    t.person.wait_for("[y/N]").await;
    // The chat's own answer, typed here: it must reach the chat, not count as a no.
    t.person.type_line("/approve ab3k").await;
    assert_eq!(t.next_chat().await, Some(chat("/approve ab3k")));
    t.person.type_line("n").await;
    assert_eq!(within(asked).await.expect("ask finished"), Some(false));
    // Withdrawn once decided elsewhere: the next `y` is chat again.
    let terminal = Arc::clone(&t.terminal);
    let withdrawn = tokio::spawn(async move { terminal.ask_open("Allow read?").await });
    t.person.wait_for("Allow read? [y/N]").await;
    withdrawn.abort();
    let _ = withdrawn.await;
    t.person.type_line("y").await;
    assert_eq!(t.next_chat().await, Some(chat("y")));
}
