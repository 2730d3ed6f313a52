//! Locations of the config files, the state file and the lock directory
//! (docs/architecture.md#the-original-module-by-module).
//!
//! The environment is a parameter, never read from the process here, so every combination
//! of variables can be tested without touching the real home directory.

use std::path::{Path, PathBuf};

/// Variable that replaces config discovery with one file (scope "override").
pub const CONFIG_ENV: &str = "PI_BOT_CONNECT_CONFIG";
/// Variable that moves the state file (and, with it, the lock directory).
pub const STATE_ENV: &str = "PI_BOT_CONNECT_STATE";

/// Which config files to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigLocations {
    /// Normal discovery: the global file, then the project file (project overrides global).
    Discover {
        /// `~/.pi/agent/bot-connect.json`.
        global: PathBuf,
        /// `<cwd>/.pi/bot-connect.json`.
        project: PathBuf,
    },
    /// `PI_BOT_CONNECT_CONFIG` is set: only this file is read.
    Override(PathBuf),
}

/// Every location the host needs, resolved once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Which config files to read.
    pub config: ConfigLocations,
    /// The state file shared by all sessions.
    pub state_file: PathBuf,
    /// Directory holding the single-instance lock files.
    pub lock_dir: PathBuf,
}

/// Why the locations could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathsError {
    /// A location lives under the home directory, but none is known.
    #[error(
        "cannot find the home directory (HOME is not set or empty), and the {needed_for} lives there; \
         set HOME, or point {CONFIG_ENV} and {STATE_ENV} at explicit paths"
    )]
    NoHome {
        /// Which location needed the home directory.
        needed_for: &'static str,
    },
}

/// Everything bot-connect keeps beside its state file: the state file itself, the
/// compiled-component cache, the attach links, the private copy of the pi extension, the
/// broker's socket (and the directory that holds it), its bindings and its status file. A
/// remote turn never reads or changes these without an approval: a changed extension copy
/// or binding would outlive the turn that wrote it.
pub fn bridge_files(state_file: &Path) -> Vec<PathBuf> {
    let mut files = vec![state_file.to_path_buf()];
    files.extend(state_db_files(state_file));
    if let Some(dir) = state_file.parent() {
        files.extend(
            [
                "cache",
                "links",
                "pi-extension",
                "broker",
                "broker.sock",
                "broker-bindings.json",
                "broker-status.json",
            ]
            .iter()
            .map(|name| dir.join(name)),
        );
    }
    files
}

/// The state database beside a state file path: `state.json` → `state.sqlite3`, any other
/// name gets `.sqlite3` added. `PI_BOT_CONNECT_STATE` keeps naming the state (and the lock
/// directory beside it) as before.
pub fn db_path(state_file: &Path) -> PathBuf {
    if state_file.extension().is_some_and(|ext| ext == "json") {
        state_file.with_extension("sqlite3")
    } else {
        with_suffix(state_file, ".sqlite3")
    }
}

/// Where the migrated JSON state file is kept (the backup).
pub fn migrated_backup_path(state_file: &Path) -> PathBuf {
    with_suffix(state_file, ".migrated")
}

