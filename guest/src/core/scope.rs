//! Scoped remote turns (docs/decisions.md#decision-16-scoped-remote-turns): what a
//! messenger-originated turn may do, written once, frozen when the turn starts and enforced here
//! rather than trusted to the agent.
//!
//! A tool call lands in one of three tiers: **allowed** (inside the scope), **approval**
//! (one tap on the phone or the local confirm), or **refused** (outside the scope, with
//! the reason the agent is told). Stricter wins: a call that is both protected and outside
//! the allowed paths is refused, not asked about, and nothing protected is ever allowed
//! silently.
//!
//! Paths are judged lexically against the working directory the turn started in: the
//! bridge has no file system. The host resolves `~` and symlinks and sends a resolved path
//! beside the written one (see `wit/session.wit`, `tool-path`), so a link pointing out of
//! the tree is judged where it leads.

use crate::core::config::{RemoteScopeSettings, RemoteToolApproval, RemoteToolPolicy};
use crate::core::globs::Globs;
use crate::core::tool_policy::{self, READ_ONLY_TOOLS};
use crate::model::{PathAccess, ToolCall};

/// Paths a remote turn never touches without asking, whatever the scope says: the
/// repository's history and hooks, environment files, CI configuration, and pi's and
/// bot-connect's own project settings (`.pi/`: extensions and `bot-connect.json`), so an
/// agent can never widen its own rights by editing them. A configured `protectedPaths`
/// adds to these; it cannot remove them.
pub const DEFAULT_PROTECTED: &[&str] = &[
    "**/.git",
    "**/.git/**",
    "**/.gitmodules",
    "**/.env*",
    ".github/**",
    ".gitlab-ci.yml",
    ".gitlab/**",
    ".circleci/**",
    ".buildkite/**",
    ".travis.yml",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    "Jenkinsfile",
    ".drone.yml",
    ".woodpecker/**",
    ".ci/**",
    ".pi/**",
];

/// A set of tool names; `*` stands for every tool.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tools(Vec<String>);

impl Tools {
    fn contains(&self, tool: &str) -> bool {
        self.0.iter().any(|t| t == "*" || t == tool)
    }
}

/// Where the scope came from, which decides the wording of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// `remoteToolPolicy` alone (a preset).
    Policy(RemoteToolPolicy),
    /// `remoteScope`.
    Configured,
}

/// The scope of remote turns: compiled once, shared by the turns that started under it.
#[derive(Debug, Clone)]
pub struct Scope {
    source: Source,
    approval: RemoteToolApproval,
    allow_tools: Tools,
    ask_tools: Tools,
    allowed: Globs,
    protected: Globs,
    /// The inbox (`bridge.inbox.dir`, normalized, no trailing `/`), when files are saved:
    /// a remote turn may read there even though `.pi/**` is protected, since it holds only
    /// what the chats sent. Writing there stays protected.
    inbox: Option<String>,
}

/// Why a call needs approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskReason {
    /// It touches a protected path (named as normalized).
    Protected(String),
    /// It reads outside the working directory.
    OutsideWorkingDirectory(String),
    /// The tool is in `askTools`.
    AskTool,
    /// `remoteToolApproval: each`.
    EachCall,
    /// A search filtered by its own glob (written here), which ripgrep lets override
    /// ignore files: it can select protected files.
    SearchGlob(String),
    /// A search the protected paths cannot be left out of (a protected glob that ripgrep
    /// could not take inside an exclusion).
    ProtectedSearch,
}

/// The tier of one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tier {
    /// Inside the scope: runs.
    Allowed,
    /// Runs only after a yes.
    Approval(AskReason),
    /// Outside the scope; the reason is what the agent is told.
    Refused(String),
}

/// Where a path lies relative to the working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// Inside, as a relative path with `/` separators (`.` for the directory itself).
    Inside(String),
    /// Outside, as given after lexical normalization.
    Outside(String),
}

