//! Builds the guest crate as a `wasm32-wasip2` component and embeds it, so a fresh clone
//! needs nothing but `cargo run -p host-shim -- run`.
//!
//! The nested cargo gets its own target and build dir under `$OUT_DIR`: sharing the
//! outer ones deadlocks `cargo build --release` on cargo's file locks (seen while setting
//! this build up). `GUEST_WASM=/path/guest.wasm` skips the nested build.
//!
//! The guest is linked with the hash-seed adapter (`build/hash_seed_adapter.rs`), so
//! std's `HashMap` seed comes through the bridge's `rng` import and the component
//! imports no `wasi:random`. A guest built by hand without it is refused at load; link
//! it with `-C link-arg=--adapt=<module>=<OUT_DIR>/hash-seed-adapter.wasm` as below.

#[path = "build/hash_seed_adapter.rs"]
mod hash_seed_adapter;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const TARGET: &str = "wasm32-wasip2";

fn main() {
    if let Err(message) = run() {
        // A build script's panic is how cargo shows a failure; the message is what matters.
        panic!("\n\nhost-shim could not embed the bridge component:\n{message}\n");
    }
}

fn run() -> Result<(), String> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR is not set")?);
    let workspace = manifest_dir
        .parent()
        .ok_or("host-shim has no parent directory")?;
    let embedded = out_dir.join("guest.wasm");

    println!("cargo:rerun-if-env-changed=GUEST_WASM");
    if let Some(prebuilt) = env::var_os("GUEST_WASM") {
        fs::copy(&prebuilt, &embedded).map_err(|e| {
            format!(
                "GUEST_WASM={} cannot be copied: {e}",
                Path::new(&prebuilt).display()
            )
        })?;
        return Ok(());
    }

    ensure_target_installed()?;
    let adapter = write_hash_seed_adapter(workspace, &out_dir)?;

    let nested = out_dir.join("guest-target");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    // `cargo rustc` so the link argument reaches the guest's own link only, and only
    // the cdylib (the component) is built.
    cmd.current_dir(workspace)
        .args([
            "rustc",
            "--locked",
            "--release",
            "-p",
            "guest",
            "--crate-type",
            "cdylib",
            "--target",
            TARGET,
        ])
        .arg("--target-dir")
        .arg(&nested)
        // The env var beats a configured build-dir, which would otherwise deadlock.
        .env("CARGO_BUILD_BUILD_DIR", &nested)
        .arg("--")
        .arg("-C")
        .arg(format!(
            "link-arg=--adapt={}={}",
            hash_seed_adapter::STD_SEED_MODULE,
            adapter.display()
        ));
    // Host settings must not leak into the wasm build: link args break wasm-component-ld,
    // clippy-driver would lint the guest for wasm, profiles would change it untracked.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "OUT_DIR",
        "TARGET",
        "HOST",
        "PROFILE",
        "OPT_LEVEL",
        "DEBUG",
        "NUM_JOBS",
        "RUSTC_LINKER",
    ] {
        cmd.env_remove(var);
    }
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        let inherited = [
            "CARGO_CFG_",
            "CARGO_FEATURE_",
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "DEP_",
            "CARGO_PROFILE_",
        ];
        if inherited.iter().any(|prefix| key.starts_with(prefix)) {
            cmd.env_remove(&*key);
        }
    }
    // WebAssembly SIMD (on in wasmtime by default), for every crate of the guest: memchr's
    // searches, which redaction runs over each reply several times, read 16 bytes at a
    // time, and the compiler vectorises the byte loops. A 64 KiB reply cost 37-42 % fewer
    // operators and 31-34 % less time (docs/benchmarks.md#a-reply-inside-the-component).
    cmd.env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+simd128");
    let status = cmd
        .status()
        .map_err(|e| format!("could not run cargo for the guest build: {e}"))?;
    if !status.success() {
        return Err(format!(
            "the guest build failed (see the errors above).\n\
             If the error is `can't find crate for core`, the {TARGET} target is missing: run\n    \
             rustup target add {TARGET}\n\
             Or build the guest yourself and set GUEST_WASM=/path/to/guest.wasm."
        ));
    }

    let release = nested.join(TARGET).join("release");
    copy_if_changed(&release.join("guest.wasm"), &embedded)?;

    for path in ["Cargo.lock", "Cargo.toml", "guest/Cargo.toml", "wit"] {
        println!("cargo:rerun-if-changed={}", workspace.join(path).display());
    }
    // Cargo's dep-info lists every guest source and every .wit file wit-bindgen read.
    let dep_info = fs::read_to_string(release.join("guest.d"))
        .map_err(|e| format!("cannot read the guest's dep-info: {e}"))?;
    for line in dep_info.lines() {
        if let Some((_, deps)) = line.split_once(": ") {
            for file in deps.replace("\\ ", "\0").split_whitespace() {
                println!("cargo:rerun-if-changed={}", file.replace('\0', " "));
            }
        }
    }
    Ok(())
}

