//! The capability audit: what the component imports, and why each import is there.
//!
//! The component model enforces the boundary; this module makes it visible
//! (`host-shim inspect`) and testable (C1): the bridge world's own interfaces, plus the
//! few `wasi:*` interfaces Rust's std links (stdio, process exit), and nothing that
//! reaches files, sockets, HTTP, clocks or any random source. The guest's only
//! randomness is the bridge's own `rng` import: std's `HashMap` seed goes through it too
//! (host-shim/build/hash_seed_adapter.rs), so replaying a session's imports replays the
//! seed (C4).

use wasmtime::Engine;
use wasmtime::component::types::{Component, ComponentItem};

/// The `wasi:*` interfaces std pulls in, each with the reason it is there. The host
/// links them to a context that grants nothing.
pub const ALLOWED_WASI: &[(&str, &str)] = &[
    (
        "wasi:cli/environment",
        "std's env lookups (RUST_BACKTRACE on panic); the host grants an empty environment",
    ),
    ("wasi:cli/exit", "std's process exit and abort path"),
    (
        "wasi:cli/stdin",
        "std's stdio setup; the host gives an empty stdin",
    ),
    (
        "wasi:cli/stdout",
        "std's stdio setup; nothing is written there",
    ),
    (
        "wasi:cli/stderr",
        "panic messages; the host captures them in memory for trap reports",
    ),
    (
        "wasi:cli/terminal-input",
        "std's terminal checks; the host reports no terminal",
    ),
    (
        "wasi:cli/terminal-output",
        "std's terminal checks; the host reports no terminal",
    ),
    (
        "wasi:cli/terminal-stdin",
        "std's terminal checks; the host reports no terminal",
    ),
    (
        "wasi:cli/terminal-stdout",
        "std's terminal checks; the host reports no terminal",
    ),
    (
        "wasi:cli/terminal-stderr",
        "std's terminal checks; the host reports no terminal",
    ),
    ("wasi:io/error", "error type of the stdio streams"),
    ("wasi:io/streams", "the stdio streams themselves"),
    ("wasi:io/poll", "readiness of the stdio streams"),
];

/// The bridge world's own imports (wit/world.wit).
pub const BRIDGE_IMPORTS: &[&str] = &[
    "pi:bot-connect/types",
    "pi:bot-connect/transport",
    "pi:bot-connect/agent",
    "pi:bot-connect/ui",
    "pi:bot-connect/store",
    "pi:bot-connect/clock",
    "pi:bot-connect/rng",
    "pi:bot-connect/lock",
    "pi:bot-connect/pairing",
    "pi:bot-connect/log",
    "pi:bot-connect/speech",
];

/// Why an import is allowed, or that it is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Part of the bridge world.
    Bridge,
    /// A std-required WASI interface, with its reason.
    Wasi(&'static str),
    /// Not expected: a capability the bridge must not have.
    Unexpected,
}

/// One import of the component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// Full name, e.g. `wasi:io/streams@0.2.6`.
    pub name: String,
    /// Functions the interface offers the guest.
    pub functions: Vec<String>,
    /// The audit's verdict.
    pub verdict: Verdict,
}

/// Classifies one import name (the version suffix is ignored).
pub fn classify(name: &str) -> Verdict {
    let unversioned = name.split('@').next().unwrap_or(name);
    if BRIDGE_IMPORTS.contains(&unversioned) {
        return Verdict::Bridge;
    }
    match ALLOWED_WASI.iter().find(|(n, _)| *n == unversioned) {
        Some((_, why)) => Verdict::Wasi(why),
        None => Verdict::Unexpected,
    }
}

/// Every import of `component`, classified.
pub fn imports(component: &Component, engine: &Engine) -> Vec<Import> {
    component
        .imports(engine)
        .map(|(name, item)| Import {
            name: name.to_string(),
            functions: functions(&item.ty, engine),
            verdict: classify(name),
        })
        .collect()
}

/// Every export of `component` with its functions.
pub fn exports(component: &Component, engine: &Engine) -> Vec<(String, Vec<String>)> {
    component
        .exports(engine)
        .map(|(name, item)| (name.to_string(), functions(&item.ty, engine)))
        .collect()
}

fn functions(item: &ComponentItem, engine: &Engine) -> Vec<String> {
    match item {
        ComponentItem::ComponentInstance(instance) => instance
            .exports(engine)
            .filter(|(_, e)| matches!(e.ty, ComponentItem::ComponentFunc(_)))
            .map(|(n, _)| n.to_string())
            .collect(),
        _ => Vec::new(),
    }
}
