//! One broker, two live pi sessions: the real `host-shim serve` and the real pi with the
//! bot-connect extension, whose `host-shim attach` hands each session to the broker.
//! `doctor` lists both; a pi that exits takes its session off the broker; a broker that
//! stops lets the extension's attach exit, so pi reports it. Skipped, with the reason
//! printed, when node or the pi package is unavailable.

// These tests signal the real processes they start (kill, pidfd_open): libc calls.
#![allow(unsafe_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::pi::{PiHome, PiProcess, extension_path, require_pi};

/// Longest any step may take (a cold debug build compiles the component first).
const LIMIT: Duration = Duration::from_secs(60);

fn status_note(v: &Value) -> bool {
    v["type"] == "extension_ui_request"
        && v["method"] == "notify"
        && v["message"]
            .as_str()
            .is_some_and(|m| m.contains("bot-connect status"))
}

/// The bridge's own environment: config, state, and this build of host-shim.
fn bridge_env(dir: &Path) -> Vec<(String, String)> {
    crate::common::compiled::seed_cache(dir);
    vec![
        (
            "PI_BOT_CONNECT_HOST_SHIM".into(),
            env!("CARGO_BIN_EXE_host-shim").into(),
        ),
        (
            "PI_BOT_CONNECT_CONFIG".into(),
            dir.join("config.json").display().to_string(),
        ),
        (
            "PI_BOT_CONNECT_STATE".into(),
            dir.join("state.json").display().to_string(),
        ),
    ]
}

/// `host-shim doctor`'s output in this environment.
async fn doctor(env: &[(String, String)], cwd: &Path) -> String {
    let output = tokio::time::timeout(
        LIMIT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_host-shim"))
            .arg("doctor")
            .current_dir(cwd)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output(),
    )
    .await
    .expect("doctor in time")
    .expect("doctor runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `doctor` until its broker section satisfies `done` (the broker updates its list
/// as sessions come and go); a bounded number of tries.
async fn doctor_until(env: &[(String, String)], cwd: &Path, done: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..40 {
        last = doctor(env, cwd).await;
        if done(&last) {
            return last;
        }
        tokio::task::yield_now().await;
    }
    panic!("doctor never showed the expected broker state:\n{last}");
}

#[tokio::test]
async fn two_pi_sessions_attach_to_one_broker_and_leave_it_when_pi_exits() {
    let Some(bin) = require_pi("two_pi_sessions_attach_to_one_broker").await else {
        return;
    };
    let home = PiHome::new(Some("http://127.0.0.1:9/v1"));
    let bridge = home.dir.path().join("bc");
    std::fs::create_dir_all(&bridge).unwrap();
    std::fs::write(bridge.join("config.json"), "{}").unwrap();
    let mut env = home.env();
    env.extend(bridge_env(&bridge));

    let mut broker = tokio::process::Command::new(env!("CARGO_BIN_EXE_host-shim"))
        .args(["serve"])
        .current_dir(home.work())
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("host-shim serve starts");
    let mut lines = BufReader::new(broker.stdout.take().expect("stdout")).lines();
    let ready = tokio::time::timeout(LIMIT, lines.next_line())
        .await
        .expect("the broker is ready in time")
        .expect("stdout")
        .expect("a line");
    assert!(ready.starts_with("host-shim serve: ready"), "{ready}");

    let mut args = home.args();
    args.push("-e".into());
    args.push(extension_path().display().to_string());
    let mut first = PiProcess::start(&bin, &home.work(), &args, &env).await;
    let mut second = PiProcess::start(&bin, &home.work(), &args, &env).await;
    for pi in [&mut first, &mut second] {
        pi.request(json!({"type": "prompt", "message": "/connect status"}))
            .await;
        pi.wait_for_nth("the status", 1, status_note).await;
        // The broker's sessions say so in pi.
        pi.notified("served by the shared bot").await;
    }
    let listed = doctor_until(&env, &home.work(), |d| d.contains("\n  2. ")).await;
    assert!(
        listed.contains("broker (host-shim serve): running"),
        "{listed}"
    );

    // pi exits: its attach exits, and the broker takes its session off.
    first.close().await;
    let listed = doctor_until(&env, &home.work(), |d| {
        d.contains("\n  1. ") && !d.contains("\n  2. ")
    })
    .await;
    assert!(listed.contains("running"), "{listed}");

    // The broker stops (SIGTERM): the remaining pi hears its host stopped.
    let pid = broker.id().expect("broker pid") as libc::pid_t;
    // SAFETY: kill(2) on the broker this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = tokio::time::timeout(LIMIT, broker.wait())
        .await
        .expect("the broker stops in time")
        .expect("exit status");
    assert!(status.success(), "{status:?}");
    second.notified("host-shim stopped unexpectedly").await;
    let after = doctor(&env, &home.work()).await;
    assert!(
        after.contains("broker (host-shim serve): not running"),
        "{after}"
    );
    second.close().await;
}
