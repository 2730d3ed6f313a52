//! The README's three-node setup, as processes: the real `host-shim serve --nats` as one
//! ingress and two session nodes on a real nats-server, the bot on Telegram's wire (a
//! loopback Bot API). Only the ingress has the bot's token. A chat lists the sessions,
//! picks one and gets its answer; SIGTERM stops every node cleanly. Skipped, with the
//! reason printed, where nats-server cannot be installed.

#[path = "../../tests/tests/cluster_support/mod.rs"]
mod cluster_support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use transport_testing::telegram::{BotApiServer, private_text};

const USER: i64 = 4242;
/// Longest any step may take (a cold debug build compiles the component first).
const LIMIT: Duration = Duration::from_secs(90);

/// One node: the process, and its stdout's ready line already read.
struct Node {
    child: Child,
}

impl Node {
    async fn start(dir: &Path, url: &str, args: &[&str], token: Option<&str>) -> Node {
        let mut command = Command::new(env!("CARGO_BIN_EXE_host-shim"));
        command
            .args(["serve", "--nats", url, "--prefix", "cli", "--lock-ttl", "1"])
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
    let config = cluster_support::telegram_cluster_config(&bot.base_url(), USER);
    std::fs::write(dir.path().join("config.json"), config.to_string()).expect("config");
    let sessions = [
        "--role", "sessions", "--demo", "api", "--demo", "web", "--pace", "0",
    ];
    let ingress = Node::start(
        dir.path(),
        &nats.url,
        &["--role", "ingress"],
        Some(&bot.token()),
    )
    .await;
    let first = Node::start(dir.path(), &nats.url, &sessions, None).await;
    let second = Node::start(dir.path(), &nats.url, &sessions, None).await;

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
