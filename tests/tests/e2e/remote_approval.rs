//! Approval from the phone through the real component and host
//! (docs/decisions.md#decision-11-approval-from-the-phone): the demo agent's tool call waits,
//! parked by the host, while the chat's `/approve` or `/deny` goes into the same instance and
//! settles it; the terminal can answer first.

use crate::common::{self, Dirs, Setup, WAIT};

const CONFIG: &str = r#"{"bridge":{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":{"enabled":true,"timeoutMs":60000}}}"#;

/// The id of the newest approval request the chat received.
fn last_request_id(texts: &[String]) -> String {
    let text = texts
        .iter()
        .rev()
        .find_map(|t| t.strip_prefix("Approval needed ("))
        .expect("an approval request in the chat");
    text.split(')').next().unwrap_or_default().to_string()
}

async fn wait_for_requests(h: &common::Harness, count: usize) {
    let found = h
        .fake
        .wait_for(WAIT, |sent, _| {
            sent.iter()
                .filter(|m| m.message.text.starts_with("Approval needed ("))
                .count()
                >= count
        })
        .await;
    assert!(found, "no approval request #{count}: {:#?}", h.texts());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_waits_for_the_phone_and_approve_or_deny_decides_it() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "approve");
    setup.config = vec![common::user_config(CONFIG)];
    let h = setup.start().await;
    h.pair("user-1").await;

    // The demo turn calls `read`, then `bash`. Nobody answers at the terminal.
    h.fake
        .inject(h.dm("user-1", "run the tests"))
        .await
        .expect("fake is listening");
    wait_for_requests(&h, 1).await;
    let read = last_request_id(&h.texts());
    assert!(
        h.texts().iter().any(|t| t.contains("wants to run 'read'")),
        "{:#?}",
        h.texts()
    );
    // Commands still go in while the call is parked.
    h.say("user-1", "/status", "pi-bot-connect status").await;
    h.say(
        "user-1",
        &format!("/approve {read}"),
        &format!("Approval {read} ('read'): approved by fake:user-1 from the chat."),
    )
    .await;

    wait_for_requests(&h, 2).await;
    let bash = last_request_id(&h.texts());
    assert_ne!(bash, read);
    h.say(
        "user-1",
        &format!("/deny {bash}"),
        &format!("Approval {bash} ('bash'): denied by fake:user-1 from the chat."),
    )
    .await;
    // The turn ends and its answer says what really happened.
    h.say("user-1", "/approve zzzz", "No approval 'zzzz' is waiting")
        .await;
    let found = h
        .fake
        .wait_for(WAIT, |sent, _| {
            sent.iter()
                .any(|m| m.message.text.contains("`bash` was blocked"))
        })
        .await;
    assert!(found, "{:#?}", h.texts());
    // The terminal heard who decided each call.
    let notes: Vec<String> = h.ui.notes().into_iter().map(|(_, t)| t).collect();
    assert!(
        notes.iter().any(
            |n| n == &format!("Approval {bash} ('bash'): denied by fake:user-1 from the chat.")
        ),
        "{notes:#?}"
    );
    h.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_can_answer_first_and_the_chat_is_told() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "local-first");
    setup.config = vec![common::user_config(CONFIG)];
    let h = setup.start().await;
    h.pair("user-1").await;
    // Both local questions are answered yes at once.
    h.ui.answer(true);
    h.ui.answer(true);

    h.fake
        .inject(h.dm("user-1", "run the tests"))
        .await
        .expect("fake is listening");
    let found = h
        .fake
        .wait_for(WAIT, |sent, _| {
            sent.iter()
                .any(|m| m.message.text.contains("[x] ran the tests"))
        })
        .await;
    assert!(found, "{:#?}", h.texts());
    let texts = h.texts();
    let id = last_request_id(&texts);
    assert!(
        texts.contains(&format!(
            "Approval {id} ('bash'): approved at the terminal."
        )),
        "{texts:#?}"
    );
    // Too late from the phone: it says who decided.
    h.say(
        "user-1",
        &format!("/deny {id}"),
        "was already decided; your answer changed nothing",
    )
    .await;
    h.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_still_waiting_at_shutdown_is_blocked() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "shutdown");
    setup.config = vec![common::user_config(CONFIG)];
    let agent = std::sync::Arc::new(common::ScriptAgent::default());
    setup.agent = agent.clone();
    let h = setup.start().await;
    h.pair("user-1").await;
    let waiting = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.tool_call("bash").await })
    };
    // The call is outside any turn the bridge saw: it counts as remote and asks.
    wait_for_requests(&h, 1).await;
    h.session.shutdown().await.expect("clean shutdown");
    let verdict = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("a verdict in time")
        .expect("the task ran");
    assert!(
        matches!(verdict, host_shim::wit::session::ToolDecision::Block(_)),
        "{verdict:?}"
    );
}
