//! What one long reply costs inside the component (docs/benchmarks.md#a-reply-inside-the-component):
//! the pipeline benchmark's 64 KiB agent texts (`secrets`: realistic output with secrets
//! planted, `clean`: the same without, `agent`: agent markdown) handed to a live bridge as
//! the finished assistant message of a remote turn, then the turn settled: redacted,
//! rendered, cut and sent to the fake bot. Prints the guest work in fuel (wasm operators,
//! which load does not move) of the last round and the wall time of the rounds (least and
//! median: the machine's load moves them). The pipeline benchmark measures the same guest
//! code natively; this is what the product runs.
//!
//! `cargo build --release -p host-shim --example reply_count`, then
//! `target/release/examples/reply_count secrets 30`; `COUNT_COMPONENT=path/guest.wasm`
//! counts another build of the bridge.

use std::time::{Duration, Instant};

use host_shim::sandbox::imports::SessionHost;
use host_shim::sandbox::runtime::Instance;
use host_shim::wit::session::{AgentEvent, TurnOrigin};
use host_shim::wit::types;
use transport_testing::fake::FakeTransport;

#[path = "support/counted_session.rs"]
mod counted_session;
use counted_session::{burnt, configure, start, status};

#[path = "../../guest/benches/traffic/mod.rs"]
#[allow(dead_code)] // the pipeline bench's texts; this counts three of them
mod traffic;

/// The prompt whose turn the reply ends; each round's has its own message id, as a chat's
/// messages do.
fn prompt(round: usize) -> types::Envelope {
    types::Envelope {
        text: "summarise what you changed".into(),
        message_id: Some(format!("{}", 1_000 + round)),
        ..status()
    }
}

/// One remote turn ending in `reply`; returns the fuel and the wall time of the reply's
/// part (the assistant message and the turn settling), the prompt's own part left out.
async fn turn(
    instance: &mut Instance,
    fake: &FakeTransport,
    reply: &str,
    round: usize,
) -> (u64, Duration) {
    drop(fake.take_records());
    let session = instance.bridge.pi_bot_connect_session();
    session
        .call_on_envelope(&mut instance.store, &prompt(round))
        .await
        .expect("envelope");
    session
        .call_on_agent_event(
            &mut instance.store,
            &AgentEvent::TurnStarted(TurnOrigin::Remote),
        )
        .await
        .expect("turn started");
    burnt(instance);
    let session = instance.bridge.pi_bot_connect_session();
    let started = Instant::now();
    session
        .call_on_agent_event(
            &mut instance.store,
            &AgentEvent::AssistantMessage(reply.to_owned()),
        )
        .await
        .expect("assistant message");
    session
        .call_on_agent_event(&mut instance.store, &AgentEvent::TurnSettled)
        .await
        .expect("turn settled");
    let elapsed = started.elapsed();
    // A count of a reply that was never sent would time an early return.
    let sent: usize = fake.sent().iter().map(|s| s.message.text.len()).sum();
    assert!(
        sent >= reply.len() / 4,
        "the reply was not sent: {sent} bytes for a {} byte reply",
        reply.len()
    );
    (burnt(instance), elapsed)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "secrets".into());
    let rounds: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(30);
    let size = 64 << 10;
    let reply = match kind.as_str() {
        "secrets" => traffic::realistic_reply(size, true).0,
        "clean" => traffic::realistic_reply(size, false).0,
        "agent" => traffic::agent_reply(size),
        other => panic!("unknown text {other:?}: `secrets`, `clean` or `agent`"),
    };
    // Bound whole, not destructured: its directory and inbound channel must live on.
    let counted = counted_session::counted();
    let ctx = counted.ctx;
    let (tokio, runtime, fake) = (&counted.tokio, &counted.runtime, &counted.fake);
    let (fuel, mut times) = tokio.block_on(async {
        let mut instance = runtime
            .instantiate(SessionHost::new(ctx))
            .await
            .expect("instance");
        burnt(&mut instance);
        configure(&mut instance).await;
        start(&mut instance).await;
        let mut fuel = 0;
        let mut times = Vec::with_capacity(rounds);
        for round in 0..rounds.max(1) {
            let (burnt, elapsed) = turn(&mut instance, fake, &reply, round).await;
            fuel = burnt;
            times.push(elapsed);
        }
        (fuel, times)
    });
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{kind} ({} bytes) x{}: the reply's guest work {fuel} operators (fuel, the last round); \
         wall least {:.3} ms, median {:.3} ms",
        reply.len(),
        times.len(),
        ms(times[0]),
        ms(times[times.len() / 2]),
    );
}
