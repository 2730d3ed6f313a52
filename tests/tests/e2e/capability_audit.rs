//! C1: the component reaches nothing beyond the bridge world and the few WASI
//! interfaces std needs (no randomness of any kind: std's HashMap seed comes through the
//! bridge's `rng` import), and the host grants it no environment or arguments.

use host_shim::sandbox::audit::{self, ALLOWED_WASI, BRIDGE_IMPORTS, Verdict};

use crate::common::{self, Dirs, Setup};

#[test]
fn component_imports_only_the_audited_interfaces() {
    let runtime = common::runtime();
    let imports = audit::imports(&runtime.component_type(), runtime.engine());
    let unexpected: Vec<&str> = imports
        .iter()
        .filter(|i| i.verdict == Verdict::Unexpected)
        .map(|i| i.name.as_str())
        .collect();
    assert!(
        unexpected.is_empty(),
        "imports outside the audit: {unexpected:?}"
    );
    for forbidden in [
        "wasi:filesystem",
        "wasi:sockets",
        "wasi:http",
        "wasi:clocks",
        "wasi:random",
    ] {
        assert!(
            !imports.iter().any(|i| i.name.starts_with(forbidden)),
            "{forbidden} must not be imported"
        );
    }
    for name in BRIDGE_IMPORTS
        .iter()
        .filter(|n| **n != "pi:bot-connect/types")
    {
        assert!(
            imports.iter().any(|i| i.name.starts_with(name)),
            "{name} is part of the world"
        );
    }
    for (name, why) in ALLOWED_WASI {
        assert!(!why.is_empty(), "{name} needs a reason");
    }
}

/// The allow-list is exactly what the component needs: an entry it no longer imports is
/// a capability the host would still link for any `--component`, so it must go.
#[test]
fn the_wasi_allow_list_is_exactly_what_the_component_imports() {
    let runtime = common::runtime();
    let mut imported: Vec<&str> = Vec::new();
    let imports = audit::imports(&runtime.component_type(), runtime.engine());
    for import in &imports {
        if matches!(import.verdict, Verdict::Wasi(_)) {
            imported.push(import.name.split('@').next().unwrap_or(&import.name));
        }
    }
    imported.sort_unstable();
    let mut allowed: Vec<&str> = ALLOWED_WASI.iter().map(|(name, _)| *name).collect();
    allowed.sort_unstable();
    assert_eq!(imported, allowed);
}

/// std seeds every HashMap from `wasi:random/insecure-seed`; the build links the guest
/// with an adapter that takes the seed from the bridge's `rng` import instead. Without
/// it, the host (which links no `wasi:random`) would refuse the component.
#[test]
fn std_hashmap_seed_is_not_a_wasi_import() {
    assert!(
        !ALLOWED_WASI
            .iter()
            .any(|(name, _)| name.starts_with("wasi:random")),
        "no wasi:random interface is on the allow-list"
    );
    assert_eq!(
        audit::classify("wasi:random/insecure-seed@0.2.6"),
        Verdict::Unexpected
    );
    let runtime = common::runtime();
    let imports = audit::imports(&runtime.component_type(), runtime.engine());
    let rng: Vec<&str> = imports
        .iter()
        .filter(|i| i.name.starts_with("pi:bot-connect/rng@"))
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(rng.len(), 1, "one rng interface serves both: {rng:?}");
}

#[test]
fn classify_rejects_capabilities_outside_the_world() {
    assert_eq!(
        audit::classify("wasi:filesystem/preopens@0.2.6"),
        Verdict::Unexpected
    );
    assert_eq!(
        audit::classify("wasi:sockets/tcp@0.2.6"),
        Verdict::Unexpected
    );
    assert_eq!(
        audit::classify("wasi:http/outgoing-handler@0.2.6"),
        Verdict::Unexpected
    );
    assert_eq!(
        audit::classify("pi:bot-connect/agent@0.1.0"),
        Verdict::Bridge
    );
    assert!(matches!(
        audit::classify("wasi:cli/stderr@0.2.6"),
        Verdict::Wasi(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guest_sees_no_environment_and_no_arguments() {
    let dirs = Dirs::new();
    let h = Setup::new(&dirs, "audit").start().await;
    let diagnostics = h
        .session
        .diagnostics()
        .await
        .unwrap()
        .expect("bridge is alive");
    assert!(
        std::env::vars_os().count() > 0,
        "the test process itself has an environment"
    );
    assert_eq!(diagnostics.sandbox.environment_variables, 0);
    assert_eq!(diagnostics.sandbox.arguments, 0);
    h.session.shutdown().await.unwrap();
}
