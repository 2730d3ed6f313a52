//! C3 and I18: a token in the host's environment never becomes visible to the guest
//! and never appears in anything the bridge produces. One test in its own binary,
//! because it sets process environment variables.

mod common;

use common::{Dirs, Setup};

const TOKEN: &str = "123456789:AAHsecretsecretsecretsecretsecret12";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_token_never_reaches_the_guest_or_its_output() {
    // SAFETY: this binary has a single test, set before any other thread reads the env.
    unsafe {
        std::env::set_var("PI_TELEGRAM_TOKEN", TOKEN);
        std::env::set_var("PI_DISCORD_TOKEN", TOKEN);
    }
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
