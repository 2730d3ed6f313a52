use super::*;
use crate::core::globs::validate_glob;
use crate::model::{ToolCall, ToolPath};
use proptest::prelude::*;

const CWD: &str = "/home/me/proj";

fn write(path: &str) -> ToolPath {
    ToolPath {
        path: path.into(),
        access: PathAccess::Write,
        bridge_owned: false,
    }
}

fn read(path: &str) -> ToolPath {
    ToolPath {
        path: path.into(),
        access: PathAccess::Read,
        bridge_owned: false,
    }
}

fn call(name: &str, paths: Vec<ToolPath>) -> ToolCall {
    ToolCall {
        name: name.into(),
        paths,
    }
}

fn configured(allow: &[&str], ask: &[&str], allowed: &[&str], protected: &[&str]) -> Scope {
    let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
    let settings = RemoteScopeSettings {
        allow_tools: owned(allow),
        ask_tools: owned(ask),
        allowed_paths: owned(allowed),
        protected_paths: owned(protected),
    };
    Scope::new(
        RemoteToolPolicy::ReadOnly,
        RemoteToolApproval::Off,
        Some(&settings),
    )
}

/// The scope most tests use: look anywhere, change `src/**` and `docs/*.md`, ask for bash.
fn team_scope() -> Scope {
    configured(
        &["read", "grep", "find", "ls", "write", "edit"],
        &["bash"],
        &["src/**", "docs/*.md"],
        &["src/secrets/**"],
    )
}

#[test]
fn locate_table() {
    let inside = |s: &str| Location::Inside(s.into());
    let outside = |s: &str| Location::Outside(s.into());
    let rows = [
        ("src/main.rs", inside("src/main.rs")),
        ("./src//main.rs", inside("src/main.rs")),
        ("", inside(".")),
        (".", inside(".")),
        ("/home/me/proj", inside(".")),
        ("/home/me/proj/", inside(".")),
        ("/home/me/proj/src/lib.rs", inside("src/lib.rs")),
        // `..` segments are taken back lexically, never above the root.
        ("src/../Cargo.toml", inside("Cargo.toml")),
        ("../proj/src/a.rs", inside("src/a.rs")),
        ("../other/a.rs", outside("/home/me/other/a.rs")),
        ("../../../../../etc/passwd", outside("/etc/passwd")),
        ("/home/me/proj/../proj2/x", outside("/home/me/proj2/x")),
        // A sibling whose name starts with the cwd's is not inside it.
        ("/home/me/project-old/x", outside("/home/me/project-old/x")),
        ("/etc/hosts", outside("/etc/hosts")),
        // Unexpanded `~` is judged the strict way.
        ("~/.ssh/id_ed25519", outside("~/.ssh/id_ed25519")),
        ("~", outside("~")),
        // A symlink-looking path is judged by its text (lexically it stays inside); where a
        // real link leads is the host's second entry, judged on its own.
        ("src/link/../../etc", inside("etc")),
        ("src/../../etc", outside("/home/me/etc")),
    ];
    for (path, expected) in rows {
        assert_eq!(locate(path, CWD), expected, "{path:?}");
    }
    assert_eq!(locate("a/b", "/"), Location::Inside("a/b".into()));
    assert_eq!(locate("/a/b", "/"), Location::Inside("a/b".into()));
    // No cwd known: relative paths stay inside, absolute ones are outside.
    assert_eq!(locate("a", ""), Location::Inside("a".into()));
    assert_eq!(locate("/a", ""), Location::Outside("/a".into()));
}

#[test]
fn glob_semantics_table() {
    let scope = team_scope();
    let refused = |rel: &str| {
        Tier::Refused(format!(
            "Tool 'write' may not change '{rel}' in a messenger-originated turn: it is outside \
             the allowed paths (src/**, docs/*.md). Ask the operator to do it locally."
        ))
    };
    let protected = |rel: &str| Tier::Approval(AskReason::Protected(rel.into()));
    let rows = [
        // `**` spans directories, including none.
        ("src/main.rs", Tier::Allowed),
        ("src/a/b/c/d.rs", Tier::Allowed),
        // `*` does not cross `/`.
        ("docs/guide.md", Tier::Allowed),
        ("docs/api/guide.md", refused("docs/api/guide.md")),
        // Dot-files are matched like any other name...
        ("src/.hidden.rs", Tier::Allowed),
        // ...and protected ones ask, even inside the allowed paths.
        ("src/.env", protected("src/.env")),
        ("src/.env.local", protected("src/.env.local")),
        ("src/.ENV", protected("src/.ENV")),
        ("src/sub/.git/config", protected("src/sub/.git/config")),
        ("src/secrets/key.pem", protected("src/secrets/key.pem")),
        // Allowed paths match as written: `SRC/` is another directory.
        ("SRC/main.rs", refused("SRC/main.rs")),
        ("README.md", refused("README.md")),
        // `..` is resolved before matching, in both directions.
        ("docs/../src/x.rs", Tier::Allowed),
        ("src/../README.md", refused("README.md")),
        // Absolute paths inside the working directory are judged relative to it.
        ("/home/me/proj/src/x.rs", Tier::Allowed),
        (
            "/home/me/proj/.git/hooks/pre-commit",
            refused(".git/hooks/pre-commit"),
        ),
    ];
    for (path, expected) in rows {
        assert_eq!(
            scope.judge(&call("write", vec![write(path)]), CWD),
            expected,
            "{path:?}"
        );
    }
}

