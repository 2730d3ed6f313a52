//! The `host-shim` binary as a person runs it: a real process, a real stdin that stays
//! open, a temporary home. Every wait is bounded, so a hang fails instead of stalling.

// These tests signal the real processes they start (kill, pidfd_open): libc calls.
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest any step may take (a cold debug build compiles the component first).
const LIMIT: Duration = Duration::from_secs(60);

/// A temporary home with a state path and a working directory.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn state_file(&self) -> PathBuf {
        self.path().join("agent").join("bot-connect-state.json")
    }

    /// Writes the user's own config (`~/.pi/agent/bot-connect.json`): a project file may
    /// only narrow it (docs/security.md#project-files-only-narrow).
    fn user_config(&self, json: &str) {
        let dir = self.path().join(".pi").join("agent");
        std::fs::create_dir_all(&dir).expect("config dir");
        std::fs::write(dir.join("bot-connect.json"), json).expect("config");
    }

    fn command(&self, args: &[&str]) -> Command {
        // What runs the component finds it compiled, as a user's earlier `run` left it (the
        // commands that write nothing read that cache and compiled it otherwise: 5-10 s a
        // call). `doctor`'s test seeds it itself, before it lists the state directory.
        if matches!(
            args.first(),
            Some(&("run" | "serve" | "attach" | "preview" | "replay"))
        ) && let Some(state_dir) = self.state_file().parent()
        {
            crate::common::compiled::seed_cache(state_dir);
        }
        let mut command = Command::new(env!("CARGO_BIN_EXE_host-shim"));
        command
            .args(args)
            .current_dir(self.path())
            .env_clear()
            .env("HOME", self.path())
            .env("PI_BOT_CONNECT_STATE", self.state_file())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command
    }
}