/// Writes the hash-seed adapter for the `rng` interface wit/rng.wit declares and
/// returns its path. The file is named after its bytes: cargo does not track what a
/// link argument points to, so a changed adapter must be a changed argument to relink.
fn write_hash_seed_adapter(workspace: &Path, out_dir: &Path) -> Result<PathBuf, String> {
    let wit = workspace.join("wit/rng.wit");
    let text =
        fs::read_to_string(&wit).map_err(|e| format!("cannot read {}: {e}", wit.display()))?;
    let rng = rng_interface(&text).ok_or_else(|| {
        format!(
            "{} has no `package <namespace>:<name>@<version>;` line, so the hash-seed \
             adapter cannot name the rng interface it calls",
            wit.display()
        )
    })?;
    let bytes = hash_seed_adapter::module(&rng);
    // The fixed name is what host-shim/tests/host/hash_seed_adapter.rs loads.
    write_if_changed(&bytes, &out_dir.join("hash-seed-adapter.wasm"))?;
    let mut hasher = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&bytes, &mut hasher);
    let path = out_dir.join(format!(
        "hash-seed-adapter-{:016x}.wasm",
        std::hash::Hasher::finish(&hasher)
    ));
    write_if_changed(&bytes, &path)?;
    Ok(path)
}

/// `pi:bot-connect/rng@0.2.0` from the `package pi:bot-connect@0.2.0;` line of rng.wit.
fn rng_interface(wit: &str) -> Option<String> {
    let package = wit
        .lines()
        .find_map(|line| line.trim().strip_prefix("package "))?
        .trim_end()
        .strip_suffix(';')?;
    let (name, version) = package.split_once('@')?;
    Some(format!("{}/rng@{}", name.trim(), version.trim()))
}

/// Machines with `RUSTUP_AUTO_INSTALL=0` do not add the toolchain file's target by
/// themselves; add it here so a fresh clone builds with no manual step.
fn ensure_target_installed() -> Result<(), String> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("could not run rustc: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let target_lib = Path::new(&sysroot).join("lib/rustlib").join(TARGET);
    if target_lib.is_dir() {
        return Ok(());
    }
    let mut rustup = Command::new("rustup");
    rustup.args(["target", "add", TARGET]).stdout(Stdio::null());
    if let Some(toolchain) = env::var_os("RUSTUP_TOOLCHAIN") {
        rustup.arg("--toolchain").arg(toolchain);
    }
    match rustup.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(_) | Err(_) => Err(format!(
            "the {TARGET} target is not installed for this toolchain and `rustup target add` \
             failed.\nRun this once, then build again:\n    rustup target add {TARGET}"
        )),
    }
}

/// Leaves the embedded file untouched when the bytes are the same.
fn copy_if_changed(from: &Path, to: &Path) -> Result<(), String> {
    let new = fs::read(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    write_if_changed(&new, to)
}

/// Writes `bytes` to `to` unless it already holds them.
fn write_if_changed(bytes: &[u8], to: &Path) -> Result<(), String> {
    if fs::read(to).ok().as_deref() != Some(bytes) {
        fs::write(to, bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    }
    Ok(())
}
