//! End to end with Telegram: the real component and host, the real Telegram transport,
//! and a loopback Bot API server speaking HTTP + JSON on 127.0.0.1. Pair from a Telegram
//! chat, prompt, watch the card edited, get a long reply as several valid HTML messages,
//! and ask `/status` while the agent works; `@bot status` in a group is a command; approve
//! a parked tool call with the request's inline-keyboard button.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use host_shim::factory::{self, Environment};
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::pairing_budget::PairingBudget;
use host_shim::sandbox::session::{Session, SessionSpec};
use host_shim::wit::session::{AgentEvent, ToolResult, TurnOrigin};
use serde_json::json;
use transport_testing::telegram::{
    BotApiServer, button_press, group_text, parse_telegram_html, private_text,
};

use crate::common::{self, Dirs, ScriptAgent, WAIT};

const USER: i64 = 4242;
const GROUP: i64 = -100_777;

struct Telegram {
    server: Arc<BotApiServer>,
    session: Session,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
    dirs: Dirs,
    clock: Arc<ManualClock>,
}

/// A session on `server`, with its state and locks in `dirs` (shared across a restart).
fn spec(
    server: &BotApiServer,
    dirs: &Dirs,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
) -> SessionSpec {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    spec_with(server, dirs, agent, ui, json!({}), clock)
}

/// [`spec`] with this `bridge` config section.
fn spec_with(
    server: &BotApiServer,
    dirs: &Dirs,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
    bridge: serde_json::Value,
    clock: Arc<ManualClock>,
) -> SessionSpec {
    let token = server.token();
    let state_dir = dirs.dir.path().to_path_buf();
    let config = json!({"bridge": bridge, "transports": {"telegram": {
        "enabled": true,
        "tokenEnv": "TG_TEST_TOKEN",
        "baseUrl": server.base_url(),
        "pollTimeoutSeconds": 1,
    }}});
    SessionSpec {
        key: "telegram-e2e".into(),
        config_sources: vec![common::user_config(&config.to_string())],
        platforms: factory::declarations(),
        transports: Box::new(move |requests| {
            // The token comes from the "environment" only, as in production.
            let var = move |name: &str| (name == "TG_TEST_TOKEN").then(|| token.clone());
            factory::build(
                requests,
                None,
                &Environment {
                    var: &var,
                    state_dir: Some(state_dir),
                },
            )
        }),
        agent,
        ui,
        state: Dirs::open_state(&dirs.dir),
        locks: dirs.locks(),
        pairing: PairingBudget::default(),
        clock,
        log: Arc::new(MemoryLog::default()),
        exclusive: true,
        transcript: None,
    }
}

impl Telegram {
    async fn start() -> Telegram {
        Telegram::start_with(json!({})).await
    }

    /// A session whose config has this `bridge` section.
    async fn start_with(bridge: serde_json::Value) -> Telegram {
        Telegram::start_in(bridge, None).await
    }

    /// [`Telegram::start_with`] for an agent working in `cwd` from the start (the bridge
    /// reads the working directory once, when the session starts).
    async fn start_in(bridge: serde_json::Value, cwd: Option<&std::path::Path>) -> Telegram {
        let server = Arc::new(BotApiServer::start().await);
        let dirs = Dirs::new();
        let agent = Arc::new(ScriptAgent::default());
        *agent.cwd.lock().unwrap() = cwd.map(|dir| dir.to_string_lossy().into_owned());
        let ui = Arc::new(RecordingUi::default());
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let session = Session::spawn(
            common::runtime(),
            spec_with(
                &server,
                &dirs,
                agent.clone(),
                ui.clone(),
                bridge,
                clock.clone(),
            ),
        )
        .await
        .expect("session starts");
        Telegram {
            server,
            session,
            agent,
            ui,
            dirs,
            clock,
        }
    }

    /// Queues an update and waits until the bot has sent something containing `expect`.
    async fn say(&self, update: serde_json::Value, expect: &str) {
        let before = self.server.sent().len();
        self.server.queue_update(update);
        let found = self
            .server
            .wait_until(WAIT, |s| {
                s.sent()[before..].iter().any(|m| m.text.contains(expect))
            })
            .await;
        assert!(
            found,
            "no message containing {expect:?}; sent: {:#?}\nlocal: {:#?}",
            self.server.sent(),
            self.ui.notes()
        );
    }

