//! The live pi session: the real pi with `examples/pi-extension` loaded, linked to the
//! attach server (`host_shim::pi::attach`, in-process here so the fake messenger can sit
//! behind it), offline. pi runs in RPC mode only so the test can type into it and see its
//! notifications; the extension behaves as in the TUI. Skipped, with the reason printed,
//! when node or the pi package is unavailable.

use std::path::Path;
use std::sync::Arc;

use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use host_shim::pi::attach::{self, Link};
use host_shim::sandbox::pairing_budget::PairingBudget;
use host_shim::sandbox::session::{Built, Session, SessionSpec};
use serde_json::json;
use transport_core::{Envelope, Transport};
use transport_testing::fake::FakeTransport;

use crate::common::fake_model::FakeModel;
use crate::common::pi::{
    PiHome, PiProcess, extension_path, private_link_socket, require_pi, start_linked,
};
use crate::common::{self, Dirs, WAIT, editable_fake, user_config};

struct Live {
    pi: PiProcess,
    model: FakeModel,
    fake: FakeTransport,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
    home: PiHome,
    _dirs: Dirs,
}

async fn start(test: &str, bridge: &str, extra_env: &[(&str, &str)]) -> Option<Live> {
    start_in(test, bridge, extra_env, PiHome::new, Load::Flag).await
}

/// How pi gets the bot-connect extension.
enum Load<'a> {
    /// `-e examples/pi-extension/index.ts`, for this run.
    Flag,
    /// As [`Load::Flag`], with a second extension after it, from its source.
    FlagWith(&'a str),
    /// `pi install examples/pi-extension` first, as a user installs a pi package; then pi
    /// finds it in its settings (extension discovery on).
    Installed,
    /// `pi install git:<url>` first, the URL leading (through git's `insteadOf`) to a local
    /// repository laid out as this one: its root `package.json` and the extension.
    FromGit,
}

/// [`start`] with a second extension loaded after bot-connect's, from `source`.
async fn start_with_extension(test: &str, bridge: &str, source: &str) -> Option<Live> {
    start_in(test, bridge, &[], PiHome::new, Load::FlagWith(source)).await
}

