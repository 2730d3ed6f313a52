//! pi's questions answered from the phone (docs/pi.md#questions-pi-asks), headless: an extension's
//! `ctx.ui.select` / `confirm` / `input` reaches the chat of the turn as a question, and
//! the chat's answer goes back to pi as its `extension_ui_response`.
//!
//! First against a fake pi (a shell script speaking pi's RPC lines, so the exact lines on
//! the wire are checked on every machine), then against the real pi with a small
//! extension that asks, when node and the pi package are available.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use host_shim::local::ui::RecordingUi;
use host_shim::pi::rpc_agent::{PiLaunch, PiRpcAgent, write_extension};

use crate::common::{self, Dirs, Harness, Setup, user_config};

/// A pi that answers `get_state`, says its gate is loaded, and on a prompt asks one
/// question per line of `$QUESTIONS`, then replies with the `extension_ui_response` lines
/// it got back, one per question, so the test reads exactly what host-shim wrote.
const FAKE_PI: &str = r#"#!/bin/sh
printf '%s\n' '{"type":"extension_ui_request","id":"s0","method":"setStatus","statusKey":"bot-connect-gate","statusText":"gate v1"}'
id_of() { printf '%s' "$1" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
while IFS= read -r line; do
  case "$line" in
    *'"get_state"'*)
      printf '{"type":"response","id":"%s","command":"get_state","success":true,"data":{}}\n' "$(id_of "$line")" ;;
    *'"prompt"'*)
      printf '{"type":"response","id":"%s","command":"prompt","success":true}\n' "$(id_of "$line")"
      printf '%s\n' '{"type":"agent_start"}'
      answers=""
      n=0
      while IFS= read -r question <&3; do
        n=$((n + 1))
        printf '%s\n' "$question"
        IFS= read -r answer
        answers="$answers ANSWER$n=$(printf '%s' "$answer" | sed "s/\"/'/g; s/_/-/g")"
      done 3< "$QUESTIONS"
      printf '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"%s"}],"stopReason":"stop"}}\n' "$answers"
      printf '%s\n' '{"type":"agent_end","messages":[]}' ;;
  esac
done
"#;

struct FakePi {
    harness: Harness,
    pi: PiRpcAgent,
    _dir: tempfile::TempDir,
    _dirs: Dirs,
}

async fn fake_pi(questions: &[&str]) -> FakePi {
    let dir = tempfile::tempdir().expect("temp dir");
    let program = dir.path().join("pi");
    std::fs::write(&program, FAKE_PI).expect("fake pi written");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let list = dir.path().join("questions.jsonl");
    std::fs::write(&list, format!("{}\n", questions.join("\n"))).expect("questions written");
    let launch = PiLaunch {
        program: program.into_os_string(),
        args: Vec::new(),
        cwd: dir.path().to_path_buf(),
        extension: write_extension(&dir.path().join("ext")).expect("extension"),
        key: "pi-questions".into(),
        ready_timeout: Duration::from_secs(20),
        env: vec![(OsString::from("QUESTIONS"), list.into_os_string())],
    };
    let pi = PiRpcAgent::start(launch, Arc::new(RecordingUi::default()))
        .await
        .expect("the fake pi starts");
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "pi-questions");
    setup.agent = Arc::new(pi.clone());
    setup.config = vec![user_config(
        r#"{"bridge":{"remoteToolPolicy":"read-only"}}"#,
    )];
    let harness = setup.start().await;
    FakePi {
        harness,
        pi,
        _dir: dir,
        _dirs: dirs,
    }
}

impl FakePi {
    async fn stop(self) {
        self.harness
            .session
            .shutdown()
            .await
            .expect("session stops");
        self.pi.stop().await;
    }
}