#[test]
fn outside_the_working_directory() {
    let scope = team_scope();
    assert_eq!(
        scope.judge(&call("write", vec![write("../other/x")]), CWD),
        Tier::Refused(
            "Tool 'write' may not change '/home/me/other/x' in a messenger-originated turn: it \
             is outside the working directory. Ask the operator to do it locally."
                .into()
        )
    );
    assert_eq!(
        scope.judge(&call("read", vec![read("/etc/passwd")]), CWD),
        Tier::Approval(AskReason::OutsideWorkingDirectory("/etc/passwd".into()))
    );
    assert_eq!(
        scope.judge(&call("read", vec![read("~/.ssh/id_ed25519")]), CWD),
        Tier::Approval(AskReason::OutsideWorkingDirectory(
            "~/.ssh/id_ed25519".into()
        ))
    );
}

#[test]
fn default_protected_paths_ask_for_reads_and_writes() {
    let everything = Scope::new(
        RemoteToolPolicy::Unrestricted,
        RemoteToolApproval::Off,
        None,
    );
    let rows = [
        ".git/config",
        ".git",
        "vendor/lib/.git",
        ".gitmodules",
        ".env",
        "deploy/.env.production",
        ".envrc",
        ".github/workflows/ci.yml",
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        ".ci/run",
        "Jenkinsfile",
        ".pi/bot-connect.json",
        ".pi/extensions/evil.ts",
    ];
    for path in rows {
        for access in [write(path), read(path)] {
            assert_eq!(
                everything.judge(&call("anything", vec![access.clone()]), CWD),
                Tier::Approval(AskReason::Protected(path.into())),
                "{access:?}"
            );
        }
    }
    for ordinary in [
        "src/env.rs",
        "environment.md",
        "git/notes.txt",
        "ci/x",
        "docs/.github.md",
    ] {
        assert_eq!(
            everything.judge(&call("write", vec![write(ordinary)]), CWD),
            Tier::Allowed,
            "{ordinary}"
        );
    }
}

#[test]
fn bridge_owned_files_always_ask() {
    let everything = Scope::new(
        RemoteToolPolicy::Unrestricted,
        RemoteToolApproval::Off,
        None,
    );
    let owned = ToolPath {
        path: "state/bot-connect-state.json".into(),
        access: PathAccess::Write,
        bridge_owned: true,
    };
    assert_eq!(
        everything.judge(&call("write", vec![owned]), CWD),
        Tier::Approval(AskReason::Protected("state/bot-connect-state.json".into()))
    );
}

#[test]
fn presets_keep_the_original_texts() {
    let read_only = Scope::new(RemoteToolPolicy::ReadOnly, RemoteToolApproval::Off, None);
    assert_eq!(
        read_only.judge(&call("read", vec![read("src/a")]), CWD),
        Tier::Allowed
    );
    assert_eq!(
        read_only.judge(&call("bash", vec![]), CWD),
        Tier::Refused(
            "Tool 'bash' is not allowed for messenger-originated turns (read-only mode). Ask the operator to run it locally."
                .into()
        )
    );
    let none = Scope::new(RemoteToolPolicy::NoTools, RemoteToolApproval::Each, None);
    assert_eq!(
        none.judge(&call("read", vec![]), CWD),
        Tier::Refused(
            "Tool 'read' is blocked because this turn came from a messenger. Ask the operator to run it locally."
                .into()
        )
    );
    let each = Scope::new(
        RemoteToolPolicy::Unrestricted,
        RemoteToolApproval::Each,
        None,
    );
    assert_eq!(
        each.judge(&call("bash", vec![]), CWD),
        Tier::Approval(AskReason::EachCall)
    );
}

