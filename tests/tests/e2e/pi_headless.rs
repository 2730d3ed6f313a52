//! `host-shim run --agent pi` against the real pi, offline: the bridge drives
//! `pi --mode rpc` (with the embedded extension as its tool gate) and a fake messenger
//! pairs, prompts, aborts. Skipped, with the reason printed, when node or the pi package
//! is unavailable.

use std::ffi::OsString;
use std::sync::Arc;

use host_shim::local::ui::RecordingUi;
use host_shim::pi::rpc_agent::{PiLaunch, PiRpcAgent, write_extension};

use crate::common::fake_model::FakeModel;
use crate::common::pi::{PI_WAIT, PiHome, require_pi};
use crate::common::{self, Dirs, Harness, Setup, WAIT, user_config};

struct Headless {
    harness: Harness,
    model: FakeModel,
    pi: PiRpcAgent,
    home: PiHome,
    _dirs: Dirs,
}

async fn start(test: &str, policy: &str, extension: Option<&str>) -> Option<Headless> {
    start_with(
        test,
        &format!(r#"{{"bridge":{{"remoteToolPolicy":"{policy}"}}}}"#),
        extension,
    )
    .await
}

async fn start_with(test: &str, config: &str, extension: Option<&str>) -> Option<Headless> {
    start_in(test, config, extension, PiHome::new).await
}

async fn start_in(
    test: &str,
    config: &str,
    extension: Option<&str>,
    home: fn(Option<&str>) -> PiHome,
) -> Option<Headless> {
    let bin = require_pi(test).await?;
    let model = FakeModel::start().await;
    let home = home(Some(&model.base_url));
    let extension_dir = home.dir.path().join("bot-connect");
    let mut args = home.args();
    if extension.is_none() {
        // `--tools` names every active tool, an extension's too: the embedded extension's
        // send_file is one.
        for arg in &mut args {
            if arg.starts_with("read,") {
                arg.push_str(",send_file");
            }
        }
    }
    let extension = match extension {
        // What `run --agent pi` loads: the embedded copy.
        None => write_extension(&extension_dir).expect("extension written"),
        Some(source) => {
            std::fs::create_dir_all(&extension_dir).unwrap();
            let path = extension_dir.join("index.ts");
            std::fs::write(&path, source).unwrap();
            path
        }
    };
    let launch = PiLaunch {
        program: bin.into_os_string(),
        args: args.into_iter().map(OsString::from).collect(),
        cwd: home.work(),
        extension,
        key: "pi-headless".into(),
        ready_timeout: PI_WAIT,
        env: home
            .env()
            .into_iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
    };
    let pi = PiRpcAgent::start(launch, Arc::new(RecordingUi::default()))
        .await
        .expect("pi starts in rpc mode");
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "pi-headless");
    setup.agent = Arc::new(pi.clone());
    // Set explicitly: the default policy may change, these tests rely on this one.
    setup.config = vec![user_config(config)];
    let harness = setup.start().await;
    Some(Headless {
        harness,
        model,
        pi,
        home,
        _dirs: dirs,
    })
}

impl Headless {
    async fn stop(self) {
        self.harness
            .session
            .shutdown()
            .await
            .expect("session stops");
        self.pi.stop().await;
    }

    fn card_shows(&self, label: &str) -> bool {
        let sent = self.harness.fake.sent().into_iter().map(|m| m.message.text);
        let edited = self.harness.fake.edits().into_iter().map(|m| m.text);
        sent.chain(edited).any(|t| t.contains(label))
    }
}

#[tokio::test]
async fn a_remote_prompt_runs_a_pi_turn_with_its_tool_card_and_reply() {
    let Some(t) = start("a_remote_prompt_runs_a_pi_turn", "unrestricted", None).await else {
        return;
    };
    t.harness.pair("alice").await;
    t.harness.say("alice", "please TOOL", "tool said: hi").await;
    assert!(
        t.card_shows("✓ bash"),
        "the card follows pi's tool events: {:#?}",
        t.harness.texts()
    );
    let seen = t.model.seen();
    assert_eq!(seen[0].last_text, "please TOOL");
    assert_eq!(seen[1].last_role, "tool");
    t.stop().await;
}

