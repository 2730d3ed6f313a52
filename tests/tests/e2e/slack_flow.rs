//! End to end with Slack: the real component and host, the real Slack transport, and the
//! loopback Slack (a Socket Mode WebSocket and a Web API on 127.0.0.1). Pair in an IM,
//! prompt, watch the card updated, get a long reply as several mrkdwn messages under
//! 4,000 characters, and talk in a channel thread that is answered in its thread. Also
//! `explain slack` on the payloads a person would paste.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use host_shim::factory::{self, Environment};
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::pairing_budget::PairingBudget;
use host_shim::sandbox::session::{Session, SessionSpec};
use host_shim::wit::session::{AgentEvent, ToolResult, TurnOrigin};
use serde_json::{Value, json};
use transport_core::platform::{BotSelf, Normalized};
use transport_testing::slack::{
    SlackServer, TEST_BOT_USER_ID, block_actions, channel_message, event_callback, im_message,
    in_thread,
};

use crate::common::{self, Dirs, ScriptAgent, WAIT};

const USER: &str = "U0ADA";
const IM: &str = "D0ADA";
const CHANNEL: &str = "C0TEAM";
/// A member of the channel who never paired.
const STRANGER: &str = "U0STRANGER";

struct Slack {
    server: Arc<SlackServer>,
    session: Session,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
    _dirs: Dirs,
}

fn spec(
    server: &SlackServer,
    dirs: &Dirs,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
    bridge: Value,
) -> SessionSpec {
    let (bot, app) = (server.bot_token(), server.app_token());
    let config = json!({"bridge": bridge, "transports": {"slack": {
        "enabled": true,
        "tokenEnv": "SLACK_E2E_BOT",
        "appTokenEnv": "SLACK_E2E_APP",
        "baseUrl": server.base_url(),
    }}});
    SessionSpec {
        key: "slack-e2e".into(),
        config_sources: vec![common::user_config(&config.to_string())],
        platforms: factory::declarations(),
        transports: Box::new(move |requests| {
            // Both tokens come from the "environment" only, as in production.
            let var = move |name: &str| match name {
                "SLACK_E2E_BOT" => Some(bot.clone()),
                "SLACK_E2E_APP" => Some(app.clone()),
                _ => None,
            };
            factory::build(
                requests,
                None,
                &Environment {
                    var: &var,
                    state_dir: None,
                },
            )
        }),
        agent,
        ui,
        state: Dirs::open_state(&dirs.dir),
        locks: dirs.locks(),
        pairing: PairingBudget::default(),
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        log: Arc::new(MemoryLog::default()),
        exclusive: true,
        transcript: None,
    }
}

impl Slack {
    async fn start() -> Slack {
        Slack::start_with(json!({})).await
    }

    /// A session whose configuration has `bridge` as its `bridge` section.
    async fn start_with(bridge: Value) -> Slack {
        Slack::start_in(bridge, None).await
    }

    /// [`Slack::start_with`] for an agent working in `cwd` from the start (the bridge
    /// reads the working directory once, when the session starts).
    async fn start_in(bridge: Value, cwd: Option<&std::path::Path>) -> Slack {
        let server = Arc::new(SlackServer::start().await);
        let dirs = Dirs::new();
        let agent = Arc::new(ScriptAgent::default());
        *agent.cwd.lock().unwrap() = cwd.map(|dir| dir.to_string_lossy().into_owned());
        let ui = Arc::new(RecordingUi::default());
        let session = Session::spawn(
            common::runtime(),
            spec(&server, &dirs, agent.clone(), ui.clone(), bridge),
        )
        .await
        .expect("session starts");
        assert!(
            server
                .wait_until(WAIT, |s| s.latest_connection().is_some())
                .await,
            "the transport connected; local: {:#?}",
            ui.notes()
        );
        Slack {
            server,
            session,
            agent,
            ui,
            _dirs: dirs,
        }
    }

    fn send(&self, event: Value) {
        let connection = self.server.latest_connection().expect("connected");
        self.server.send_event(connection, event).expect("sent");
    }

    /// Sends `event` and waits until the bot has posted something containing `expect`.
    async fn say(&self, event: Value, expect: &str) {
        let before = self.server.posted().len();
        self.send(event);
        let found = self
            .server
            .wait_until(WAIT, |s| {
                s.posted()[before..].iter().any(|m| m.text.contains(expect))
            })
            .await;
        assert!(
            found,
            "no message containing {expect:?}; posted: {:#?}\nlocal: {:#?}",
            self.server.posted(),
            self.ui.notes()
        );
    }

