//! Transcripts and `host-shim replay` through the real component (I42): a
//! real flow (pairing, a prompt with a token in it, the agent's reply echoing it, a local
//! command) is recorded, holds no code and no token, rotates at its size cap, reads back
//! line for line, and replays against the embedded component with no difference; an
//! edited effect is reported exactly; bad lines are skipped with a warning.

use std::path::{Path, PathBuf};

use host_shim::commands::replay::{Difference, replay};
use host_shim::transcript::Transcript;
use host_shim::transcript::file::{Rotation, file_stem};
use host_shim::transcript::line::{Dir, Event, Line};
use host_shim::transcript::read;

use crate::common::{self, Dirs, Setup};

/// A GitHub token shape: the bridge's redaction engine knows it.
const TOKEN: &str = "ghp_Zx9Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4V";

const KEY: &str = "transcript-session";

/// The clock of `common::Setup::start`.
const START_MS: u64 = 1_700_000_000_000;

/// The files of a session's transcript, oldest first (`.N` … `.1`, then the current one).
fn transcript_files(dir: &Path) -> Vec<PathBuf> {
    let stem = file_stem(KEY);
    let mut old: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .expect("transcript dir")
        .map(|e| e.expect("entry").path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            let n = name
                .strip_prefix(&format!("{stem}."))?
                .strip_suffix(".jsonl")?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    old.sort_by_key(|entry| std::cmp::Reverse(entry.0));
    let mut files: Vec<PathBuf> = old.into_iter().map(|(_, p)| p).collect();
    files.push(dir.join(format!("{stem}.jsonl")));
    files
}

/// Records the real flow in `dir` with `rotation`; returns the code the terminal showed.
async fn record_flow(dir: &Path, rotation: Rotation) -> String {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, KEY);
    setup.config = vec![common::demo_runs_tools()];
    setup.transcript =
        Some(Transcript::create(dir, KEY, "", rotation, START_MS).expect("transcript"));
    let h = setup.start().await;
    h.say("user-1", "hello", "not paired").await;
    let code = h.code_shown_locally();
    // A wrong attempt, then the code as people type it: with separators and words.
    let last = code.as_bytes()[5] - b'0';
    let wrong = format!("{}-{}{}", &code[..3], &code[3..5], (last + 1) % 10);
    h.say("user-1", &wrong, "That code did not match").await;
    h.say(
        "user-1",
        &format!("code: {} {}", &code[..3], &code[3..]),
        "Paired as",
    )
    .await;
    h.say(
        "user-1",
        &format!("check the deploy, my token is {TOKEN}"),
        "You asked",
    )
    .await;
    h.session
        .local_command("status")
        .await
        .expect("session alive");
    h.session.shutdown().await.expect("shuts down");
    code
}

