//! Path globs for scoped remote turns (issue 15 §2): how a configured glob is checked and
//! how globs match. `*` never crosses `/`; `**` spans any number of directories.

use std::sync::OnceLock;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Why a glob in `remoteScope` was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobError {
    /// The glob as written.
    pub glob: String,
    /// What is wrong with it, for the person fixing the config.
    pub reason: String,
}

/// Checks one configured glob: relative to the working directory, no `..`, valid syntax.
pub fn validate_glob(glob: &str) -> Result<(), GlobError> {
    let error = |reason: &str| GlobError {
        glob: glob.to_string(),
        reason: reason.to_string(),
    };
    if glob.trim().is_empty() {
        return Err(error("an empty glob matches nothing"));
    }
    if glob.starts_with('/') || glob.starts_with('~') {
        return Err(error(
            "globs are relative to the working directory; a remote turn may never change \
             anything outside it",
        ));
    }
    if glob.split('/').any(|part| part == "..") {
        return Err(error("`..` would reach outside the working directory"));
    }
    build_glob(glob, false)
        .map(|_| ())
        .map_err(|e| error(&e.kind().to_string()))
}

fn build_glob(glob: &str, case_insensitive: bool) -> Result<Glob, globset::Error> {
    // `*` must not cross `/`: `*.rs` is a file here, not every Rust file in the tree.
    GlobBuilder::new(glob)
        .literal_separator(true)
        .case_insensitive(case_insensitive)
        .build()
}

/// Globs with their spelling, so a match can be named. The set is compiled at the first
/// match, not when the scope is built: compiling the default protected globs is most of
/// a session's start-up otherwise (~0.4 ms natively, more in the sandbox), and many
/// sessions never see a remote tool call.
#[derive(Debug, Clone)]
pub struct Globs {
    written: Vec<String>,
    globs: Vec<Glob>,
    set: OnceLock<GlobSet>,
}

impl Globs {
    /// Reads `globs`, skipping any that fail (config validation has already refused
    /// them, so this only happens to a caller that skipped it, and skipping narrows).
    pub fn new(globs: &[String], case_insensitive: bool) -> Self {
        let mut written = Vec::new();
        let mut parsed = Vec::new();
        for glob in globs {
            if let Ok(compiled) = build_glob(glob, case_insensitive) {
                parsed.push(compiled);
                written.push(glob.clone());
            }
        }
        Globs {
            written,
            globs: parsed,
            set: OnceLock::new(),
        }
    }

    /// The globs as written.
    pub fn written(&self) -> &[String] {
        &self.written
    }

    /// The first glob matching `path`.
    pub fn first_match(&self, path: &str) -> Option<&str> {
        self.set
            .get_or_init(|| {
                let mut builder = GlobSetBuilder::new();
                for glob in &self.globs {
                    builder.add(glob.clone());
                }
                builder.build().unwrap_or_else(|_| GlobSet::empty())
            })
            .matches(path)
            .first()
            .and_then(|i| self.written.get(*i))
            .map(String::as_str)
    }
}