/// The id of the `n`th question posted (from 1): `Question from the agent (<id>): …`.
async fn question_id(harness: &Harness, n: usize) -> String {
    let found = harness
        .fake
        .wait_for(common::WAIT, |sent, _| {
            sent.iter()
                .filter(|m| m.message.text.starts_with("Question from the agent ("))
                .count()
                >= n
        })
        .await;
    assert!(found, "question {n} was not asked: {:#?}", harness.texts());
    let texts: Vec<String> = harness
        .texts()
        .into_iter()
        .filter(|t| t.starts_with("Question from the agent ("))
        .collect();
    texts[n - 1]
        .trim_start_matches("Question from the agent (")
        .split(')')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_select_a_confirm_and_an_input_are_answered_from_the_chat() {
    let t = fake_pi(&[
        r#"{"type":"extension_ui_request","id":"q-select","method":"select","title":"Deploy where?","options":["eu-west","us-east"],"timeout":600000}"#,
        r#"{"type":"extension_ui_request","id":"q-confirm","method":"confirm","title":"Drop the cache?","message":"It rebuilds in an hour."}"#,
        r#"{"type":"extension_ui_request","id":"q-input","method":"input","title":"Release name?","placeholder":"v1.2.3"}"#,
    ])
    .await;
    let h = &t.harness;
    h.pair("alice").await;
    h.send("alice", "ship it").await;

    let select = question_id(h, 1).await;
    let asked = h
        .fake
        .sent()
        .into_iter()
        .find(|m| m.message.text.contains(&format!("({select})")))
        .expect("the select was posted");
    let buttons: Vec<(String, String)> = asked
        .message
        .buttons
        .iter()
        .map(|b| (b.label.clone(), b.command.clone()))
        .collect();
    assert_eq!(
        buttons,
        vec![
            ("eu-west".to_string(), format!("/answer {select} 1")),
            ("us-east".to_string(), format!("/answer {select} 2")),
        ]
    );
    // A press is the command it stands for.
    h.send("alice", &format!("/answer {select} 2")).await;

    let confirm = question_id(h, 2).await;
    h.send("alice", &format!("/answer {confirm} no")).await;

    question_id(h, 3).await;
    // "Reply with your answer": the next plain message is it.
    h.send("alice", "v2.0.0").await;

    let reply = h.posted("ANSWER1=").await;
    assert!(
        reply
            .contains("ANSWER1={'type':'extension-ui-response','id':'q-select','value':'us-east'}"),
        "{reply}"
    );
    assert!(
        reply.contains(
            "ANSWER2={'type':'extension-ui-response','id':'q-confirm','confirmed':false}"
        ),
        "{reply}"
    );
    assert!(
        reply.contains("ANSWER3={'type':'extension-ui-response','id':'q-input','value':'v2.0.0'}"),
        "{reply}"
    );
    t.stop().await;
}

#[tokio::test]
async fn a_question_nobody_answers_is_dismissed_at_its_deadline() {
    let t = fake_pi(&[
        r#"{"type":"extension_ui_request","id":"q-late","method":"confirm","title":"Proceed?","timeout":30000}"#,
    ])
    .await;
    let h = &t.harness;
    h.pair("bob").await;
    h.send("bob", "go").await;
    let id = question_id(h, 1).await;
    h.clock.advance(30_000);
    h.session.tick().await.expect("session alive");
    h.posted(&format!("Question {id} ('Proceed?'): no answer in time"))
        .await;
    let reply = h.posted("ANSWER1=").await;
    assert!(reply.contains("'id':'q-late','cancelled':true"), "{reply}");
    t.stop().await;
}

/// A small extension that asks before every tool call, then runs the call with a command
/// that echoes the answers: the model's next request holds them as the tool's result.
const ASKING_EXTENSION: &str = r#"
export default function (pi) {
	pi.on("tool_call", async (event, ctx) => {
		const where = await ctx.ui.select("Deploy where?", ["eu-west", "us-east"]);
		const sure = await ctx.ui.confirm("Drop the cache?", "It rebuilds in an hour.");
		const name = await ctx.ui.input("Release name?", "v1.2.3");
		event.input.command = `echo "where=${where} sure=${sure} name=${name}"`;
		return undefined;
	});
}
"#;

#[tokio::test]
async fn the_real_pi_gets_the_chats_answers_to_an_extensions_questions() {
    use crate::common::fake_model::FakeModel;
    use crate::common::pi::{PI_WAIT, PiHome, require_pi};

    let test = "the_real_pi_gets_the_chats_answers";
    let Some(bin) = require_pi(test).await else {
        return;
    };
    let model = FakeModel::start().await;
    let home = PiHome::new(Some(&model.base_url));
    let gate = write_extension(&home.dir.path().join("bot-connect")).expect("gate written");
    let asking = home.dir.path().join("asking.ts");
    std::fs::write(&asking, ASKING_EXTENSION).expect("extension written");
    let mut args: Vec<OsString> = home.args().into_iter().map(OsString::from).collect();
    args.extend([OsString::from("-e"), asking.into_os_string()]);
    let launch = PiLaunch {
        program: bin.into_os_string(),
        args,
        cwd: home.work(),
        extension: gate,
        key: "pi-questions-real".into(),
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
    let mut setup = Setup::new(&dirs, "pi-questions-real");
    setup.agent = Arc::new(pi.clone());
    setup.config = vec![user_config(
        r#"{"bridge":{"remoteToolPolicy":"unrestricted"}}"#,
    )];
    let h = setup.start().await;
    h.pair("carol").await;
    h.send("carol", "please TOOL").await;

    let select = question_id(&h, 1).await;
    h.send("carol", &format!("/answer {select} 2")).await;
    let confirm = question_id(&h, 2).await;
    h.send("carol", &format!("/answer {confirm} yes")).await;
    question_id(&h, 3).await;
    h.send("carol", "v2").await;

    model
        .wait("the tool's result", PI_WAIT, |m| m.seen().len() >= 2)
        .await;
    let seen = model.seen();
    assert_eq!(seen[1].last_role, "tool");
    assert!(
        seen[1]
            .last_text
            .contains("where=us-east sure=true name=v2"),
        "{:?}",
        seen[1].last_text
    );
    h.session.shutdown().await.expect("session stops");
    pi.stop().await;
}
