//! The three-node setup of docs/scaling.md#a-local-three-node-setup, as processes: the real
//! `host-shim serve --nats` as one ingress and two session nodes on a real nats-server, the
//! bot on Telegram's wire (a loopback Bot API). Only the ingress has the bot's token. A chat
//! lists the sessions, picks one and gets its answer; SIGTERM stops every node cleanly.
//! Skipped, with the reason printed, where nats-server cannot be installed.

// These tests signal the real processes they start (kill, pidfd_open): libc calls.
#![allow(unsafe_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use transport_testing::telegram::{BotApiServer, private_text};

use crate::common::cluster::{self, nats_or_skip};

const USER: i64 = 4242;
/// Longest any step may take (a cold debug build compiles the component first).
const LIMIT: Duration = Duration::from_secs(90);

/// One node: the process, and its stdout's ready line already read.
struct Node {
    child: Child,
}

/// The cluster key every node gets, by variable (never argv).
const CLUSTER_KEY: &str = "a test cluster key of at least thirty-two bytes";

/// `host-shim serve --nats` logging in as the test server's node user, with the key: the
/// secrets travel in the environment only, the flags name the variables.
fn serve(nats: &cluster::NatsServer) -> Command {
    joined(nats, "serve")
}

/// `host-shim <subcommand> --nats …` on the test server's prefix with a 1 s TTL, logged in as
/// its node user, with the cluster key.
fn joined(nats: &cluster::NatsServer, subcommand: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_host-shim"));
    command
        .args([
            subcommand,
            "--nats",
            &nats.url,
            "--prefix",
            "cli",
            "--lock-ttl",
            "1",
        ])
        .args(["--nats-user-env", "TEST_NATS_USER"])
        .args(["--nats-password-env", "TEST_NATS_PASSWORD"])
        .args(["--cluster-key-env", "TEST_CLUSTER_KEY"])
        .env("TEST_NATS_USER", cluster::NODE_USER)
        .env("TEST_NATS_PASSWORD", &nats.password)
        .env("TEST_CLUSTER_KEY", CLUSTER_KEY);
    command
}

impl Node {
    async fn start(
        dir: &Path,
        nats: &cluster::NatsServer,
        args: &[&str],
        token: Option<&str>,
    ) -> Node {
        crate::common::compiled::seed_cache(dir);
        let mut command = serve(nats);
        command
            .args(args)
            .current_dir(dir)
            .env("HOME", dir)
            .env("PI_BOT_CONNECT_CONFIG", dir.join("config.json"))
            .env("PI_BOT_CONNECT_STATE", dir.join("state.json"))
            .env_remove("TG_TEST_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if let Some(token) = token {
            command.env("TG_TEST_TOKEN", token);
        }
        let mut child = command.spawn().expect("host-shim starts");
        let stdout = child.stdout.take().expect("piped");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(LIMIT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("ready for") {
                    return line;
                }
            }
            String::new()
        })
        .await
        .expect("the node says it is ready in time");
        assert!(ready.contains("ready for"), "{args:?} did not start");
        // Keep reading, so the node never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Node { child }
    }

    async fn stop(mut self) {
        let pid = self.child.id().expect("running") as libc::pid_t;
        // SAFETY: kill(2) on the child this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = tokio::time::timeout(LIMIT, self.child.wait())
            .await
            .expect("the node stops in time")
            .expect("status");
        assert!(status.success(), "{status}");
    }
}

