//! What a hibernated session's wake costs, counted rather than timed
//! (docs/scaling.md#idle-sessions): wall figures on a shared machine swing with the other
//! workers' load, counts do not.
//!
//! A wake is what `Actor::wake` does: a fresh instance from the pool for the session's kept
//! context, `configure` and `start` again, then the envelope that woke it. This does that
//! `N` times (`wake N`), or sends the same envelope `N` times to one live instance (`live
//! N`), and prints each phase's guest work in fuel (wasm operators, deterministic) for the
//! last round. For the host's share as well, run it under
//! `valgrind --tool=cachegrind --cache-sim=no` for two values of `N`: the difference in
//! instructions over the difference in `N` is one round, the component's load and the first
//! round's one-time costs cancelling out; a wake's extra is a `wake` round less a `live` one.
//!
//! `cargo build --release -p host-shim --example wake_count`, then
//! `target/release/examples/wake_count wake 5` once to fill the compiled-code cache (in
//! `target/count-cache`, or the directory in `COUNT_CACHE`), then under valgrind.
//! `COUNT_COMPONENT=path/guest.wasm` counts another build of the bridge.

use host_shim::sandbox::imports::SessionHost;
use host_shim::sandbox::runtime::Instance;
use transport_testing::fake::FakeTransport;

#[path = "support/counted_session.rs"]
mod counted_session;
use counted_session::{burnt, configure, start, status};

/// Fuel (wasm operators) each phase of one round burnt.
#[derive(Debug, Default)]
struct Round {
    instantiate: u64,
    configure: u64,
    start: u64,
    envelope: u64,
}

async fn envelope(instance: &mut Instance, fake: &FakeTransport) -> u64 {
    drop(fake.take_records());
    let session = instance.bridge.pi_bot_connect_session();
    session
        .call_on_envelope(&mut instance.store, &status())
        .await
        .expect("envelope");
    // A count of an early return would say nothing: the session must have answered.
    let answered = fake.sent();
    assert!(
        answered
            .iter()
            .any(|sent| sent.message.text.contains("- session: s0\n")),
        "/status was not answered by the session: {answered:?}"
    );
    burnt(instance)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "wake".into());
    let rounds: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(5);
    // Bound whole, not destructured: its directory and inbound channel must live on.
    let counted = counted_session::counted();
    let mut ctx = counted.ctx;
    let (tokio, runtime, fake) = (&counted.tokio, &counted.runtime, &counted.fake);
    let mut last = Round::default();
    tokio.block_on(async {
        match mode.as_str() {
            "wake" => {
                for _ in 0..rounds {
                    let mut instance = runtime
                        .instantiate(SessionHost::new(ctx))
                        .await
                        .expect("instance");
                    last.instantiate = burnt(&mut instance);
                    last.configure = configure(&mut instance).await;
                    last.start = start(&mut instance).await;
                    last.envelope = envelope(&mut instance, fake).await;
                    // Hibernated: the store goes, the context stays for the next wake.
                    ctx = instance.store.into_data().into_context();
                }
            }
            "live" => {
                let mut instance = runtime
                    .instantiate(SessionHost::new(ctx))
                    .await
                    .expect("instance");
                burnt(&mut instance);
                configure(&mut instance).await;
                start(&mut instance).await;
                for _ in 0..rounds {
                    last.envelope = envelope(&mut instance, fake).await;
                }
            }
            other => panic!("unknown mode {other:?}: `wake N` or `live N`"),
        }
    });
    println!(
        "{mode} x{rounds}, the last round's guest work in fuel (wasm operators): instantiate \
         {}, configure {}, start {}, /status {}; in all {}",
        last.instantiate,
        last.configure,
        last.start,
        last.envelope,
        last.instantiate + last.configure + last.start + last.envelope
    );
}
