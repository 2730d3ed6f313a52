//! Scoped remote turns through the real component and host with the demo agent
//! (docs/decisions.md#decision-16-scoped-remote-turns): the demo's `write <path>` carries its path
//! to the host, which reads it out of the tool's arguments; a write outside `allowedPaths` is
//! refused with the reason, a write to a protected path asks the phone, and an ordinary one inside
//! the scope just runs.

use crate::common::{self, Dirs, Setup};

/// The README's example, so what the README promises is what is tested.
const SCOPE: &str = include_str!("../../../examples/scoped.json");

async fn start(key: &str) -> (Dirs, common::Harness) {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, key);
    setup.config = vec![common::user_config(SCOPE)];
    let h = setup.start().await;
    h.pair("user-1").await;
    (dirs, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_outside_the_allowed_paths_is_refused_with_the_reason() {
    let (_dirs, h) = start("outside").await;
    h.say("user-1", "write README.md", "Not done").await;
    let texts = h.texts().join("\n");
    assert!(
        texts.contains(
            "`write` was blocked: Tool 'write' may not change 'README.md' in a \
             messenger-originated turn: it is outside the allowed paths (src/**, tests/**, docs/**)."
        ),
        "{texts}"
    );
    assert!(
        !texts.contains("Approval needed"),
        "refused, not asked: {texts}"
    );
    // The digest lists what the scope refused this turn.
    let note = h.session.local_command("digest").await.expect("digest");
    assert!(note.text.contains("Digest sent"), "{}", note.text);
    let digest = h.posted("Scope this turn").await;
    assert!(digest.contains("refused `write` README.md"), "{digest}");
    h.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_inside_the_scope_runs_without_asking() {
    let (_dirs, h) = start("inside").await;
    h.say("user-1", "write src/lib.rs", "I wrote `src/lib.rs`")
        .await;
    assert!(
        !h.texts().iter().any(|t| t.starts_with("Approval needed")),
        "{:#?}",
        h.texts()
    );
    h.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_protected_path_asks_the_phone_first() {
    let (_dirs, h) = start("protected").await;
    h.send("user-1", "write src/.env").await;
    let id = h.approval_id().await;
    let request = h.posted("Approval needed (").await;
    assert!(
        request.contains("wants to run 'write' on 'src/.env' (a protected path)"),
        "{request}"
    );
    // While it waits, /scope shows the running turn's frozen scope.
    h.say(
        "user-1",
        "/scope",
        "Scope of the running remote turn (frozen when it started):\nFrom: bridge.remoteScope\nRuns without asking: read, grep, find, ls, write, edit\nAsks first: bash\nMay change: src/**, tests/**, docs/**",
    )
    .await;
    h.say(
        "user-1",
        &format!("/approve {id}"),
        &format!("Approval {id} ('write'): approved by fake:user-1 from the chat."),
    )
    .await;
    h.posted("I wrote `src/.env`").await;
    h.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_connects_own_config_is_protected_even_where_writes_are_allowed() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "own-files");
    // Writes allowed everywhere: only protection stands between the agent and its config.
    setup.config = vec![common::user_config(
        r#"{"bridge":{"remoteScope":{"allowTools":["write"],"allowedPaths":["**"]},
            "remoteApproval":{"enabled":true,"timeoutMs":60000}}}"#,
    )];
    let h = setup.start().await;
    h.pair("user-1").await;
    h.send("user-1", "write .pi/bot-connect.json").await;
    let request = h.posted("Approval needed (").await;
    assert!(
        request.contains("'.pi/bot-connect.json' (a protected path)"),
        "{request}"
    );
    h.session.shutdown().await.expect("clean shutdown");
}