/// A running `host-shim` whose output is collected as it comes.
struct Running {
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Running {
    fn start(mut command: Command) -> Running {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("host-shim starts");
        let output = Arc::new(Mutex::new(String::new()));
        for mut stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let output = output.clone();
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    output
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buffer[..n]));
                }
            });
        }
        Running { child, output }
    }

    fn type_line(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("host-shim reads its input");
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits (bounded) until the output contains `needle`.
    fn wait_for(&self, needle: &str) {
        let start = Instant::now();
        while !self.output().contains(needle) {
            assert!(
                start.elapsed() < LIMIT,
                "no {needle:?} in the output:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (bounded) for the process to end, with stdin still open.
    fn wait_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("process status") {
                return status;
            }
            if start.elapsed() > LIMIT {
                let _ = self.child.kill();
                panic!("host-shim did not exit; output:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Runs a command to its end (stdin closed) and returns its status and output.
fn finish(command: Command) -> (ExitStatus, String) {
    let mut running = Running::start(command);
    // End of input: a command that reads stdin sees Ctrl-D.
    drop(running.child.stdin.take());
    let status = running.wait_exit();
    // The reader threads end with the process; give them the last bytes.
    std::thread::sleep(Duration::from_millis(50));
    (status, running.output())
}

#[test]
fn quit_exits_at_once_while_stdin_stays_open() {
    let home = Home::new();
    let mut run = Running::start(home.command(&["run", "--pace", "0"]));
    run.wait_for("Leave with /quit");
    run.type_line("/quit");
    let status = run.wait_exit();
    assert!(status.success(), "{}", run.output());
    assert!(run.output().contains("bye"));
}

#[test]
fn a_transport_that_cannot_start_leaves_the_terminal_working() {
    let home = Home::new();
    home.user_config(r#"{"transports":{"telegram":{"enabled":true}}}"#);
    let mut run = Running::start(home.command(&["run", "--pace", "0"]));
    run.wait_for("PI_TELEGRAM_TOKEN is not set");
    run.type_line("hello");
    run.wait_for("This terminal is not a chat in this run");
    run.type_line("/connect status");
    run.wait_for("bot-connect");
    run.type_line("/quit");
    assert!(run.wait_exit().success(), "{}", run.output());
}

#[test]
fn the_terminal_follows_bridge_local_command() {
    let home = Home::new();
    home.user_config(r#"{"bridge":{"localCommand":"bc"}}"#);
    let mut run = Running::start(home.command(&["run", "--pace", "0"]));
    run.wait_for("Local commands start with /bc");
    // It used to take only `/connect …`, whatever the config said.
    run.type_line("/bc status");
    run.wait_for("bot-connect status");
    run.type_line("/quit");
    assert!(run.wait_exit().success(), "{}", run.output());
}

/// The id in the newest `Approval needed (<id>)` line of `output`.
fn newest_approval_id(output: &str) -> String {
    let at = output
        .rfind("Approval needed (")
        .expect("an approval request was shown");
    output[at + "Approval needed (".len()..]
        .split(')')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_demo_walkthrough_approves_from_the_chat_and_from_the_terminal() {
    let home = Home::new();
    home.user_config(
        r#"{"bridge":{"allowUsers":["terminal:you"],"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":"on"}}"#,
    );
    let mut run = Running::start(home.command(&["run", "--pace", "0"]));
    // A local command is answered once the session runs; the chat is live from then on.
    run.type_line("/connect status");
    run.wait_for("bot-connect status");
    run.type_line("run the tests");
    // The chat gets the request for `read`, the terminal asks the same question.
    run.wait_for("wants to run 'read'");
    run.wait_for("[y/N]");
    let read = newest_approval_id(&run.output());
    // Typed as the chat: not taken as the terminal's answer, it answers from the chat.
    run.type_line(&format!("/approve {read}"));
    run.wait_for(&format!(
        "Approval {read} ('read'): approved by terminal:you from the chat."
    ));
    run.wait_for("wants to run 'bash'");
    let bash = newest_approval_id(&run.output());
    assert_ne!(bash, read);
    // Now the terminal answers first.
    run.wait_for(&format!("(approval {bash};"));
    run.type_line("y");
    run.wait_for(&format!(
        "Approval {bash} ('bash'): approved at the terminal."
    ));
    run.wait_for("ran the tests");
    run.type_line("/quit");
    assert!(run.wait_exit().success(), "{}", run.output());
}

#[test]
fn a_second_host_on_the_same_session_is_refused_and_says_who_holds_it() {
    let home = Home::new();
    let mut first = Running::start(home.command(&["run", "--pace", "0"]));
    // Answered only once the session (and its lock) is up.
    first.type_line("/connect status");
    first.wait_for("bot-connect status");
    let (status, output) = finish(home.command(&["run", "--pace", "0"]));
    assert!(!status.success());
    assert!(
        output.contains("another host-shim already runs session")
            && output.contains(&format!("pid {}", first.child.id())),
        "{output}"
    );
    first.type_line("/quit");
    assert!(first.wait_exit().success());
    // Once the first has left, the session is free again.
    let mut again = Running::start(home.command(&["run", "--pace", "0"]));
    again.wait_for("Leave with /quit");
    again.type_line("/quit");
    assert!(again.wait_exit().success(), "{}", again.output());
}

#[test]
fn doctor_writes_nothing_reports_once_and_fails_on_errors() {
    let home = Home::new();
    std::fs::create_dir_all(home.state_file().parent().unwrap()).unwrap();
    std::fs::write(home.state_file(), "{ not json").unwrap();
    home.user_config(r#"{"bridge":{"remoteToolPolicy":"yolo"},"transports":{"telegram":{}}}"#);
    // A cache an earlier `run` left: doctor reads it and writes nothing beside it either.
    crate::common::compiled::seed_cache(home.state_file().parent().unwrap());
    let before: Vec<_> = std::fs::read_dir(home.state_file().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let (status, output) = finish(home.command(&["doctor"]));
    assert!(!status.success(), "errors give a failing status:\n{output}");
    assert!(output.contains("store file is not valid JSON"), "{output}");
    assert!(output.contains("bridge.remoteToolPolicy"), "{output}");
    assert!(output.contains("$PI_TELEGRAM_TOKEN is NOT SET"), "{output}");
    let after: Vec<_> = std::fs::read_dir(home.state_file().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "doctor created, moved or removed a file");
    assert_eq!(
        std::fs::read_to_string(home.state_file()).unwrap(),
        "{ not json"
    );
}

#[test]
fn a_component_that_is_not_one_is_refused_in_a_sentence() {
    let home = Home::new();
    let garbage = home.path().join("garbage.wasm");
    std::fs::write(&garbage, b"not a component").unwrap();
    let (status, output) =
        finish(home.command(&["--component", garbage.to_str().unwrap(), "inspect"]));
    assert!(!status.success());
    assert!(
        output.contains("the component could not be compiled"),
        "{output}"
    );
    assert!(!output.contains("Error {"), "a Debug dump: {output}");
}

#[test]
fn preview_says_what_would_happen_to_a_telegram_group_mention() {
    let home = Home::new();
    let payload = home.path().join("update.json");
    std::fs::write(
        &payload,
        r#"{"update_id":7,"message":{"message_id":3,"date":1700000000,
            "from":{"id":42,"is_bot":false,"first_name":"Ada"},
            "chat":{"id":-100123,"type":"supergroup","title":"Team"},
            "text":"@piBot /status","entities":[{"type":"mention","offset":0,"length":6}]}}"#,
    )
    .unwrap();
    let (status, output) = finish(home.command(&[
        "preview",
        "telegram",
        payload.to_str().unwrap(),
        "--bot-name",
        "piBot",
        "--bot-id",
        "999",
    ]));
    assert!(status.success(), "{output}");
    assert!(
        output.contains("conversation: telegram:-100123"),
        "{output}"
    );
    assert!(
        output.contains("sender: telegram:42 (not paired)"),
        "{output}"
    );
    assert!(
        output.contains("pairing: the sender is not paired"),
        "{output}"
    );
    assert!(
        !home.state_file().exists(),
        "preview must not write the state file"
    );
    assert!(
        !home.state_file().with_extension("sqlite3").exists(),
        "explain must not create the state database"
    );
}

#[test]
fn preview_reads_a_telegram_button_press_as_the_command_it_stands_for() {
    let home = Home::new();
    let payload = home.path().join("press.json");
    std::fs::write(
        &payload,
        r#"{"update_id":8,"callback_query":{"id":"4382bfdwdsb323b2d9","chat_instance":"-820530038",
            "from":{"id":42,"is_bot":false,"first_name":"Ada"},
            "message":{"message_id":77,"date":1700000000,"from":{"id":999,"is_bot":true,"first_name":"Pi"},
                "chat":{"id":42,"type":"private","first_name":"Ada"},"text":"Approval needed (qd4k)"},
            "data":"/approve qd4k"}}"#,
    )
    .unwrap();
    let (status, output) = finish(home.command(&[
        "preview",
        "telegram",
        payload.to_str().unwrap(),
        "--bot-name",
        "piBot",
        "--bot-id",
        "999",
    ]));
    assert!(status.success(), "{output}");
    assert!(
        output.contains("starts like a command: /approve"),
        "{output}"
    );
    assert!(output.contains("conversation: telegram:42"), "{output}");
    assert!(output.contains("sender: telegram:42"), "{output}");
    assert!(output.contains("addresses the bot"), "{output}");

    // Data that is not one of the bridge's commands says why it is ignored.
    std::fs::write(
        &payload,
        r#"{"update_id":9,"callback_query":{"id":"x","chat_instance":"c",
            "from":{"id":42,"is_bot":false,"first_name":"Ada"},
            "message":{"message_id":77,"date":0,"chat":{"id":42,"type":"private"}},
            "data":"run rm -rf /"}}"#,
    )
    .unwrap();
    let (status, output) =
        finish(home.command(&["preview", "telegram", payload.to_str().unwrap()]));
    assert!(status.success(), "{output}");
    assert!(output.contains("not a bridge command"), "{output}");
}

#[test]
fn preview_reads_discord_payloads_of_every_kind() {
    let home = Home::new();
    let payloads =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../transports/discord/tests/payloads");
    let cases: [(&str, &[&str]); 7] = [
        // A click on an approval request's button: the command, from the clicker.
        (
            "click",
            &[
                "text after normalizing: 13 character(s) (starts like a command: /approve)",
                "conversation: discord:1100000000000000100",
                "sender: discord:134127815531560960 (not paired)",
            ],
        ),
        (
            "dm",
            &[
                "conversation: discord:1200000000000000001",
                "sender: discord:134127815531560960 (not paired)",
                "direct message, addresses the bot",
            ],
        ),
        (
            "guild_mention",
            &[
                "text after normalizing: 6 character(s)",
                "conversation: discord:1100000000000000100",
                "group or channel message, addresses the bot",
            ],
        ),
        // A reply that pings the bot without `<@id>` in its text.
        (
            "reply_ping",
            &[
                "text after normalizing: 6 character(s)",
                "group or channel message, addresses the bot",
            ],
        ),
        // A thread is a conversation of its own.
        (
            "thread",
            &[
                "conversation: discord:1235120000000000077",
                "group or channel message, addresses the bot",
            ],
        ),
        (
            "webhook",
            &["ignored by the discord transport: a webhook message"],
        ),
        (
            "other_bot",
            &["ignored by the discord transport: a message from another bot"],
        ),
    ];
    for (name, expected) in cases {
        let payload = payloads.join(format!("{name}.json"));
        let (status, output) = finish(home.command(&[
            "preview",
            "discord",
            payload.to_str().unwrap(),
            "--bot-name",
            "pi-bot",
            "--bot-id",
            "987654321098765432",
        ]));
        assert!(status.success(), "{name}: {output}");
        for line in expected {
            assert!(
                output.contains(line),
                "{name}: expected {line:?} in\n{output}"
            );
        }
    }
    assert!(
        !home.state_file().exists(),
        "preview must not write the state file"
    );
    assert!(
        !home.state_file().with_extension("sqlite3").exists(),
        "explain must not create the state database"
    );
}

/// The one transcript file in `dir`.
fn only_transcript(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("transcript dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().expect("one file")
}

#[test]
fn a_run_records_a_transcript_when_asked_and_it_replays_identically() {
    let home = Home::new();
    home.user_config(r#"{"bridge":{"allowUsers":["terminal:you"]}}"#);
    // Never on by default.
    let mut plain = Running::start(home.command(&["run", "--pace", "0"]));
    plain.wait_for("Leave with /quit");
    plain.type_line("/quit");
    assert!(plain.wait_exit().success(), "{}", plain.output());
    assert!(!plain.output().contains("Recording a transcript"));

    // The environment variable turns it on (pi's extension starts `attach` that way).
    let dir = home.path().join("transcripts");
    let mut command = home.command(&["run", "--pace", "0"]);
    command.env("PI_BOT_CONNECT_TRANSCRIPT", &dir);
    let mut run = Running::start(command);
    run.wait_for("Recording a transcript in");
    run.type_line("/connect status");
    run.wait_for("bot-connect status");
    run.type_line("hello there");
    run.wait_for("Not done");
    run.type_line("/quit");
    assert!(run.wait_exit().success(), "{}", run.output());
    let file = only_transcript(&dir);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "a transcript is this user's alone");
    }

    // The header names the bridge build that ran.
    let embedded = host_shim::sandbox::runtime::component_digest(
        host_shim::sandbox::runtime::EMBEDDED_COMPONENT,
    );
    let header = std::fs::read_to_string(&file).expect("transcript");
    assert!(
        header
            .lines()
            .next()
            .is_some_and(|l| l.contains(&format!(r#""bridge":"{embedded}""#))),
        "{header}"
    );

    // A real clock and a real agent: replay still reproduces every effect.
    let file = file.to_string_lossy().into_owned();
    let (status, output) = finish(home.command(&["replay", &file]));
    assert_eq!(status.code(), Some(0), "{output}");
    assert!(output.contains("identical"), "{output}");

    // `--transcript` does the same from the command line.
    let flag_dir = home.path().join("by-flag");
    let mut run = Running::start(home.command(&[
        "run",
        "--pace",
        "0",
        "--transcript",
        &flag_dir.to_string_lossy(),
    ]));
    run.wait_for("Recording a transcript in");
    run.type_line("/quit");
    assert!(run.wait_exit().success(), "{}", run.output());
    let text = std::fs::read_to_string(only_transcript(&flag_dir)).expect("transcript");
    assert!(text.contains(r#""kind":"shutdown""#), "{text}");
}

#[test]
fn replay_says_identical_different_or_unreadable_in_its_exit_status() {
    let home = Home::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/transcript.jsonl");
    let example_text = std::fs::read_to_string(&example).expect("the example transcript");

    // The README's example, word for word as the README shows it.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let shown = readme
        .split("$ host-shim replay examples/transcript.jsonl\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README shows a replay of the example");
    let mut command = home.command(&["replay", "examples/transcript.jsonl"]);
    command.current_dir(&root);
    let (status, output) = finish(command);
    assert_eq!(status.code(), Some(0), "{output}");
    assert_eq!(output, shown);
    let shown_lines: Vec<String> = readme
        .split("```json\n{\"v\":1")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .flat_map(|block| block.lines().map(str::to_string).collect::<Vec<_>>())
        .enumerate()
        .map(|(i, l)| if i == 0 { format!("{{\"v\":1{l}") } else { l })
        .collect();
    assert_eq!(shown_lines.len(), 2, "the README shows two example lines");
    for line in shown_lines {
        assert!(
            example_text.lines().any(|l| l == line),
            "the README shows a line the example does not hold: {line}"
        );
    }

    // One recorded reply changed, one line broken: exit 1, that reply named by its line,
    // and a warning naming the broken line.
    let mut lines: Vec<String> = example_text.lines().map(str::to_string).collect();
    let reply = lines
        .iter()
        .position(|l| l.contains("Paired as fake:user-1"))
        .expect("the pairing reply");
    lines[reply] = lines[reply].replace("Paired as fake:user-1", "Paired as fake:user-2");
    // Recorded by another build: the report names both, as a new-build check needs.
    lines[0] = lines[0].replace(r#""host":"#, r#""bridge":"00000000deadbeef","host":"#);
    lines.push("{\"v\":1,\"seq\":".into());
    let edited = home.path().join("edited.jsonl");
    std::fs::write(&edited, lines.join("\n")).expect("write");
    let (status, output) = finish(home.command(&["replay", &edited.to_string_lossy()]));
    assert_eq!(status.code(), Some(1), "{output}");
    assert!(
        output.contains(&format!("line {} (after the input on line", reply + 1)),
        "{output}"
    );
    assert!(output.contains("expected: ") && output.contains("Paired as fake:user-2"));
    assert!(output.contains("got:      ") && output.contains("Paired as fake:user-1"));
    assert!(
        output.contains("1 input with different effects"),
        "{output}"
    );
    let embedded = host_shim::sandbox::runtime::component_digest(
        host_shim::sandbox::runtime::EMBEDDED_COMPONENT,
    );
    assert!(
        output.contains(&format!(
            "recorded with bridge 00000000deadbeef, replayed with bridge {embedded}"
        )),
        "{output}"
    );
    assert!(
        output.contains(&format!("line {}: skipped", lines.len())),
        "{output}"
    );

    // Nothing to replay: exit 2, with the reason.
    let missing = home.path().join("missing.jsonl");
    let (status, output) = finish(home.command(&["replay", &missing.to_string_lossy()]));
    assert_eq!(status.code(), Some(2), "{output}");
    assert!(output.contains("cannot read the transcript"), "{output}");
    let garbage = home.path().join("garbage.jsonl");
    std::fs::write(&garbage, "not a transcript\n").expect("write");
    let (status, output) = finish(home.command(&["replay", &garbage.to_string_lossy()]));
    assert_eq!(status.code(), Some(2), "{output}");
    assert!(output.contains("line 1: skipped"), "{output}");
    assert!(output.contains("holds no input line"), "{output}");
    // A later part of a rotated transcript starts mid-session.
    let tail: Vec<&str> = example_text.lines().skip(20).collect();
    let part = home.path().join("part.jsonl");
    std::fs::write(&part, tail.join("\n")).expect("write");
    let (status, output) = finish(home.command(&["replay", &part.to_string_lossy()]));
    assert_eq!(status.code(), Some(2), "{output}");
    assert!(
        output.contains("starts in the middle of a session"),
        "{output}"
    );
}

#[test]
fn a_second_broker_on_one_state_directory_is_refused_and_says_who_holds_it() {
    let home = Home::new();
    let mut first = Running::start(home.command(&["serve", "--demo", "api", "--pace", "0"]));
    first.wait_for("host-shim serve: ready. 1 demo session(s)");
    // The demo session's terminal is the broker's stderr, labelled with its name.
    first.wait_for("[api] info: This session is served by the shared bot as \"api\"");
    let (status, output) = finish(home.command(&["serve"]));
    assert!(!status.success());
    assert!(
        output.contains("another host-shim serve already runs")
            && output.contains(&format!("pid {}", first.child.id())),
        "{output}"
    );
    // SIGTERM (a service manager's stop) shuts it down cleanly.
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(first.child.id() as libc::pid_t, libc::SIGTERM) };
    assert!(first.wait_exit().success(), "{}", first.output());
    assert!(first.output().contains("host-shim serve: stopped"));
}

/// One command line refused before anything starts: what it says names the flag or the
/// setting and what to do instead.
struct Refusal {
    /// The user's config, where the refusal depends on it.
    config: Option<&'static str>,
    /// Variables set beside `HOME`.
    env: &'static [(&'static str, &'static str)],
    /// The command line after `host-shim`.
    args: Vec<&'static str>,
    /// What the output must hold, every one.
    says: &'static [&'static str],
}

/// A bad flag, a missing setting or a bad environment is named before anything starts: no
/// state database opened, no NATS reached for, and a sentence that says what to do. Each
/// row runs in a home of its own; a failure names the row's command line.
#[test]
fn a_bad_command_line_is_named_before_anything_starts() {
    const TELEGRAM: &str =
        r#"{"transports": {"telegram": {"enabled": true, "tokenEnv": "TG_NEVER_SET"}}}"#;
    // Port 1 on loopback refuses at once, should a row get as far as NATS.
    let nats = |rest: &[&'static str]| -> Vec<&'static str> {
        [
            "serve",
            "--nats",
            "nats://127.0.0.1:1",
            "--insecure-no-auth",
        ]
        .into_iter()
        .chain(rest.iter().copied())
        .collect()
    };
    // Refused before the missing --insecure-no-auth (or credentials) would be.
    let forget_offline_after = |value: &'static str| {
        [
            "serve",
            "--nats",
            "nats://127.0.0.1:1",
            "--role",
            "ingress",
            "--forget-offline-after",
            value,
        ]
    };
    let bare = |args: &[&'static str], says: &'static [&'static str]| Refusal {
        config: None,
        env: &[],
        args: args.to_vec(),
        says,
    };
    let rows = [
        bare(
            &["serve", "--hibernate-after", "5"],
            &[
                "--hibernate-after must be at least 60 seconds",
                "or 0 for never; got 5",
            ],
        ),
        bare(
            &["serve", "--hibernate-after", "10m"],
            &["--hibernate-after takes seconds (e.g. 600 for ten minutes)"],
        ),
        bare(
            &forget_offline_after("10m"),
            &["--forget-offline-after must be at least 1h (or 0 for never), got \"10m\""],
        ),
        bare(
            &forget_offline_after("7"),
            &[
                "--forget-offline-after takes a whole number with a unit, like 7d, 36h or 90m (or 0 for never), got \"7\"",
            ],
        ),
        bare(
            &["serve", "--max-sessions", "0"],
            &["--max-sessions must be between 1 and 100000, got 0"],
        ),
        // A cluster node names what is missing before it reaches for NATS.
        bare(&nats(&[]), &["--role"]),
        // A session node needs no --demo (pi sessions attach to it), but a bot.
        bare(
            &nats(&["--role", "sessions"]),
            &["the config enables no messenger"],
        ),
        bare(
            &nats(&["--role", "ingress"]),
            &["the config enables no messenger"],
        ),
        Refusal {
            config: Some(TELEGRAM),
            args: nats(&["--role", "ingress", "--demo", "api"]),
            ..bare(&[], &["use it with --role sessions"])
        },
        // The dashboard's sessions, approvals and decisions live on the session nodes.
        Refusal {
            config: Some(TELEGRAM),
            args: nats(&[
                "--role",
                "ingress",
                "--metrics",
                "127.0.0.1:0",
                "--dashboard",
            ]),
            ..bare(&[], &["--dashboard shows sessions", "--role sessions"])
        },
        // Without the bot's token the ingress would hold nothing: said before NATS.
        Refusal {
            config: Some(TELEGRAM),
            args: nats(&["--role", "ingress"]),
            ..bare(&[], &["the ingress cannot hold telegram", "$TG_NEVER_SET"])
        },
        Refusal {
            config: Some(TELEGRAM),
            env: &[("TG_NEVER_SET", "123456:not-a-real-token")],
            args: nats(&["--role", "ingress"]),
            ..bare(
                &[],
                &["cannot reach NATS at nats://127.0.0.1:1", "nats-server -js"],
            )
        },
        bare(
            &["serve", "--metrics", "0.0.0.0:0", "--dashboard"],
            &[
                "--dashboard is served on loopback only",
                "--metrics 127.0.0.1:",
            ],
        ),
        bare(
            &["run", "--metrics", "0.0.0.0:0", "--dashboard"],
            &[
                "--dashboard is served on loopback only",
                "--metrics 127.0.0.1:",
            ],
        ),
        Refusal {
            env: &[("RUST_LOG", "bot_connect=loud")],
            ..bare(
                &["doctor"],
                &[
                    "RUST_LOG=\"bot_connect=loud\" is not a filter",
                    "RUST_LOG=bot_connect=info",
                ],
            )
        },
    ];
    for row in rows {
        let case = row.args.join(" ");
        let home = Home::new();
        if let Some(config) = row.config {
            home.user_config(config);
        }
        let mut command = home.command(&row.args);
        command.envs(row.env.iter().copied());
        let (status, output) = finish(command);
        assert!(!status.success(), "{case}: not refused: {output}");
        for needle in row.says {
            assert!(output.contains(needle), "{case}: no {needle:?} in {output}");
        }
        // A message continued on the next source line without its `\` keeps that line's
        // indent ("(or 0          for never)": three refusals read so until 2026-12-07).
        for line in output.lines() {
            assert!(
                !line.trim_start().contains("   "),
                "{case}: a run of spaces in {line:?}"
            );
        }
        let state = home.state_file().with_extension("sqlite3");
        assert!(!state.exists(), "{case}: the state was opened: {output}");
    }
}

/// `GET path` on `addr` with `headers`: the status and the whole reply (bounded).
fn http_get(addr: &str, path: &str, headers: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("the listener accepts");
    stream.set_read_timeout(Some(LIMIT)).expect("a timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{headers}\r\n"
    )
    .expect("writes");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("reads the reply");
    let status = reply
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    (status, reply)
}

/// The value of `metric` with `labels` in a scrape, if it is there.
fn sample(scrape: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == metric
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(k).is_some_and(|value| value == *v))
        })
        .and_then(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => Some(v),
            _ => None,
        })
}

#[test]
fn run_with_metrics_serves_what_serve_does_for_its_one_session() {
    let home = Home::new();
    home.user_config(
        r#"{"bridge":{"allowUsers":["terminal:you"],"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":"on"}}"#,
    );
    let mut run = Running::start(home.command(&[
        "run",
        "--pace",
        "0",
        "--metrics",
        "127.0.0.1:0",
        "--dashboard",
    ]));
    run.wait_for("/readyz");
    run.wait_for("/dashboard?token=");
    let output = run.output();
    let addr = output
        .split("metrics on http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("the listener's address")
        .to_owned();
    let token = output
        .split("/dashboard?token=")
        .nth(1)
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_hexdigit)
                .collect::<String>()
        })
        .expect("the dashboard's token");
    run.type_line("/connect status");
    run.wait_for("bot-connect status");
    run.type_line("run the tests");
    run.wait_for("wants to run 'read'");
    let read = newest_approval_id(&run.output());

    let (status, reply) = http_get(&addr, "/metrics", "");
    assert_eq!(status, 200, "{reply}");
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let lines = body.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text");
    assert_eq!(
        sample(
            &scrape,
            "botconnect_approvals_total",
            &[("outcome", "asked")]
        ),
        Some(1.0),
        "{body}"
    );
    let sessions = ["active", "idle"]
        .map(|state| sample(&scrape, "botconnect_sessions", &[("state", state)]).unwrap_or(0.0));
    assert_eq!(sessions.iter().sum::<f64>(), 1.0, "{body}");
    // The terminal answered the chat, through the counted transport.
    let sent = sample(
        &scrape,
        "botconnect_envelopes_sent_total",
        &[("transport", "terminal"), ("outcome", "sent")],
    )
    .unwrap_or(0.0);
    assert!(sent >= 1.0, "{body}");
    // The one chat message came in through the counted transport too.
    assert_eq!(
        sample(
            &scrape,
            "botconnect_envelopes_received_total",
            &[("transport", "terminal")]
        ),
        Some(1.0),
        "{body}"
    );

    let (status, reply) = http_get(&addr, "/healthz", "");
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = http_get(&addr, "/readyz", "");
    assert_eq!(status, 200, "{reply}");
    assert!(reply.contains("transport terminal"), "{reply}");

    let (status, reply) = http_get(&addr, "/dashboard", "");
    assert_eq!(status, 401, "{reply}");
    let cookie = format!("cookie: botconnect_dashboard={token}\r\n");
    let (status, page) = http_get(&addr, "/dashboard", &cookie);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("data-session=\"demo\""), "{page}");
    // Its chat, read from the state it saved: no broker keeps it in this mode.
    assert!(page.contains("data-chat=\"terminal:"), "{page}");
    assert!(
        page.contains("data-decision=\"prompt forwarded\""),
        "{page}"
    );
    assert!(page.contains(&read), "the open approval {read}: {page}");
    assert!(!page.contains(&token), "{page}");
    assert!(!page.contains("run the tests"), "{page}");

    run.type_line("/quit");
    assert!(run.wait_exit().success(), "{}", run.output());
}
