//! Config discovery (docs/architecture.md#the-original-module-by-module): which config files exist,
//! and their raw text.
//!
//! Parsing and validation belong to the guest; the host only reads files. A file that
//! exists but cannot be read is still handed over, as unreadable: it may have been the
//! one that restricted remote turns, so the bridge must fail closed on it, not quietly
//! run with the defaults.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::disk::paths::{CONFIG_ENV, ConfigLocations};

/// Larger files are skipped: a config is a few hundred bytes, so a megabyte means the
/// variable points at the wrong file, and reading it whole would only waste memory.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Where a config text came from; the label prefixes every note about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `~/.pi/agent/bot-connect.json`.
    Global,
    /// `<cwd>/.pi/bot-connect.json`.
    Project,
    /// The file named by `PI_BOT_CONNECT_CONFIG`.
    Override,
}

impl Scope {
    /// The label used in notes: `global`, `project` or `override`.
    pub fn label(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Project => "project",
            Scope::Override => "override",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One config file: its text, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigText {
    /// Where it came from.
    pub scope: Scope,
    /// The file.
    pub path: PathBuf,
    /// Its contents, or the reason they could not be read (for a person).
    pub text: Result<String, String>,
}

/// The result of discovery: the files in merge order (global before project).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Discovery {
    /// Config files, lowest precedence first.
    pub sources: Vec<ConfigText>,
}

/// Reads the config files named by `locations`. A missing discovered file is normal and
/// silent; a missing override file is noted, because the user asked for that file explicitly.
pub fn discover(locations: &ConfigLocations) -> Discovery {
    let mut discovery = Discovery::default();
    match locations {
        ConfigLocations::Discover { global, project } => {
            read_into(&mut discovery, Scope::Global, global);
            read_into(&mut discovery, Scope::Project, project);
        }
        ConfigLocations::Override(path) => {
            read_into(&mut discovery, Scope::Override, path);
        }
    }
    discovery
}

fn read_into(discovery: &mut Discovery, scope: Scope, path: &Path) {
    let text = match read_limited(path) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => {
            Err("it is larger than 1 MiB (a config file is never that big; check the path)".into())
        }
        // A discovered file that is not there is the normal case: nothing to read.
        Err(err) if err.kind() == io::ErrorKind::NotFound && scope != Scope::Override => return,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            Err(format!("it does not exist, though {CONFIG_ENV} names it"))
        }
        Err(err) => Err(err.to_string()),
    };
    discovery.sources.push(ConfigText {
        scope,
        path: path.to_path_buf(),
        text,
    });
}

/// The file's text, or `None` when it exceeds the cap. The cap is enforced on the bytes
/// actually read, so a file that grows after a size check cannot slip through.
fn read_limited(path: &Path) -> io::Result<Option<String>> {
    let mut text = String::new();
    File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)?;
    Ok((text.len() as u64 <= MAX_CONFIG_BYTES).then_some(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn discover_in(dir: &Path) -> (PathBuf, PathBuf, Discovery) {
        let global = dir.join("global.json");
        let project = dir.join("project.json");
        let found = discover(&ConfigLocations::Discover {
            global: global.clone(),
            project: project.clone(),
        });
        (global, project, found)
    }

    #[test]
    fn reads_global_then_project() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("global.json"), "{\"g\":1}").unwrap();
        fs::write(dir.path().join("project.json"), "{\"p\":1}").unwrap();
        let (global, project, found) = discover_in(dir.path());
        assert_eq!(
            found,
            Discovery {
                sources: vec![
                    ConfigText {
                        scope: Scope::Global,
                        path: global,
                        text: Ok("{\"g\":1}".into())
                    },
                    ConfigText {
                        scope: Scope::Project,
                        path: project,
                        text: Ok("{\"p\":1}".into())
                    },
                ],
            }
        );
    }

    #[test]
    fn missing_discovered_files_are_silent() {
        let dir = tempfile::tempdir().unwrap();
        let (_, _, found) = discover_in(dir.path());
        assert_eq!(found, Discovery::default());
    }

    #[test]
    fn override_replaces_discovery() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("global.json"), "{}").unwrap();
        let path = dir.path().join("mine.json");
        fs::write(&path, "{\"o\":1}").unwrap();
        let found = discover(&ConfigLocations::Override(path.clone()));
        assert_eq!(
            found.sources,
            vec![ConfigText {
                scope: Scope::Override,
                path,
                text: Ok("{\"o\":1}".into())
            }]
        );
    }

    #[test]
    fn a_missing_override_is_an_unreadable_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.json");
        let found = discover(&ConfigLocations::Override(path.clone()));
        assert_eq!(
            found.sources,
            vec![ConfigText {
                scope: Scope::Override,
                path,
                text: Err("it does not exist, though PI_BOT_CONNECT_CONFIG names it".into())
            }]
        );
    }

    #[test]
    fn an_unreadable_file_is_handed_over_as_unreadable_and_the_other_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        // A directory in place of the file: tests run as root, so mode bits cannot
        // provoke a read error, but reading a directory always fails.
        fs::create_dir(dir.path().join("global.json")).unwrap();
        fs::write(dir.path().join("project.json"), "{}").unwrap();
        let (global, _, found) = discover_in(dir.path());
        let err = fs::read_to_string(&global).unwrap_err();
        assert_eq!(found.sources.len(), 2);
        assert_eq!(found.sources[0].scope, Scope::Global);
        assert_eq!(found.sources[0].text, Err(err.to_string()));
        assert_eq!(found.sources[1].text, Ok("{}".into()));
    }

    #[test]
    fn a_non_utf8_file_is_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        fs::write(&path, [0xff, 0xfe]).unwrap();
        let found = discover(&ConfigLocations::Override(path.clone()));
        assert_eq!(
            found.sources[0].text,
            Err("stream did not contain valid UTF-8".into())
        );
    }

    #[test]
    fn size_cap_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let at_cap = dir.path().join("global.json");
        let over_cap = dir.path().join("project.json");
        fs::write(&at_cap, " ".repeat(1024 * 1024)).unwrap();
        fs::write(&over_cap, " ".repeat(1024 * 1024 + 1)).unwrap();
        let (_, _, found) = discover_in(dir.path());
        assert_eq!(found.sources.len(), 2);
        assert_eq!(found.sources[0].path, at_cap);
        assert!(found.sources[0].text.is_ok());
        assert_eq!(found.sources[1].path, over_cap);
        assert_eq!(
            found.sources[1].text,
            Err("it is larger than 1 MiB (a config file is never that big; check the path)".into())
        );
    }

    #[test]
    fn scope_labels() {
        let labels: Vec<String> = [Scope::Global, Scope::Project, Scope::Override]
            .iter()
            .map(Scope::to_string)
            .collect();
        assert_eq!(labels, ["global", "project", "override"]);
    }
}