async fn start_in(
    test: &str,
    bridge: &str,
    extra_env: &[(&str, &str)],
    home: fn(Option<&str>) -> PiHome,
    load: Load<'_>,
) -> Option<Live> {
    let bin = require_pi(test).await?;
    let model = FakeModel::start().await;
    let home = home(Some(&model.base_url));
    let dirs = Dirs::new();
    // The link's socket must sit in a directory only its user can enter (attach refuses
    // an open one), as a user's state directory is.
    let (socket, listener) = private_link_socket(dirs.dir.path()).await;
    let link = Link::new();
    let connected = link.connected();
    let fake = editable_fake();
    let transport: Arc<dyn Transport> = Arc::new(fake.handle());
    let (agent, ui) = (link.agent(), link.ui());
    let (state, locks) = (dirs.state.clone(), dirs.locks());
    // Set explicitly: the default policy may change, these tests rely on this one.
    let config = user_config(&format!(r#"{{"bridge":{bridge}}}"#));
    let starter: attach::SessionStarter = Box::new(move |described| {
        Box::pin(async move {
            let spec = SessionSpec {
                key: described.key,
                config_sources: vec![config],
                platforms: host_shim::factory::declarations(),
                transports: Box::new(move |_| Built {
                    transports: vec![transport],
                    notes: Vec::new(),
                }),
                agent,
                ui,
                state,
                locks,
                pairing: PairingBudget::default(),
                clock: Arc::new(SystemClock),
                log: Arc::new(MemoryLog::default()),
                exclusive: true,
                transcript: None,
            };
            Session::spawn(common::runtime(), spec)
                .await
                .map(attach::Served::owned)
        })
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(attach::serve(listener, link, None, starter, async {
        let _ = stopped.await;
    }));
    let mut args = home.args();
    if let Load::Installed | Load::FromGit = load {
        match load {
            Load::FromGit => install_from_git(&bin, &home).await,
            _ => install_package(&bin, &home).await,
        }
        // `-ne` turns off discovery, and with it the installed package.
        args.retain(|a| a != "-ne");
    } else {
        args.push("-e".into());
        args.push(extension_path().display().to_string());
    }
    if let Load::FlagWith(source) = load {
        let path = home.dir.path().join("other-extension.ts");
        std::fs::write(&path, source).expect("the other extension is written");
        args.push("-e".into());
        args.push(path.display().to_string());
    }
    let extra_env: Vec<(String, String)> = extra_env
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    let pi = start_linked(&bin, &home, &args, &socket, &extra_env, connected).await;
    Some(Live {
        pi,
        model,
        fake,
        stop: Some(stop),
        server,
        home,
        _dirs: dirs,
    })
}

/// `pi install <examples/pi-extension>` into `home`, as the README tells a user to.
/// The URL a user would give `pi install git:`; git is told to fetch it from a local copy.
const GIT_URL: &str = "git.example.test/bot-connect/pi-bot-connect";

/// Runs `pi install git:GIT_URL` the way pi does it (a real `git clone`, then `npm install`
/// in the clone), from a repository holding this checkout's root `package.json` and
/// `examples/pi-extension/` as they are on disk: what a clone of this repository gives pi.
async fn install_from_git(bin: &std::path::Path, home: &PiHome) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let origin = home.dir.path().join("origin");
    let extension = origin.join("examples/pi-extension");
    std::fs::create_dir_all(&extension).expect("the origin's directories");
    std::fs::copy(root.join("package.json"), origin.join("package.json"))
        .expect("the root package.json (what `pi install git:` reads)");
    for file in ["index.ts", "package.json"] {
        std::fs::copy(
            root.join("examples/pi-extension").join(file),
            extension.join(file),
        )
        .expect("the extension's files");
    }
    let git_config = home.dir.path().join("gitconfig");
    std::fs::write(
        &git_config,
        format!(
            "[url \"file://{}\"]\n\tinsteadOf = https://{GIT_URL}\n[user]\n\tname = test\n\temail = test@example.invalid\n",
            origin.display()
        ),
    )
    .expect("the git config");
    let git_env = [
        ("GIT_CONFIG_GLOBAL", git_config.display().to_string()),
        ("GIT_CONFIG_NOSYSTEM", "1".to_owned()),
        ("GIT_TERMINAL_PROMPT", "0".to_owned()),
    ];
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &["commit", "-qm", "the package"],
    ] {
        let out = tokio::process::Command::new("git")
            .args(args)
            .current_dir(&origin)
            .envs(git_env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .await
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
    pi_install(bin, home, &format!("git:{GIT_URL}"), &git_env).await;
    let clone = home
        .dir
        .path()
        .join("agent/git/git.example.test/bot-connect/pi-bot-connect");
    assert!(
        clone.join("examples/pi-extension/index.ts").is_file(),
        "pi cloned the repository to {}",
        clone.display()
    );
}

async fn install_package(bin: &std::path::Path, home: &PiHome) {
    let package = extension_path()
        .parent()
        .expect("the extension sits in its package")
        .to_path_buf();
    pi_install(bin, home, &package.display().to_string(), &[]).await;
    let settings = std::fs::read_to_string(home.dir.path().join("agent/settings.json"))
        .expect("pi wrote its settings");
    assert!(
        settings.contains("pi-extension"),
        "the package is in pi's settings: {settings}"
    );
}

/// `pi install <source>` in `home`, with `env` besides pi's own (none of the caller's
/// `PI_` variables), in bounded time; fails the test with pi's output when it fails.
async fn pi_install(bin: &std::path::Path, home: &PiHome, source: &str, env: &[(&str, String)]) {
    let mut command = tokio::process::Command::new(bin);
    command
        .arg("install")
        .arg(source)
        .current_dir(home.work())
        .envs(home.env())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PI_") && key != "PI_CODING_AGENT_DIR" {
            command.env_remove(&key);
        }
    }
    let out = tokio::time::timeout(WAIT, command.output())
        .await
        .expect("pi install finishes in time")
        .expect("pi install runs");
    assert!(
        out.status.success(),
        "pi install {source} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Live {
    fn dm(&self, user: &str, text: &str) -> Envelope {
        let mut envelope = self.fake.envelope(text);
        envelope.user_id = user.into();
        envelope.conversation_id = format!("dm-{user}");
        envelope
    }

    async fn inject(&self, user: &str, text: &str) {
        self.fake
            .inject(self.dm(user, text))
            .await
            .expect("fake listening");
    }

    /// Sends a message and waits for a post containing `expect` after it.
    async fn say(&self, user: &str, text: &str, expect: &str) {
        let before = self.fake.sent().len();
        self.inject(user, text).await;
        let found = self
            .fake
            .wait_for(WAIT, |sent, _| {
                sent[before.min(sent.len())..]
                    .iter()
                    .any(|m| m.message.text.contains(expect))
            })
            .await;
        assert!(
            found,
            "no post containing {expect:?} after {text:?}: {:#?}",
            self.texts()
        );
    }

    fn texts(&self) -> Vec<String> {
        self.fake
            .sent()
            .into_iter()
            .map(|m| m.message.text)
            .collect()
    }

    fn card_shows(&self, label: &str) -> bool {
        let sent = self.fake.sent().into_iter().map(|m| m.message.text);
        let edited = self.fake.edits().into_iter().map(|m| m.text);
        sent.chain(edited).any(|t| t.contains(label))
    }

    /// Pairs through the real flow: the code shows up in pi, not in the chat.
    async fn pair(&self, user: &str) {
        self.say(user, "hello", "not paired").await;
        let note = self.pi.notified("Messenger pairing code:").await;
        let text = note["message"].as_str().unwrap_or_default();
        let code: String = text
            .split("code:")
            .nth(1)
            .and_then(|rest| rest.split('(').next())
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        assert!(
            !self.texts().iter().any(|t| t.contains(&code)),
            "the code never goes to the chat"
        );
        self.say(user, &code, "Paired as").await;
    }

    async fn stop_host(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.server).await.expect("server task ends");
    }

    async fn finish(mut self) {
        self.stop_host().await;
        self.pi.close().await;
    }
}

const UNRESTRICTED: &str = r#"{"remoteToolPolicy":"unrestricted"}"#;
const READ_ONLY: &str = r#"{"remoteToolPolicy":"read-only"}"#;

/// The extension is a pi package (docs/pi.md#install): `pi install <path>` and a plain `pi`
/// load it from the package's `pi` manifest, and a chat pairs and prompts through it.
#[tokio::test]
async fn installed_as_a_pi_package_it_loads_and_pairs() {
    let Some(live) = start_in(
        "installed_as_a_pi_package",
        READ_ONLY,
        &[],
        PiHome::new,
        Load::Installed,
    )
    .await
    else {
        return;
    };
    live.pair("alice").await;
    live.say("alice", "hello pi", "You said: hello pi").await;
    live.finish().await;
}

/// `pi install git:<this repository>` works: pi clones it, reads the root `package.json`,
/// loads the extension from `examples/pi-extension`, and the session pairs.
#[tokio::test]
async fn installed_from_a_git_url_it_loads_and_pairs() {
    let Some(live) = start_in(
        "installed_from_a_git_url",
        READ_ONLY,
        &[],
        PiHome::new,
        Load::FromGit,
    )
    .await
    else {
        return;
    };
    live.pair("alice").await;
    live.say("alice", "hello pi", "You said: hello pi").await;
    live.finish().await;
}

/// Session commands reach the live pi through the extension's API
/// (docs/pi.md#session-commands-from-the-chat): `/model` switches the model of the session
/// in the TUI, `/usage` sums pi's own figures, and `/new`, which pi's extension API cannot
/// do from outside a typed command, says so instead of pretending.
#[tokio::test]
async fn session_commands_reach_the_live_session_through_the_extension() {
    let Some(live) = start(
        "extension: session_commands_reach_the_live_session",
        r#"{"remoteToolPolicy":"read-only","usageFooter":"tokens"}"#,
        &[],
    )
    .await
    else {
        return;
    };
    live.pair("alice").await;
    // The footer comes from pi's own usage report of the fake model's counts, asked
    // through the extension's API.
    live.say("alice", "first", "You said: first\n\nTokens: 10 in, 5 out")
        .await;
    live.say("alice", "/model", "fake/fake-model-2").await;
    live.say("alice", "/model fake-model-2", "Model: fake/fake-model-2")
        .await;
    live.say("alice", "second", "You said: second").await;
    let seen = live.model.seen();
    assert_eq!(seen.last().expect("a request").model, "fake-model-2");
    live.say("alice", "/usage", "last turn: 10 in, 5 out").await;
    live.say("alice", "/thinking", "Thinking level:").await;
    live.say("alice", "/compact", "Compacted").await;
    live.say("alice", "/new", "type /new in pi").await;
    assert!(
        live.model
            .seen()
            .iter()
            .all(|s| !s.last_text.contains("/model") && !s.last_text.contains("/new")),
        "no command reached the model"
    );
    live.finish().await;
}

/// Without host-shim anywhere (not named, not next to the extension, not on PATH) pi says
/// the one command that installs it, instead of a spawn error.
#[tokio::test]
async fn without_host_shim_pi_says_how_to_install_it() {
    let Some(bin) = require_pi("without_host_shim").await else {
        return;
    };
    // A model pi can name at start; no request reaches it.
    let home = PiHome::new(Some("http://127.0.0.1:9/v1"));
    // A copy of the package alone: no checkout's target/ next to it.
    let package = home.dir.path().join("package");
    std::fs::create_dir_all(&package).expect("package dir");
    std::fs::copy(extension_path(), package.join("index.ts")).expect("extension copied");
    // pi runs on node, so PATH keeps node's directory and nothing else.
    let node_dir = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).find(|dir| dir.join("node").is_file()))
        .expect("node is on PATH when pi is available");
    assert!(
        !node_dir.join("host-shim").exists(),
        "{} holds a host-shim: this test needs a PATH without one",
        node_dir.display()
    );
    let mut args = home.args();
    args.push("-e".into());
    args.push(package.join("index.ts").display().to_string());
    let mut env = home.env();
    env.push(("PATH".into(), node_dir.display().to_string()));
    let pi = PiProcess::start(&bin, &home.work(), &args, &env).await;
    let note = pi.notified("host-shim is not installed").await;
    let text = note["message"].as_str().unwrap_or_default();
    assert!(
        text.contains("cargo install --path host-shim"),
        "names the install command: {text}"
    );
    pi.close().await;
}