/// Places `path` relative to `cwd` lexically: `.` and empty segments dropped, `..` taken
/// back (never above the root). A path starting with `~` was not expanded by the host and
/// counts as outside: where it leads is unknown here, so it is judged the strict way.
pub fn locate(path: &str, cwd: &str) -> Location {
    if path.starts_with('~') {
        return Location::Outside(path.to_string());
    }
    let base = normalize_segments(Vec::new(), cwd);
    let start = if path.starts_with('/') {
        Vec::new()
    } else {
        base.clone()
    };
    let segments = normalize_segments(start, path);
    // A relative cwd (a host that reports none) leaves only relative paths inside.
    let inside = cwd.starts_with('/') || !path.starts_with('/');
    if inside && segments.len() >= base.len() && segments[..base.len()] == base[..] {
        let rest = segments[base.len()..].join("/");
        Location::Inside(if rest.is_empty() { ".".into() } else { rest })
    } else {
        Location::Outside(format!("/{}", segments.join("/")))
    }
}

fn normalize_segments<'a>(mut stack: Vec<&'a str>, path: &'a str) -> Vec<&'a str> {
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                stack.pop();
            }
            other => stack.push(other),
        }
    }
    stack
}

impl Scope {
    /// The scope in force for `policy`, `approval` and an optional `remoteScope`: the
    /// configured scope when there is one, else the policy's preset. The default protected
    /// paths always apply.
    pub fn new(
        policy: RemoteToolPolicy,
        approval: RemoteToolApproval,
        configured: Option<&RemoteScopeSettings>,
    ) -> Self {
        let (source, allow, ask, allowed, extra) = match configured {
            Some(settings) => (
                Source::Configured,
                settings.allow_tools.clone(),
                settings.ask_tools.clone(),
                settings.allowed_paths.clone(),
                settings.protected_paths.clone(),
            ),
            None => {
                let (allow, allowed): (Vec<String>, Vec<String>) = match policy {
                    RemoteToolPolicy::Unrestricted => (vec!["*".into()], vec!["**".into()]),
                    RemoteToolPolicy::ReadOnly => (
                        READ_ONLY_TOOLS.iter().map(|t| t.to_string()).collect(),
                        Vec::new(),
                    ),
                    RemoteToolPolicy::NoTools => (Vec::new(), Vec::new()),
                };
                (
                    Source::Policy(policy),
                    allow,
                    Vec::new(),
                    allowed,
                    Vec::new(),
                )
            }
        };
        let protected: Vec<String> = DEFAULT_PROTECTED
            .iter()
            .map(|g| g.to_string())
            .chain(extra)
            .collect();
        Scope {
            source,
            approval,
            allow_tools: Tools(allow),
            ask_tools: Tools(ask),
            // Allowed paths match exactly as written, protected ones in any case: on a
            // case-insensitive file system `.ENV` is `.env`, and stricter is the safe side.
            allowed: Globs::new(&allowed, false),
            protected: Globs::new(&protected, true),
            inbox: None,
        }
    }

    /// This scope with reads inside `dir` (the inbox, relative to the working directory)
    /// exempt from the protected paths: the agent was told a chat's file is there, and
    /// asking the phone to approve reading what the phone just sent helps nobody. A dir
    /// that does not stay inside the working directory is ignored.
    pub fn with_readable_inbox(mut self, dir: &str) -> Self {
        self.inbox = match locate(dir, "/") {
            Location::Inside(rel) if rel != "." => Some(rel),
            _ => None,
        };
        self
    }

    /// Whether `rel` (a path inside the working directory) is in the inbox.
    fn in_inbox(&self, rel: &str) -> bool {
        self.inbox.as_deref().is_some_and(|inbox| {
            rel.strip_prefix(inbox)
                .is_some_and(|rest| rest.starts_with('/') || rest.is_empty())
        })
    }

