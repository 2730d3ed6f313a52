//! The sandbox: one wasmtime engine, the bridge component compiled once (or loaded from
//! the on-disk cache), and a cheap fresh instance per agent session from a pool.
//!
//! Each instance gets a memory cap, a fuel budget per export call, and only the WASI
//! interfaces the capability audit allows, linked to a context that grants nothing. A
//! trap poisons only its own store; the session takes its state back out of the store
//! and instantiates again (docs/architecture.md#what-crosses-the-wit-boundary, C2).

use std::path::{Path, PathBuf};

use wasmtime::component::{Component, HasData, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimitsBuilder,
};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};

use crate::sandbox::audit::{self, Verdict};
use crate::sandbox::imports::SessionHost;
use crate::wit;

/// The component built by `build.rs` from `guest/`.
pub static EMBEDDED_COMPONENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest.wasm"));

/// Fuel between two yields of a running guest call: a long call (rendering a megabyte)
/// gives other sessions on the same worker thread a turn about every millisecond.
const FUEL_YIELD_INTERVAL: u64 = 2_000_000;

/// Limits applied to every session instance.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest linear memory one instance may grow to.
    pub memory_bytes: usize,
    /// Fuel one export call may burn: wasm instructions, roughly. It counts the guest's
    /// own work only (time waiting in host imports, for a network send or a local
    /// confirmation, burns none), and it is the same on a loaded machine as on an idle
    /// one, so an ordinary call is never interrupted because the host was busy.
    pub call_fuel: u64,
    /// Instances alive at once (the pool's capacity): sessions, plus one being replaced
    /// after a trap.
    pub max_instances: u32,
}

impl Default for Limits {
    fn default() -> Self {
        // 64 MiB leaves room for a 1 MiB reply through every pipeline stage. 20 billion
        // units is several seconds of guest CPU, orders of magnitude above any legitimate
        // call (budgets: µs to ms; the worst pipeline input costs ~50 million).
        Limits {
            memory_bytes: 64 << 20,
            call_fuel: 20_000_000_000,
            max_instances: 16,
        }
    }
}

/// Where the compiled component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiled {
    /// Cranelift compiled it now (and, with a cache directory, saved it there).
    Now,
    /// It was loaded from the on-disk cache: no compilation.
    FromCache,
}

/// Whether a component compiled now is saved in the cache directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Save {
    Yes,
    No,
}

/// The compiled component, ready to instantiate many times.
pub struct Runtime {
    engine: Engine,
    pre: wit::BridgePre<SessionHost>,
    limits: Limits,
    compiled: Compiled,
    digest: String,
}

/// A live instance and its store.
pub struct Instance {
    /// The store holding the instance's memory and the session's host state.
    pub store: Store<SessionHost>,
    /// The typed exports.
    pub bridge: wit::Bridge,
}

impl Instance {
    /// How large the guest's linear memory has grown, in bytes: its heap and data, the
    /// guest's part of what a session costs.
    pub fn guest_memory_bytes(&self) -> usize {
        self.store.data().limits.memory_bytes
    }
}

/// An instance that could not be made, with the host state it was to run with.
pub struct Refused {
    /// Why (the pool is full, most often).
    pub error: anyhow::Error,
    /// The host state, unharmed: nothing ran in the failed store.
    pub host: Box<SessionHost>,
}

/// Why a component cannot run here. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The bytes are not a component this engine can compile.
    #[error(
        "the component could not be compiled ({0}); is it a wasm32-wasip2 build of guest/? \
         Rebuild it with `cargo build -p guest --target wasm32-wasip2 --release`"
    )]
    NotAComponent(String),
    /// It asks for capabilities outside the audited set.
    #[error(
        "the component imports {0}, outside the bridge world and the audited WASI set; this \
         host refuses to run it. Run `host-shim inspect --component <path>` to see every import"
    )]
    ForbiddenImports(String),
    /// Its imports or exports do not match this host's WIT.
    #[error(
        "the component does not match this host's WIT world (wit/*.wit): {0}. Rebuild it from \
         the same checkout as host-shim"
    )]
    WorldMismatch(String),
    /// wasmtime itself could not be set up (memory reservation, threads).
    #[error("the wasm engine could not start: {0}")]
    Engine(String),
}

impl Runtime {
    /// Compiles `component` (the embedded one or a `--component` build) and links the
    /// imports, without touching any cache.
    pub fn new(component: &[u8], limits: Limits) -> Result<Runtime, RuntimeError> {
        Self::load(component, limits, None)
    }

    /// Like [`Runtime::new`], but looks in `cache_dir` first for this exact component
    /// compiled by this exact engine, and saves it there after compiling. A cache that
    /// cannot be read or written only costs the compilation; it never stops a start.
    pub fn load(
        component: &[u8],
        limits: Limits,
        cache_dir: Option<&Path>,
    ) -> Result<Runtime, RuntimeError> {
        Self::load_from(component, limits, cache_dir, Save::Yes)
    }

