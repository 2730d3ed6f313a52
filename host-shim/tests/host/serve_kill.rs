//! A broker killed with SIGKILL keeps its promises (docs/state.md#what-a-kill--9-may-lose):
//! the real `host-shim serve` with a demo session, its bot on Telegram's wire (a loopback Bot
//! API), killed at a different moment of a busy turn in each round and started again on the
//! same state. Every start must open the store; the chat's pairing must hold; a prompt the
//! chat was told is queued must be reported as not run after the kill; and the pairing
//! failure budget spent before a kill must still be spent after it.

// These tests signal the real processes they start (kill(2)): libc calls.
#![allow(unsafe_code)]

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use transport_testing::telegram::{BotApiServer, private_text};

/// The chat's owner, and a stranger who guesses.
const USER: i64 = 4242;
const STRANGER: i64 = 777;
/// Longest any step may take (a cold debug build compiles the component first).
const LIMIT: Duration = Duration::from_secs(90);
/// Kill and restart rounds after the one that pairs.
const ROUNDS: u64 = 4;

/// `host-shim serve --demo api`, its stdout's ready line read, its stderr (the demo
/// session's terminal, where codes show) collected.
struct Broker {
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Broker {
    async fn start(dir: &Path, token: &str) -> Broker {
        crate::common::compiled::seed_cache(dir);
        let mut child = Command::new(env!("CARGO_BIN_EXE_host-shim"))
            // A slow demo agent: each turn takes a few seconds, so prompts queue behind it.
            .args(["serve", "--demo", "api", "--pace", "1"])
            .current_dir(dir)
            .env("HOME", dir)
            .env("PI_BOT_CONNECT_CONFIG", dir.join("config.json"))
            .env("PI_BOT_CONNECT_STATE", dir.join("state.json"))
            .env("TG_TEST_TOKEN", token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("host-shim starts");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut errors = BufReader::new(child.stderr.take().expect("piped")).lines();
        let collected = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = errors.next_line().await {
                collected.lock().expect("stderr lines").push(line);
            }
        });
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let ready = tokio::time::timeout(LIMIT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("ready") {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        assert!(
            ready,
            "serve did not start (the store must open after every kill): {:#?}",
            stderr.lock().expect("stderr lines")
        );
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Broker { child, stderr }
    }

    /// The stderr line holding `needle`, waiting for it a bounded time.
    async fn stderr_line(&self, needle: &str) -> Option<String> {
        for _ in 0..400 {
            if let Some(line) = self
                .stderr
                .lock()
                .expect("stderr lines")
                .iter()
                .find(|line| line.contains(needle))
            {
                return Some(line.clone());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        None
    }

    async fn kill(mut self) {
        let pid = self.child.id().expect("running") as libc::pid_t;
        // SAFETY: kill(2) on the child this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = tokio::time::timeout(LIMIT, self.child.wait()).await;
    }
}

/// The digits of a "Messenger pairing code: 123 456 (valid …" line.
fn code_in(line: &str) -> String {
    let after = line
        .split("pairing code: ")
        .nth(1)
        .expect("a code line")
        .split(" (")
        .next()
        .unwrap_or_default();
    after.chars().filter(char::is_ascii_digit).collect()
}

/// A private message sent now: an unpaired sender's message older than the pairing window
/// is not answered, and the server's default date is long past.
fn now_text(user: i64, id: i64, text: &str) -> serde_json::Value {
    let mut update = private_text(user, id, text);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    update["message"]["date"] = serde_json::json!(now);
    update
}

/// Sends `text` from `user` and waits for a message to that chat holding `expect`.
async fn say(bot: &BotApiServer, user: i64, id: &mut i64, text: &str, expect: &str) -> bool {
    *id += 1;
    let before = bot.sent().len();
    bot.queue_update(now_text(user, *id, text));
    bot.wait_until(Duration::from_secs(20), |s| {
        s.sent()[before..]
            .iter()
            .any(|m| m.chat_id == user.to_string() && m.text.contains(expect))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_mid_turn_keeps_pairings_the_failure_budget_and_reports_the_queue() {
    let bot = BotApiServer::start().await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = serde_json::json!({
        "bridge": {
            "remoteToolPolicy": "unrestricted",
            "pairingMaxFailuresPerHour": 3,
            "rateLimit": {"promptsPerMinute": 0, "commandsPerMinute": 0},
        },
        "transports": {"telegram": {
            "enabled": true,
            "tokenEnv": "TG_TEST_TOKEN",
            "baseUrl": bot.base_url(),
            "pollTimeoutSeconds": 1,
        }}
    });
    std::fs::write(dir.path().join("config.json"), config.to_string()).expect("config");
    let mut id = 0;

    // Round 0: the owner picks the session and pairs after two wrong codes (two of the
    // hour's three judged failures spent).
    let broker = Broker::start(dir.path(), &bot.token()).await;
    assert!(
        say(&bot, USER, &mut id, "/switch api", "now talks to").await,
        "{:#?} {:#?}",
        bot.sent(),
        broker.stderr.lock().expect("stderr lines")
    );
    assert!(
        say(&bot, USER, &mut id, "hello", "not paired").await,
        "{:#?} {:#?}",
        bot.sent(),
        broker.stderr.lock().expect("stderr lines")
    );
    let line = broker
        .stderr_line("Messenger pairing code:")
        .await
        .expect("the code shows on the demo session's terminal");
    let code = code_in(&line);
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for _ in 0..2 {
        id += 1;
        bot.queue_update(now_text(USER, id, wrong));
    }
    assert!(
        say(&bot, USER, &mut id, &code, "Paired as telegram:4242").await,
        "{:#?}",
        bot.sent()
    );
    broker.kill().await;

    // Each round: a turn runs, one prompt waits behind it, and the broker is killed at a
    // moment that moves round by round.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for round in 1..=ROUNDS {
        let broker = Broker::start(dir.path(), &bot.token()).await;
        assert!(
            say(&bot, USER, &mut id, "/whoami", "telegram:4242").await,
            "round {round}: the pairing was lost: {:#?}",
            bot.sent()
        );
        if round == 1 {
            // The budget spent before the kill is spent after it: a stranger's first wrong
            // code is the hour's third, and closes pairing.
            assert!(say(&bot, STRANGER, &mut id, "/switch api", "now talks to").await);
            assert!(say(&bot, STRANGER, &mut id, "hi", "not paired").await);
            id += 1;
            bot.queue_update(now_text(STRANGER, id, "123456"));
            assert!(
                broker.stderr_line("Pairing is closed").await.is_some(),
                "the failure budget was reset by the kill: {:#?}",
                broker.stderr.lock().expect("stderr lines")
            );
        }
        assert!(say(&bot, USER, &mut id, &format!("build it {round}"), "").await);
        assert!(
            say(
                &bot,
                USER,
                &mut id,
                &format!("then the docs {round}"),
                "Queued"
            )
            .await,
            "round {round}: {:#?}",
            bot.sent()
        );
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Right after the acknowledgement, or once the running turn's card moved on.
        if seed % 2 == 1 {
            let edits = bot.edited().len();
            bot.wait_until(Duration::from_secs(20), |s| s.edited().len() > edits)
                .await;
        }
        broker.kill().await;

        let before = bot.sent().len();
        let broker = Broker::start(dir.path(), &bot.token()).await;
        let told = bot
            .wait_until(Duration::from_secs(30), |s| {
                s.sent()[before..].iter().any(|m| {
                    m.text
                        .contains("queued message(s) from this chat were not run")
                })
            })
            .await;
        assert!(
            told,
            "round {round}: the queued prompt was not reported after the kill: {:#?}",
            bot.sent()
        );
        broker.kill().await;
    }
}