    fn code_shown_locally(&self) -> String {
        let notes = self.ui.notes();
        let note = notes
            .iter()
            .rev()
            .find(|(_, text)| text.contains("Messenger pairing code:"))
            .expect("a pairing code was shown locally");
        let after = note.1.split("Messenger pairing code:").nth(1).unwrap_or("");
        after
            .split('(')
            .next()
            .unwrap_or("")
            .chars()
            .filter(char::is_ascii_digit)
            .collect()
    }

    async fn pair(&self, message_id: i64) {
        self.say(private_text(USER, message_id, "hello"), "not paired")
            .await;
        let code = self.code_shown_locally();
        assert!(
            self.server.sent().iter().all(|m| !m.text.contains(&code)),
            "the code never goes to the chat (I1)"
        );
        self.say(
            private_text(USER, message_id + 1, &code),
            "Paired as telegram:4242",
        )
        .await;
    }
}

/// A reply of several sections, each with a code block: far over Telegram's 4,096 units.
fn long_reply() -> String {
    let mut text = String::new();
    for i in 0..12 {
        text.push_str(&format!(
            "## Step {i}\n\nI changed **the parser** so nested <blocks> & lists close.\n\n```rust\n{}```\n\n",
            format!("fn step_{i}() {{ println!(\"{i}\"); }}\n").repeat(12)
        ));
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_prompt_card_and_a_long_reply_in_valid_html_messages() {
    let t = Telegram::start().await;
    t.pair(1).await;

    t.server
        .queue_update(private_text(USER, 3, "please fix the parser"));
    // Waited for on the agent: the server's wait re-reads its condition only when the
    // server's own state changes, so a prompt reaching the agent was seen at the deadline.
    t.agent.wait_for_prompts(1).await;
    assert_eq!(t.agent.prompts.lock().unwrap()[0], "please fix the parser");

    t.agent.busy.store(true, Ordering::SeqCst);
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    t.agent.emit(AgentEvent::ToolStarted("bash".into())).await;
    t.agent
        .emit(AgentEvent::ToolFinished(ToolResult {
            name: "bash".into(),
            ok: true,
        }))
        .await;
    // `/status` while the agent works is answered at once (I8).
    t.say(private_text(USER, 4, "/status"), "agent: busy").await;
    t.session.tick().await.expect("session alive");
    t.agent
        .emit(AgentEvent::AssistantMessage(long_reply()))
        .await;
    t.agent.busy.store(false, Ordering::SeqCst);
    t.agent.emit(AgentEvent::TurnSettled).await;

    let done = t
        .server
        .wait_until(WAIT, |s| {
            s.sent().iter().filter(|m| m.text.contains("Step")).count() >= 2
        })
        .await;
    assert!(
        done,
        "the reply arrived in several messages: {:#?}",
        t.server.sent()
    );

    // The card was edited in place, not posted anew for each step.
    let edits = t.server.edited();
    assert!(!edits.is_empty(), "the progress card was edited");
    for message in t.server.sent() {
        let units = message.text.encode_utf16().count();
        assert_eq!(message.parse_mode.as_deref(), Some("HTML"));
        let plain = parse_telegram_html(&message.text)
            .unwrap_or_else(|e| panic!("invalid Telegram HTML ({e}): {}", message.text));
        assert!(
            plain.encode_utf16().count() <= 4096 && units > 0,
            "over the limit: {units} units"
        );
    }
    let reply: Vec<_> = t
        .server
        .sent()
        .into_iter()
        .filter(|m| m.text.contains("Step"))
        .collect();
    assert!(
        reply
            .iter()
            .all(|m| m.text.contains("<pre>") || !m.text.contains("fn step")),
        "code stays in fenced blocks"
    );
    t.session.shutdown().await.expect("clean shutdown");
}

/// With reactions on, the prompt's message shows 👀 once taken and 👍 once its turn ended,
/// and a long turn's done message replies to it (docs/pi.md#reactions-and-the-done-message),
/// all through the real component, host and Telegram transport.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_gets_its_reactions_and_a_long_turns_done_message_replies_to_it() {
    let t = Telegram::start_with(json!({"reactions": true, "doneNoticeAfterMs": 60_000})).await;
    t.pair(1).await;
    t.server
        .queue_update(private_text(USER, 3, "please fix the parser"));
    t.agent.wait_for_prompts(1).await;
    let taken = t
        .server
        .wait_until(WAIT, |s| !s.reactions().is_empty())
        .await;
    assert!(taken, "no reaction on the prompt");
    let first = &t.server.reactions()[0];
    assert_eq!(
        (
            first.chat_id.as_str(),
            first.message_id,
            first.emoji.clone()
        ),
        (USER.to_string().as_str(), 3, vec!["👀".to_owned()])
    );
    t.agent.busy.store(true, Ordering::SeqCst);
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    // The turn's start is read from the clock when the session handles it: a tick queued
    // behind it returns once it was handled, and only then may time move on.
    t.session.tick().await.expect("session alive");
    t.clock.advance(252_000);
    t.agent
        .emit(AgentEvent::AssistantMessage("Fixed the parser.".into()))
        .await;
    t.agent.busy.store(false, Ordering::SeqCst);
    t.agent.emit(AgentEvent::TurnSettled).await;
    let ended = t
        .server
        .wait_until(WAIT, |s| s.reactions().len() >= 2)
        .await;
    assert!(ended, "no done reaction: {:?}", t.server.reactions());
    assert_eq!(t.server.reactions()[1].emoji, ["👍"]);
    let sent = t.server.sent();
    let done: Vec<_> = sent
        .iter()
        .filter(|m| m.text.starts_with("Done in 4m12s"))
        .collect();
    assert_eq!(done.len(), 1, "{sent:#?}");
    assert_eq!(
        done[0].reply_to,
        Some(3),
        "the done message replies to the prompt"
    );
    let answer = sent
        .iter()
        .find(|m| m.text.contains("Fixed the parser"))
        .expect("the answer");
    assert_eq!(answer.reply_to, None);
    t.session.shutdown().await.expect("clean shutdown");
}

/// With `streamPreview`, a private chat sees the answer streamed as Telegram drafts
/// (`sendMessageDraft`), never a piece of a secret the model sends in chunks, and the card
/// keeps to its steps; the final answer is posted as a message of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_streams_as_telegram_drafts_without_ever_showing_a_secret() {
    let t = Telegram::start_with(json!({"streamPreview": true, "progressMinIntervalMs": 0})).await;
    t.pair(1).await;
    t.server.queue_update(private_text(USER, 3, "push it"));
    t.agent.wait_for_prompts(1).await;
    t.agent.busy.store(true, Ordering::SeqCst);
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let answer = format!("Use the key {token} to push, then run the tests. All done here.");
    let mut end = 0;
    while end < answer.len() {
        end = (end + 9).min(answer.len());
        t.agent
            .emit(AgentEvent::AssistantDraft(answer[..end].into()))
            .await;
    }
    t.agent
        .emit(AgentEvent::AssistantMessage(answer.clone()))
        .await;
    t.agent.busy.store(false, Ordering::SeqCst);
    t.agent.emit(AgentEvent::TurnSettled).await;
    let answered = t
        .server
        .wait_until(WAIT, |s| {
            s.sent().iter().any(|m| m.text.contains("All done here"))
        })
        .await;
    assert!(answered, "{:#?}", t.server.sent());
    let drafts = t.server.drafts();
    assert!(
        drafts.iter().any(|d| d.text.contains("Use the key")),
        "the answer streamed as drafts: {drafts:#?}"
    );
    assert!(drafts.iter().all(|d| d.chat_id == USER && d.draft_id != 0));
    for text in drafts
        .iter()
        .map(|d| d.text.clone())
        .chain(t.server.sent().into_iter().map(|m| m.text))
        .chain(t.server.edited().into_iter().map(|m| m.text))
    {
        assert!(
            !text.contains("abcdefghij") && !text.contains("ghp_a"),
            "{text}"
        );
    }
    assert!(
        t.server.edited().iter().all(|m| !m.text.contains('✎')),
        "the card keeps to its steps where drafts stream"
    );
    t.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_mention_of_a_command_is_a_command() {
    let t = Telegram::start().await;
    t.pair(1).await;
    let mention = json!([{"type": "mention", "offset": 0, "length": 6}]);
    t.say(
        group_text(GROUP, USER, 10, "@piBot /status", mention.clone()),
        "pi-bot-connect status",
    )
    .await;
    // After the mention, a lone command word is the command, not a prompt
    // (docs/decisions.md#decision-1-bot-status-is-a-command).
    t.say(
        group_text(GROUP, USER, 11, "@piBot status", mention),
        "pi-bot-connect status",
    )
    .await;
    assert!(
        t.agent.prompts.lock().unwrap().is_empty(),
        "neither became a prompt: {:?}",
        t.agent.prompts.lock().unwrap()
    );
    t.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_host_answers_what_arrived_while_it_was_away_exactly_once() {
    let t = Telegram::start().await;
    t.pair(1).await;
    let answered = t.server.sent().len();
    t.session.shutdown().await.expect("clean shutdown");
    // Offline: a message waits on the server.
    t.server.queue_update(private_text(USER, 9, "/whoami"));
    let restarted = Session::spawn(
        common::runtime(),
        spec(
            &t.server,
            &t.dirs,
            Arc::new(ScriptAgent::default()),
            t.ui.clone(),
        ),
    )
    .await
    .expect("restarted session starts");
    let whoami = |s: &BotApiServer| {
        s.sent()[answered..]
            .iter()
            .filter(|m| m.text.contains("telegram:4242"))
            .count()
    };
    assert!(
        t.server.wait_until(WAIT, |s| whoami(s) == 1).await,
        "sent: {:#?}",
        t.server.sent()
    );
    // Polling went on (a later long poll confirmed the offset) and nothing was answered twice.
    let polls = t.server.calls("getUpdates");
    assert!(
        t.server
            .wait_until(WAIT, |s| s.calls("getUpdates") > polls + 1)
            .await
    );
    assert_eq!(whoami(&t.server), 1);
    restarted.shutdown().await.expect("clean shutdown");
}

/// What waited on the server is answered, but a stranger's message older than the pairing window
/// mints no code and gets no reply
/// (docs/decisions.md#decision-10-telegrams-backlog-is-answered-but-not-a-stale-one-for-strangers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_message_older_than_the_pairing_window_is_not_answered() {
    let t = Telegram::start().await;
    let mut stale = private_text(777, 1, "anyone there?");
    // The clock reads 1_700_000_000 s; this was sent ten minutes before (TTL: five).
    stale["message"]["date"] = json!(1_700_000_000 - 600);
    t.server.queue_update(stale);
    t.say(private_text(778, 2, "hello"), "not paired").await;
    let to_stale: Vec<_> = t
        .server
        .sent()
        .into_iter()
        .filter(|m| m.chat_id == "777")
        .collect();
    assert!(to_stale.is_empty(), "{to_stale:#?}");
    let codes =
        t.ui.notes()
            .iter()
            .filter(|(_, text)| text.contains("Messenger pairing code:"))
            .count();
    assert_eq!(
        codes,
        1,
        "one code, for the fresh message: {:#?}",
        t.ui.notes()
    );
    t.session.shutdown().await.expect("clean shutdown");
}

/// Approval from the phone (docs/decisions.md#decision-11-approval-from-the-phone) with one real
/// transport's buttons: the remote turn's parked tool call is put to the paired chat with Approve /
/// Deny buttons; a stranger's press decides nothing, the paired user's press on Approve lets the
/// call run, and every press is answered so the phone's spinner stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_on_the_approve_button_lets_the_parked_tool_call_run() {
    const STRANGER: i64 = 5555;
    let t = Telegram::start_with(json!({
        "remoteToolPolicy": "unrestricted",
        "remoteToolApproval": "each",
        "remoteApproval": {"enabled": true, "timeoutMs": 60000},
    }))
    .await;
    t.pair(1).await;
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    let waiting = {
        let agent = t.agent.clone();
        tokio::spawn(async move { agent.tool_call("bash").await })
    };
    let asked = t
        .server
        .wait_until(WAIT, |s| {
            s.sent()
                .iter()
                .any(|m| m.text.starts_with("Approval needed ("))
        })
        .await;
    assert!(asked, "no approval request: {:#?}", t.server.sent());
    let request = t
        .server
        .sent()
        .into_iter()
        .find(|m| m.text.starts_with("Approval needed ("))
        .expect("the request");
    let id = request
        .text
        .trim_start_matches("Approval needed (")
        .split(')')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(request.chat_id, USER.to_string());
    assert_eq!(
        request.buttons(),
        vec![
            ("Approve once".to_owned(), format!("/approve {id}")),
            ("Deny".to_owned(), format!("/deny {id}")),
            (
                "Allow for this turn".to_owned(),
                format!("/approve {id} turn")
            ),
            ("Details".to_owned(), format!("/details {id}")),
        ]
    );
    // Only the request carries buttons.
    assert_eq!(
        t.server
            .sent()
            .iter()
            .filter(|m| m.reply_markup.is_some())
            .count(),
        1
    );

    // A stranger presses Approve (a forwarded request, or a forged press): it decides
    // nothing, makes no pairing code, and only the stranger is told, in the press's own
    // answer (an alert), never in the chat.
    let sent_before = t.server.sent().len();
    t.server.queue_update(button_press(
        "press-stranger",
        STRANGER,
        None,
        request.message_id,
        &format!("/approve {id}"),
    ));
    let refused = t
        .server
        .wait_until(WAIT, |s| {
            s.callback_answers()
                .iter()
                .any(|a| a.callback_query_id == "press-stranger")
        })
        .await;
    assert!(refused, "{:#?}", t.server.callback_answers());
    let refusal = t
        .server
        .callback_answers()
        .into_iter()
        .find(|a| a.callback_query_id == "press-stranger")
        .expect("answered");
    assert!(refusal.show_alert, "{refusal:?}");
    assert!(
        refusal
            .text
            .as_deref()
            .is_some_and(|text| text.starts_with("Your press decided nothing")),
        "{refusal:?}"
    );
    assert_eq!(
        t.server.sent().len(),
        sent_before,
        "nothing said in the chat: {:#?}",
        t.server.sent()
    );
    assert!(
        !waiting.is_finished(),
        "a stranger's press decided the call"
    );
    // The paired user presses it.
    t.server.queue_update(button_press(
        "press-paired",
        USER,
        None,
        request.message_id,
        &format!("/approve {id}"),
    ));
    let verdict = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("a verdict in time")
        .expect("the task ran");
    assert!(
        matches!(verdict, host_shim::wit::session::ToolDecision::Allow),
        "{verdict:?}"
    );
    let told = format!("Approval {id} ('bash'): approved by telegram:{USER} from the chat.");
    let found = t
        .server
        .wait_until(WAIT, |s| s.sent().iter().any(|m| m.text == told))
        .await;
    assert!(found, "sent: {:#?}", t.server.sent());
    // The request itself now shows the outcome, its keyboard gone (no reply_markup).
    let outcome = t
        .server
        .edited()
        .into_iter()
        .find(|e| e.message_id == request.message_id)
        .expect("the request was edited to its outcome");
    assert!(
        outcome.text.contains("Approved once by telegram:"),
        "{outcome:?}"
    );
    assert_eq!(outcome.reply_markup, None, "{outcome:?}");
    let answered = t
        .server
        .wait_until(WAIT, |s| s.callback_answers().len() == 2)
        .await;
    assert!(answered, "{:#?}", t.server.callback_answers());
    let ids: Vec<String> = t
        .server
        .callback_answers()
        .into_iter()
        .map(|a| a.callback_query_id)
        .collect();
    assert!(ids.contains(&"press-paired".to_owned()), "{ids:?}");
    assert!(ids.contains(&"press-stranger".to_owned()), "{ids:?}");
    t.session.shutdown().await.expect("clean shutdown");
}