/// The database, the files SQLite keeps beside it and the migration backup: all of them
/// are bot-connect's own (an agent's tool must not read or change them).
fn state_db_files(state_file: &Path) -> Vec<PathBuf> {
    let db = db_path(state_file);
    vec![
        with_suffix(&db, "-wal"),
        with_suffix(&db, "-shm"),
        with_suffix(&db, "-journal"),
        db,
        migrated_backup_path(state_file),
    ]
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

impl Paths {
    /// Resolves the locations from `var` (environment lookup), the home directory and the
    /// working directory. Empty variables count as unset, as in the original, so an
    /// `export PI_BOT_CONNECT_STATE=` slip does not move the state file to the cwd.
    /// Relative override paths are taken relative to `cwd`.
    pub fn resolve(
        var: &dyn Fn(&str) -> Option<String>,
        home: Option<&Path>,
        cwd: &Path,
    ) -> Result<Paths, PathsError> {
        let agent_dir = |needed_for| {
            home.filter(|h| !h.as_os_str().is_empty())
                .map(|h| h.join(".pi").join("agent"))
                .ok_or(PathsError::NoHome { needed_for })
        };
        let set = |name: &str| var(name).filter(|v| !v.is_empty());

        let config = match set(CONFIG_ENV) {
            Some(path) => ConfigLocations::Override(cwd.join(path)),
            None => ConfigLocations::Discover {
                global: agent_dir("global config")?.join("bot-connect.json"),
                project: cwd.join(".pi").join("bot-connect.json"),
            },
        };
        let (state_file, lock_dir) = match set(STATE_ENV) {
            Some(path) => {
                let given = Path::new(&path);
                let lock_dir = match given.parent().filter(|p| !p.as_os_str().is_empty()) {
                    Some(parent) => cwd.join(parent).join("locks"),
                    None => agent_dir("lock directory")?.join("locks"),
                };
                (cwd.join(given), lock_dir)
            }
            None => {
                let agent = agent_dir("state file")?;
                (agent.join("bot-connect-state.json"), agent.join("locks"))
            }
        };
        Ok(Paths {
            config,
            state_file,
            lock_dir,
        })
    }
}

/// Where `attach` finds a running broker: `broker/broker.sock` beside the state file.
pub fn control_socket_path(state_dir: &Path) -> PathBuf {
    // Its own directory, created 0700: the state directory may be shared (/tmp) and is
    // never chmodded (see `attach::private_dir`).
    state_dir.join("broker").join("broker.sock")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(vars: &[(&str, &str)], home: Option<&str>) -> Result<Paths, PathsError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        Paths::resolve(&lookup, home.map(Path::new), Path::new("/work/proj"))
    }

    fn discover(global: &str, project: &str) -> ConfigLocations {
        ConfigLocations::Discover {
            global: PathBuf::from(global),
            project: PathBuf::from(project),
        }
    }

    #[test]
    fn defaults_live_under_home_and_cwd() {
        assert_eq!(
            resolve(&[], Some("/home/u")),
            Ok(Paths {
                config: discover(
                    "/home/u/.pi/agent/bot-connect.json",
                    "/work/proj/.pi/bot-connect.json"
                ),
                state_file: PathBuf::from("/home/u/.pi/agent/bot-connect-state.json"),
                lock_dir: PathBuf::from("/home/u/.pi/agent/locks"),
            })
        );
    }

    #[test]
    fn config_override_replaces_discovery() {
        let paths = resolve(&[(CONFIG_ENV, "/etc/bc.json")], Some("/home/u")).unwrap();
        assert_eq!(
            paths.config,
            ConfigLocations::Override(PathBuf::from("/etc/bc.json"))
        );
        assert_eq!(
            paths.state_file,
            PathBuf::from("/home/u/.pi/agent/bot-connect-state.json")
        );
    }

    #[test]
    fn relative_config_override_is_relative_to_cwd() {
        let paths = resolve(&[(CONFIG_ENV, "conf/bc.json")], Some("/home/u")).unwrap();
        assert_eq!(
            paths.config,
            ConfigLocations::Override(PathBuf::from("/work/proj/conf/bc.json"))
        );
    }

    #[test]
    fn state_override_moves_state_file_and_lock_dir() {
        let paths = resolve(&[(STATE_ENV, "/var/bc/state.json")], Some("/home/u")).unwrap();
        assert_eq!(paths.state_file, PathBuf::from("/var/bc/state.json"));
        assert_eq!(paths.lock_dir, PathBuf::from("/var/bc/locks"));
    }

    #[test]
    fn relative_state_override_with_directory_keeps_locks_beside_it() {
        let paths = resolve(&[(STATE_ENV, "run/state.json")], Some("/home/u")).unwrap();
        assert_eq!(paths.state_file, PathBuf::from("/work/proj/run/state.json"));
        assert_eq!(paths.lock_dir, PathBuf::from("/work/proj/run/locks"));
    }

    #[test]
    fn state_override_without_directory_falls_back_to_home_locks() {
        let paths = resolve(&[(STATE_ENV, "state.json")], Some("/home/u")).unwrap();
        assert_eq!(paths.state_file, PathBuf::from("/work/proj/state.json"));
        assert_eq!(paths.lock_dir, PathBuf::from("/home/u/.pi/agent/locks"));
    }

    #[test]
    fn empty_variables_count_as_unset() {
        assert_eq!(
            resolve(&[(CONFIG_ENV, ""), (STATE_ENV, "")], Some("/home/u")),
            resolve(&[], Some("/home/u"))
        );
    }

    #[test]
    fn both_overrides_with_directories_need_no_home() {
        let paths = resolve(
            &[(CONFIG_ENV, "/c.json"), (STATE_ENV, "/s/state.json")],
            None,
        )
        .unwrap();
        assert_eq!(
            paths.config,
            ConfigLocations::Override(PathBuf::from("/c.json"))
        );
        assert_eq!(paths.lock_dir, PathBuf::from("/s/locks"));
    }

    /// Environment variables, home directory, and which location needs the home.
    type NoHomeCase<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, &'a str);

    #[test]
    fn missing_home_names_what_needed_it() {
        let cases: [NoHomeCase<'_>; 4] = [
            (&[], None, "global config"),
            (&[], Some(""), "global config"),
            (&[(CONFIG_ENV, "/c.json")], None, "state file"),
            (
                &[(CONFIG_ENV, "/c.json"), (STATE_ENV, "s.json")],
                None,
                "lock directory",
            ),
        ];
        for (vars, home, needed_for) in cases {
            assert_eq!(resolve(vars, home), Err(PathsError::NoHome { needed_for }));
        }
    }

    #[test]
    fn missing_home_message_says_what_to_do() {
        let text = PathsError::NoHome {
            needed_for: "state file",
        }
        .to_string();
        assert_eq!(
            text,
            "cannot find the home directory (HOME is not set or empty), and the state file lives there; \
             set HOME, or point PI_BOT_CONNECT_CONFIG and PI_BOT_CONNECT_STATE at explicit paths"
        );
    }
}
