//! What git says about the working directory, for the work digest.
//!
//! The host only runs the two commands the original ran and hands their raw output to the
//! bridge, which parses it (pure, tested code in the guest). Every failure, a missing git,
//! a directory that is not a repository, or a hung command, just leaves the fact out.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How long one git command may take; a digest never waits longer.
const GIT_TIMEOUT: Duration = Duration::from_secs(5);

/// The most output kept from one command: a huge diff must not fill the guest's memory.
const MAX_OUTPUT: u64 = 1 << 20;

/// `git rev-parse --abbrev-ref HEAD` and `git diff --numstat HEAD` in `cwd`, run at once.
pub async fn git_facts(cwd: &Path) -> (Option<String>, Option<String>) {
    tokio::join!(
        git(cwd, &["rev-parse", "--abbrev-ref", "HEAD"]),
        git(cwd, &["diff", "--numstat", "HEAD"]),
    )
}

/// Output of `git -C <cwd> <args>` when it exits successfully within [`GIT_TIMEOUT`].
async fn git(cwd: &Path, args: &[&str]) -> Option<String> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(cwd)
        .args(args)
        // Never ask for credentials or open an editor or pager: nobody is there to answer.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // A command still running at the timeout is killed, not left behind.
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let run = async {
        let mut out = Vec::new();
        (&mut stdout)
            .take(MAX_OUTPUT)
            .read_to_end(&mut out)
            .await
            .ok()?;
        // Past the cap nobody reads the pipe: closing it ends git instead of blocking it.
        drop(stdout);
        let status = child.wait().await.ok()?;
        status
            .success()
            .then(|| String::from_utf8_lossy(&out).into_owned())
    };
    tokio::time::timeout(GIT_TIMEOUT, run).await.ok()?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `git` with `args` in `dir` for test setup (CI machines have git: they clone).
    fn setup(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "test setup: `git {}` failed (is git installed?)",
            args.join(" ")
        );
    }

    #[tokio::test]
    async fn a_directory_outside_any_repository_gives_no_facts() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        assert_eq!(git_facts(dir.path()).await, (None, None));
    }

    #[tokio::test]
    async fn a_repository_gives_its_branch_and_changed_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let d = dir.path();
        setup(d, &["init", "-q", "-b", "work"]);
        setup(d, &["config", "user.email", "t@example.com"]);
        setup(d, &["config", "user.name", "t"]);
        std::fs::write(d.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("write: {e}"));
        setup(d, &["add", "a.txt"]);
        setup(d, &["commit", "-q", "-m", "one"]);
        std::fs::write(d.join("a.txt"), "one\ntwo\nthree\n")
            .unwrap_or_else(|e| panic!("write: {e}"));
        let (branch, numstat) = git_facts(d).await;
        assert_eq!(branch.as_deref(), Some("work\n"));
        assert_eq!(numstat.as_deref(), Some("2\t0\ta.txt\n"));
    }
}
