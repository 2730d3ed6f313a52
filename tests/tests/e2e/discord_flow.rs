//! End to end with Discord: the real component and host, the real Discord transport, and
//! the loopback gateway (WebSocket) and REST server on 127.0.0.1. Pair in a DM, prompt,
//! watch the card edited, get a long reply as several messages under 2,000 UTF-16 units
//! with every code fence closed in the piece that opened it, and ask for the status
//! with a mention in a server channel.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use host_shim::factory::{self, Environment};
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::pairing_budget::PairingBudget;
use host_shim::sandbox::session::{Session, SessionSpec};
use host_shim::wit::session::{AgentEvent, ToolResult, TurnOrigin};
use serde_json::{Value, json};
use transport_testing::discord::{
    DiscordLoopback, TEST_BOT_ID, bot_user, component_click, dm_message, guild_message,
};

use crate::common::{self, Dirs, ScriptAgent, WAIT};

const USER: &str = "555000000000000001";
const DM: &str = "900000000000000001";
const CHANNEL: &str = "700000000000000001";
const SERVER: &str = "800000000000000001";
/// A member of the server who never paired.
const STRANGER: &str = "555000000000000099";

struct Discord {
    loopback: Arc<DiscordLoopback>,
    session: Session,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
    _dirs: Dirs,
    next_id: AtomicU64,
}

