//! The sandbox: one wasmtime engine, the bridge component compiled once, and a cheap
//! fresh instance per agent session.
//!
//! Each instance gets a memory cap and a per-call CPU budget (epoch interruption), and a
//! WASI context that grants nothing: no preopens, no environment, no arguments, no
//! sockets, no stdin. A trap poisons only its own store; the session drops it and
//! instantiates again (architecture §1.1, C2).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::error::Context as _;
use wasmtime::{Config, Engine, Store, StoreLimitsBuilder, UpdateDeadline};

use crate::imports::SessionHost;

/// Bindings generated from `wit/bridge.wit`.
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "bridge",
        // Imports that never wait are plain calls (an async host call costs several times
        // more, and an envelope makes a handful of them); `trappable` is how bindgen spells
        // "not async" here, and lets the rng trap instead of returning predictable bytes.
        imports: {
            "pi:bot-connect/clock.now-ms": trappable,
            "pi:bot-connect/clock.request-tick": trappable,
            "pi:bot-connect/rng.random-bytes": trappable,
            "pi:bot-connect/log.write": trappable,
            "pi:bot-connect/agent.is-idle": trappable,
            "pi:bot-connect/agent.info": trappable,
            "pi:bot-connect/agent.abort": trappable,
            "pi:bot-connect/transport.typing": trappable,
            default: async,
        },
        exports: { default: async },
        // Tests and the host compare decisions and events by value.
        additional_derives: [PartialEq, Eq],
    });
}

/// The component built by `build.rs` from `guest/`.
pub static EMBEDDED_COMPONENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest.wasm"));

/// How often the engine's epoch advances; the unit of the CPU budget.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Limits applied to every session instance.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest linear memory one instance may grow to.
    pub memory_bytes: usize,
    /// Guest CPU time one export call may use (time spent waiting in host imports, such
    /// as a network send or a local confirmation, does not count).
    pub call_budget: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        // 64 MiB leaves room for a 1 MiB reply through every pipeline stage; 5 s of guest
        // CPU is orders of magnitude above any legitimate call (budgets: µs to ms).
        Limits {
            memory_bytes: 64 << 20,
            call_budget: Duration::from_secs(5),
        }
    }
}

/// The compiled component, ready to instantiate many times.
pub struct Runtime {
    engine: Engine,
    pre: bindings::BridgePre<SessionHost>,
    limits: Limits,
    ticker_stop: Arc<AtomicBool>,
}

/// A live instance and its store.
pub struct Instance {
    /// The store holding the instance's memory and host state.
    pub store: Store<SessionHost>,
    /// The typed exports.
    pub bridge: bindings::Bridge,
}

impl Runtime {
    /// Compiles `component` (the embedded one or a `--component` build) and links the
    /// imports. Fails with a clear message when the bytes are not a bridge component.
    pub fn new(component: &[u8], limits: Limits) -> anyhow::Result<Runtime> {
        Ok(Self::build(component, limits)?)
    }

    fn build(component: &[u8], limits: Limits) -> wasmtime::Result<Runtime> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).context("could not create the wasm engine")?;
        let component = Component::new(&engine, component).context(
            "the component could not be compiled; is it a wasm32-wasip2 build of guest/?",
        )?;
        let mut linker = Linker::<SessionHost>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .context("could not link the WASI interfaces")?;
        bindings::Bridge::add_to_linker::<SessionHost, HasSelf<SessionHost>>(&mut linker, |s| s)
            .context("could not link the bridge imports")?;
        let pre = linker.instantiate_pre(&component).context(
            "the component does not match this host's WIT world (wit/bridge.wit); rebuild it",
        )?;
        let pre = bindings::BridgePre::new(pre)
            .context("the component does not export the `session` interface")?;

        let ticker_stop = Arc::new(AtomicBool::new(false));
        let (weak_engine, stop) = (engine.weak(), ticker_stop.clone());
        // One ticker per runtime drives every instance's CPU budget.
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak_engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| {
                wasmtime::Error::msg(format!("could not start the epoch ticker thread: {e}"))
            })?;

        Ok(Runtime {
            engine,
            pre,
            limits,
            ticker_stop,
        })
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
        Ok(self.instantiate_inner(host).await?)
    }

    async fn instantiate_inner(&self, mut host: SessionHost) -> wasmtime::Result<Instance> {
        host.limits = StoreLimitsBuilder::new()
            .memory_size(self.limits.memory_bytes)
            .instances(16)
            .build();
        host.call_budget = self.limits.call_budget;
        let mut store = Store::new(&self.engine, host);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            // Yield at every tick so one busy guest never starves the others on this
            // thread, and trap once the guest's own CPU time passes the budget.
            if ctx.data().guest_time_exceeded() {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        let bridge = self
            .pre
            .instantiate_async(&mut store)
            .await
            .context("could not instantiate the bridge component")?;
        Ok(Instance { store, bridge })
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}