#[tokio::test]
async fn a_remote_prompt_starts_a_turn_in_the_live_session() {
    let Some(live) = start(
        "extension: a_remote_prompt_starts_a_turn",
        UNRESTRICTED,
        &[],
    )
    .await
    else {
        return;
    };
    live.pair("alice").await;
    live.say("alice", "please TOOL", "tool said: hi").await;
    assert!(
        live.card_shows("✓ bash"),
        "the card follows pi's tool events: {:#?}",
        live.texts()
    );
    // The prompt went into the session as a user message, as if typed.
    assert_eq!(live.model.seen()[0].last_text, "please TOOL");
    live.finish().await;
}

#[tokio::test]
async fn a_remote_prompt_while_pi_works_is_a_follow_up() {
    let Some(mut live) = start("extension: a_remote_prompt_while_busy", UNRESTRICTED, &[]).await
    else {
        return;
    };
    live.pair("bob").await;
    // A local prompt keeps pi busy.
    live.pi
        .request(json!({"type": "prompt", "message": "HOLD local work"}))
        .await;
    live.model
        .wait("the local request", WAIT, |m| !m.seen().is_empty())
        .await;
    live.inject("bob", "remote follow-up").await;
    live.pi
        .wait_for("the follow-up queued", |v| {
            v["type"] == "queue_update" && v["followUp"].as_array().is_some_and(|f| !f.is_empty())
        })
        .await;
    live.model.release();
    let found = live
        .fake
        .wait_for(WAIT, |sent, _| {
            sent.iter()
                .any(|m| m.message.text.contains("You said: remote follow-up"))
        })
        .await;
    assert!(found, "{:#?}", live.texts());
    let texts: Vec<String> = live.model.seen().into_iter().map(|s| s.last_text).collect();
    assert_eq!(texts, ["HOLD local work", "remote follow-up"]);
    live.finish().await;
}