fn spec(
    loopback: &DiscordLoopback,
    dirs: &Dirs,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
    bridge: Value,
) -> SessionSpec {
    let token = loopback.token();
    let state_dir = dirs.dir.path().to_path_buf();
    // The gateway URL comes from the loopback REST server's GET /gateway/bot.
    let mut discord = json!({
        "enabled": true,
        "tokenEnv": "DISCORD_TEST_TOKEN",
        "baseUrl": loopback.base_url(),
        "readyTimeoutSeconds": 10,
    });
    // Keys a test adds to `transports.discord` ride in the bridge section's `_discord`.
    let mut bridge = bridge;
    if let Some(Value::Object(extra)) = bridge.as_object_mut().and_then(|b| b.remove("_discord")) {
        for (key, value) in extra {
            discord[key] = value;
        }
    }
    let config = json!({"bridge": bridge, "transports": {"discord": discord}});
    SessionSpec {
        key: "discord-e2e".into(),
        config_sources: vec![common::user_config(&config.to_string())],
        platforms: factory::declarations(),
        transports: Box::new(move |requests| {
            // The token comes from the "environment" only, as in production.
            let var = move |name: &str| (name == "DISCORD_TEST_TOKEN").then(|| token.clone());
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
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        log: Arc::new(MemoryLog::default()),
        exclusive: true,
        transcript: None,
    }
}

impl Discord {
    async fn start() -> Discord {
        Discord::start_with(json!({})).await
    }

    /// A session whose configuration has `bridge` as its `bridge` section.
    async fn start_with(bridge: Value) -> Discord {
        Discord::start_in(bridge, None).await
    }

    /// [`Discord::start_with`] for an agent working in `cwd` from the start (the bridge
    /// reads the working directory once, when the session starts).
    async fn start_in(bridge: Value, cwd: Option<&std::path::Path>) -> Discord {
        let loopback = Arc::new(DiscordLoopback::start().await);
        let dirs = Dirs::new();
        let agent = Arc::new(ScriptAgent::default());
        *agent.cwd.lock().unwrap() = cwd.map(|dir| dir.to_string_lossy().into_owned());
        let ui = Arc::new(RecordingUi::default());
        let session = Session::spawn(
            common::runtime(),
            spec(&loopback, &dirs, agent.clone(), ui.clone(), bridge),
        )
        .await
        .expect("session starts");
        let ready = loopback
            .gateway
            .wait_until(WAIT, |gateway| gateway.is_ready())
            .await;
        assert!(
            ready,
            "the transport connected to the gateway: {:#?}",
            ui.notes()
        );
        Discord {
            loopback,
            session,
            agent,
            ui,
            _dirs: dirs,
            next_id: AtomicU64::new(1_300_000_000_000_000_000),
        }
    }

    fn id(&self) -> String {
        self.next_id.fetch_add(1, Ordering::SeqCst).to_string()
    }

    fn dm(&self, text: &str) -> Value {
        dm_message(&self.id(), DM, USER, text)
    }

    /// A channel message that mentions the bot as `<@id>` at the start.
    fn mention(&self, text: &str) -> Value {
        guild_message(
            &self.id(),
            CHANNEL,
            SERVER,
            USER,
            &format!("<@{TEST_BOT_ID}> {text}"),
            json!([bot_user()]),
        )
    }

    /// Dispatches a MESSAGE_CREATE and waits until the bot has posted something
    /// containing `expect`.
    async fn say(&self, message: Value, expect: &str) {
        let before = self.loopback.rest.created().len();
        assert!(
            self.loopback.gateway.message_create(message).is_some(),
            "a gateway session exists"
        );
        let found = self
            .loopback
            .rest
            .wait_until(WAIT, |rest| {
                rest.created()[before..]
                    .iter()
                    .any(|m| m.content.contains(expect))
            })
            .await;
        assert!(
            found,
            "no message containing {expect:?}; created: {:#?}\nlocal: {:#?}",
            self.loopback.rest.created(),
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

    async fn pair(&self) {
        self.say(self.dm("hello"), "not paired").await;
        let code = self.code_shown_locally();
        assert!(
            self.loopback
                .rest
                .created()
                .iter()
                .all(|m| !m.content.contains(&code)),
            "the code never goes to the chat (I1)"
        );
        self.say(self.dm(&code), &format!("Paired as discord:{USER}"))
            .await;
    }
}

/// A reply of several sections with code blocks, and one code block that alone is longer
/// than Discord's 2,000: the whole far over one message.
fn long_reply() -> String {
    let mut text = String::new();
    for i in 0..8 {
        text.push_str(&format!(
            "## Step {i}\n\nI changed **the parser** so nested lists close — ünïcödé and 🦀 count twice in UTF-16.\n\n```rust\n{}```\n\n",
            format!("fn step_{i}() {{ println!(\"🦀 {i}\"); }}\n").repeat(10)
        ));
    }
    text.push_str("## The big one\n\n```text\n");
    for line in 0..120 {
        text.push_str(&format!("log line {line:03}: 🦀 all good\n"));
    }
    text.push_str("```\n\nDone.\n");
    text
}

/// Lines that open or close a fence.
fn fence_lines(text: &str) -> usize {
    text.lines()
        .filter(|line| line.trim_start().starts_with("```"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_prompt_card_and_a_long_reply_in_messages_under_2000_units() {
    let d = Discord::start().await;
    d.pair().await;

    assert!(
        d.loopback
            .gateway
            .message_create(d.dm("please fix the parser"))
            .is_some()
    );
    // Waited for on the agent: the server's wait re-reads its condition only when the
    // server's own state changes, so a prompt reaching the agent was seen at the deadline.
    d.agent.wait_for_prompts(1).await;
    assert_eq!(d.agent.prompts.lock().unwrap()[0], "please fix the parser");

    d.agent.busy.store(true, Ordering::SeqCst);
    d.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    d.agent.emit(AgentEvent::ToolStarted("bash".into())).await;
    d.agent
        .emit(AgentEvent::ToolFinished(ToolResult {
            name: "bash".into(),
            ok: true,
        }))
        .await;
    // The typing indicator shows while the turn runs.
    let typing = d
        .loopback
        .rest
        .wait_until(WAIT, |rest| {
            rest.typing().iter().any(|channel| channel == DM)
        })
        .await;
    assert!(typing, "typing was triggered in the DM");
    // `/status` while the agent works is answered at once (I8).
    d.say(d.dm("/status"), "agent: busy").await;
    d.session.tick().await.expect("session alive");
    let reply = long_reply();
    d.agent
        .emit(AgentEvent::AssistantMessage(reply.clone()))
        .await;
    d.agent.busy.store(false, Ordering::SeqCst);
    d.agent.emit(AgentEvent::TurnSettled).await;

    let done = d
        .loopback
        .rest
        .wait_until(WAIT, |rest| {
            rest.created().iter().any(|m| m.content.contains("Done."))
        })
        .await;
    assert!(
        done,
        "the whole reply arrived: {:#?}",
        d.loopback.rest.created()
    );

    // The progress card was edited in place.
    let edits = d.loopback.rest.edited();
    assert!(!edits.is_empty(), "the progress card was edited");
    assert!(edits.iter().all(|edit| edit.channel_id == DM));

    let created = d.loopback.rest.created();
    for message in &created {
        let units = message.content.encode_utf16().count();
        assert!(
            units > 0 && units <= 2000,
            "over Discord's limit: {units} UTF-16 units"
        );
        // Nothing the agent writes may ping anyone.
        assert_eq!(
            message.body["allowed_mentions"],
            json!({"parse": [], "replied_user": false})
        );
    }
    let pieces: Vec<&str> = created
        .iter()
        .map(|m| m.content.as_str())
        .skip_while(|content| !content.contains("Step 0"))
        .collect();
    assert!(
        pieces.len() >= 3,
        "split into several messages: {pieces:#?}"
    );
    for piece in &pieces {
        // Every fence a piece opens, it closes (I27, I28): an even count of fence lines.
        assert_eq!(fence_lines(piece) % 2, 0, "an unclosed fence in:\n{piece}");
    }
    // The oversized block is re-opened in each piece it spans.
    let big: Vec<&&str> = pieces.iter().filter(|p| p.contains("log line")).collect();
    assert!(big.len() >= 2, "the big block spans pieces: {big:#?}");
    assert!(
        big.iter().all(|piece| piece.contains("```text")),
        "{big:#?}"
    );
    // No log line is lost or repeated.
    let lines: Vec<&str> = pieces
        .iter()
        .flat_map(|piece| piece.lines())
        .filter(|line| line.starts_with("log line"))
        .collect();
    assert_eq!(lines.len(), 120);
    d.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_with_a_slash_command_in_a_channel_is_a_command() {
    let d = Discord::start().await;
    d.pair().await;
    d.say(d.mention("/status"), "pi-bot-connect status").await;
    let answer = d
        .loopback
        .rest
        .created()
        .into_iter()
        .rev()
        .find(|m| m.content.contains("pi-bot-connect status"))
        .expect("answered");
    assert_eq!(answer.channel_id, CHANNEL, "answered where it was asked");
    assert!(
        d.agent.prompts.lock().unwrap().is_empty(),
        "not a prompt: {:?}",
        d.agent.prompts.lock().unwrap()
    );
    d.session.shutdown().await.expect("clean shutdown");
}

/// `@bot status` (no slash) in a channel is a command
/// (docs/decisions.md#decision-1-bot-status-is-a-command). The transport emits text `status` with
/// `addressed: true` (see transport_discord::normalize); turning a bare command word of an
/// addressed channel message into a command is the router's part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_with_a_bare_command_word_in_a_channel_is_a_command() {
    let d = Discord::start().await;
    d.pair().await;
    d.say(d.mention("status"), "pi-bot-connect status").await;
    assert!(
        d.agent.prompts.lock().unwrap().is_empty(),
        "not a prompt: {:?}",
        d.agent.prompts.lock().unwrap()
    );
    d.session.shutdown().await.expect("clean shutdown");
}

/// A tap to decide, through the real host and component on the loopback gateway and REST
/// server: the approval request of a turn started in a server channel carries an action row;
/// a stranger's click decides nothing and is answered with an ephemeral follow-up only they
/// see (nothing is posted in the channel); the paired owner's click approves, and the
/// request is edited to the outcome with its buttons removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_click_is_refused_privately_and_the_owners_click_approves_in_place() {
    let d = Discord::start_with(json!({
        "remoteToolPolicy": "unrestricted",
        "remoteToolApproval": "each",
        "remoteApproval": {"enabled": true, "timeoutMs": 60000},
    }))
    .await;
    d.pair().await;
    assert!(
        d.loopback
            .gateway
            .message_create(d.mention("run the tests"))
            .is_some()
    );
    // Waited for on the agent: the server's wait re-reads its condition only when the
    // server's own state changes, so a prompt reaching the agent was seen at the deadline.
    d.agent.wait_for_prompts(1).await;
    d.agent.busy.store(true, Ordering::SeqCst);
    d.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    let waiting = {
        let agent = d.agent.clone();
        tokio::spawn(async move { agent.tool_call("bash").await })
    };
    let asked = d
        .loopback
        .rest
        .wait_until(WAIT, |rest| {
            rest.created()
                .iter()
                .any(|m| m.channel_id == CHANNEL && m.content.starts_with("Approval needed ("))
        })
        .await;
    assert!(asked, "the request: {:#?}", d.loopback.rest.created());
    let request = d
        .loopback
        .rest
        .created()
        .into_iter()
        .find(|m| m.content.starts_with("Approval needed ("))
        .expect("the request");
    let command = |label: &str| -> String {
        request.body["components"][0]["components"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|button| button["label"] == label)
            .and_then(|button| button["custom_id"].as_str())
            .unwrap_or_else(|| panic!("no {label} button: {}", request.body))
            .to_owned()
    };
    let approve = command("Approve once");
    let codes = |d: &Discord| {
        d.ui.notes()
            .iter()
            .filter(|(_, note)| note.contains("Messenger pairing code:"))
            .count()
    };
    let codes_before = codes(&d);
    let created_before = d.loopback.rest.created().len();

    d.loopback.click(component_click(
        "1400000000000000001",
        "stranger-interaction-token",
        CHANNEL,
        Some(SERVER),
        STRANGER,
        &request.id,
        &approve,
    ));
    let refused = d
        .loopback
        .rest
        .wait_until(WAIT, |rest| !rest.followups().is_empty())
        .await;
    assert!(
        refused,
        "the stranger was answered: {:#?}",
        d.loopback.rest.requests()
    );
    let followup = &d.loopback.rest.followups()[0];
    assert_eq!(followup.interaction_id, "1400000000000000001");
    assert_eq!(followup.body["flags"], 64, "ephemeral: the clicker alone");
    assert!(
        followup.body["content"]
            .as_str()
            .is_some_and(|text| text.starts_with("Your press decided nothing")),
        "{followup:?}"
    );
    assert_eq!(
        d.loopback.rest.created().len(),
        created_before,
        "nothing said in the channel: {:#?}",
        d.loopback.rest.created()
    );
    assert!(!waiting.is_finished(), "the stranger decided nothing");
    assert_eq!(
        codes(&d),
        codes_before,
        "no pairing code was made for a click"
    );
    assert!(
        d.loopback.rest.edited().iter().all(|e| e.id != request.id),
        "the request stays live"
    );

    d.loopback.click(component_click(
        "1400000000000000002",
        "owner-interaction-token",
        CHANNEL,
        Some(SERVER),
        USER,
        &request.id,
        &approve,
    ));
    let verdict = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("a verdict in time")
        .expect("the task ran");
    assert_eq!(verdict, host_shim::wit::session::ToolDecision::Allow);
    let decided = d
        .loopback
        .rest
        .wait_until(WAIT, |rest| {
            rest.edited().iter().any(|e| {
                e.id == request.id
                    && e.content
                        .contains(&format!("Approved once by discord:{USER}"))
            })
        })
        .await;
    assert!(
        decided,
        "edited to the outcome: {:#?}",
        d.loopback.rest.edited()
    );
    let outcome = d
        .loopback
        .rest
        .edited()
        .into_iter()
        .rfind(|e| e.id == request.id)
        .expect("the outcome");
    assert_eq!(outcome.body["components"], json!([]), "its buttons removed");
    assert_eq!(
        d.loopback.rest.followups().len(),
        1,
        "the owner's click is answered in the open"
    );
    d.session.shutdown().await.expect("clean shutdown");
}

/// A DM from [`USER`] carrying these attachments.
fn with_attachments(discord: &Discord, content: &str, attachments: Value) -> Value {
    let mut message = discord.dm(content);
    message["attachments"] = attachments;
    message
}

#[tokio::test]
async fn a_file_goes_to_the_inbox_and_a_voice_message_is_transcribed_from_the_cdn() {
    let engine = crate::common::transcription::TranscriptionServer::start("ship it").await;
    let t = Discord::start_with(json!({"voice": {
        "engine": "openai", "baseUrl": engine.base_url, "apiKeyEnv": null, "maxSeconds": 60
    }}))
    .await;
    let workspace = tempfile::tempdir().expect("temp dir");
    *t.agent.cwd.lock().unwrap() = Some(workspace.path().to_string_lossy().into_owned());
    t.pair().await;

    let csv = b"name,score\nada,3\n".to_vec();
    let url = t.loopback.rest.serve_file(
        "scores.csv",
        transport_testing::telegram::ServedFile::new(Some("text/csv"), csv.clone()),
    );
    assert!(
        t.loopback
            .gateway
            .message_create(with_attachments(
                &t,
                "plot these",
                json!([{
                    "id": "1", "filename": "scores.csv", "content_type": "text/csv",
                    "size": csv.len(), "url": url
                }])
            ))
            .is_some()
    );
    t.agent.wait_for_prompts(1).await;
    let prompt = t.agent.prompts.lock().unwrap()[0].clone();
    assert!(
        prompt.contains(".pi/inbox/scores.csv (text/csv, 17 bytes)"),
        "{prompt}"
    );
    assert_eq!(
        std::fs::read(workspace.path().join(".pi/inbox/scores.csv")).expect("saved"),
        csv
    );

    let opus = b"OggS discord voice".to_vec();
    let url = t.loopback.rest.serve_file(
        "voice-message.ogg",
        transport_testing::telegram::ServedFile::new(Some("audio/ogg"), opus.clone()),
    );
    t.say(
        with_attachments(
            &t,
            "",
            json!([{
                "id": "2", "filename": "voice-message.ogg", "content_type": "audio/ogg",
                "size": opus.len(), "duration_secs": 2.5, "url": url
            }]),
        ),
        "Heard: ship it",
    )
    .await;
    t.agent.wait_for_prompts(2).await;
    assert!(t.agent.prompts.lock().unwrap()[1].ends_with("misheard]\nship it"));

    // Longer than maxSeconds by Discord's own duration_secs: refused before any download.
    let url = t.loopback.rest.serve_file(
        "long.ogg",
        transport_testing::telegram::ServedFile::new(Some("audio/ogg"), opus.clone()),
    );
    t.say(
        with_attachments(
            &t,
            "",
            json!([{
                "id": "3", "filename": "long.ogg", "content_type": "audio/ogg",
                "size": opus.len(), "duration_secs": 61.2, "url": url
            }]),
        ),
        "bridge.voice.maxSeconds",
    )
    .await;
    assert_eq!(engine.requests.lock().unwrap().len(), 1);
    assert_eq!(t.agent.prompts.lock().unwrap().len(), 2);
    t.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_file_is_uploaded_with_payload_json_redacted_or_refused_by_the_configured_limit()
{
    use host_shim::sandbox::session::FileRequest;
    let workspace = tempfile::tempdir().expect("temp dir");
    let root = workspace.path();
    // The server's limit as the operator configured it (1 MiB, the smallest allowed).
    let t = Discord::start_in(
        json!({"_discord": {"maxUploadBytes": 1_048_576}}),
        Some(root),
    )
    .await;
    let token = format!("ghp_{}", "Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0EdCbA9z");
    let csv = b"name,score\nada,3\n".to_vec();
    std::fs::write(root.join("scores.csv"), &csv).unwrap();
    std::fs::write(root.join(".env.local"), format!("TOKEN={token}\n")).unwrap();
    std::fs::write(
        root.join("deploy.md"),
        format!("# Deploy\nuse {token} here\n"),
    )
    .unwrap();
    let mut blob = vec![0u8, 0xff, 3];
    blob.extend_from_slice(token.as_bytes());
    std::fs::write(root.join("state.db"), &blob).unwrap();
    std::fs::File::create(root.join("dump.tar"))
        .unwrap()
        .set_len(2 * 1024 * 1024)
        .unwrap();

    t.pair().await;
    assert!(
        t.loopback
            .gateway
            .message_create(t.dm("plot the scores"))
            .is_some()
    );
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
        .send_file(send("scores.csv", Some("the scores @everyone")))
        .await
        .expect("session alive")
        .expect("the csv is sent");
    assert!(told.starts_with("Sent scores.csv ("), "{told}");
    let uploads = t.loopback.rest.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:#?}");
    let upload = &uploads[0];
    assert_eq!(upload.channel_id, DM);
    assert_eq!(upload.field, "files[0]");
    assert_eq!(upload.file_name.as_deref(), Some("scores.csv"));
    assert_eq!(
        upload.content_type.as_deref(),
        Some("text/csv; charset=utf-8")
    );
    assert_eq!(upload.content, "the scores @everyone");
    // The caption never pings: no mention is parsed.
    assert_eq!(upload.payload["allowed_mentions"]["parse"], json!([]));
    assert_eq!(upload.data, csv);

    let refused = t
        .session
        .send_file(send(".env.local", None))
        .await
        .expect("session alive")
        .expect_err("protected");
    assert!(refused.contains("protected"), "{refused}");
    let told = t
        .session
        .send_file(send("deploy.md", None))
        .await
        .expect("session alive")
        .expect("sent redacted");
    assert!(told.contains("redacted"), "{told}");
    let text = String::from_utf8(t.loopback.rest.uploads()[1].data.clone()).unwrap();
    assert!(
        text.starts_with("# Deploy\nuse ") && !text.contains(&token),
        "{text}"
    );
    let refused = t
        .session
        .send_file(send("state.db", None))
        .await
        .expect("session alive")
        .expect_err("a binary with a secret");
    assert!(refused.contains("state.db was not sent"), "{refused}");
    let refused = t
        .session
        .send_file(send("dump.tar", None))
        .await
        .expect("session alive")
        .expect_err("over the configured limit");
    assert!(
        refused.contains("dump.tar is 2.0 MB, and Discord takes files of up to 1.0 MB"),
        "{refused}"
    );
    assert_eq!(t.loopback.rest.uploads().len(), 2);
    t.session.shutdown().await.expect("clean shutdown");
}
