//! Pinned npm packages for the tests that drive real node programs (pi, playwright-core):
//! each is installed once into its own folder under `target/tmp`, never into the user's
//! home, and every program the tests run for it is bounded in time.
#![allow(dead_code)] // each test module uses a different part of the common modules

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// The file in an install's folder that names the package spec it holds. Written inside
/// the staging folder before the rename, so a folder that has it is complete.
const MARKER: &str = ".installed";

/// Runs `program` in `cwd` for at most `timeout`: its trimmed stdout, or what went wrong
/// with the last 600 characters of its stderr.
pub async fn output(
    program: &str,
    args: &[&str],
    cwd: &Path,
    timeout: Duration,
) -> Result<String, String> {
    let child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{program} is not available ({e})"))?;
    let out = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| {
            format!(
                "`{program} {}` took over {} s",
                args.join(" "),
                timeout.as_secs()
            )
        })?
        .map_err(|e| format!("{program} failed ({e})"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: String = stderr
            .chars()
            .rev()
            .take(600)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(format!(
            "`{program} {}` failed ({}): {tail}",
            args.join(" "),
            out.status
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether `dir` holds a complete install of `spec`.
pub fn installed(dir: &Path, spec: &str) -> bool {
    std::fs::read_to_string(dir.join(MARKER)).ok().as_deref() == Some(spec)
}

/// Installs `spec` (`name@version`) into `dir/node_modules` unless it is there already,
/// within `timeout`, without its install scripts.
///
/// Installed beside `dir` and renamed into place, so an interrupted install never looks
/// complete. Test processes may install at once (nextest runs one process a test): one
/// rename wins, and a loser uses the winner's folder rather than deleting it under the pi
/// or node another test is running from it (that test then failed with a module missing).
pub async fn install(dir: &Path, spec: &str, timeout: Duration) -> Result<(), String> {
    if installed(dir, spec) {
        return Ok(());
    }
    let here = std::env::temp_dir();
    output("npm", &["--version"], &here, Duration::from_secs(30)).await?;
    let staging = dir.with_extension(format!("staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    std::fs::write(
        staging.join("package.json"),
        r#"{"name":"bot-connect-test-cache","private":true}"#,
    )
    .map_err(|e| format!("cannot write package.json: {e}"))?;
    let args = [
        "install",
        "--no-audit",
        "--no-fund",
        "--ignore-scripts",
        "--loglevel=error",
        spec,
    ];
    output("npm", &args, &staging, timeout).await?;
    std::fs::write(staging.join(MARKER), spec)
        .map_err(|e| format!("cannot mark the install: {e}"))?;
    if std::fs::rename(&staging, dir).is_ok() {
        return Ok(());
    }
    if installed(dir, spec) {
        // Another process got there first; its folder may be in use.
        let _ = std::fs::remove_dir_all(&staging);
        return Ok(());
    }
    // What is there is incomplete or another version: nobody can be using it for `spec`.
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staging);
        format!("cannot move the install into {}: {e}", dir.display())
    })
}