#[test]
fn tool_rules_of_a_configured_scope() {
    let scope = team_scope();
    assert_eq!(
        scope.judge(&call("bash", vec![]), CWD),
        Tier::Approval(AskReason::AskTool)
    );
    assert_eq!(
        scope.judge(&call("mcp_deploy", vec![]), CWD),
        Tier::Refused(
            "Tool 'mcp_deploy' is outside the scope of this messenger-originated turn (bridge.remoteScope). Ask the operator to run it locally."
                .into()
        )
    );
    // A tool in both lists asks: stricter wins.
    let both = configured(&["bash"], &["bash"], &[], &[]);
    assert_eq!(
        both.judge(&call("bash", vec![]), CWD),
        Tier::Approval(AskReason::AskTool)
    );
    // An asking tool writing outside the allowed paths is refused, not asked about.
    assert!(matches!(
        scope.judge(&call("bash", vec![write("README.md")]), CWD),
        Tier::Refused(_)
    ));
}

#[test]
fn validate_glob_table() {
    let rows: [(&str, Option<&str>); 7] = [
        ("src/**", None),
        ("**/*.rs", None),
        ("", Some("an empty glob matches nothing")),
        (
            "/etc/**",
            Some(
                "globs are relative to the working directory; a remote turn may never change anything outside it",
            ),
        ),
        (
            "~/x",
            Some(
                "globs are relative to the working directory; a remote turn may never change anything outside it",
            ),
        ),
        (
            "src/../../x",
            Some("`..` would reach outside the working directory"),
        ),
        ("src/[a", Some("unclosed character class; missing ']'")),
    ];
    for (glob, expected) in rows {
        assert_eq!(
            validate_glob(glob).err().map(|e| e.reason),
            expected.map(String::from),
            "{glob:?}"
        );
    }
}

#[test]
fn describe_lists_every_rule() {
    assert_eq!(
        team_scope().describe(),
        format!(
            "From: bridge.remoteScope\n\
             Runs without asking: read, grep, find, ls, write, edit\n\
             Asks first: bash\n\
             May change: src/**, docs/*.md\n\
             Always asks (protected): {}, src/secrets/**, anything outside the working directory, and bot-connect's own files\n\
             Searches (grep) leave the protected paths out; a search with its own glob asks first.\n\
             Any other tool is refused.",
            DEFAULT_PROTECTED.join(", ")
        )
    );
    let read_only = Scope::new(RemoteToolPolicy::ReadOnly, RemoteToolApproval::Each, None);
    let text = read_only.describe();
    assert!(text.starts_with("From: remoteToolPolicy: read-only\nRuns without asking: read, grep, find, ls\nMay change: nothing\n"), "{text}");
    assert!(
        text.contains("\nEvery call asks first (remoteToolApproval: each).\n"),
        "{text}"
    );
}

/// A naive reading of one glob, independent of globset: `**` any run of segments, `*` any
/// run within a segment, everything else literal. Enough for the generated globs below.
fn naive_match(glob: &str, path: &str) -> bool {
    fn segment(glob: &[u8], name: &[u8]) -> bool {
        match (glob.first(), name.first()) {
            (None, None) => true,
            (Some(b'*'), _) => {
                segment(&glob[1..], name) || (!name.is_empty() && segment(glob, &name[1..]))
            }
            (Some(g), Some(n)) if g == n => segment(&glob[1..], &name[1..]),
            _ => false,
        }
    }
    fn segments(glob: &[&str], path: &[&str]) -> bool {
        match (glob.first(), path.first()) {
            (None, None) => true,
            (Some(&"**"), _) => {
                segments(&glob[1..], path) || (!path.is_empty() && segments(glob, &path[1..]))
            }
            (Some(g), Some(p)) => {
                segment(g.as_bytes(), p.as_bytes()) && segments(&glob[1..], &path[1..])
            }
            _ => false,
        }
    }
    let glob: Vec<&str> = glob.split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    segments(&glob, &path)
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "src", "docs", ".git", ".env", "a.rs", "b.md", ".pi", "x", "..", ".",
    ])
    .prop_map(String::from)
}

fn path() -> impl Strategy<Value = String> {
    (
        prop::bool::weighted(0.2),
        prop::collection::vec(name(), 1..5),
    )
        .prop_map(|(abs, parts)| {
            let rel = parts.join("/");
            if abs { format!("{CWD}/{rel}") } else { rel }
        })
}

