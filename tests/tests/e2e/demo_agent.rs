//! The demo agent honours the bridge's verdicts: with `examples/strict.json` its tools
//! are blocked, and its answer says so instead of claiming work that never happened.

use crate::common::{self, Dirs, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_strict_example_the_reply_says_the_tools_were_blocked() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "strict");
    setup.config = vec![common::user_config(include_str!(
        "../../../examples/strict.json"
    ))];
    let h = setup.start().await;
    h.pair("user-1").await;
    h.say("user-1", "run the tests", "Not done").await;
    let texts = h.texts().join("\n");
    assert!(texts.contains("`bash` was blocked"), "{texts}");
    assert!(!texts.contains("[x] ran the tests"), "{texts}");
    assert!(!texts.contains("All **green**"), "{texts}");
    h.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_tools_are_allowed_the_reply_lists_what_ran() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "open");
    setup.config = vec![common::user_config(
        r#"{"bridge":{"remoteToolPolicy":"unrestricted"}}"#,
    )];
    let h = setup.start().await;
    h.pair("user-1").await;
    h.say("user-1", "run the tests", "[x] ran the tests").await;
    h.session.shutdown().await.expect("clean shutdown");
}
