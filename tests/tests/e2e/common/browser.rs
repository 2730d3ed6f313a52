//! A real headless browser for the dashboard's test (docs/operations.md#dashboard): Debian's
//! Chromium (`apt-get install chromium`, since a browser download of Playwright's own cannot
//! be fetched on these machines) driven by `playwright-core` from npm through its executable
//! path. Both are installed by [`require_browser`] on first use, each within a bounded time;
//! where that cannot be done (not root, no apt-get, no node or npm, no network) the test is
//! skipped with the reason written to the real stderr, unless `BOT_CONNECT_REQUIRE_BROWSER=1`
//! makes that a failure.
#![allow(dead_code)] // only the dashboard's test uses it

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::OnceCell;

use super::npm::{self, output};

/// The playwright-core release the test is pinned to.
pub const PLAYWRIGHT_VERSION: &str = "1.65.2";
/// Where Debian installs Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Installing Chromium (about 100 MB of packages) may take this long.
const APT_TIMEOUT: Duration = Duration::from_secs(240);
/// Installing playwright-core (a few MB, no browser) may take this long.
const NPM_TIMEOUT: Duration = Duration::from_secs(120);

/// What drives the browser.
#[derive(Debug, Clone)]
pub struct Browser {
    /// The Chromium executable.
    pub chromium: PathBuf,
    /// The `playwright-core` package directory (for `require`).
    pub playwright: PathBuf,
}

async fn chromium() -> Result<PathBuf, String> {
    let path = PathBuf::from(CHROMIUM);
    if path.exists() {
        return Ok(path);
    }
    let here = std::env::temp_dir();
    // As root only: a test run by a person must not ask for a password.
    let uid = output("id", &["-u"], &here, Duration::from_secs(10)).await?;
    if uid != "0" {
        return Err(format!(
            "{CHROMIUM} is missing and this is not root; run `sudo apt-get install -y chromium`"
        ));
    }
    let install = ["install", "-y", "--no-install-recommends", "chromium"];
    if output("apt-get", &install, &here, APT_TIMEOUT)
        .await
        .is_err()
    {
        output("apt-get", &["update"], &here, APT_TIMEOUT).await?;
        output("apt-get", &install, &here, APT_TIMEOUT).await?;
    }
    path.exists()
        .then_some(path)
        .ok_or_else(|| format!("apt-get installed chromium but {CHROMIUM} is missing"))
}

async fn playwright() -> Result<PathBuf, String> {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("playwright-{PLAYWRIGHT_VERSION}"));
    let spec = format!("playwright-core@{PLAYWRIGHT_VERSION}");
    if !npm::installed(&dir, &spec) {
        output(
            "node",
            &["--version"],
            &std::env::temp_dir(),
            Duration::from_secs(30),
        )
        .await?;
        npm::install(&dir, &spec, NPM_TIMEOUT).await?;
    }
    Ok(dir.join("node_modules/playwright-core"))
}

async fn install() -> Result<Browser, String> {
    Ok(Browser {
        chromium: chromium().await?,
        playwright: playwright().await?,
    })
}

/// The browser, or `None` after printing why `test` is skipped.
pub async fn require_browser(test: &str) -> Option<Browser> {
    static BROWSER: OnceCell<Result<Browser, String>> = OnceCell::const_new();
    match BROWSER.get_or_init(install).await {
        Ok(browser) => Some(browser.clone()),
        Err(why) => {
            if std::env::var("BOT_CONNECT_REQUIRE_BROWSER").as_deref() == Ok("1") {
                panic!("{test}: the browser is required (BOT_CONNECT_REQUIRE_BROWSER=1): {why}");
            }
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: no headless browser: {why}"
            );
            None
        }
    }
}

/// Runs `script` (CommonJS) with node, `PLAYWRIGHT` and `CHROMIUM` in its environment plus
/// `env`, a fresh profile directory in `PROFILE`, and returns what it printed. At most 90 s.
pub async fn run(
    browser: &Browser,
    script: &str,
    env: &[(&str, String)],
) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("drive.js");
    std::fs::write(&file, script).map_err(|e| e.to_string())?;
    let profile = dir.path().join("profile");
    let mut command = tokio::process::Command::new("node");
    command
        .arg(&file)
        .current_dir(dir.path())
        .env("PLAYWRIGHT", &browser.playwright)
        .env("CHROMIUM", &browser.chromium)
        .env("PROFILE", &profile)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    let out = tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .map_err(|_| "the browser script took over 90 s".to_owned())?
        .map_err(|e| format!("node did not run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the browser script failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