    /// The tier of `call` for a turn working in `cwd`.
    pub fn judge(&self, call: &ToolCall, cwd: &str) -> Tier {
        let tool = call.name.as_str();
        let asks = self.ask_tools.contains(tool);
        if !asks && !self.allow_tools.contains(tool) {
            return Tier::Refused(self.tool_refusal(tool));
        }
        // Before anything else: a path nobody could read may lead anywhere, and judging the
        // call without it would let it through (a 5,000-character `./././…/.ssh/key`).
        if let Some(argument) = call
            .paths
            .iter()
            .find(|p| p.access == PathAccess::Unjudgeable)
        {
            return Tier::Refused(format!(
                "Tool '{tool}' was refused in a messenger-originated turn: its '{}' argument \
                 could not be judged (too long or not text). Use a shorter path, or ask the \
                 operator to run it locally.",
                argument.path
            ));
        }
        let located: Vec<(Location, &crate::model::ToolPath)> = call
            .paths
            .iter()
            .filter(|p| p.access != PathAccess::Glob)
            .map(|p| (locate(&p.path, cwd), p))
            .collect();
        for (location, path) in &located {
            if path.access != PathAccess::Write {
                continue;
            }
            match location {
                Location::Inside(rel) if self.allowed.first_match(rel).is_some() => {}
                Location::Inside(rel) => return Tier::Refused(self.path_refusal(tool, rel)),
                Location::Outside(abs) => {
                    return Tier::Refused(format!(
                        "Tool '{tool}' may not change '{abs}' in a messenger-originated turn: it is \
                         outside the working directory. Ask the operator to do it locally."
                    ));
                }
            }
        }
        for (location, path) in &located {
            let reason = match location {
                _ if path.bridge_owned => Some(AskReason::Protected(path.path.clone())),
                Location::Inside(rel) if path.access == PathAccess::Read && self.in_inbox(rel) => {
                    None
                }
                // The directory of a protected tree counts as protected too: a tool that
                // lists or removes `.git` touches what `**/.git/**` protects.
                Location::Inside(rel) => self
                    .protected
                    .first_match(rel)
                    .or_else(|| self.protected.first_match(&format!("{rel}/\u{1}")))
                    .map(|_| AskReason::Protected(rel.clone())),
                Location::Outside(abs) => Some(AskReason::OutsideWorkingDirectory(abs.clone())),
            };
            if let Some(reason) = reason {
                return Tier::Approval(reason);
            }
        }
        if let Some(glob) = call.paths.iter().find(|p| p.access == PathAccess::Glob) {
            return Tier::Approval(AskReason::SearchGlob(glob.path.clone()));
        }
        if SEARCH_TOOLS.contains(&tool) && self.search_exclusion().is_none() {
            return Tier::Approval(AskReason::ProtectedSearch);
        }
        if asks {
            return Tier::Approval(AskReason::AskTool);
        }
        match self.approval {
            RemoteToolApproval::Each => Tier::Approval(AskReason::EachCall),
            RemoteToolApproval::Off => Tier::Allowed,
        }
    }

    /// The arguments a remote call runs with when it may run: a content search with no
    /// glob of its own gets one that leaves every protected path out. pi's grep runs
    /// ripgrep with `--hidden`, so a search of `.` otherwise reads `.git/config` and
    /// `.env`. ripgrep matches the glob against paths relative to the directory pi runs
    /// in, which is the working directory the protected globs are written against.
    pub fn narrowing(&self, call: &ToolCall) -> Option<Vec<(String, String)>> {
        let own_glob = call.paths.iter().any(|p| p.access == PathAccess::Glob);
        if !SEARCH_TOOLS.contains(&call.name.as_str()) || own_glob {
            return None;
        }
        self.search_exclusion()
            .map(|glob| vec![("glob".to_string(), glob)])
    }

    /// One ripgrep glob excluding every protected glob, in any case (as they are matched
    /// here): `!{**/.[gG][iI][tT],…}`. None when a protected glob holds what an
    /// alternation cannot (a brace, a comma, an escape).
    pub fn search_exclusion(&self) -> Option<String> {
        let mut alternatives = Vec::new();
        for glob in self.protected.written() {
            if glob.contains(['{', '}', ',', '\\']) {
                return None;
            }
            alternatives.push(any_case(glob));
        }
        Some(format!("!{{{}}}", alternatives.join(",")))
    }

