//! The extension starts the real `host-shim attach` binary for its pi session, talks to
//! it, reports its crash, starts it again on `/connect`, and stops it when pi exits.
//! Skipped, with the reason printed, when node or the pi package is unavailable.

// These tests signal the real processes they start (kill, pidfd_open): libc calls.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd as _, OwnedFd};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::pi::{PiHome, PiProcess, extension_path, require_pi};

/// Processes whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            found.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    found
}

fn is_attach(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("attach"))
        .unwrap_or(false)
}

/// Waits for `pid` to exit, through a pidfd (no polling).
async fn exited(pid: u32) {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if fd < 0 {
        return; // already gone
    }
    // SAFETY: `fd` is a fresh descriptor this function owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the descriptor is owned by the AsyncFd and closed only when it drops.
    let fd = unsafe { tokio::io::unix::AsyncFd::register(fd) }.expect("pidfd registers");
    // A pidfd turns readable when its process exits.
    let _exited = tokio::time::timeout(Duration::from_secs(30), fd.readable())
        .await
        .expect("the process exits in time")
        .expect("pidfd readable");
}

fn status_note(v: &Value) -> bool {
    v["type"] == "extension_ui_request"
        && v["method"] == "notify"
        && v["message"]
            .as_str()
            .is_some_and(|m| m.contains("bot-connect status"))
}

#[tokio::test]
async fn the_extension_runs_attach_for_its_session_and_survives_its_crash() {
    let Some(bin) = require_pi("the_extension_runs_attach_for_its_session").await else {
        return;
    };
    // No prompt goes to a model in this test; the provider only has to exist.
    let home = PiHome::new(Some("http://127.0.0.1:9/v1"));
    let bridge = home.dir.path().join("bc");
    std::fs::create_dir_all(&bridge).unwrap();
    std::fs::write(bridge.join("config.json"), "{}").unwrap();
    crate::common::compiled::seed_cache(&bridge);
    let mut args = home.args();
    args.push("-e".into());
    args.push(extension_path().display().to_string());
    let mut env = home.env();
    env.push((
        "PI_BOT_CONNECT_HOST_SHIM".into(),
        env!("CARGO_BIN_EXE_host-shim").into(),
    ));
    env.push((
        "PI_BOT_CONNECT_CONFIG".into(),
        bridge.join("config.json").display().to_string(),
    ));
    env.push((
        "PI_BOT_CONNECT_STATE".into(),
        bridge.join("state.json").display().to_string(),
    ));
    let mut pi = PiProcess::start(&bin, &home.work(), &args, &env).await;

    // Typed in pi: answered by the attach process the extension started.
    pi.request(json!({"type": "prompt", "message": "/connect status"}))
        .await;
    pi.wait_for_nth("the status", 1, status_note).await;
    let attach: Vec<u32> = children(pi.pid())
        .into_iter()
        .filter(|p| is_attach(*p))
        .collect();
    assert_eq!(
        attach.len(),
        1,
        "one host-shim attach per session: {attach:?}"
    );
    let links = std::fs::read_dir(bridge.join("links")).unwrap().count();
    assert_eq!(links, 1, "its socket lives under the state directory");

    // A crash is reported in pi, and pi carries on.
    // SAFETY: kill(2) on a pid this test just found as pi's child.
    unsafe { libc::kill(attach[0] as libc::pid_t, libc::SIGKILL) };
    pi.notified("host-shim stopped unexpectedly").await;
    let state = pi.request(json!({"type": "get_state"})).await;
    assert_eq!(state["success"], true, "pi is unaffected");

    // `/connect` starts it again.
    pi.request(json!({"type": "prompt", "message": "/connect status"}))
        .await;
    pi.wait_for_nth("the status after the restart", 2, status_note)
        .await;
    let again: Vec<u32> = children(pi.pid())
        .into_iter()
        .filter(|p| is_attach(*p))
        .collect();
    assert_eq!(again.len(), 1, "{again:?}");

    // pi exits: its attach stops too.
    pi.close().await;
    exited(again[0]).await;
}