fn glob() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!["src", "docs", "**", "*", "*.rs", "*.md", "x"]),
        1..4,
    )
    .prop_map(|parts| parts.join("/"))
}

fn tool_path() -> impl Strategy<Value = ToolPath> {
    (path(), prop::bool::ANY, prop::bool::weighted(0.1)).prop_map(|(path, w, owned)| ToolPath {
        path,
        access: if w {
            PathAccess::Write
        } else {
            PathAccess::Read
        },
        bridge_owned: owned,
    })
}

proptest! {
    /// Under any scope and any call, nothing outside the scope runs without an approval,
    /// and a protected path is never allowed silently.
    #[test]
    fn nothing_outside_the_scope_runs_unasked(
        allow in prop::collection::vec(prop::sample::select(vec!["read", "write", "bash", "*"]), 0..3),
        ask in prop::collection::vec(prop::sample::select(vec!["write", "bash"]), 0..2),
        allowed in prop::collection::vec(glob(), 0..3),
        extra in prop::collection::vec(glob(), 0..2),
        tool in prop::sample::select(vec!["read", "write", "bash", "deploy"]),
        paths in prop::collection::vec(tool_path(), 0..4),
        each in prop::bool::ANY,
    ) {
        let owned = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let settings = RemoteScopeSettings {
            allow_tools: owned(&allow),
            ask_tools: owned(&ask),
            allowed_paths: allowed.clone(),
            protected_paths: extra.clone(),
        };
        let approval = if each { RemoteToolApproval::Each } else { RemoteToolApproval::Off };
        let scope = Scope::new(RemoteToolPolicy::Unrestricted, approval, Some(&settings));
        let call = ToolCall { name: tool.to_string(), paths: paths.clone() };
        let tier = scope.judge(&call, CWD);

        let listed = |list: &[&str]| list.iter().any(|t| *t == "*" || *t == tool);
        if !listed(&allow) && !listed(&ask) {
            prop_assert!(matches!(tier, Tier::Refused(_)), "unlisted tool ran: {tier:?}");
        }
        for p in &paths {
            let located = locate(&p.path, CWD);
            let rel = match &located { Location::Inside(r) => Some(r.clone()), Location::Outside(_) => None };
            if p.access == PathAccess::Write {
                let in_scope = rel.as_ref().is_some_and(|r| allowed.iter().any(|g| naive_match(g, r)));
                if !in_scope {
                    prop_assert!(matches!(tier, Tier::Refused(_)), "write to {located:?} outside {allowed:?}: {tier:?}");
                }
            }
            let protected = p.bridge_owned
                || rel.is_none()
                || rel.as_ref().is_some_and(|r| {
                    DEFAULT_PROTECTED.iter().map(|g| g.to_string()).chain(extra.iter().cloned())
                        .any(|g| naive_match(&g.to_ascii_lowercase(), &r.to_ascii_lowercase()))
                });
            if protected {
                prop_assert!(tier != Tier::Allowed, "protected {located:?} allowed silently");
            }
        }
        if each || listed(&ask) {
            prop_assert!(tier != Tier::Allowed, "a call that must ask ran: {tier:?}");
        }
    }
}

#[test]
fn a_path_the_host_could_not_read_is_refused_under_every_policy() {
    // The extension marks a 5,000-character `./././…/.ssh/id_ed25519` instead of dropping it;
    // judged without it, the call looked like one that touches nothing.
    let unread = ToolPath {
        path: "path".into(),
        access: PathAccess::Unjudgeable,
        bridge_owned: false,
    };
    for policy in [RemoteToolPolicy::ReadOnly, RemoteToolPolicy::Unrestricted] {
        let scope = Scope::new(policy, RemoteToolApproval::Off, None);
        match scope.judge(&call("read", vec![unread.clone()]), CWD) {
            Tier::Refused(reason) => assert!(
                reason.contains("'path' argument could not be judged"),
                "{reason}"
            ),
            other => panic!("{policy:?}: {other:?}"),
        }
    }
    let scope = configured(&["write"], &[], &["**"], &[]);
    assert!(matches!(
        scope.judge(&call("write", vec![write("src/a.rs"), unread]), CWD),
        Tier::Refused(_)
    ));
}

fn search_glob(text: &str) -> ToolPath {
    ToolPath {
        path: text.into(),
        access: PathAccess::Glob,
        bridge_owned: false,
    }
}