#[tokio::test]
async fn abort_from_the_chat_stops_the_live_turn() {
    let Some(live) = start("extension: abort_from_the_chat", UNRESTRICTED, &[]).await else {
        return;
    };
    live.pair("carol").await;
    live.inject("carol", "HOLD forever").await;
    live.model
        .wait("the held request", WAIT, |m| !m.seen().is_empty())
        .await;
    live.say("carol", "/abort", "Abort requested.").await;
    live.model
        .wait("the stream closed by pi", WAIT, |m| m.cancelled() == 1)
        .await;
    live.say("carol", "again", "You said: again").await;
    live.finish().await;
}

#[tokio::test]
async fn read_only_blocks_a_remote_tool_call_but_not_a_local_one() {
    let Some(mut live) = start("extension: read_only_blocks_remote_tools", READ_ONLY, &[]).await
    else {
        return;
    };
    live.pair("dave").await;
    live.say("dave", "please TOOL", "tool said:").await;
    let blocked = live
        .model
        .seen()
        .last()
        .expect("tool result")
        .last_text
        .clone();
    assert!(
        blocked.contains("read-only mode"),
        "blocked by the real hook: {blocked:?}"
    );
    assert!(live.card_shows("✕ bash"), "{:#?}", live.texts());
    // Typed at the terminal: never restricted (I34).
    live.pi
        .request(json!({"type": "prompt", "message": "local TOOL"}))
        .await;
    live.model
        .wait("the local tool result", WAIT, |m| {
            m.seen()
                .iter()
                .any(|s| s.last_role == "tool" && s.last_text.trim() == "hi")
        })
        .await;
    live.finish().await;
}

#[tokio::test]
async fn connect_status_typed_in_pi_answers_there() {
    let Some(mut live) = start("extension: connect_status_typed_in_pi", UNRESTRICTED, &[]).await
    else {
        return;
    };
    live.pi
        .request(json!({"type": "prompt", "message": "/connect status"}))
        .await;
    let note = live.pi.notified("bot-connect status").await;
    assert!(
        note["message"]
            .as_str()
            .unwrap()
            .contains("- transports: fake"),
        "{note}"
    );
    assert!(
        live.model.seen().is_empty(),
        "a local command never reaches the model"
    );
    live.stop_host().await;
    live.pi.close().await;
}

#[tokio::test]
async fn a_host_crash_is_reported_in_pi_and_blocks_the_remote_turns_tools() {
    let Some(mut live) = start("extension: a_host_crash_is_reported", UNRESTRICTED, &[]).await
    else {
        return;
    };
    live.pair("erin").await;
    live.inject("erin", "HOLD then TOOL").await;
    live.model
        .wait("the held request", WAIT, |m| !m.seen().is_empty())
        .await;
    live.stop_host().await;
    live.pi.notified("host-shim closed the link").await;
    live.model.release();
    // The remote turn's tool call cannot be checked any more: blocked, with the reason.
    live.model
        .wait("the blocked tool's result", WAIT, |m| {
            m.seen().iter().any(|s| {
                s.last_role == "tool" && s.last_text.contains("bot-connect is not running")
            })
        })
        .await;
    // pi itself carries on.
    let state = live.pi.request(json!({"type": "get_state"})).await;
    assert_eq!(state["success"], true);
    assert!(live.pi.running());
    live.pi.close().await;
}

