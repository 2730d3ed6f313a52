//! Interoperability: a client written in Python with grpcio talks to the server through
//! all four RPCs, with stubs generated from `proto/messenger.proto` alone, so nothing
//! tonic-specific can creep into the contract.
//!
//! grpcio and grpcio-tools are installed with pip into a cache folder under cargo's
//! target directory (never globally) the first time. Without python3, pip, or the network
//! to fetch the packages, the test is SKIPPED and prints why. `ROBO_CLAW_INTEROP=skip`
//! skips it on purpose.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use transport_core::{Inbound, Transport};
use transport_robo_claw::{ClientConfig, RoboClawConfig};

use crate::support::{TOKEN, config, start};

const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn skip(reason: &str) {
    println!("SKIPPED robo_claw interop test: {reason}");
}

/// Runs `command` with a deadline; the output, or why it failed.
async fn run(mut command: Command, limit: Duration) -> Result<String, String> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().map_err(|error| error.to_string())?;
    let output = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| format!("did not finish within {} s", limit.as_secs()))?
        .map_err(|error| error.to_string())?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The cache folder with grpcio and grpcio-tools, installed on first use.
async fn python_packages() -> Result<PathBuf, String> {
    let site = Path::new(env!("CARGO_TARGET_TMPDIR")).join("robo_claw-interop-python");
    if site.join("grpc_tools").is_dir() && site.join("grpc").is_dir() {
        return Ok(site);
    }
    let mut pip = Command::new("python3");
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--target",
    ])
    .arg(&site)
    .args(["grpcio", "grpcio-tools"]);
    run(pip, INSTALL_TIMEOUT)
        .await
        .map_err(|error| format!("pip could not install grpcio and grpcio-tools ({error})"))?;
    Ok(site)
}

#[tokio::test]
async fn a_python_grpcio_client_uses_all_four_rpcs() {
    if std::env::var("ROBO_CLAW_INTEROP").as_deref() == Ok("skip") {
        return skip("ROBO_CLAW_INTEROP=skip");
    }
    if run(
        {
            let mut version = Command::new("python3");
            version.arg("--version");
            version
        },
        Duration::from_secs(20),
    )
    .await
    .is_err()
    {
        return skip("python3 is not installed");
    }
    let site = match python_packages().await {
        Ok(site) => site,
        Err(reason) => return skip(&reason),
    };

    // Stubs from the proto, with grpcio-tools' own protoc.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stubs = tempfile::tempdir().expect("temp dir");
    let mut protoc = Command::new("python3");
    protoc
        .env("PYTHONPATH", &site)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(manifest.join("proto"))
        .arg(format!("--python_out={}", stubs.path().display()))
        .arg(format!("--grpc_python_out={}", stubs.path().display()))
        .arg(manifest.join("proto/messenger.proto"));
    run(protoc, RUN_TIMEOUT)
        .await
        .expect("grpc_tools.protoc compiles the proto");

    let mut server = start(config()).await;
    let addr = server.addr;
    // Plays the bridge: a command is answered with a status line, a prompt with an echo
    // naming its attachment, each in the conversation it came from.
    let transport = server.transport.clone();
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let bridge = tokio::spawn(async move {
        while let Some(inbound) = server.inbound.recv().await {
            let Inbound::Message { envelope, handled } = inbound else {
                continue;
            };
            let text = if envelope.text.starts_with('/') {
                format!("status: idle ({})", envelope.text)
            } else {
                let names: Vec<String> = envelope
                    .attachments
                    .iter()
                    .map(|a| format!("{} {:?}", a.media_type, a.size_bytes))
                    .collect();
                format!("echo: {} [{}]", envelope.text, names.join(", "))
            };
            server.reply(&envelope.conversation_id, &text).await;
            drop(handled);
            let _ = seen_tx.send(envelope);
        }
    });

    let mut client = Command::new("python3");
    client
        .env(
            "PYTHONPATH",
            std::env::join_paths([site.as_path(), stubs.path()]).expect("paths"),
        )
        .arg(manifest.join("tests/interop/client.py"))
        .arg(addr.to_string())
        .arg(TOKEN);
    let output = run(client, RUN_TIMEOUT)
        .await
        .expect("the Python client runs");
    bridge.abort();
    let seen_by_python: serde_json::Value =
        serde_json::from_str(output.trim()).expect("the client prints JSON");

    assert_eq!(seen_by_python["upload"]["success"], true);
    let file_id = seen_by_python["upload"]["file_id"]
        .as_str()
        .expect("a file id")
        .to_owned();
    assert_eq!(
        seen_by_python["download"],
        serde_json::json!({"data": "hello from python", "filename": "hello.txt", "last": true})
    );
    assert_eq!(seen_by_python["command"]["success"], true);
    assert_eq!(
        seen_by_python["command"]["message"],
        "status: idle (/status)"
    );
    assert_eq!(seen_by_python["command"]["result"]["room_id"], "py-room");
    assert_eq!(
        seen_by_python["reply"],
        serde_json::json!({
            "sender_id": "robot",
            "content": "echo: hello from python [application/octet-stream Some(17)]",
            "room": "py-room"
        })
    );
    assert_eq!(seen_by_python["wrong_token"], "UNAUTHENTICATED");

    let command = seen.recv().await.expect("the command envelope");
    assert_eq!(
        (command.user_id.as_str(), command.conversation_id.as_str()),
        ("py", "py-room")
    );
    let prompt = seen.recv().await.expect("the prompt envelope");
    assert_eq!(prompt.attachments[0].reference, file_id);
    assert_eq!(prompt.timestamp, 1_700_000_000_000);
    transport.stop().await;
}