#[tokio::test]
async fn a_prompt_while_pi_works_is_delivered_as_a_follow_up() {
    let Some(t) = start(
        "a_prompt_while_pi_works_is_a_follow_up",
        "unrestricted",
        None,
    )
    .await
    else {
        return;
    };
    t.harness.pair("bob").await;
    t.harness
        .fake
        .inject(t.harness.dm("bob", "HOLD first"))
        .await
        .expect("fake listening");
    t.model
        .wait("the first request", WAIT, |m| {
            m.seen().iter().any(|s| s.last_text == "HOLD first")
        })
        .await;
    t.harness
        .fake
        .inject(t.harness.dm("bob", "second"))
        .await
        .expect("fake listening");
    t.model.release();
    let found = t
        .harness
        .fake
        .wait_for(WAIT, |sent, _| {
            sent.iter()
                .any(|m| m.message.text.contains("You said: second"))
        })
        .await;
    assert!(
        found,
        "the follow-up was answered: {:#?}",
        t.harness.texts()
    );
    let texts: Vec<String> = t.model.seen().into_iter().map(|s| s.last_text).collect();
    assert_eq!(
        texts,
        ["HOLD first", "second"],
        "delivered after the first, not rejected"
    );
    t.stop().await;
}

#[tokio::test]
async fn abort_from_the_chat_stops_the_pi_turn() {
    let Some(t) = start(
        "abort_from_the_chat_stops_the_pi_turn",
        "unrestricted",
        None,
    )
    .await
    else {
        return;
    };
    t.harness.pair("carol").await;
    t.harness
        .fake
        .inject(t.harness.dm("carol", "HOLD forever"))
        .await
        .expect("fake listening");
    t.model
        .wait("the held request", WAIT, |m| !m.seen().is_empty())
        .await;
    t.harness.say("carol", "/abort", "Abort requested.").await;
    // pi closes the model stream when it aborts.
    t.model
        .wait("the stream closed by pi", WAIT, |m| m.cancelled() == 1)
        .await;
    // pi is usable again: the next prompt is a fresh turn.
    t.harness.say("carol", "again", "You said: again").await;
    t.stop().await;
}

#[tokio::test]
async fn read_only_policy_blocks_a_remote_tool_call_in_the_real_hook() {
    let Some(t) = start("read_only_blocks_a_remote_tool_call", "read-only", None).await else {
        return;
    };
    t.harness.pair("dave").await;
    t.harness.say("dave", "please TOOL", "tool said:").await;
    let seen = t.model.seen();
    let result = &seen
        .last()
        .expect("the model saw the tool result")
        .last_text;
    assert!(
        result.contains("read-only mode"),
        "the tool result is the bridge's block reason: {result:?}"
    );
    assert!(t.card_shows("✕ bash"), "{:#?}", t.harness.texts());
    t.stop().await;
}

#[tokio::test]
async fn the_scope_judges_the_paths_pi_writes() {
    let config = r#"{"bridge":{"remoteScope":{"allowTools":["write"],"allowedPaths":["src/**"]}}}"#;
    let Some(t) = start_with("the_scope_judges_the_paths_pi_writes", config, None).await else {
        return;
    };
    t.harness.pair("erin").await;
    // Outside `allowedPaths`: refused, the reason reaches the model, nothing is written.
    t.harness
        .say("erin", "please WRITE notes.txt", "tool said:")
        .await;
    let seen = t.model.seen();
    let result = &seen
        .last()
        .expect("the model saw the tool result")
        .last_text;
    assert!(
        result.contains("may not change 'notes.txt'")
            && result.contains("outside the allowed paths (src/**)"),
        "the tool result is the scope's reason: {result:?}"
    );
    assert!(!t.home.work().join("notes.txt").exists());
    // Inside: pi really writes the file.
    std::fs::create_dir_all(t.home.work().join("src")).expect("src dir");
    t.harness
        .say("erin", "please WRITE src/notes.txt", "tool said:")
        .await;
    let written = std::fs::read_to_string(t.home.work().join("src/notes.txt"));
    assert_eq!(written.ok().as_deref(), Some("written by pi"));
    t.stop().await;
}

#[tokio::test]
async fn without_the_tool_gate_remote_prompts_are_refused() {
    // An extension that loads but never says it gates tool calls: the policy cannot be
    // enforced, so no remote prompt may reach pi.
    let inert = "export default function () {}\n";
    let Some(t) = start(
        "without_the_tool_gate_prompts_are_refused",
        "read-only",
        Some(inert),
    )
    .await
    else {
        return;
    };
    t.harness.pair("erin").await;
    t.harness
        .say("erin", "please TOOL", "did not accept that message")
        .await;
    assert!(t.model.seen().is_empty(), "nothing reached the model");
    t.stop().await;
}