/// Queues a private message and waits for a sent message holding `expect`.
async fn say(bot: &BotApiServer, message_id: i64, text: &str, expect: &str) -> bool {
    let before = bot.sent().len();
    bot.queue_update(private_text(USER, message_id, text));
    bot.wait_until(Duration::from_secs(10), |s| {
        s.sent()[before..].iter().any(|m| m.text.contains(expect))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_three_node_setup_answers_a_chat_and_stops_cleanly() {
    let nats = nats_or_skip!();
    let bot = BotApiServer::start().await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = cluster::telegram_cluster_config(&bot.base_url(), USER);
    std::fs::write(dir.path().join("config.json"), config.to_string()).expect("config");
    let sessions = [
        "--role", "sessions", "--demo", "api", "--demo", "web", "--pace", "0",
    ];
    let ingress = Node::start(
        dir.path(),
        &nats,
        &["--role", "ingress"],
        Some(&bot.token()),
    )
    .await;
    let first = Node::start(dir.path(), &nats, &sessions, None).await;
    let second = Node::start(dir.path(), &nats, &sessions, None).await;

    // The nodes place their sessions within a few lock periods; until then the list is
    // shorter.
    let mut id = 0;
    let listed = loop {
        id += 1;
        assert!(id < 40, "both sessions never listed: {:#?}", bot.sent());
        if say(&bot, id, "/sessions", "2. ").await {
            break bot
                .sent()
                .last()
                .map(|m| m.text.clone())
                .unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(listed.contains("api") && listed.contains("web"), "{listed}");
    assert!(say(&bot, id + 1, "/switch web", "now talks to web").await);
    assert!(
        say(&bot, id + 2, "build it", "You asked").await,
        "{:#?}",
        bot.sent()
    );

    first.stop().await;
    second.stop().await;
    ingress.stop().await;
}

/// Runs `serve` (already given its arguments) to its end; returns its stderr.
async fn refused(mut command: Command, dir: &Path) -> (bool, String) {
    crate::common::compiled::seed_cache(dir);
    command
        .current_dir(dir)
        .env("HOME", dir)
        .env("PI_BOT_CONNECT_CONFIG", dir.join("config.json"))
        .env("PI_BOT_CONNECT_STATE", dir.join("state.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(LIMIT, command.output())
        .await
        .expect("the node ends in time")
        .expect("host-shim runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_credentials_or_key_refuses_to_start_and_says_which_flags() {
    let nats = nats_or_skip!();
    let bot = BotApiServer::start().await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = cluster::telegram_cluster_config(&bot.base_url(), USER);
    std::fs::write(dir.path().join("config.json"), config.to_string()).expect("config");
    let bare = |extra: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_host-shim"));
        command
            .args(["serve", "--nats", &nats.url, "--role", "ingress"])
            .args(extra)
            .env("TG_TEST_TOKEN", bot.token())
            .envs(env.iter().copied());
        command
    };

    let key = [("K", CLUSTER_KEY)];
    let (ok, stderr) = refused(bare(&["--cluster-key-env", "K"], &key), dir.path()).await;
    assert!(!ok && stderr.contains("--nats-creds FILE"), "{stderr}");

    let login = [("U", "node"), ("P", nats.password.as_str())];
    let flags = ["--nats-user-env", "U", "--nats-password-env", "P"];
    let (ok, stderr) = refused(bare(&flags, &login), dir.path()).await;
    assert!(
        !ok && stderr.contains("--cluster-key-file FILE"),
        "{stderr}"
    );

    let short = [("K", "too short")];
    let (ok, stderr) = refused(bare(&["--cluster-key-env", "K"], &short), dir.path()).await;
    assert!(!ok && stderr.contains("at least 32"), "{stderr}");

    // The password in the URL is refused, and never echoed.
    let url = nats
        .url
        .replace("nats://", &format!("nats://node:{}@", nats.password));
    let mut command = Command::new(env!("CARGO_BIN_EXE_host-shim"));
    command.args([
        "serve",
        "--nats",
        &url,
        "--role",
        "ingress",
        "--insecure-no-auth",
    ]);
    let (ok, stderr) = refused(command, dir.path()).await;
    assert!(!ok && stderr.contains("--nats-password-env"), "{stderr}");
    assert!(!stderr.contains(&nats.password), "{stderr}");

    // --insecure-no-auth gets past the node's own check, says why that is dangerous, and
    // this server (with authentication on) then refuses the anonymous client.
    let (ok, stderr) = refused(bare(&["--insecure-no-auth"], &[]), dir.path()).await;
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("WARNING: INSECURE"), "{stderr}");
    assert!(stderr.contains("authorization violation"), "{stderr}");
}

/// `host-shim run --nats` (docs/scaling.md#a-second-machine-a-session-lives-where-its-agent-lives):
/// the one session `run` starts, in a home and state directory of its own (another
/// "machine"), joins the cluster and is answered through the ingress's bot, which holds the
/// only token; `/quit` ends it and the process exits cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_nats_serves_its_one_session_through_the_clusters_bot() {
    let nats = nats_or_skip!();
    let bot = BotApiServer::start().await;
    let machine_a = tempfile::tempdir().expect("temporary directory");
    let machine_b = tempfile::tempdir().expect("temporary directory");
    let config = cluster::telegram_cluster_config(&bot.base_url(), USER);
    for dir in [machine_a.path(), machine_b.path()] {
        std::fs::write(dir.join("config.json"), config.to_string()).expect("config");
    }
    let ingress = Node::start(
        machine_a.path(),
        &nats,
        &["--role", "ingress"],
        Some(&bot.token()),
    )
    .await;
    crate::common::compiled::seed_cache(machine_b.path());
    let dir = machine_b.path();
    let mut run = joined(&nats, "run");
    run.args(["--pace", "0"])
        .current_dir(dir)
        .env("HOME", dir)
        .env("PI_BOT_CONNECT_CONFIG", dir.join("config.json"))
        .env("PI_BOT_CONNECT_STATE", dir.join("state.json"))
        .env_remove("TG_TEST_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = run.spawn().expect("host-shim run starts");
    let mut stdin = child.stdin.take().expect("piped");

    // The session is attached within a few lock periods; until then nothing answers.
    let mut id = 0;
    loop {
        id += 1;
        assert!(
            id < 40,
            "the run's session never answered: {:#?}",
            bot.sent()
        );
        if say(&bot, id, &format!("build it {id}"), "You asked").await {
            break;
        }
    }
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"/quit\n")
        .await
        .expect("write /quit");
    let output = tokio::time::timeout(LIMIT, child.wait_with_output())
        .await
        .expect("run ends in time")
        .expect("status");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{printed}");
    assert!(printed.contains("joins the cluster"), "{printed}");
    assert!(!printed.contains(&bot.token()), "no token in run's output");
    ingress.stop().await;
}
