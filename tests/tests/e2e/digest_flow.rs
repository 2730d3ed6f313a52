//! `/connect digest` through the component and the host: git facts from a real repository,
//! the demo agent's last shell run and checklist, and the card in the paired chat.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use host_shim::agent::DemoAgent;
use host_shim::wit::types::Level;

use crate::common::{self, Dirs, Setup, info};

/// Runs `git` in `dir` for the fixture (CI machines have git: they clone).
fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "fixture: `git {}` failed (is git installed?)",
        args.join(" ")
    );
}

/// A repository on branch `work` with one committed file changed by two lines.
fn repository() -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("temp dir");
    let d = repo.path();
    git(d, &["init", "-q", "-b", "work"]);
    git(d, &["config", "user.email", "t@example.com"]);
    git(d, &["config", "user.name", "t"]);
    std::fs::write(d.join("notes.md"), "one\n").expect("write");
    git(d, &["add", "notes.md"]);
    git(d, &["commit", "-q", "-m", "one"]);
    std::fs::write(d.join("notes.md"), "one\ntwo\nthree\n").expect("write");
    repo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_digest_card_reaches_the_paired_chat_with_what_the_work_looks_like() {
    let repo = repository();
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "digest");
    let mut session = info("digest");
    session.cwd = repo.path().display().to_string();
    setup.agent = Arc::new(DemoAgent::new(Duration::ZERO, session));
    // The digest reports the demo's shell run, so it has to happen.
    setup.config = vec![common::demo_runs_tools()];
    let h = setup.start().await;
    h.pair("user-1").await;
    h.say("user-1", "tidy the notes", "You asked").await;

    let note = h
        .session
        .local_command("digest")
        .await
        .expect("session alive");

    assert_eq!(note.level, Level::Info);
    assert_eq!(note.text, "Digest sent to 1 conversation(s).");
    let card = h.texts().last().cloned().expect("a card was posted");
    for part in [
        "### test — idle\n",
        " · branch `work`",
        "**Changes (1 files, +2/-0)**\n- `notes.md` +2/-0",
        "**Tests:** cargo test --workspace — 12 passed, 0 failed",
        "**Pending (1/3)**",
        "**Last request**\n> tidy the notes",
        "**Summary**\nDone You asked: tidy the notes What I did:",
    ] {
        assert!(
            card.contains(part),
            "{part:?} missing from the card:\n{card}"
        );
    }
    h.session.shutdown().await.expect("clean shutdown");
}