/// pi's own new runs (a retry after an overload, the continuation after an overflow
/// compaction) answer the same remote prompt: under read-only their `bash` is blocked too.
async fn a_run_pi_starts_by_itself_is_still_remote(test: &str, prompt: &str) {
    let config = r#"{"bridge":{"remoteToolPolicy":"read-only"}}"#;
    let Some(t) = start_in(test, config, None, PiHome::with_retries).await else {
        return;
    };
    t.harness.pair("olga").await;
    t.harness.say("olga", prompt, "tool said:").await;
    let seen = t.model.seen();
    let result = seen
        .iter()
        .find(|s| s.last_role == "tool")
        .expect("a tool result");
    assert!(
        result.last_text.contains("read-only mode"),
        "the bash of pi's own new run ran: {seen:#?}"
    );
    assert!(
        seen.iter().filter(|s| s.last_text == prompt).count() >= 2,
        "pi asked the model again without a new prompt: {seen:#?}"
    );
    t.stop().await;
}

#[tokio::test]
async fn a_run_retried_after_an_overload_is_still_remote() {
    a_run_pi_starts_by_itself_is_still_remote(
        "a_run_retried_after_an_overload",
        "FAIL:overloaded then TOOL",
    )
    .await;
}

#[tokio::test]
async fn a_run_continued_after_an_overflow_is_still_remote() {
    a_run_pi_starts_by_itself_is_still_remote(
        "a_run_continued_after_an_overflow",
        "FAIL:overflow then TOOL",
    )
    .await;
}

#[tokio::test]
async fn a_remote_search_is_narrowed_out_of_protected_files() {
    let Some(t) = start("a_remote_search_is_narrowed", "read-only", None).await else {
        return;
    };
    if let Err(why) = common::ripgrep::give_pi_ripgrep(&t.home.dir.path().join("agent")) {
        eprintln!("SKIPPED (no ripgrep): {why}");
        t.stop().await;
        return;
    }
    let work = t.home.work();
    std::fs::create_dir_all(work.join(".git")).unwrap();
    std::fs::write(work.join(".env"), "API_KEY=PLANTED-in-env\n").unwrap();
    std::fs::write(
        work.join(".git/config"),
        "url = https://me:PLANTED-in-git@x\n",
    )
    .unwrap();
    std::fs::write(work.join("notes.md"), "PLANTED-in-notes\n").unwrap();
    t.harness.pair("nina").await;
    // The gate's verdict sets grep's glob: ripgrep (with pi's --hidden) then skips them.
    t.harness.say("nina", "GREP PLANTED", "tool said:").await;
    let seen = t.model.seen();
    let result = &seen
        .iter()
        .rfind(|s| s.last_role == "tool")
        .expect("a result")
        .last_text;
    assert!(
        result.contains("PLANTED-in-notes"),
        "the search ran: {result}"
    );
    assert!(
        !result.contains("PLANTED-in-env") && !result.contains("PLANTED-in-git"),
        "a remote search read protected files: {result}"
    );
    t.stop().await;
}