#[tokio::test]
async fn a_verdict_that_does_not_come_in_time_blocks_the_tool() {
    // With approval on, the host asks pi's person; nobody answers here, and the
    // extension's own deadline (2 s in this test) blocks the tool first.
    let bridge = r#"{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each"}"#;
    let env = [("PI_BOT_CONNECT_VERDICT_TIMEOUT_MS", "2000")];
    let Some(live) = start("extension: a_verdict_that_does_not_come", bridge, &env).await else {
        return;
    };
    live.pair("frank").await;
    live.inject("frank", "please TOOL").await;
    live.pi
        .wait_for("the approval question", |v| {
            v["type"] == "extension_ui_request" && v["method"] == "confirm"
        })
        .await;
    live.model
        .wait("the blocked tool's result", WAIT, |m| {
            m.seen()
                .iter()
                .any(|s| s.last_role == "tool" && s.last_text.contains("no verdict within 2 s"))
        })
        .await;
    live.finish().await;
}

#[tokio::test]
async fn an_approval_answered_in_pi_lets_the_tool_run() {
    let bridge = r#"{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each"}"#;
    let Some(mut live) = start("extension: an_approval_answered_in_pi", bridge, &[]).await else {
        return;
    };
    live.pair("gina").await;
    live.inject("gina", "please TOOL").await;
    let question = live
        .pi
        .wait_for("the approval question", |v| {
            v["type"] == "extension_ui_request" && v["method"] == "confirm"
        })
        .await;
    assert_eq!(question["title"], "Remote tool call: bash");
    live.pi
        .send(json!({"type": "extension_ui_response", "id": question["id"], "confirmed": true}))
        .await;
    let found = live
        .fake
        .wait_for(WAIT, |sent, _| {
            sent.iter()
                .any(|m| m.message.text.contains("tool said: hi"))
        })
        .await;
    assert!(found, "{:#?}", live.texts());
    live.finish().await;
}

#[tokio::test]
async fn a_remote_follow_up_in_a_local_run_is_restricted_from_its_delivery_on() {
    let Some(mut live) = start(
        "extension: a_remote_follow_up_is_restricted",
        READ_ONLY,
        &[],
    )
    .await
    else {
        return;
    };
    live.pair("hana").await;
    // A local run is going; its own tools would be allowed.
    live.pi
        .request(json!({"type": "prompt", "message": "HOLD local work"}))
        .await;
    live.model
        .wait("the local request", WAIT, |m| !m.seen().is_empty())
        .await;
    live.inject("hana", "please TOOL").await;
    live.pi
        .wait_for("the follow-up queued", |v| {
            v["type"] == "queue_update" && v["followUp"].as_array().is_some_and(|f| !f.is_empty())
        })
        .await;
    live.model.release();
    // Delivered into the same pi run, the remote prompt's tool call meets the policy.
    live.model
        .wait("the blocked tool's result", WAIT, |m| {
            m.seen()
                .iter()
                .any(|s| s.last_role == "tool" && s.last_text.contains("read-only mode"))
        })
        .await;
    live.finish().await;
}

/// pi retries a failed model call, and continues after compacting an over-long
/// conversation, in a run of its own that no prompt starts. That run answers the same
/// messenger prompt, so its tool calls meet the same policy: under read-only, the `bash`
/// the retried stream asks for must not run (it did, when such a run was classed local).
async fn a_run_pi_starts_by_itself_keeps_the_remote_policy(test: &str, prompt: &str) {
    let Some(live) = start_in(test, READ_ONLY, &[], PiHome::with_retries, Load::Flag).await else {
        return;
    };
    live.pair("ivan").await;
    live.inject("ivan", prompt).await;
    live.model
        .wait("the tool's result after pi's own new run", WAIT, |m| {
            m.seen().iter().any(|s| s.last_role == "tool")
        })
        .await;
    let seen = live.model.seen();
    let result = seen
        .iter()
        .find(|s| s.last_role == "tool")
        .expect("a tool result");
    assert!(
        result.last_text.contains("read-only mode"),
        "the retried run's bash ran: {:#?}",
        seen
    );
    let prompts = seen.iter().filter(|s| s.last_text == prompt).count();
    assert!(
        prompts >= 2,
        "pi asked again without a new prompt: {seen:#?}"
    );
    // The run pi started by itself was reported as remote, never as local.
    let turns: Vec<String> = live
        .pi
        .lines()
        .into_iter()
        .filter(|v| v["type"] == "agent_start")
        .map(|v| v.to_string())
        .collect();
    assert!(turns.len() >= 2, "pi started a second run: {turns:?}");
    live.finish().await;
}

