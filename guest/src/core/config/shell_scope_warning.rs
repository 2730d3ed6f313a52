//! A shell in the remote scope makes its path rules moot
//! (docs/security.md#what-a-remote-turn-can-and-cannot-do): `bash` (or `*`, which includes it) in
//! `allowTools` or `askTools` runs commands whose paths are never judged, so `allowedPaths` and
//! `protectedPaths` hold only for `read`, `write` and `edit`. People set both and believed their
//! protected paths held; they are told at start and by `doctor`.

use super::schema::RemoteScopeSettings;

/// The warning for `scope`, if a shell is in it.
pub fn shell_scope_warning(scope: Option<&RemoteScopeSettings>) -> Option<String> {
    let scope = scope?;
    fn shell(tools: &[String]) -> Option<&str> {
        tools
            .iter()
            .find(|t| *t == "bash" || *t == "*")
            .map(String::as_str)
    }
    let (list, tool) = match (shell(&scope.allow_tools), shell(&scope.ask_tools)) {
        (Some(tool), _) => ("allowTools", tool),
        (None, Some(tool)) => ("askTools", tool),
        (None, None) => return None,
    };
    let what = if tool == "*" {
        "\"*\" (which includes bash)"
    } else {
        "\"bash\""
    };
    Some(format!(
        "bridge.remoteScope.{list} has {what}: a shell command can read and write any file this \
         user can, and the paths inside it are not judged, so allowedPaths and protectedPaths do \
         not hold for it (only for read, write, edit and the other file tools). Leave bash out \
         of remote turns, or read every command before approving it."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(allow: &[&str], ask: &[&str]) -> RemoteScopeSettings {
        RemoteScopeSettings {
            allow_tools: allow.iter().map(|s| s.to_string()).collect(),
            ask_tools: ask.iter().map(|s| s.to_string()).collect(),
            ..RemoteScopeSettings::default()
        }
    }

    #[test]
    fn shell_table() {
        let rows: [(Option<RemoteScopeSettings>, Option<&str>); 6] = [
            (None, None),
            (Some(scope(&["read", "write"], &["edit"])), None),
            (
                Some(scope(&["read", "bash"], &[])),
                Some("bridge.remoteScope.allowTools has \"bash\": "),
            ),
            (
                Some(scope(&["*"], &[])),
                Some("bridge.remoteScope.allowTools has \"*\" (which includes bash): "),
            ),
            (
                Some(scope(&["read"], &["bash"])),
                Some("bridge.remoteScope.askTools has \"bash\": "),
            ),
            (Some(scope(&["bashful"], &["sh"])), None),
        ];
        for (scope, expected) in rows {
            let warning = shell_scope_warning(scope.as_ref());
            match expected {
                None => assert_eq!(warning, None, "{scope:?}"),
                Some(start) => {
                    let warning = warning.unwrap_or_default();
                    assert!(warning.starts_with(start), "{warning}");
                    assert!(warning.contains("allowedPaths and protectedPaths do not hold"));
                }
            }
        }
    }
}
