//! C3 and I18: a token in the host's environment never becomes visible to the guest
//! and never appears in anything the bridge produces.
//!
//! The token has to be in the environment of the process the host runs in, and setting a
//! variable in this one would race every other test of the binary (they read the
//! environment from their own threads). So the test runs this binary again, this one test
//! only, with the token in the child's environment from its start, as a shell would put it.

use std::process::Command;

use crate::common::{self, Dirs, Setup};

const TOKEN: &str = "123456789:AAHsecretsecretsecretsecretsecret12";

/// Set in the child's environment only: there the test runs the session itself.
const CHILD: &str = "BOT_CONNECT_SECRET_ISOLATION_CHILD";

#[test]
fn a_host_token_never_reaches_the_guest_or_its_output() {
    if std::env::var_os(CHILD).is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(with_the_token_in_the_environment());
        return;
    }
    // libtest's name of this test: its module path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    let name = format!("{module}::a_host_token_never_reaches_the_guest_or_its_output");
    let child = Command::new(std::env::current_exe().expect("the path of this test binary"))
        .args([name.as_str(), "--exact", "--test-threads=1"])
        .env(CHILD, "1")
        .env("PI_TELEGRAM_TOKEN", TOKEN)
        .env("PI_DISCORD_TOKEN", TOKEN)
        .output()
        .expect("this test binary runs again");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("test result: ok. 1 passed"),
        "the run with the token in its environment failed ({}):\n{stdout}\n{}",
        child.status,
        String::from_utf8_lossy(&child.stderr)
    );
}

/// The check itself, in the child whose environment holds the token.
async fn with_the_token_in_the_environment() {
    assert_eq!(
        std::env::var("PI_TELEGRAM_TOKEN").as_deref(),
        Ok(TOKEN),
        "the token is in the host's environment"
    );
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "secrets");
    setup.config = vec![common::demo_runs_tools()];
    let h = setup.start().await;
    h.pair("user-1").await;
    h.say("user-1", "status of the build", "You asked").await;
    let diagnostics = h
        .session
        .diagnostics()
        .await
        .unwrap()
        .expect("bridge is alive");
    assert_eq!(
        diagnostics.sandbox.environment_variables, 0,
        "the guest sees no environment"
    );
    let doctor = h.session.local_command("doctor").await.unwrap();

    let mut everything: Vec<String> = h.texts();
    everything.extend(h.ui.notes().into_iter().map(|(_, t)| t));
    everything.extend(
        h.log
            .lines()
            .into_iter()
            .flat_map(|(_, l)| l.fields.into_iter().map(|(_, v)| v)),
    );
    everything.push(format!("{diagnostics:?}"));
    everything.push(doctor.text);
    for text in everything {
        assert!(
            !text.contains(TOKEN) && !text.contains("AAHsecret"),
            "token leaked into: {text}"
        );
    }
    h.session.shutdown().await.unwrap();
}
