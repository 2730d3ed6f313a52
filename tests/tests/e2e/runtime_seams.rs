//! The runtime's seams: a component asking for capabilities outside the audit is refused
//! by name, and compiled code is cached so a second start does not compile.

use std::os::unix::fs::PermissionsExt as _;

use host_shim::sandbox::runtime::{Compiled, EMBEDDED_COMPONENT, Limits, Runtime, RuntimeError};

/// A component importing one function from `interface`: enough to ask for a capability.
fn component_importing(interface: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(component
             (import "{interface}" (instance
               (export "now" (func (result u64))))))"#
    ))
    .expect("valid component text")
}

#[test]
fn a_component_importing_a_clock_or_randomness_is_refused_by_name() {
    for interface in [
        "wasi:clocks/wall-clock@0.2.6",
        "wasi:clocks/monotonic-clock@0.2.6",
        "wasi:random/random@0.2.6",
        "wasi:filesystem/preopens@0.2.6",
    ] {
        let refused = Runtime::new(&component_importing(interface), Limits::default())
            .err()
            .unwrap_or_else(|| panic!("{interface} was accepted"));
        assert!(
            matches!(&refused, RuntimeError::ForbiddenImports(names) if names == interface),
            "{interface}: {refused}"
        );
        assert!(refused.to_string().contains("this host refuses to run it"));
    }
}

#[test]
fn a_second_start_loads_the_compiled_component_from_the_cache() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("cache");
    let first =
        Runtime::load(EMBEDDED_COMPONENT, Limits::default(), Some(&cache)).expect("compiles");
    assert_eq!(first.compiled(), Compiled::Now);
    let second = Runtime::load(EMBEDDED_COMPONENT, Limits::default(), Some(&cache)).expect("loads");
    assert_eq!(second.compiled(), Compiled::FromCache);
    // Another component is never served the first one's code.
    let other = component_importing("pi:bot-connect/log@0.3.0");
    let compiled_other = Runtime::load(&other, Limits::default(), Some(&cache));
    assert!(
        compiled_other.is_err(),
        "a component without the session export does not run, cached or not"
    );
}

#[test]
fn a_cache_others_could_write_is_not_trusted() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The run's compiled component, copied in as a first start leaves it (0700, 0600): the
    // one compile this test needs is the one it proves, not a second to fill the cache.
    crate::common::compiled::seed_cache(dir.path());
    let cache = dir.path().join("cache");
    let trusted =
        Runtime::load(EMBEDDED_COMPONENT, Limits::default(), Some(&cache)).expect("loads");
    assert_eq!(
        trusted.compiled(),
        Compiled::FromCache,
        "a private cache is used"
    );
    // Loading compiled code runs it: a directory anyone can write is no place to load from.
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let again =
        Runtime::load(EMBEDDED_COMPONENT, Limits::default(), Some(&cache)).expect("compiles again");
    assert_eq!(again.compiled(), Compiled::Now);
}

#[test]
fn the_commands_that_write_nothing_load_the_cache_and_never_fill_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    crate::common::compiled::seed_cache(dir.path());
    let cache = dir.path().join("cache");
    let read = Runtime::load_read_only(EMBEDDED_COMPONENT, Limits::default(), Some(&cache))
        .expect("loads");
    assert_eq!(
        read.compiled(),
        Compiled::FromCache,
        "what `run` cached is used"
    );
    // A component compiled now is not saved. An empty one compiles at once and fails to
    // link, after the point where a writing load has saved it.
    let empty = wat::parse_str("(component)").expect("valid component text");
    let fresh = dir.path().join("fresh");
    assert!(Runtime::load_read_only(&empty, Limits::default(), Some(&fresh)).is_err());
    assert!(
        !fresh.exists(),
        "a read-only load created the cache directory"
    );
    assert!(Runtime::load(&empty, Limits::default(), Some(&fresh)).is_err());
    let saved = std::fs::read_dir(&fresh).map_or(0, |files| files.count());
    assert_eq!(
        saved, 1,
        "a writing load saves it (so the check above sees a write)"
    );
}