#[tokio::test]
async fn a_python_client_with_its_own_token_cannot_pose_as_another_client() {
    if std::env::var("ROBO_CLAW_INTEROP").as_deref() == Ok("skip") {
        return skip("ROBO_CLAW_INTEROP=skip");
    }
    let site = match python_packages().await {
        Ok(site) => site,
        Err(reason) => return skip(&reason),
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stubs = tempfile::tempdir().expect("temp dir");
    let mut protoc = Command::new("python3");
    protoc
        .env("PYTHONPATH", &site)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(manifest.join("proto"))
        .arg(format!("--python_out={}", stubs.path().display()))
        .arg(format!("--grpc_python_out={}", stubs.path().display()))
        .arg(manifest.join("proto/messenger.proto"));
    run(protoc, RUN_TIMEOUT)
        .await
        .expect("grpc_tools.protoc compiles the proto");
    let client = |name: &str, token: &str, sender: &str| ClientConfig {
        name: name.into(),
        token_env: format!("PI_RC_{}", name.to_uppercase()),
        token: Some(token.into()),
        senders: vec![sender.into()],
    };
    let mut server = start(RoboClawConfig {
        clients: vec![
            client("a", "py-token-a", "alice"),
            client("b", "py-token-b", "bob"),
        ],
        ..config()
    })
    .await;
    let mut attacker = Command::new("python3");
    attacker
        .env(
            "PYTHONPATH",
            std::env::join_paths([site.as_path(), stubs.path()]).expect("paths"),
        )
        .arg(manifest.join("tests/interop/attacker.py"))
        .arg(server.addr.to_string())
        .args(["py-token-a", "py-token-b", TOKEN]);
    let output = run(attacker, RUN_TIMEOUT)
        .await
        .expect("the Python client runs");
    let seen: serde_json::Value =
        serde_json::from_str(output.trim()).expect("the client prints JSON");
    assert_eq!(
        seen,
        serde_json::json!({
            "stream_as_b": "PERMISSION_DENIED",
            "command_as_b": "PERMISSION_DENIED",
            "download_bs_file": "NOT_FOUND",
            "shared_token": "UNAUTHENTICATED"
        })
    );
    // Nothing any of it sent reached the session.
    while let Ok(inbound) = server.inbound.try_recv() {
        assert!(
            !matches!(inbound, Inbound::Message { .. }),
            "a message was delivered"
        );
    }
    server.transport.stop().await;
}