    /// Like [`Runtime::load`], but writes nothing: the compiled component is taken from
    /// `cache_dir` when a start left it there, else compiled for this process only. For
    /// the commands that promise to write nothing (`preview`, `explain`, `replay`), which
    /// compiled the component at each call, 5–10 s, though `run` had cached it.
    pub fn load_read_only(
        component: &[u8],
        limits: Limits,
        cache_dir: Option<&Path>,
    ) -> Result<Runtime, RuntimeError> {
        Self::load_from(component, limits, cache_dir, Save::No)
    }

    fn load_from(
        component: &[u8],
        limits: Limits,
        cache_dir: Option<&Path>,
        save: Save,
    ) -> Result<Runtime, RuntimeError> {
        let digest = component_digest(component);
        let engine = engine(limits)?;
        let cache = cache_dir.map(|dir| cache_file(dir, &engine, component));
        let cached = cache.as_deref().and_then(|path| load_cached(&engine, path));
        let (component, compiled) = match cached {
            Some(component) => (component, Compiled::FromCache),
            None => {
                let component = Component::new(&engine, component)
                    .map_err(|e| RuntimeError::NotAComponent(format!("{e:#}")))?;
                if let (Some(path), Save::Yes) = (&cache, save) {
                    save_cached(&component, path);
                }
                (component, Compiled::Now)
            }
        };
        refuse_unaudited_imports(&engine, &component)?;
        let pre = link(&engine, &component)?;
        Ok(Runtime {
            engine,
            pre,
            limits,
            compiled,
            digest,
        })
    }

    /// Which bridge build this runtime runs ([`component_digest`]).
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Whether this runtime compiled the component or loaded it from the cache.
    pub fn compiled(&self) -> Compiled {
        self.compiled
    }

    /// The component's WIT, as the engine sees it: every import and export.
    pub fn component_type(&self) -> wasmtime::component::types::Component {
        self.pre.instance_pre().component().component_type()
    }

    /// The engine, for inspection.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A fresh, sandboxed instance whose imports are served by `host`.
    pub async fn instantiate(&self, host: SessionHost) -> anyhow::Result<Instance> {
        self.try_instantiate(host)
            .await
            .map_err(|refused| refused.error)
    }

    /// Like [`Runtime::instantiate`], but a failure gives `host` back: a hibernated
    /// session that finds the pool full keeps its transports, locks and agent link and
    /// can try again at its next input, instead of losing them with the failed store.
    pub async fn try_instantiate(&self, mut host: SessionHost) -> Result<Instance, Refused> {
        host.limits.caps = StoreLimitsBuilder::new()
            .memory_size(self.limits.memory_bytes)
            .instances(16)
            .build();
        host.call_fuel = self.limits.call_fuel;
        let mut store = Store::new(&self.engine, host);
        store.limiter(|s| &mut s.limits);
        let prepared = store
            .set_fuel(self.limits.call_fuel)
            .and_then(|()| store.fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL)));
        let instantiated =
            match prepared {
                Ok(()) => self.pre.instantiate_async(&mut store).await.map_err(|e| {
                    anyhow::anyhow!("could not instantiate the bridge component: {e:#}")
                }),
                Err(error) => Err(anyhow::anyhow!(
                    "could not prepare the instance's fuel budget: {error:#}"
                )),
            };
        match instantiated {
            Ok(bridge) => Ok(Instance { store, bridge }),
            Err(error) => Err(Refused {
                error,
                host: Box::new(store.into_data()),
            }),
        }
    }

    /// Component instances alive in the pool now: one per live session (a hibernated
    /// session has none).
    pub fn live_instances(&self) -> u64 {
        self.engine
            .pooling_allocator_metrics()
            .map_or(0, |metrics| metrics.component_instances())
    }

    /// The limits every instance runs with.
    pub fn limits(&self) -> Limits {
        self.limits
    }
}

/// The engine: fuel for the per-call budget, and a pool of instance slots so a new
/// session costs microseconds and no allocation of its own.
fn engine(limits: Limits) -> Result<Engine, RuntimeError> {
    let mut pool = PoolingAllocationConfig::new();
    // wit-component wraps the guest's module in a few small helper modules; each
    // component instance needs room for all of them.
    let core_per_component = 8;
    pool.total_component_instances(limits.max_instances)
        .total_core_instances(limits.max_instances * core_per_component)
        .total_memories(limits.max_instances)
        .total_tables(limits.max_instances * core_per_component)
        .total_stacks(limits.max_instances)
        .max_memory_size(limits.memory_bytes);
    let mut config = Config::new();
    config
        .consume_fuel(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).map_err(|e| RuntimeError::Engine(format!("{e:#}")))
}

