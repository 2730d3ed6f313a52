//! The component compiled once for a whole test run. Compiling it costs 5–10 s, and every
//! `host-shim` a test starts with a fresh state directory compiled it again (its cache lives
//! beside the state file): that was most of the test suite's time. The first test to ask
//! compiles it into one folder under cargo's `CARGO_TARGET_TMPDIR`, and each test's state
//! directory gets a copy of the compiled file before its `host-shim` starts; in-process
//! runtimes load it from that folder too.

use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Limits, Runtime, component_digest};

/// The shared folder, with the component compiled in it (compiled by the first caller of
/// this test binary, or loaded: an earlier binary of the same run left it there).
fn shared() -> &'static Path {
    static SHARED: OnceLock<PathBuf> = OnceLock::new();
    SHARED.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compiled-component");
        private_dir(&dir);
        Runtime::load(EMBEDDED_COMPONENT, Limits::default(), Some(&dir))
            .expect("the component compiles");
        dir
    })
}

/// A runtime with `limits`, its compiled code from the shared folder.
pub fn runtime(limits: Limits) -> Arc<Runtime> {
    Arc::new(Runtime::load(EMBEDDED_COMPONENT, limits, Some(shared())).expect("component loads"))
}

/// Puts the compiled component where a `host-shim` whose state directory is `state_dir`
/// looks for it (`<state_dir>/cache`), as its own first start would have left it: the
/// folder `0700`, the file `0600` (the host refuses compiled code anyone else could write).
pub fn seed_cache(state_dir: &Path) {
    let cache = state_dir.join("cache");
    private_dir(&cache);
    // Only this build's: the folder keeps the files of earlier builds of the component.
    let this_build = format!("bridge-{}", component_digest(EMBEDDED_COMPONENT));
    let compiled = std::fs::read_dir(shared()).expect("the shared folder reads");
    for entry in compiled.flatten() {
        let name = entry.file_name();
        let shown = name.to_string_lossy();
        if !shown.starts_with(&this_build) || !shown.ends_with(".cwasm") {
            continue;
        }
        // A host already running here maps the file it loaded: rewriting it in place would
        // kill that host with SIGBUS. The name is the content's hash, so one that is there is
        // this one; a new one is written aside and renamed into place whole.
        let copy = cache.join(&name);
        if copy.exists() {
            continue;
        }
        let aside = cache.join(format!(
            ".{}.{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        std::fs::copy(entry.path(), &aside).expect("the compiled component copies");
        std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o600))
            .expect("the copy is made private");
        std::fs::rename(&aside, &copy).expect("the copy is put in place");
    }
}

fn private_dir(dir: &Path) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .expect("the folder is created");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .expect("the folder is made private");
}
