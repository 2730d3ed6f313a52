//! Path globs for scoped remote turns (docs/decisions.md#decision-16-scoped-remote-turns): how a
//! configured glob is checked and how globs match. `*` never crosses `/`; `**` spans any number of
//! directories.

use std::sync::OnceLock;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

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

/// `text` in Unicode NFC. Globs and paths are compared in NFC on both sides: macOS stores names
/// decomposed (NFD), so a protected `café/**` typed composed never matched the `café` the file
/// system reports, and the other way round (docs/security.md#what-a-remote-turn-can-and-cannot-do).
fn nfc(text: &str) -> std::borrow::Cow<'_, str> {
    // Nearly every path is ASCII, already NFC: no allocation for it.
    match is_nfc_quick(text.chars()) {
        IsNormalized::Yes => std::borrow::Cow::Borrowed(text),
        _ => std::borrow::Cow::Owned(text.nfc().collect()),
    }
}

fn build_glob(glob: &str, case_insensitive: bool) -> Result<Glob, globset::Error> {
    // `*` must not cross `/`: `*.rs` is a file here, not every Rust file in the tree.
    GlobBuilder::new(&nfc(glob))
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
            .matches(nfc(path).as_ref())
            .first()
            .and_then(|i| self.written.get(*i))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `é` composed (NFC, as typed) and decomposed (NFD, as macOS stores names).
    const NFC: &str = "caf\u{e9}";
    const NFD: &str = "cafe\u{301}";

    #[test]
    fn globs_and_paths_match_across_normal_forms() {
        assert_ne!(NFC, NFD);
        for (glob, path) in [(NFC, NFD), (NFD, NFC), (NFC, NFC), (NFD, NFD)] {
            for case_insensitive in [false, true] {
                let globs = Globs::new(&[format!("{glob}/**")], case_insensitive);
                let path = format!("{path}/secret.txt");
                assert_eq!(
                    globs.first_match(&path),
                    Some(format!("{glob}/**").as_str()),
                    "glob {glob:?} against path {path:?}"
                );
            }
        }
        let globs = Globs::new(&[format!("{NFC}/**")], false);
        assert_eq!(globs.first_match("cafe/secret.txt"), None);
    }
}