/// Session commands from the chat are pi's own operations
/// (docs/pi.md#session-commands-from-the-chat). Before, `/new` and `/model` reached pi as
/// prompts (text for the model); now `/model` switches the model the
/// next request names, `/usage` and the answer's footer (`bridge.usageFooter`) show the fake
/// model's own token counts, `/new` starts a conversation without the earlier turns, and each
/// turn longer than `bridge.doneNoticeAfterMs` ends with one done message.
#[tokio::test]
async fn session_commands_from_the_chat_switch_the_model_and_start_over() {
    let Some(t) = start_with(
        "session_commands_from_the_chat",
        r#"{"bridge":{"remoteToolPolicy":"read-only","usageFooter":"tokens","doneNoticeAfterMs":1}}"#,
        None,
    )
    .await
    else {
        return;
    };
    t.harness.pair("alice").await;
    t.harness
        .say("alice", "first question", "You said: first question")
        .await;
    t.harness.say("alice", "/model", "fake/fake-model-2").await;
    t.harness
        .say("alice", "/model fake-model-2", "Model: fake/fake-model-2")
        .await;
    // The answer carries the footer, from pi's usage report of the fake model's counts.
    t.harness
        .say(
            "alice",
            "second question",
            "You said: second question\n\nTokens: 10 in, 5 out",
        )
        .await;
    let seen = t.model.seen();
    let second = seen.last().expect("a request");
    assert_eq!(second.model, "fake-model-2", "the switch reached the model");
    assert_eq!(second.user_texts, ["first question", "second question"]);
    // The fake model reports 10 prompt and 5 completion tokens per call.
    t.harness
        .say("alice", "/usage", "last turn: 10 in, 5 out")
        .await;
    t.harness.say("alice", "/compact", "Compacted").await;
    t.harness.say("alice", "/new", "New session started").await;
    t.harness.say("alice", "third", "You said: third").await;
    let seen = t.model.seen();
    assert_eq!(
        seen.last().expect("a request").user_texts,
        ["third"],
        "the new session shows the model none of the earlier turns"
    );
    assert!(
        seen.iter()
            .all(|s| !s.last_text.contains("/model") && !s.last_text.contains("/new")),
        "no command reached the model as a prompt: {seen:#?}"
    );
    t.stop().await;
}

/// `bridge.streamPreview` against the real pi (docs/pi.md#streaming-preview): the card shows
/// the answer while the fake model streams it in two pieces, and the token the model sends
/// split across them never shows, on the card or anywhere else.
#[tokio::test]
async fn a_streamed_preview_never_shows_a_secret_sent_in_pieces() {
    let Some(t) = start_with(
        "a_streamed_preview_never_shows_a_secret",
        r#"{"bridge":{"remoteToolPolicy":"read-only","streamPreview":true,"progressMinIntervalMs":0}}"#,
        None,
    )
    .await
    else {
        return;
    };
    t.harness.pair("alice").await;
    // The fake model answers "Hello from fake model. You said: <text>" in two deltas, split
    // in the middle: inside the token.
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    t.harness
        .say("alice", &format!("KEY {token} end"), "You said: KEY")
        .await;
    assert!(
        t.card_shows("✎ Hello from fake model"),
        "the card showed the answer being written: {:#?}",
        t.harness.fake.edits()
    );
    let sent = t.harness.fake.sent().into_iter().map(|m| m.message.text);
    let edited = t.harness.fake.edits().into_iter().map(|m| m.text);
    for text in sent.chain(edited) {
        assert!(
            !text.contains("abcdefghij"),
            "a part of the token showed: {text}"
        );
    }
    t.stop().await;
}

/// Headless pi's model calls the extension's `send_file`: in rpc mode the tool asks
/// host-shim through its `bot-connect:send-file` dialog, the bridge uploads the file to
/// the chat that asked, and the tool result the model reads says where it went.
#[tokio::test]
async fn the_models_send_file_call_is_uploaded_through_the_rpc_dialog() {
    let Some(t) = start_with(
        "the_models_send_file_call_is_uploaded_through_the_rpc_dialog",
        r#"{"bridge":{"remoteToolPolicy":"read-only"}}"#,
        None,
    )
    .await
    else {
        return;
    };
    let notes = b"release notes\n".to_vec();
    std::fs::write(t.home.work().join("notes.txt"), &notes).expect("written");
    std::fs::write(t.home.work().join(".env"), "SECRET=1\n").expect("written");
    t.harness.pair("alice").await;
    t.harness
        .say(
            "alice",
            "please SEND notes.txt",
            "tool said: Sent notes.txt",
        )
        .await;
    let files = t.harness.fake.files();
    assert_eq!(files.len(), 1, "{files:#?}");
    assert_eq!(files[0].name, "notes.txt");
    assert_eq!(files[0].caption, "from pi");
    assert_eq!(files[0].data, notes);
    assert_eq!(files[0].conversation_id, "dm-alice");
    // A protected file from the same chat: the gate refuses the call before it runs.
    t.harness
        .say("alice", "please SEND .env", "tool said:")
        .await;
    let refused = t
        .model
        .seen()
        .last()
        .expect("a tool result")
        .last_text
        .clone();
    assert!(refused.contains("protected"), "{refused}");
    assert_eq!(t.harness.fake.files().len(), 1);
    t.stop().await;
}
