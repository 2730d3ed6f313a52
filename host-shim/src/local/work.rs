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
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(cwd)
        .args(args)
        // Never ask for credentials or open an editor or pager: nobody is there to answer.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat");
    capped_output(command, MAX_OUTPUT).await
}

/// What `command` prints, when it succeeds within [`GIT_TIMEOUT`]. Output past `cap` bytes
/// is cut at the last whole line and the command is stopped: a diff of thousands of files
/// still yields its first lines instead of nothing.
async fn capped_output(mut command: Command, cap: u64) -> Option<String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // A command still running at the timeout (or cut off at the cap) is killed, not
        // left behind.
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let run = async {
        let mut out = Vec::new();
        (&mut stdout).take(cap).read_to_end(&mut out).await.ok()?;
        if out.len() as u64 >= cap {
            // Stopped reading: the exit status says nothing about what was read.
            let whole_lines = out.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            out.truncate(whole_lines);
            return Some(String::from_utf8_lossy(&out).into_owned());
        }
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
    async fn output_past_the_cap_is_cut_at_a_whole_line_not_lost() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "i=0; while [ $i -lt 1000 ]; do echo \"1\t2\tfile_$i\"; i=$((i+1)); done",
        ]);
        // Lines are 11 bytes: 100 bytes hold 9 whole lines and the start of a tenth.
        let out = capped_output(command, 100).await.expect("cut output");
        assert_eq!(
            out,
            "1\t2\tfile_0\n1\t2\tfile_1\n1\t2\tfile_2\n1\t2\tfile_3\n1\t2\tfile_4\n1\t2\tfile_5\n1\t2\tfile_6\n1\t2\tfile_7\n1\t2\tfile_8\n"
        );
    }

    #[tokio::test]
    async fn a_failing_command_gives_nothing() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo partial; exit 3"]);
        assert_eq!(capped_output(command, 100).await, None);
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