/// Checks every import against the audit before linking, so a component that asks for a
/// clock, randomness, files or sockets is refused with its names, not with a linker error.
fn refuse_unaudited_imports(engine: &Engine, component: &Component) -> Result<(), RuntimeError> {
    let forbidden: Vec<String> = audit::imports(&component.component_type(), engine)
        .into_iter()
        .filter(|import| import.verdict == Verdict::Unexpected)
        .map(|import| import.name)
        .collect();
    if forbidden.is_empty() {
        Ok(())
    } else {
        Err(RuntimeError::ForbiddenImports(forbidden.join(", ")))
    }
}

/// Links the bridge world and exactly the WASI interfaces on the audit's allow-list
/// ([`audit::ALLOWED_WASI`]); anything else a component imports stays unlinked.
fn link(
    engine: &Engine,
    component: &Component,
) -> Result<wit::BridgePre<SessionHost>, RuntimeError> {
    let mut linker = Linker::<SessionHost>::new(engine);
    link_allowed_wasi(&mut linker).map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
    crate::sandbox::imports::add_to_linker(&mut linker)
        .map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
    let pre = linker
        .instantiate_pre(component)
        .map_err(|e| RuntimeError::WorldMismatch(format!("{e:#}")))?;
    wit::BridgePre::new(pre).map_err(|e| RuntimeError::WorldMismatch(format!("{e:#}")))
}

/// The stdio streams' resource table, as the wasi-io bindings want it.
struct HasIo;

impl HasData for HasIo {
    type Data<'a> = &'a mut ResourceTable;
}

/// One line per allowed interface: this list *is* the WASI part of the boundary, and the
/// audit test checks it against [`audit::ALLOWED_WASI`].
fn link_allowed_wasi(linker: &mut Linker<SessionHost>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::cli;
    use wasmtime_wasi_io::bindings::wasi::io;
    let l = linker;
    io::error::add_to_linker::<SessionHost, HasIo>(l, |t| t.ctx().table)?;
    io::poll::add_to_linker::<SessionHost, HasIo>(l, |t| t.ctx().table)?;
    io::streams::add_to_linker::<SessionHost, HasIo>(l, |t| t.ctx().table)?;
    cli::exit::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::environment::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::stdin::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::stdout::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::stderr::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::terminal_input::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::terminal_output::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::terminal_stdin::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::terminal_stdout::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    cli::terminal_stderr::add_to_linker::<SessionHost, WasiCli>(l, SessionHost::cli)?;
    Ok(())
}

/// The cache file for `component` compiled by `engine`: named after the component's
/// SHA-256 and the engine's compatibility hash (wasmtime version and every setting that
/// changes the machine code), so a new build or a new wasmtime never loads a stale file.
fn cache_file(dir: &Path, engine: &Engine, component: &[u8]) -> PathBuf {
    use sha2::Digest as _;
    use std::hash::{Hash as _, Hasher as _};
    let digest = sha2::Sha256::digest(component);
    let mut compat = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut compat);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("bridge-{hex}-{:016x}.cwasm", compat.finish()))
}

/// A short name for one build of the bridge: the first 8 bytes of the component's
/// SHA-256, in hex. Transcripts record it, so a replay that differs says which builds it
/// compared.
pub fn component_digest(component: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(component)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The cached compilation at `path`, if it is there and safe to load. Loading compiled
/// code runs it, so the file must be the user's own and nobody else's to write: a
/// planted file would be arbitrary native code.
fn load_cached(engine: &Engine, path: &Path) -> Option<Component> {
    if !owned_privately(path) || !path.parent().is_some_and(owned_privately) {
        return None;
    }
    // SAFETY: the file is named after this component's hash and this engine's
    // compatibility hash, it was written by `save_cached` from `Component::serialize`,
    // and only this user can write it or its directory (checked above). wasmtime checks
    // the header and refuses a file from another version or configuration.
    #[allow(unsafe_code)]
    let loaded = unsafe { Component::deserialize_file(engine, path) };
    loaded.ok()
}

/// Whether `path` belongs to this user and no one else may write it.
fn owned_privately(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let me = unsafe { libc::geteuid() };
    !meta.file_type().is_symlink() && meta.uid() == me && meta.mode() & 0o022 == 0
}

/// Saves `component` at `path` (directory 0700, file 0600, written atomically). A
/// failure is silent by design: the next start compiles again, which is only slower.
fn save_cached(component: &Component, path: &Path) {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let Some(dir) = path.parent() else { return };
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .is_err()
        || !owned_privately(dir)
    {
        return;
    }
    let Ok(bytes) = component.serialize() else {
        return;
    };
    let temp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut file| file.write_all(&bytes).and_then(|()| file.sync_all()));
    if written.is_err() || std::fs::rename(&temp, path).is_err() {
        let _ = std::fs::remove_file(&temp);
    }
}