#[tokio::test]
async fn a_run_retried_after_an_overload_keeps_the_remote_policy() {
    a_run_pi_starts_by_itself_keeps_the_remote_policy(
        "extension: a_run_retried_after_an_overload",
        "FAIL:overloaded then TOOL",
    )
    .await;
}

#[tokio::test]
async fn a_run_continued_after_an_overflow_keeps_the_remote_policy() {
    a_run_pi_starts_by_itself_keeps_the_remote_policy(
        "extension: a_run_continued_after_an_overflow",
        "FAIL:overflow then TOOL",
    )
    .await;
}

/// A working directory as a real repository has one: a secret in `.env`, a credential URL
/// in `.git/config`, and ordinary code. Every file holds the word the search looks for.
fn plant_repository(work: &std::path::Path) {
    std::fs::create_dir_all(work.join(".git")).unwrap();
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::write(work.join(".env"), "API_KEY=PLANTED-in-env\n").unwrap();
    std::fs::write(
        work.join(".git/config"),
        "[remote \"origin\"]\n\turl = https://me:PLANTED-in-git@example.com/r.git\n",
    )
    .unwrap();
    std::fs::write(work.join("src/main.rs"), "// PLANTED-in-src\n").unwrap();
}

/// The text of every tool result pi sent the model.
fn tool_results(model: &FakeModel) -> Vec<String> {
    model
        .seen()
        .into_iter()
        .filter(|s| s.last_role == "tool")
        .map(|s| s.last_text)
        .collect()
}

#[tokio::test]
async fn a_remote_search_never_reads_protected_files_unasked() {
    let Some(mut live) = start("extension: a_remote_search_never_reads", READ_ONLY, &[]).await
    else {
        return;
    };
    if let Err(why) = common::ripgrep::give_pi_ripgrep(&live.home.dir.path().join("agent")) {
        eprintln!("SKIPPED (no ripgrep): {why}");
        live.finish().await;
        return;
    }
    plant_repository(&live.home.work());
    live.pair("kira").await;
    // pi's grep runs ripgrep with --hidden: unnarrowed, `.` reads .git/config and .env.
    live.say("kira", "GREP PLANTED", "tool said:").await;
    let results = tool_results(&live.model);
    let searched = results.last().expect("the search's result");
    assert!(
        searched.contains("PLANTED-in-src"),
        "the search ran: {searched}"
    );
    assert!(
        !searched.contains("PLANTED-in-env") && !searched.contains("PLANTED-in-git"),
        "a remote search read protected files: {searched}"
    );
    // A glob of its own overrides ignore files in ripgrep: asked about, and a no blocks it.
    live.inject("kira", "GREP PLANTED GLOB=.env*").await;
    let question = live
        .pi
        .wait_for("the question about the search's glob", |v| {
            v["type"] == "extension_ui_request" && v["method"] == "confirm"
        })
        .await;
    assert!(
        question["message"]
            .as_str()
            .unwrap_or_default()
            .contains(".env*"),
        "{question}"
    );
    live.pi
        .send(json!({"type": "extension_ui_response", "id": question["id"], "confirmed": false}))
        .await;
    live.model
        .wait("the declined search's result", WAIT, |m| {
            tool_results(m).len() == 2
        })
        .await;
    let declined = tool_results(&live.model).pop().unwrap();
    assert!(!declined.contains("PLANTED-in-env"), "{declined}");
    // pi refuses a prompt while it still answers the declined call: wait for that run's end.
    live.pi
        .wait_for_nth("the declined search's run to end", 2, |v| {
            v["type"] == "agent_end"
        })
        .await;
    // Typed at the terminal, the same search is the user's own: nothing is left out.
    live.pi
        .request(json!({"type": "prompt", "message": "local GREP PLANTED"}))
        .await;
    live.model
        .wait("the local search's result", WAIT, |m| {
            tool_results(m).len() == 3
        })
        .await;
    let local = tool_results(&live.model).pop().unwrap();
    assert!(local.contains("PLANTED-in-env"), "{local}");
    live.finish().await;
}