    fn tool_refusal(&self, tool: &str) -> String {
        match self.source {
            // The original's texts for its policies, kept word for word.
            Source::Policy(policy) => match tool_policy::decide_remote_tool_access(policy, tool) {
                Err(reason) => reason,
                Ok(()) => format!("Tool '{tool}' is outside this remote turn's scope."),
            },
            Source::Configured => format!(
                "Tool '{tool}' is outside the scope of this messenger-originated turn \
                 (bridge.remoteScope). Ask the operator to run it locally."
            ),
        }
    }

    fn path_refusal(&self, tool: &str, rel: &str) -> String {
        let allowed = if self.allowed.written().is_empty() {
            "none".to_string()
        } else {
            self.allowed.written().join(", ")
        };
        format!(
            "Tool '{tool}' may not change '{rel}' in a messenger-originated turn: it is outside \
             the allowed paths ({allowed}). Ask the operator to do it locally."
        )
    }

    /// The scope for `/scope` and `/connect scope`, one rule per line.
    pub fn describe(&self) -> String {
        let list = |tools: &Tools| -> String {
            if tools.0.is_empty() {
                "nothing".into()
            } else if tools.0.iter().any(|t| t == "*") {
                "every tool".into()
            } else {
                tools.0.join(", ")
            }
        };
        let source = match self.source {
            Source::Policy(policy) => format!("remoteToolPolicy: {}", policy.as_str()),
            Source::Configured => "bridge.remoteScope".to_string(),
        };
        let mut lines = vec![
            format!("From: {source}"),
            format!("Runs without asking: {}", list(&self.allow_tools)),
        ];
        if !self.ask_tools.0.is_empty() {
            lines.push(format!("Asks first: {}", list(&self.ask_tools)));
        }
        lines.push(format!(
            "May change: {}",
            if self.allowed.written().is_empty() {
                "nothing".to_string()
            } else {
                self.allowed.written().join(", ")
            }
        ));
        lines.push(format!(
            "Always asks (protected): {}, anything outside the working directory, and \
             bot-connect's own files",
            self.protected.written().join(", ")
        ));
        lines.push(
            "Searches (grep) leave the protected paths out; a search with its own glob asks \
             first."
                .into(),
        );
        if self.approval == RemoteToolApproval::Each {
            lines.push("Every call asks first (remoteToolApproval: each).".into());
        }
        lines.push("Any other tool is refused.".into());
        lines.join("\n")
    }
}

/// pi's tools that read the contents of every file under their root.
const SEARCH_TOOLS: [&str; 1] = ["grep"];

/// `glob` matching letters in either case, for a matcher (ripgrep's `--glob`) that is
/// case-sensitive: `.env*` becomes `.[eE][nN][vV]*`. Letters inside a class stay as they
/// are.
fn any_case(glob: &str) -> String {
    let mut out = String::with_capacity(glob.len() * 4);
    let mut in_class = false;
    for c in glob.chars() {
        match c {
            '[' if !in_class => {
                in_class = true;
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            c if !in_class && c.is_ascii_alphabetic() => {
                out.push('[');
                out.push(c.to_ascii_lowercase());
                out.push(c.to_ascii_uppercase());
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// What the approval question says about why it asks, if it is about a path.
pub fn ask_detail(reason: &AskReason) -> Option<String> {
    match reason {
        AskReason::Protected(path) => Some(format!("'{path}' (a protected path)")),
        AskReason::OutsideWorkingDirectory(path) => {
            Some(format!("'{path}' (outside the working directory)"))
        }
        AskReason::SearchGlob(glob) => Some(format!(
            "its glob '{glob}' (a search glob can select protected files)"
        )),
        AskReason::ProtectedSearch => {
            Some("a search the protected paths cannot be left out of".to_string())
        }
        AskReason::AskTool | AskReason::EachCall => None,
    }
}

#[cfg(test)]
mod tests;
