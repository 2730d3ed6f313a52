//! The paths a tool call touches, read from the agent's tool arguments
//! (docs/decisions.md#decision-16-scoped-remote-turns), so the bridge can judge a remote turn's
//! call against its scope. Paths only: contents never leave this module, and nothing here is
//! logged.
//!
//! pi's own tools are read by their schemas (`read`, `write`, `edit`, `ls`, `find`,
//! `grep`); `bash` has no paths the host can name. Any other tool is read by the argument
//! names tools commonly use for paths, and counted as writing: a tool the host does not
//! know is not assumed harmless.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::wit::session::{PathAccess, ToolPath};

/// Argument names that hold a path in tools the host does not know.
const PATH_KEYS: [&str; 12] = [
    "path",
    "paths",
    "file",
    "files",
    "file_path",
    "filePath",
    "filename",
    "dir",
    "directory",
    "target",
    "source",
    "destination",
];

/// Where the agent works and which files are bot-connect's own.
#[derive(Debug, Clone)]
pub struct PathContext {
    /// The session's working directory (relative paths are taken from it).
    pub cwd: PathBuf,
    /// The home directory, for `~`.
    pub home: Option<PathBuf>,
    /// bot-connect's config files, state file and lock directory. Shared: every session of
    /// a broker or node with the same config files has the same list (fourteen paths,
    /// about 1.2 KiB), which each of 100,000 hibernated sessions kept a copy of.
    pub own: std::sync::Arc<[PathBuf]>,
}

/// The paths `tool` touches with `input` as its arguments, each as the agent resolves it
/// and, when it leads elsewhere through a symlink, where it leads.
pub fn tool_paths(tool: &str, input: &Value, context: &PathContext) -> Vec<ToolPath> {
    // An argument that should hold a path but holds something else (the extension's mark
    // for a path too long to send, a number, an object) is named, never skipped: judged
    // without it, the call would look like one that touches nothing.
    let mut unjudgeable: Vec<String> = Vec::new();
    let mut glob = None;
    let mut named = |key: &str, required: bool| match input.get(key) {
        Some(Value::String(text)) => Some(text.clone()),
        None | Some(Value::Null) if !required => None,
        _ => {
            unjudgeable.push(key.to_string());
            None
        }
    };
    let (raw, access): (Vec<String>, PathAccess) = match tool {
        "read" => (named("path", true).into_iter().collect(), PathAccess::Read),
        "write" | "edit" => (named("path", true).into_iter().collect(), PathAccess::Write),
        // pi lists, finds and greps in the working directory when no path is given.
        "ls" | "find" | "grep" => {
            if tool == "grep" {
                glob = named("glob", false);
            }
            let root = named("path", false).unwrap_or_else(|| ".".into());
            (vec![root], PathAccess::Read)
        }
        "bash" => (Vec::new(), PathAccess::Write),
        _ => {
            let mut found = Vec::new();
            for key in PATH_KEYS {
                match input.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::String(text)) => found.push(text.clone()),
                    Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                        found.extend(items.iter().filter_map(Value::as_str).map(str::to_string))
                    }
                    Some(_) => unjudgeable.push(key.to_string()),
                }
            }
            (found, PathAccess::Write)
        }
    };
    let mut paths: Vec<ToolPath> = unjudgeable
        .into_iter()
        .map(|argument| ToolPath {
            path: argument,
            access: PathAccess::Unjudgeable,
            bridge_owned: false,
        })
        .collect();
    // grep's glob, as written: a filter, not a path, and one that can select files the
    // ignore rules would skip, so the bridge asks about it.
    paths.extend(glob.map(|glob| ToolPath {
        path: glob,
        access: PathAccess::Glob,
        bridge_owned: false,
    }));
    for written in raw {
        let expanded = expand(&written, context.home.as_deref());
        let absolute = lexical(&context.cwd.join(&expanded));
        let resolved = resolve_links(&absolute);
        let owned = |path: &Path| {
            context.own.iter().any(|own| {
                path.starts_with(own) || (access == PathAccess::Write && own.starts_with(path))
            })
        };
        let bridge_owned = owned(&absolute) || resolved.as_deref().is_some_and(owned);
        paths.push(ToolPath {
            path: expanded,
            access,
            bridge_owned,
        });
        if let Some(resolved) = resolved.filter(|r| *r != absolute) {
            paths.push(ToolPath {
                path: resolved.to_string_lossy().into_owned(),
                access,
                bridge_owned,
            });
        }
    }
    paths
}