#[tokio::test]
async fn an_over_long_path_is_judged_where_it_leads() {
    let Some(mut live) = start("extension: an_over_long_path_is_judged", READ_ONLY, &[]).await
    else {
        return;
    };
    let outside = live.home.dir.path().join("outside.txt");
    std::fs::write(&outside, "PLANTED-outside").unwrap();
    live.pair("lena").await;
    // 5,000 characters that pi resolves to ../outside.txt: once sent as no path at all,
    // so a read outside the working directory ran without a question.
    let long = format!("{}../outside.txt", "./".repeat(2_500));
    live.inject("lena", &format!("READ {long}")).await;
    let question = live
        .pi
        .wait_for(
            "the question about a read outside the working directory",
            |v| v["type"] == "extension_ui_request" && v["method"] == "confirm",
        )
        .await;
    assert!(
        question["message"]
            .as_str()
            .unwrap_or_default()
            .contains("outside the working directory"),
        "{question}"
    );
    live.pi
        .send(json!({"type": "extension_ui_response", "id": question["id"], "confirmed": false}))
        .await;
    live.model
        .wait("the declined read's result", WAIT, |m| {
            !tool_results(m).is_empty()
        })
        .await;
    let result = tool_results(&live.model).pop().unwrap();
    assert!(!result.contains("PLANTED-outside"), "{result}");
    live.finish().await;
}

#[tokio::test]
async fn a_notice_naming_a_hostile_id_reaches_pi_without_escapes() {
    let Some(live) = start("extension: a_notice_naming_a_hostile_id", READ_ONLY, &[]).await else {
        return;
    };
    // An id a platform let through: an OSC 52 clipboard write, a bidi override and a
    // zero-width space. Shown raw, pi's terminal would obey the escape.
    let hostile = "mal\u{1b}]52;c;ZXZpbA==\u{7}lo\u{202e}ry\u{200b}";
    live.pair(hostile).await;
    let note = live.pi.notified("Paired").await;
    let shown = note["message"].as_str().unwrap_or_default();
    assert!(
        shown.contains("mal"),
        "the notice names the user: {shown:?}"
    );
    for bad in ['\u{1b}', '\u{7}', '\u{202e}', '\u{200b}'] {
        assert!(
            !shown.contains(bad),
            "{bad:?} reached the terminal: {shown:?}"
        );
    }
    live.finish().await;
}

/// Asks before every tool call, then runs the call with a command that echoes the answers:
/// the model's next request holds them as the tool's result.
const ASKING_EXTENSION: &str = r#"
export default function (pi) {
	pi.on("tool_call", async (event, ctx) => {
		const where = await ctx.ui.select("Deploy where?", ["eu-west", "us-east"]);
		const sure = await ctx.ui.confirm("Drop the cache?", "It rebuilds in an hour.");
		event.input.command = `echo "where=${where} sure=${sure}"`;
		return undefined;
	});
}
"#;