#[test]
fn a_remote_search_runs_with_every_protected_path_left_out() {
    let scope = Scope::new(RemoteToolPolicy::ReadOnly, RemoteToolApproval::Off, None);
    let search = call("grep", vec![read(".")]);
    assert_eq!(scope.judge(&search, CWD), Tier::Allowed);
    let narrowing = scope.narrowing(&search).expect("a search is narrowed");
    let [(name, exclusion)] = narrowing.as_slice() else {
        panic!("one argument: {narrowing:?}");
    };
    assert_eq!(name, "glob");
    // In any case, as protected paths are matched here: `.ENV` is `.env` on macOS.
    assert!(exclusion.starts_with("!{"), "{exclusion}");
    for part in ["**/.[gG][iI][tT]", "**/.[eE][nN][vV]*", ".[pP][iI]/**"] {
        assert!(exclusion.contains(part), "{part} in {exclusion}");
    }
    // Reading a file is judged by its path; only a search is narrowed.
    assert_eq!(scope.narrowing(&call("read", vec![read("src/a.rs")])), None);
}

#[test]
fn a_search_with_its_own_glob_asks_first() {
    // ripgrep lets `--glob` override ignore files: `.env*` would select the secrets.
    let scope = Scope::new(RemoteToolPolicy::ReadOnly, RemoteToolApproval::Off, None);
    let search = call("grep", vec![read("."), search_glob(".env*")]);
    assert_eq!(
        scope.judge(&search, CWD),
        Tier::Approval(AskReason::SearchGlob(".env*".into()))
    );
    assert_eq!(scope.narrowing(&search), None);
}

#[test]
fn a_search_whose_exclusion_cannot_be_written_asks_first() {
    // ripgrep refuses a brace inside an alternation, so `secrets/{a,b}` cannot be left
    // out by one glob: the search asks instead of running unnarrowed.
    let scope = configured(&["grep"], &[], &[], &["secrets/{a,b}/**"]);
    let search = call("grep", vec![read(".")]);
    assert_eq!(
        scope.judge(&search, CWD),
        Tier::Approval(AskReason::ProtectedSearch)
    );
    assert_eq!(scope.narrowing(&search), None);
}

#[test]
fn any_case_keeps_classes_and_wildcards() {
    assert_eq!(any_case(".env*"), ".[eE][nN][vV]*");
    assert_eq!(any_case("a[bc]/**"), "[aA][bc]/**");
}

#[test]
fn a_remote_turn_reads_the_inbox_without_asking_but_never_writes_there_or_reads_beside_it() {
    let scope = Scope::new(RemoteToolPolicy::ReadOnly, RemoteToolApproval::Off, None)
        .with_readable_inbox(".pi/inbox/");
    let judge = |name: &str, path: ToolPath| scope.judge(&call(name, vec![path]), CWD);
    assert_eq!(judge("read", read(".pi/inbox/report.pdf")), Tier::Allowed);
    assert_eq!(
        judge("read", read("/home/me/proj/.pi/inbox/sub/a.txt")),
        Tier::Allowed
    );
    // Beside the inbox, `.pi/**` is protected as before.
    for path in [
        ".pi/bot-connect.json",
        ".pi/inboxes/x",
        ".pi/inbox/../settings.json",
    ] {
        assert!(
            matches!(
                judge("read", read(path)),
                Tier::Approval(AskReason::Protected(_))
            ),
            "{path}"
        );
    }
    // Writing into the inbox is a write to a protected path: a read-only turn may not.
    assert!(matches!(
        judge("write", write(".pi/inbox/x.txt")),
        Tier::Refused(_)
    ));
    let unrestricted = Scope::new(
        RemoteToolPolicy::Unrestricted,
        RemoteToolApproval::Off,
        None,
    )
    .with_readable_inbox(".pi/inbox");
    assert!(matches!(
        unrestricted.judge(&call("write", vec![write(".pi/inbox/x.txt")]), CWD),
        Tier::Approval(AskReason::Protected(_))
    ));
    // Without the inbox (switched off), reading there asks like any protected path.
    let plain = Scope::new(RemoteToolPolicy::ReadOnly, RemoteToolApproval::Off, None);
    assert!(matches!(
        plain.judge(&call("read", vec![read(".pi/inbox/report.pdf")]), CWD),
        Tier::Approval(AskReason::Protected(_))
    ));
    // A directory that leads out is ignored, never widened.
    let odd = Scope::new(RemoteToolPolicy::ReadOnly, RemoteToolApproval::Off, None)
        .with_readable_inbox("/");
    assert!(matches!(
        odd.judge(&call("read", vec![read(".env")]), CWD),
        Tier::Approval(AskReason::Protected(_))
    ));
}