/// The path as pi expands it: a leading `@` dropped, Unicode spaces made plain, `~`
/// replaced by the home directory (left as is without one: the bridge then judges it
/// the strict way).
fn expand(path: &str, home: Option<&Path>) -> String {
    let path = path.strip_prefix('@').unwrap_or(path);
    let path: String = path
        .chars()
        .map(|c| match c {
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect();
    match home {
        Some(home) if path == "~" => home.to_string_lossy().into_owned(),
        Some(home) if path.starts_with("~/") => format!("{}{}", home.to_string_lossy(), &path[1..]),
        _ => path,
    }
}

/// `.` and `..` taken away without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Where `path` really is: its nearest existing ancestor resolved through symlinks, with
/// the rest appended. `None` when nothing of it can be resolved.
fn resolve_links(path: &Path) -> Option<PathBuf> {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut resolved = real;
            for part in rest.iter().rev() {
                resolved.push(part);
            }
            return Some(lexical(&resolved));
        }
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context(cwd: &Path) -> PathContext {
        PathContext {
            cwd: cwd.to_path_buf(),
            home: Some(PathBuf::from("/home/me")),
            own: vec![
                cwd.join(".pi/bot-connect.json"),
                PathBuf::from("/state/locks"),
            ]
            .into(),
        }
    }

    fn simple(paths: &[ToolPath]) -> Vec<(String, PathAccess, bool)> {
        paths
            .iter()
            .map(|p| (p.path.clone(), p.access, p.bridge_owned))
            .collect()
    }

    #[test]
    fn pi_tools_by_their_schemas() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cwd = std::fs::canonicalize(dir.path()).expect("canonical");
        let ctx = context(&cwd);
        let rows = [
            (
                "read",
                json!({"path": "src/a.rs", "limit": 5}),
                vec![("src/a.rs", PathAccess::Read)],
            ),
            (
                "write",
                json!({"path": "@src/b.rs", "content": "SECRET CONTENTS"}),
                vec![("src/b.rs", PathAccess::Write)],
            ),
            (
                "edit",
                json!({"path": "~/notes.md", "edits": [{"oldText": "a", "newText": "b"}]}),
                vec![("/home/me/notes.md", PathAccess::Write)],
            ),
            ("ls", json!({}), vec![(".", PathAccess::Read)]),
            (
                "grep",
                json!({"pattern": "x", "path": "docs"}),
                vec![("docs", PathAccess::Read)],
            ),
            ("bash", json!({"command": "rm -rf /"}), vec![]),
            (
                "mcp_copy",
                json!({"source": "a", "destination": "b", "paths": ["c", 3]}),
                vec![
                    ("paths", PathAccess::Unjudgeable),
                    ("a", PathAccess::Write),
                    ("b", PathAccess::Write),
                ],
            ),
            // The extension's mark for a path too long to send, and a path that is missing
            // or not text: named, so the bridge refuses instead of judging nothing.
            (
                "read",
                json!({"path": {"unjudgeable": "5003 characters"}}),
                vec![("path", PathAccess::Unjudgeable)],
            ),
            (
                "write",
                json!({"content": "x"}),
                vec![("path", PathAccess::Unjudgeable)],
            ),
            (
                "grep",
                json!({"pattern": "x", "glob": {"unjudgeable": "5003 characters"}}),
                vec![("glob", PathAccess::Unjudgeable), (".", PathAccess::Read)],
            ),
            (
                "grep",
                json!({"pattern": "x", "glob": ".env*"}),
                vec![(".env*", PathAccess::Glob), (".", PathAccess::Read)],
            ),
        ];
        for (tool, input, expected) in rows {
            let expected: Vec<(String, PathAccess, bool)> = expected
                .into_iter()
                .map(|(p, a)| (p.to_string(), a, false))
                .collect();
            assert_eq!(simple(&tool_paths(tool, &input, &ctx)), expected, "{tool}");
        }
    }

    #[test]
    fn contents_never_come_out() {
        let ctx = context(Path::new("/work"));
        let paths = tool_paths(
            "write",
            &json!({"path": "a", "content": "sk-live-1234567890abcdef"}),
            &ctx,
        );
        assert!(paths.iter().all(|p| !p.path.contains("sk-live")));
    }

    #[test]
    fn a_symlink_out_of_the_tree_is_sent_where_it_leads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let cwd = root.join("proj");
        let outside = root.join("elsewhere");
        std::fs::create_dir_all(&cwd).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, cwd.join("link")).expect("symlink");
        let paths = tool_paths("write", &json!({"path": "link/new.txt"}), &context(&cwd));
        assert_eq!(
            simple(&paths),
            vec![
                ("link/new.txt".to_string(), PathAccess::Write, false),
                (
                    outside.join("new.txt").to_string_lossy().into_owned(),
                    PathAccess::Write,
                    false
                ),
            ]
        );
    }

    #[test]
    fn bot_connects_own_files_are_marked() {
        let ctx = context(Path::new("/work"));
        let owned = |tool: &str, path: &str| {
            tool_paths(tool, &json!({ "path": path }), &ctx)
                .first()
                .map(|p| p.bridge_owned)
        };
        assert_eq!(owned("write", ".pi/bot-connect.json"), Some(true));
        assert_eq!(owned("read", "/state/locks/telegram.lock"), Some(true));
        // Removing a directory that holds them counts; listing it does not.
        assert_eq!(owned("write", "/state"), Some(true));
        assert_eq!(owned("ls", "."), Some(false));
        assert_eq!(owned("write", "src/main.rs"), Some(false));
    }

    #[test]
    fn every_file_bot_connect_keeps_beside_its_state_is_its_own() {
        // A remote turn that rewrote the private extension copy or a broker binding would
        // change what runs after it; each of these was once writable.
        let state = Path::new("/home/me/.pi/agent/bot-connect-state.json");
        let ctx = PathContext {
            cwd: PathBuf::from("/home/me/proj"),
            home: Some(PathBuf::from("/home/me")),
            own: crate::disk::paths::bridge_files(state).into(),
        };
        for file in [
            "/home/me/.pi/agent/bot-connect-state.json",
            "/home/me/.pi/agent/cache/bridge.cwasm",
            "/home/me/.pi/agent/links/proj.sock",
            "/home/me/.pi/agent/pi-extension/index.ts",
            "/home/me/.pi/agent/broker/broker.sock",
            "/home/me/.pi/agent/broker.sock",
            "/home/me/.pi/agent/broker-bindings.json",
            "/home/me/.pi/agent/broker-status.json",
        ] {
            let paths = tool_paths("write", &json!({ "path": file }), &ctx);
            assert!(paths[0].bridge_owned, "{file}");
        }
        let paths = tool_paths(
            "write",
            &json!({"path": "/home/me/.pi/agent/notes.md"}),
            &ctx,
        );
        assert!(!paths[0].bridge_owned, "only bot-connect's files");
    }
}