/// The id of the `n`th question posted (from 1): `Question from the agent (<id>): …`.
async fn question_id(live: &Live, n: usize) -> String {
    let asked = |text: &str| text.starts_with("Question from the agent (");
    let found = live
        .fake
        .wait_for(WAIT, |sent, _| {
            sent.iter().filter(|m| asked(&m.message.text)).count() >= n
        })
        .await;
    assert!(found, "question {n} was not asked: {:#?}", live.texts());
    let texts: Vec<String> = live.texts().into_iter().filter(|t| asked(t)).collect();
    texts[n - 1]
        .trim_start_matches("Question from the agent (")
        .split(')')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_remote_turns_question_is_asked_in_pi_and_the_chat_and_the_first_answer_wins() {
    let Some(mut live) = start_with_extension(
        "extension: a_remote_turns_question_is_asked_in_pi_and_the_chat",
        UNRESTRICTED,
        ASKING_EXTENSION,
    )
    .await
    else {
        return;
    };
    live.pair("hana").await;
    live.inject("hana", "please TOOL").await;

    // The select opens in pi and in the chat; the chat answers first.
    let in_pi = live
        .pi
        .wait_for("the select in pi", |v| {
            v["type"] == "extension_ui_request" && v["method"] == "select"
        })
        .await;
    assert_eq!(in_pi["title"], "Deploy where?");
    let select = question_id(&live, 1).await;
    live.inject("hana", &format!("/answer {select} 2")).await;

    // The confirm is answered in pi first; the chat hears who answered.
    let confirm_in_pi = live
        .pi
        .wait_for("the confirm in pi", |v| {
            v["type"] == "extension_ui_request" && v["method"] == "confirm"
        })
        .await;
    assert_eq!(confirm_in_pi["title"], "Drop the cache?");
    let confirm = question_id(&live, 2).await;
    live.pi
        .send(
            json!({"type": "extension_ui_response", "id": confirm_in_pi["id"], "confirmed": true}),
        )
        .await;
    let told = format!("Question {confirm} ('Drop the cache?'): answered yes at the terminal.");
    let found = live
        .fake
        .wait_for(WAIT, |sent, _| sent.iter().any(|m| m.message.text == told))
        .await;
    assert!(found, "{:#?}", live.texts());

    live.model
        .wait("the tool's result", WAIT, |m| m.seen().len() >= 2)
        .await;
    let seen = live.model.seen();
    assert!(
        seen[1].last_text.contains("where=us-east sure=true"),
        "{:?}",
        seen[1].last_text
    );
    // A late answer in the chat changes nothing.
    live.say("hana", &format!("/answer {confirm} no"), "already closed")
        .await;
    live.finish().await;
}

/// The real pi's model calls the extension's `send_file` in a turn a Telegram chat
/// started: the file goes through the link, the bridge and the Bot API's `sendDocument` to
/// a loopback Telegram, and the tool's result tells the model where it went.
#[tokio::test]
async fn the_models_send_file_call_reaches_a_loopback_telegram_chat() {
    use transport_testing::telegram::{BotApiServer, private_text};
    let Some(bin) = require_pi("extension: send_file to telegram").await else {
        return;
    };
    let model = FakeModel::start().await;
    let home = PiHome::new(Some(&model.base_url));
    let report = b"quarterly figures\n".to_vec();
    std::fs::write(home.work().join("report.txt"), &report).expect("the report is written");
    let telegram = Arc::new(BotApiServer::start().await);
    let dirs = Dirs::new();
    let (socket, listener) = private_link_socket(dirs.dir.path()).await;
    let link = Link::new();
    let connected = link.connected();
    let (agent, ui) = (link.agent(), link.ui());
    let (state, locks) = (dirs.state.clone(), dirs.locks());
    let state_dir = dirs.dir.path().to_path_buf();
    let token = telegram.token();
    let config = user_config(
        &json!({"bridge": {"remoteToolPolicy": "read-only"}, "transports": {"telegram": {
            "enabled": true, "tokenEnv": "TG_TEST_TOKEN",
            "baseUrl": telegram.base_url(), "pollTimeoutSeconds": 1,
        }}})
        .to_string(),
    );
    let starter: attach::SessionStarter = Box::new(move |described| {
        Box::pin(async move {
            let spec = SessionSpec {
                key: described.key,
                config_sources: vec![config],
                platforms: host_shim::factory::declarations(),
                transports: Box::new(move |requests| {
                    let var = move |name: &str| (name == "TG_TEST_TOKEN").then(|| token.clone());
                    host_shim::factory::build(
                        requests,
                        None,
                        &host_shim::factory::Environment {
                            var: &var,
                            state_dir: Some(state_dir),
                        },
                    )
                }),
                agent,
                ui,
                state,
                locks,
                pairing: PairingBudget::default(),
                clock: Arc::new(SystemClock),
                log: Arc::new(MemoryLog::default()),
                exclusive: true,
                transcript: None,
            };
            Session::spawn(common::runtime(), spec)
                .await
                .map(attach::Served::owned)
        })
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(attach::serve(listener, link, None, starter, async {
        let _ = stopped.await;
    }));
    let mut args = home.args();
    // `--tools` names every active tool, an extension's too: a user who restricts pi's
    // tools this way adds send_file (docs/media.md#files-out).
    for arg in &mut args {
        if arg.starts_with("read,") {
            arg.push_str(",send_file");
        }
    }
    args.push("-e".into());
    args.push(extension_path().display().to_string());
    let pi = start_linked(&bin, &home, &args, &socket, &[], connected).await;

    const USER: i64 = 4242;
    let said = |expect: &'static str| {
        let telegram = telegram.clone();
        async move {
            let found = telegram
                .wait_until(WAIT, |s| s.sent().iter().any(|m| m.text.contains(expect)))
                .await;
            assert!(
                found,
                "no message containing {expect:?}: {:#?}",
                telegram.sent()
            );
        }
    };
    // Dated now: this session's clock is the system's, and an old message from a
    // stranger is not answered.
    let message = |id: i64, text: &str| {
        let mut update = private_text(USER, id, text);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        update["message"]["date"] = json!(now);
        update
    };
    telegram.queue_update(message(1, "hello"));
    said("not paired").await;
    let note = pi.notified("Messenger pairing code:").await;
    let code: String = note["message"]
        .as_str()
        .unwrap_or_default()
        .split("code:")
        .nth(1)
        .and_then(|rest| rest.split('(').next())
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    telegram.queue_update(message(2, &code));
    said("Paired as").await;

    telegram.queue_update(message(3, "please SEND report.txt"));
    let uploaded = telegram.wait_until(WAIT, |s| !s.uploads().is_empty()).await;
    assert!(uploaded, "no upload; sent: {:#?}", telegram.sent());
    let upload = telegram.uploads()[0].clone();
    assert_eq!(upload.method, "senddocument");
    assert_eq!(upload.chat_id, USER.to_string());
    assert_eq!(upload.file_name.as_deref(), Some("report.txt"));
    assert_eq!(upload.caption.as_deref(), Some("from pi"));
    assert_eq!(upload.data, report);
    // The tool's result, as the model read it, says where the file went.
    model
        .wait("the send_file result", WAIT, |m| {
            tool_results(m)
                .iter()
                .any(|t| t.contains("Sent report.txt"))
        })
        .await;
    let _ = stop.send(());
    server.await.expect("server task ends");
    pi.close().await;
}