    fn im(&self, text: &str) -> Value {
        im_message(IM, USER, &self.server.new_ts(), text)
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

    async fn pair(&self) {
        self.say(self.im("hello"), "not paired").await;
        let code = self.code_shown_locally();
        assert!(
            self.server.posted().iter().all(|m| !m.text.contains(&code)),
            "the code never goes to the chat (I1)"
        );
        self.say(self.im(&code), &format!("Paired as slack:{USER}"))
            .await;
    }

    /// Sends `event` and then `whoami` (a command in the same conversation, so the reply
    /// target stays put): the bridge handles envelopes in order, so once the second is
    /// answered the first has been handled.
    async fn and_then(&self, event: Value, whoami: Value) {
        self.send(event);
        self.say(whoami, &format!("slack:{USER}")).await;
    }
}

/// A reply of several sections, each with a code block: far over Slack's 4,000 characters.
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
async fn pair_in_an_im_prompt_see_the_card_updated_and_a_long_reply_in_mrkdwn() {
    let t = Slack::start().await;
    t.pair().await;

    t.and_then(t.im("please fix the parser"), t.im("/whoami"))
        .await;
    assert_eq!(
        t.agent.prompts.lock().unwrap().as_slice(),
        ["please fix the parser"]
    );

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
    t.session.tick().await.expect("session alive");
    t.agent
        .emit(AgentEvent::AssistantMessage(long_reply()))
        .await;
    t.agent.busy.store(false, Ordering::SeqCst);
    t.agent.emit(AgentEvent::TurnSettled).await;

    let done = t
        .server
        .wait_until(WAIT, |s| {
            s.posted()
                .iter()
                .filter(|m| m.text.contains("Step"))
                .count()
                >= 2
        })
        .await;
    assert!(
        done,
        "the reply arrived in several messages: {:#?}",
        t.server.posted()
    );

    // The card was updated in place (chat.update), not posted anew for each step.
    let updates = t.server.updated();
    assert!(!updates.is_empty(), "the progress card was updated");
    let cards: Vec<_> = updates.iter().map(|u| u.ts.clone()).collect();
    assert!(
        cards.windows(2).all(|w| w[0] == w[1]),
        "one card per turn: {cards:?}"
    );

    let reply: Vec<_> = t
        .server
        .posted()
        .into_iter()
        .filter(|m| m.text.contains("Step"))
        .collect();
    let reply_text: String = reply.iter().map(|m| m.text.as_str()).collect();
    for message in t.server.posted() {
        assert_eq!(message.channel, IM);
        assert_eq!(
            message.thread_ts, None,
            "an IM is answered at the top level"
        );
        assert_eq!(message.mrkdwn, Some(true));
        let chars = message.text.chars().count();
        assert!(chars > 0 && chars <= 4_000, "over Slack's limit: {chars}");
    }
    // mrkdwn, not markdown: bold is one star, `<`, `>` and `&` are escaped, code is fenced.
    assert!(reply_text.contains("*the parser*"), "{reply_text}");
    assert!(!reply_text.contains("**the parser**"), "{reply_text}");
    assert!(
        reply_text.contains("&lt;blocks&gt; &amp; lists"),
        "{reply_text}"
    );
    assert!(
        reply
            .iter()
            .all(|m| m.text.contains("```") || !m.text.contains("fn step")),
        "code stays in fenced blocks"
    );
    t.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_conversation_in_a_channel_is_answered_in_its_thread_and_redacted() {
    let t = Slack::start().await;
    t.pair().await;
    let mention = format!("<@{TEST_BOT_USER_ID}>");

    // A top-level mention in a channel is answered in a thread under it.
    let root = t.server.new_ts();
    t.say(
        channel_message(CHANNEL, USER, &root, &format!("{mention} /status")),
        "pi-bot-connect status",
    )
    .await;
    let status = t.server.posted().last().cloned().expect("posted");
    assert_eq!(status.channel, CHANNEL);
    assert_eq!(status.thread_ts.as_deref(), Some(root.as_str()));

    // A prompt in that thread reaches the agent, and the answer goes into the thread.
    let reply_ts = t.server.new_ts();
    let whoami_ts = t.server.new_ts();
    t.and_then(
        in_thread(
            channel_message(
                CHANNEL,
                USER,
                &reply_ts,
                &format!("{mention} add the tests"),
            ),
            &root,
        ),
        in_thread(
            channel_message(CHANNEL, USER, &whoami_ts, &format!("{mention} /whoami")),
            &root,
        ),
    )
    .await;
    assert_eq!(
        t.agent.prompts.lock().unwrap().as_slice(),
        ["add the tests"]
    );
    let token = "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx";
    let app_token = "xapp-1-A0123456789-1234567890123-abcdef0123456789";
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    t.agent
        .emit(AgentEvent::AssistantMessage(format!(
            "Added the tests. The CI token was {token} and the app token {app_token}."
        )))
        .await;
    t.agent.emit(AgentEvent::TurnSettled).await;
    // The bridge broadcasts a turn's answer to every remembered conversation (the IM
    // too); in the channel it goes into the thread, never to the channel's top level.
    let in_thread_answer = |s: &SlackServer| {
        s.posted().iter().any(|m| {
            m.text.contains("Added the tests")
                && m.channel == CHANNEL
                && m.thread_ts.as_deref() == Some(root.as_str())
        })
    };
    assert!(
        t.server.wait_until(WAIT, in_thread_answer).await,
        "posted: {:#?}",
        t.server.posted()
    );
    assert!(
        t.server
            .posted()
            .iter()
            .filter(|m| m.channel == CHANNEL)
            .all(|m| m.thread_ts.as_deref() == Some(root.as_str())),
        "posted: {:#?}",
        t.server.posted()
    );
    // Redaction knows Slack's token shapes: the reply never carries the token (I3).
    for message in t.server.posted() {
        assert!(
            !message.text.contains(token) && !message.text.contains(app_token),
            "{}",
            message.text
        );
    }
    t.session.shutdown().await.expect("clean shutdown");
}

fn explain(payload: Value) -> Normalized {
    let bot = BotSelf {
        id: TEST_BOT_USER_ID.into(),
        username: "pi".into(),
    };
    host_shim::commands::preview::normalize("slack", &payload.to_string(), &bot)
        .expect("slack is offered")
}

#[test]
fn explain_slack_on_an_im_an_app_mention_a_thread_reply_a_bot_message_and_an_edit() {
    let Normalized::Message(im) = explain(event_callback(
        im_message(IM, USER, "1700000000.000100", "/status"),
        "Ev1",
    )) else {
        panic!("an IM is for the bridge");
    };
    assert!(im.is_direct && im.addressed);
    assert_eq!(
        host_shim::commands::preview::describe(&im),
        "transport: slack\ntext after normalizing: 7 character(s) (starts like a command: /status)"
    );

    let mention = json!({"type": "app_mention", "user": USER, "channel": CHANNEL, "ts": "1.000002",
        "text": format!("<@{TEST_BOT_USER_ID}> /status")});
    let Normalized::Message(mention) = explain(mention) else {
        panic!("a mention is for the bridge");
    };
    assert_eq!(
        (mention.text.as_str(), mention.addressed),
        ("/status", true)
    );

    let reply = in_thread(
        channel_message(CHANNEL, USER, "2.000001", "more"),
        "1.000002",
    );
    let Normalized::Message(reply) = explain(reply) else {
        panic!("a thread reply is for the bridge");
    };
    assert_eq!(reply.thread_id.as_deref(), Some("1.000002"));

    let mut bot = channel_message(CHANNEL, "U0OTHERBOT", "3.000001", "done");
    bot["bot_id"] = json!("B0OTHER");
    let edit = json!({"type": "message", "subtype": "message_changed", "hidden": true, "channel": CHANNEL, "ts": "4.000001",
        "message": {"type": "message", "user": USER, "text": "edited", "ts": "1.000002"}});
    for (payload, why) in [(bot, "app or bot"), (edit, "message_changed")] {
        match explain(payload) {
            Normalized::Ignored(reason) => assert!(reason.contains(why), "{reason}"),
            Normalized::Message(m) => panic!("{m:?} should be ignored"),
        }
    }
}

/// A tap to decide, through the real host and component on the loopback Socket Mode and Web
/// API: the approval request of a turn started in a channel thread carries Block Kit
/// buttons; a stranger's click decides nothing and is answered with `chat.postEphemeral` to
/// them alone (nothing posted in the thread); the paired owner's click approves, and the
/// request is updated to the outcome with its blocks removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_click_is_refused_privately_and_the_owners_click_approves_in_place() {
    let t = Slack::start_with(json!({
        "remoteToolPolicy": "unrestricted",
        "remoteToolApproval": "each",
        "remoteApproval": {"enabled": true, "timeoutMs": 60000},
    }))
    .await;
    t.pair().await;
    let root = t.server.new_ts();
    t.send(channel_message(
        CHANNEL,
        USER,
        &root,
        &format!("<@{TEST_BOT_USER_ID}> run the tests"),
    ));
    // Waited for on the agent: the server's wait re-reads its condition only when the
    // server's own state changes, so a prompt reaching the agent was seen at the deadline.
    t.agent.wait_for_prompts(1).await;
    t.agent.busy.store(true, Ordering::SeqCst);
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    let waiting = {
        let agent = t.agent.clone();
        tokio::spawn(async move { agent.tool_call("bash").await })
    };
    assert!(
        t.server
            .wait_until(WAIT, |s| s
                .posted()
                .iter()
                .any(|m| m.text.starts_with("Approval needed (")))
            .await,
        "the request: {:#?}",
        t.server.posted()
    );
    let request = t
        .server
        .posted()
        .into_iter()
        .find(|m| m.text.starts_with("Approval needed ("))
        .expect("the request");
    assert_eq!(
        (request.channel.as_str(), request.thread_ts.as_deref()),
        (CHANNEL, Some(root.as_str())),
        "asked in the turn's thread"
    );
    let approve = request
        .blocks
        .iter()
        .flat_map(|blocks| blocks.as_array().into_iter().flatten())
        .flat_map(|block| block["elements"].as_array().into_iter().flatten())
        .find(|button| button["text"]["text"] == "Approve once")
        .and_then(|button| button["value"].as_str())
        .unwrap_or_else(|| panic!("no Approve once button: {:?}", request.blocks))
        .to_owned();
    let codes = |t: &Slack| {
        t.ui.notes()
            .iter()
            .filter(|(_, note)| note.contains("Messenger pairing code:"))
            .count()
    };
    let codes_before = codes(&t);
    let posted_before = t.server.posted().len();
    let connection = t.server.latest_connection().expect("connected");

    t.server
        .send_envelope(
            connection,
            "interactive",
            block_actions(
                CHANNEL,
                STRANGER,
                &request.ts,
                Some(&root),
                &approve,
                "1700000100.000001",
            ),
            0,
        )
        .expect("sent");
    assert!(
        t.server
            .wait_until(WAIT, |s| !s.ephemeral().is_empty())
            .await,
        "the stranger was answered: posted {:#?}",
        t.server.posted()
    );
    let refusal = &t.server.ephemeral()[0];
    assert_eq!(
        (
            refusal.channel.as_str(),
            refusal.user.as_str(),
            refusal.thread_ts.as_deref()
        ),
        (CHANNEL, STRANGER, Some(root.as_str())),
        "to the stranger alone, in the request's thread"
    );
    assert!(
        refusal.text.starts_with("Your press decided nothing"),
        "{refusal:?}"
    );
    assert_eq!(
        t.server.posted().len(),
        posted_before,
        "nothing said in the thread: {:#?}",
        t.server.posted()
    );
    assert!(!waiting.is_finished(), "the stranger decided nothing");
    assert_eq!(
        codes(&t),
        codes_before,
        "no pairing code was made for a click"
    );
    assert!(
        t.server.updated().iter().all(|u| u.ts != request.ts),
        "the request stays live"
    );

    t.server
        .send_envelope(
            connection,
            "interactive",
            block_actions(
                CHANNEL,
                USER,
                &request.ts,
                Some(&root),
                &approve,
                "1700000100.000002",
            ),
            0,
        )
        .expect("sent");
    let verdict = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("a verdict in time")
        .expect("the task ran");
    assert_eq!(verdict, host_shim::wit::session::ToolDecision::Allow);
    assert!(
        t.server
            .wait_until(WAIT, |s| s.updated().iter().any(|u| u.ts == request.ts
                && u.text.contains(&format!("Approved once by slack:{USER}"))))
            .await,
        "updated to the outcome: {:#?}",
        t.server.updated()
    );
    let outcome = t
        .server
        .updated()
        .into_iter()
        .rfind(|u| u.ts == request.ts)
        .expect("the outcome");
    assert_eq!(outcome.blocks, Some(json!([])), "its buttons removed");
    assert_eq!(
        t.server.ephemeral().len(),
        1,
        "the owner's click is answered in the open"
    );
    t.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn a_file_shared_in_an_im_is_downloaded_with_the_bearer_and_saved_in_the_inbox() {
    let t = Slack::start().await;
    let workspace = tempfile::tempdir().expect("temp dir");
    *t.agent.cwd.lock().unwrap() = Some(workspace.path().to_string_lossy().into_owned());
    t.pair().await;
    let pdf = b"%PDF-1.4 slack".to_vec();
    let url = t.server.serve_file(
        "spec.pdf",
        transport_testing::slack::ServedFile::new(Some("application/pdf"), pdf.clone()),
    );
    let mut event = t.im("review this");
    event["subtype"] = json!("file_share");
    event["files"] = json!([{
        "id": "F0SPEC", "name": "spec v2 (final).pdf", "mimetype": "application/pdf",
        "size": pdf.len(), "url_private_download": url
    }]);
    t.send(event);
    t.agent.wait_for_prompts(1).await;
    let prompt = t.agent.prompts.lock().unwrap()[0].clone();
    assert!(
        prompt.starts_with("review this\n\n[bot-connect: the sender attached a file")
            && prompt.contains(".pi/inbox/spec_v2_(final).pdf (application/pdf, 14 bytes)"),
        "{prompt}"
    );
    assert_eq!(
        std::fs::read(workspace.path().join(".pi/inbox/spec_v2_(final).pdf")).expect("saved"),
        pdf
    );
    t.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_file_is_shared_in_the_thread_through_the_external_upload() {
    use host_shim::sandbox::session::FileRequest;
    let workspace = tempfile::tempdir().expect("temp dir");
    let root_dir = workspace.path();
    let t = Slack::start_in(json!({}), Some(root_dir)).await;
    let token = format!("ghp_{}", "Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0EdCbA9z");
    let log = format!("build ok\nGITHUB_TOKEN={token}\ndone\n");
    std::fs::write(root_dir.join("build.log"), &log).unwrap();
    std::fs::write(root_dir.join(".envrc"), format!("export T={token}\n")).unwrap();
    std::fs::File::create(root_dir.join("huge.iso"))
        .unwrap()
        .set_len(25 * 1024 * 1024)
        .unwrap();
    t.pair().await;
    let mention = format!("<@{TEST_BOT_USER_ID}>");
    let root = t.server.new_ts();
    t.say(
        channel_message(CHANNEL, USER, &root, &format!("{mention} /status")),
        "pi-bot-connect status",
    )
    .await;
    let ask = t.server.new_ts();
    t.send(in_thread(
        channel_message(
            CHANNEL,
            USER,
            &ask,
            &format!("{mention} send me the build log"),
        ),
        &root,
    ));
    t.agent.wait_for_prompts(1).await;
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    let send = |path: &str, caption: Option<&str>| FileRequest {
        path: path.into(),
        caption: caption.map(str::to_owned),
    };
    let told = t
        .session
        .send_file(send("build.log", Some("the last build")))
        .await
        .expect("session alive")
        .expect("the log is shared");
    assert!(
        told.starts_with("Sent build.log (") && told.contains("redacted"),
        "{told}"
    );
    let shared = t.server.shared_files();
    assert_eq!(shared.len(), 1, "{shared:#?}");
    let file = &shared[0];
    assert_eq!(file.filename, "build.log");
    assert_eq!(file.part_file_name.as_deref(), Some("build.log"));
    assert_eq!(file.title.as_deref(), Some("build.log"));
    assert_eq!(file.channel_id, CHANNEL);
    assert_eq!(file.thread_ts.as_deref(), Some(root.as_str()));
    assert_eq!(file.initial_comment.as_deref(), Some("the last build"));
    let text = String::from_utf8(file.data.clone()).unwrap();
    assert!(
        text.starts_with("build ok\n") && text.ends_with("done\n") && !text.contains(&token),
        "{text}"
    );
    // The length promised before the upload is the length of what was uploaded.
    let asked = t.server.requests("files.getUploadURLExternal");
    assert_eq!(asked[0]["length"], json!(file.data.len().to_string()));

    let refused = t
        .session
        .send_file(send(".envrc", None))
        .await
        .expect("session alive")
        .expect_err("protected");
    assert!(refused.contains("protected"), "{refused}");
    let refused = t
        .session
        .send_file(send("huge.iso", None))
        .await
        .expect("session alive")
        .expect_err("over the bridge's cap");
    assert!(
        refused.contains("huge.iso is 25.0 MB, and the bridge sends files of up to 20.0 MB"),
        "{refused}"
    );
    assert_eq!(t.server.calls("files.getUploadURLExternal"), 1);
    assert_eq!(t.server.shared_files().len(), 1);
    t.session.shutdown().await.expect("clean shutdown");
}