fn read_all(files: &[PathBuf]) -> Vec<u8> {
    files
        .iter()
        .flat_map(|f| std::fs::read(f).expect("transcript file"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_flow_is_recorded_without_secrets_rotates_and_replays_identically() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rotation = Rotation {
        max_bytes: 4 * 1024,
        keep: 50,
    };
    let code = record_flow(dir.path(), rotation).await;
    let files = transcript_files(dir.path());
    assert!(files.len() > 1, "a 4 KiB cap rotates this flow: {files:?}");

    // (a) No code (typed or shown, grouped or not), no token, in any file.
    let spaced = format!("{} {}", &code[..3], &code[3..]);
    for file in &files {
        let text = std::fs::read_to_string(file).expect("utf-8");
        // Only a line longer than the cap by itself (the configure line lists every
        // platform's settings) makes a file pass it, alone after the file's header.
        assert!(
            text.len() as u64 <= rotation.max_bytes || text.lines().count() <= 2,
            "{file:?} over the cap"
        );
        for secret in [code.as_str(), spaced.as_str(), TOKEN] {
            assert!(!text.contains(secret), "{file:?} holds a secret");
        }
        let digits: String = text.chars().filter(char::is_ascii_digit).collect();
        // Even with every separator gone, the code's digits never follow each other, except
        // by chance inside a long number (a timestamp): then only there.
        let by_chance = text
            .split(|c: char| !c.is_ascii_digit())
            .filter(|run| run.len() > code.len() && run.contains(code.as_str()))
            .count();
        assert_eq!(
            digits.matches(code.as_str()).count(),
            by_chance,
            "{file:?}: the code appears outside long numbers"
        );
        // Each file says whose it is.
        let first = text.lines().next().expect("a first line");
        assert!(first.contains(r#""kind":"session""#), "{file:?}: {first}");
    }

    // The flow really is in there: the attempt masked and naming the shown code, the
    // token redacted in the message, the prompt and the reply, the pairing and the reply.
    let bytes = read_all(&files);
    let parsed = read::parse(&bytes);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let events: Vec<&Event> = parsed.lines.iter().map(|(_, l)| &l.event).collect();
    assert!(events.iter().any(|e| matches!(e,
        Event::Envelope { envelope, code: None, masked } if envelope.text == "•••-•••" && masked.len() == 6)),
        "the wrong attempt is masked and names no code");
    assert!(events.iter().any(|e| matches!(e,
        Event::Envelope { envelope, code: Some(0), masked } if envelope.text == "code: ••• •••" && masked.len() == 6)),
        "the right attempt is masked and names the code shown last");
    assert!(events.iter().any(|e| matches!(e,
        Event::Notify { text, .. } if text.starts_with("Messenger pairing code: ••• •••"))));
    let redacted = |text: &str| text.contains("check the deploy") && !text.contains("ghp_Zx9");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Envelope { envelope, .. } if redacted(&envelope.text)))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Prompt { text, .. } if redacted(text)))
    );
    assert!(events.iter().any(|e| matches!(e,
        Event::AgentEvent { event: host_shim::wit::session::AgentEvent::AssistantMessage(t) } if t.contains("You asked"))));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Send { message } if message.text.contains("Paired as")))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::LocalCommand { args } if args == "status"))
    );
    assert!(events.iter().any(|e| matches!(e, Event::ToolCall { .. })));
    // Code draws are withheld; longer ones (salts, ids) are kept for replay.
    for event in &events {
        if let Event::Rng { len, bytes } = event {
            assert_eq!(bytes.is_some(), *len >= 8, "rng of {len} bytes");
        }
    }

    // Round trip: every line reads back and writes out as the very same text, and the
    // sequence runs without gaps across rotation.
    let raw: Vec<&str> = std::str::from_utf8(&bytes)
        .expect("utf-8")
        .lines()
        .collect();
    assert_eq!(raw.len(), parsed.lines.len());
    for ((_, line), text) in parsed.lines.iter().zip(&raw) {
        assert_eq!(&line.to_json(), text);
    }
    let seqs: Vec<u64> = parsed.lines.iter().map(|(_, l)| l.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());

    // (b) The embedded component does the same again, pairing included.
    let report = replay(&common::runtime(), &parsed).await.expect("replays");
    assert_eq!(report.differences, Vec::<Difference>::new());
    assert!(
        report.effects > 20,
        "compared only {} effects",
        report.effects
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_effect_is_the_one_difference_replay_reports() {
    let dir = tempfile::tempdir().expect("temp dir");
    record_flow(dir.path(), Rotation::default()).await;
    let files = transcript_files(dir.path());
    assert_eq!(files.len(), 1, "8 MiB holds this flow");
    let text = std::fs::read_to_string(&files[0]).expect("transcript");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let edited = lines
        .iter()
        .position(|l| l.contains(r#""kind":"send""#) && l.contains("Paired as fake:user-1"))
        .expect("the pairing reply was recorded");
    lines[edited] = lines[edited].replace("Paired as fake:user-1", "Paired as fake:someone-else");
    let parsed = read::parse(lines.join("\n").as_bytes());
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);

    let report = replay(&common::runtime(), &parsed).await.expect("replays");
    assert_eq!(report.differences.len(), 1, "{:#?}", report.differences);
    let difference = &report.differences[0];
    assert_eq!(difference.line, edited + 1, "line numbers count from 1");
    assert!(difference.input_line < difference.line);
    let expected = difference.expected.as_deref().expect("an expected effect");
    let got = difference.got.as_deref().expect("a new effect");
    assert!(
        expected.contains("Paired as fake:someone-else"),
        "{expected}"
    );
    assert!(got.contains("Paired as fake:user-1"), "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lines_are_skipped_with_a_warning_and_replay_goes_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    record_flow(dir.path(), Rotation::default()).await;
    let text = std::fs::read_to_string(&transcript_files(dir.path())[0]).expect("transcript");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    // A line cut off by a full disk, and one from a future format, in the middle.
    let cut = lines[5][..lines[5].len() / 2].to_string();
    let future = lines[6].replacen(r#""v":1"#, r#""v":2"#, 1);
    lines.insert(5, cut);
    lines.insert(7, future);
    let parsed = read::parse(lines.join("\n").as_bytes());
    assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
    assert!(
        parsed.warnings[0].starts_with("line 6: skipped"),
        "{}",
        parsed.warnings[0]
    );
    assert!(
        parsed.warnings[1].starts_with("line 8: skipped"),
        "{}",
        parsed.warnings[1]
    );
    let report = replay(&common::runtime(), &parsed)
        .await
        .expect("replays despite bad lines");
    assert_eq!(report.differences, Vec::<Difference>::new());
}

/// Rewrites `examples/transcript.jsonl` from the real flow when
/// `BOT_CONNECT_WRITE_EXAMPLE=1`; otherwise checks it still replays as the README says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_transcript_replays_identically() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/transcript.jsonl");
    if std::env::var("BOT_CONNECT_WRITE_EXAMPLE").as_deref() == Ok("1") {
        let dir = tempfile::tempdir().expect("temp dir");
        record_flow(dir.path(), Rotation::default()).await;
        std::fs::copy(&transcript_files(dir.path())[0], &example).expect("example written");
    }
    let bytes = std::fs::read(&example).expect("examples/transcript.jsonl");
    let parsed = read::parse(&bytes);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let first: &Line = &parsed.lines[0].1;
    assert_eq!(first.dir, Dir::Meta);
    let report = replay(&common::runtime(), &parsed).await.expect("replays");
    assert_eq!(report.differences, Vec::<Difference>::new());
}

/// The transcript of an in-memory recording, as a file would hold it.
fn as_file(transcript: &Transcript) -> Vec<u8> {
    transcript
        .lines()
        .iter()
        .map(|l| l.to_json() + "\n")
        .collect::<String>()
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_from_the_phone_and_the_terminal_replay_identically() {
    const CONFIG: &str = r#"{"bridge":{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":{"enabled":true,"timeoutMs":60000}}}"#;
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, KEY);
    setup.config = vec![common::user_config(CONFIG)];
    let transcript = Transcript::in_memory(KEY, "", START_MS);
    setup.transcript = Some(transcript.clone());
    let h = setup.start().await;
    h.pair("user-1").await;
    // The first call (`read`) is approved from the phone, by the id its request names
    // (drawn from the rng: replay must get the same id back); the second (`bash`) at
    // the terminal.
    h.send("user-1", "run the tests").await;
    let id = h.approval_id().await;
    h.ui.answer_approval_of("bash", true);
    h.say(
        "user-1",
        &format!("/approve {id}"),
        "approved by fake:user-1",
    )
    .await;
    h.posted("[x] ran the tests").await;
    h.session.shutdown().await.expect("shuts down");

    let parsed = read::parse(&as_file(&transcript));
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let events: Vec<&Event> = parsed.lines.iter().map(|(_, l)| &l.event).collect();
    assert!(events.iter().any(|e| matches!(e, Event::ToolAnswer { .. })));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::LocalAnswer { approved: true, .. }))
    );
    assert!(
        events
            .iter()
            .filter(|e| matches!(e, Event::Verdict { .. }))
            .count()
            >= 2
    );
    let report = replay(&common::runtime(), &parsed).await.expect("replays");
    assert_eq!(report.differences, Vec::<Difference>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eight_digit_code_is_masked_and_its_pairing_replays() {
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, KEY);
    setup.config = vec![common::user_config(
        r#"{"bridge":{"pairingDigits":8,"remoteToolPolicy":"unrestricted"}}"#,
    )];
    let transcript = Transcript::in_memory(KEY, "", START_MS);
    setup.transcript = Some(transcript.clone());
    let h = setup.start().await;
    let code = h.pair("user-1").await;
    assert_eq!(code.len(), 8);
    // A number of the default code length is chat, not a code, under this config.
    h.say("user-1", "look at issue 123456", "You asked").await;
    h.session.shutdown().await.expect("shuts down");

    let bytes = as_file(&transcript);
    let text = String::from_utf8(bytes.clone()).expect("utf-8");
    assert!(!text.contains(&code), "the code is in the transcript");
    assert!(
        text.contains("\"text\":\"••••••••\""),
        "the attempt is masked"
    );
    assert!(
        text.contains("look at issue 123456"),
        "six digits are no code here"
    );
    let parsed = read::parse(&bytes);
    let report = replay(&common::runtime(), &parsed).await.expect("replays");
    assert_eq!(report.differences, Vec::<Difference>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_and_the_restart_after_it_replay_identically() {
    use host_shim::sandbox::runtime::Limits;
    // A message larger than the memory cap traps the guest. The cap is small so that the
    // message can be: each MiB of it costs about half a second of an unoptimised test build
    // (recorded, scrubbed, replayed), and 26 MiB under the old 24 MiB cap took 9 s.
    let limits = Limits {
        memory_bytes: 8 << 20,
        ..Limits::default()
    };
    let runtime = crate::common::compiled::runtime(limits);
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, KEY);
    setup.runtime = runtime.clone();
    setup.config = vec![common::demo_runs_tools()];
    let transcript = Transcript::in_memory(KEY, "", START_MS);
    setup.transcript = Some(transcript.clone());
    let h = setup.start().await;
    h.pair("user-1").await;
    h.fake
        .inject(h.dm("user-1", &"x".repeat(9 << 20)))
        .await
        .expect("fake is listening");
    assert_eq!(h.session.health().await.expect("alive").restarts, 1);
    h.say("user-1", "after the crash", "You asked").await;
    h.session.shutdown().await.expect("shuts down");

    let parsed = read::parse(&as_file(&transcript));
    let events: Vec<&Event> = parsed.lines.iter().map(|(_, l)| &l.event).collect();
    assert!(events.iter().any(|e| matches!(e, Event::Trap { .. })));
    let configures = events
        .iter()
        .filter(|e| matches!(e, Event::Configure { .. }))
        .count();
    assert_eq!(configures, 2, "the restart configured a fresh instance");
    // The same limits trap the same way: the trap, the restart from the saved state and
    // the prompt after it all come out the same.
    let report = replay(&runtime, &parsed).await.expect("replays");
    assert_eq!(report.differences, Vec::<Difference>::new());
}