/// A private message from [`USER`] carrying a document.
fn document(
    message_id: i64,
    file_id: &str,
    name: &str,
    size: u64,
    caption: &str,
) -> serde_json::Value {
    json!({
        "message": {
            "message_id": message_id,
            "from": {"id": USER, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": USER, "first_name": "Ada", "type": "private"},
            "date": 1_700_000_000,
            "caption": caption,
            "document": {
                "file_id": file_id,
                "file_unique_id": format!("u-{file_id}"),
                "file_name": name,
                "mime_type": "application/pdf",
                "file_size": size
            }
        }
    })
}

#[tokio::test]
async fn a_document_is_saved_in_the_inbox_and_one_over_telegrams_20_mb_is_refused_plainly() {
    let t = Telegram::start().await;
    let workspace = tempfile::tempdir().expect("temp dir");
    *t.agent.cwd.lock().unwrap() = Some(workspace.path().to_string_lossy().into_owned());
    t.pair(1).await;

    let pdf = b"%PDF-1.7 quarterly figures".to_vec();
    t.server.serve_file(
        "doc-1",
        transport_testing::telegram::ServedFile::new(Some("application/pdf"), pdf.clone()),
    );
    // getFile, the download with the token in its path, the host's write: all real.
    t.server.queue_update(document(
        10,
        "doc-1",
        "../../.q3.pdf",
        pdf.len() as u64,
        "summarise",
    ));
    t.agent.wait_for_prompts(1).await;
    let prompt = t.agent.prompts.lock().unwrap()[0].clone();
    assert!(
        prompt.starts_with("summarise\n\n[bot-connect: the sender attached a file")
            && prompt.contains(".pi/inbox/q3.pdf (application/pdf, 26 bytes)"),
        "{prompt}"
    );
    let saved = workspace.path().join(".pi/inbox/q3.pdf");
    assert_eq!(std::fs::read(&saved).expect("saved in the inbox"), pdf);
    assert!(!workspace.path().join("../.q3.pdf").exists());

    // Over the Bot API's download limit: said before any getFile, and nothing forwarded.
    let get_file_calls = t.server.calls("getFile");
    t.say(
        document(11, "doc-2", "video-dump.zip", 31 * 1024 * 1024, ""),
        "Telegram lets bots download files of up to 20 MB",
    )
    .await;
    assert_eq!(t.server.calls("getFile"), get_file_calls);
    assert_eq!(t.agent.prompts.lock().unwrap().len(), 1);
    t.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn a_voice_note_is_transcribed_by_the_engine_echoed_and_prompted_as_speech() {
    let engine = crate::common::transcription::TranscriptionServer::start(
        "Please run the test suite and tell me what fails.",
    )
    .await;
    let t = Telegram::start_with(json!({"voice": {
        "engine": "openai",
        "baseUrl": engine.base_url,
        "apiKeyEnv": null,
        "model": "whisper-1",
    }}))
    .await;
    t.pair(1).await;
    let opus = b"OggS\x00\x02 fake opus frames".to_vec();
    t.server.serve_file(
        "voice-1",
        transport_testing::telegram::ServedFile::new(Some("audio/ogg"), opus.clone()),
    );
    t.say(
        json!({"message": {
            "message_id": 20,
            "from": {"id": USER, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": USER, "first_name": "Ada", "type": "private"},
            "date": 1_700_000_000,
            "voice": {
                "file_id": "voice-1",
                "file_unique_id": "u-voice-1",
                "duration": 3,
                "mime_type": "audio/ogg",
                "file_size": opus.len()
            }
        }}),
        "Heard: Please run the test suite and tell me what fails.",
    )
    .await;
    t.agent.wait_for_prompts(1).await;
    assert_eq!(
        t.agent.prompts.lock().unwrap()[0],
        "[bot-connect: transcribed from a voice note by speech recognition; a word may be \
         misheard]\nPlease run the test suite and tell me what fails."
    );
    // The host uploaded the bytes Telegram served, as multipart, to the configured server.
    let requests = engine.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert!(request.starts_with(b"POST /v1/audio/transcriptions "));
    assert!(
        request.windows(opus.len()).any(|w| w == opus.as_slice()),
        "the voice note's bytes are in the upload"
    );
    assert!(String::from_utf8_lossy(request).contains("filename=\"voice.ogg\""));
    t.session.shutdown().await.expect("clean shutdown");
}

/// A GitHub token's shape, assembled at run time so no scanner takes the test for a leak.
fn planted_token() -> String {
    format!("ghp_{}", "Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0EdCbA9z")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_file_reaches_the_chat_that_asked_redacted_or_refused_with_the_reason() {
    use host_shim::sandbox::session::FileRequest;
    let workspace = tempfile::tempdir().expect("temp dir");
    let root = workspace.path();
    let t = Telegram::start_in(json!({}), Some(root)).await;
    let token = planted_token();
    std::fs::create_dir(root.join("out")).unwrap();
    let pdf = b"%PDF-1.7\n\xe2\xe3\xcf\xd3 quarterly figures".to_vec();
    std::fs::write(root.join("out/report.pdf"), &pdf).unwrap();
    std::fs::write(root.join(".env"), format!("GITHUB_TOKEN={token}\n")).unwrap();
    std::fs::write(
        root.join("notes.txt"),
        format!("deploy notes\nexport GITHUB_TOKEN={token}\nthe end\n"),
    )
    .unwrap();
    let mut dump = vec![0u8, 1, 2, 0xff, 0xfe];
    dump.extend_from_slice(token.as_bytes());
    dump.extend_from_slice(&[0, 0, 9]);
    std::fs::write(root.join("core.dump"), &dump).unwrap();
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01".to_vec();
    std::fs::write(root.join("chart.png"), &png).unwrap();
    // Sparse: the host refuses by the size on disk, before reading a byte.
    std::fs::File::create(root.join("video.bin"))
        .unwrap()
        .set_len(60 * 1024 * 1024)
        .unwrap();

    t.pair(1).await;
    t.server
        .queue_update(private_text(USER, 3, "send me the quarterly report"));
    t.agent.wait_for_prompts(1).await;
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    let send = |path: &str, caption: Option<&str>| FileRequest {
        path: path.into(),
        caption: caption.map(str::to_owned),
    };

    let sent = t
        .session
        .send_file(send("out/report.pdf", Some("Q3 figures")))
        .await
        .expect("session alive");
    let told = sent.expect("the report is sent");
    assert!(told.starts_with("Sent report.pdf ("), "{told}");
    let uploads = t.server.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:#?}");
    let report = &uploads[0];
    assert_eq!(report.method, "senddocument");
    assert_eq!(report.chat_id, USER.to_string());
    assert_eq!(report.field, "document");
    assert_eq!(report.file_name.as_deref(), Some("report.pdf"));
    assert_eq!(report.content_type.as_deref(), Some("application/pdf"));
    assert_eq!(report.caption.as_deref(), Some("Q3 figures"));
    assert_eq!(report.data, pdf);

    // A picture goes as a photo.
    let told = t
        .session
        .send_file(send("chart.png", None))
        .await
        .expect("session alive")
        .expect("the chart is sent");
    assert!(told.contains("chart.png"), "{told}");
    let chart = t.server.uploads().last().cloned().expect("an upload");
    assert_eq!(
        (chart.method.as_str(), chart.field.as_str()),
        ("sendphoto", "photo")
    );
    assert_eq!(chart.content_type.as_deref(), Some("image/png"));
    assert_eq!(chart.caption, None);
    assert_eq!(chart.data, png);

    // A protected file from a remote turn: refused, nothing uploaded.
    let refused = t
        .session
        .send_file(send(".env", None))
        .await
        .expect("session alive")
        .expect_err("a protected file is refused");
    assert!(
        refused.contains("'.env'") && refused.contains("protected"),
        "{refused}"
    );
    assert!(!refused.contains(&token));
    assert_eq!(t.server.uploads().len(), 2);

    // A text file with a planted secret arrives redacted, the rest of it intact.
    let told = t
        .session
        .send_file(send("notes.txt", None))
        .await
        .expect("session alive")
        .expect("the notes are sent");
    assert!(told.contains("redacted"), "{told}");
    let notes = t.server.uploads().last().cloned().expect("an upload");
    let text = String::from_utf8(notes.data).expect("text");
    assert!(!text.contains(&token), "{text}");
    assert!(
        text.starts_with("deploy notes\n") && text.ends_with("the end\n"),
        "{text}"
    );

    // A binary holding a secret's shape: refused, said in the chat, nothing uploaded.
    let before = t.server.sent().len();
    let refused = t
        .session
        .send_file(send("core.dump", None))
        .await
        .expect("session alive")
        .expect_err("a binary with a secret is refused");
    assert!(refused.contains("core.dump was not sent"), "{refused}");
    assert_eq!(t.server.uploads().len(), 3);
    assert!(
        t.server.sent()[before..]
            .iter()
            .any(|m| m.text.contains("could not send a file") && m.text.contains("core.dump")),
        "{:#?}",
        t.server.sent()
    );

    // Over Telegram's 50 MB: refused with the limit named, in the chat too.
    let refused = t
        .session
        .send_file(send("video.bin", None))
        .await
        .expect("session alive")
        .expect_err("over the limit");
    assert!(
        refused.contains("video.bin is 60.0 MB, and Telegram takes files of up to 50.0 MB"),
        "{refused}"
    );
    assert_eq!(t.server.uploads().len(), 3);
    assert!(
        t.server
            .sent()
            .iter()
            .any(|m| m.text.contains("Telegram takes files of up to 50.0 MB")),
        "{:#?}",
        t.server.sent()
    );
    t.session.shutdown().await.expect("clean shutdown");
}
