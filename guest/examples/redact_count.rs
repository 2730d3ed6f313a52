//! Instructions per redaction, for cachegrind (docs/benchmarks.md#redaction-by-instruction-count).
//!
//! Wall figures swing twofold on a loaded machine; instruction counts do not. This redacts the
//! pipeline benchmark's 64 KiB texts `N` times each; run it under
//! `valgrind --tool=cachegrind --cache-sim=no` for two values of `N` and divide the difference
//! in instructions by the difference in `N`: the one-time costs (the catalog's compile, the
//! texts' generation) cancel.
//!
//! `cargo build --release -p guest --example redact_count`, then
//! `valgrind --tool=cachegrind --cache-sim=no target/release/examples/redact_count secrets 25`
//! (a third argument sets the size in KiB: 1024 for the 1 MiB ratio).
//! Texts: `agent`, `secrets`, `clean`, `triggers`, `assignments`; `parse`, `parse-secrets`,
//! `parse-clean` are pulldown-cmark's parse of the agent, secrets and clean texts (the floors);
//! `telegram-secrets` and `telegram-clean` are the whole pipeline (`prepare`) of the secrets
//! and clean texts for Telegram (HTML, 4,096 UTF-16 units), last look included.

use std::hint::black_box;

use guest::core::outbound::prepare;
use guest::core::redact::redact;
use guest::model::Capabilities;

#[path = "../benches/traffic/mod.rs"]
mod traffic;
use traffic::{agent_reply, realistic_reply, trigger_words};

/// The benchmark's `assignments` shape: secret-like keys whose values stay, one real
/// password in sixteen lines.
fn assignments(size: usize) -> (String, usize) {
    let unit = format!(
        "{}db_password = {}\n",
        "password=changeme secret: ${APP_SECRET} api_key: <your-api-key> token=3600 pwd=true \
         client_secret: $CLIENT_SECRET auth_token: null passwd: xxxxxxxx timeout: 30s\n"
            .repeat(15),
        "Hq7Rt2Wz9Lm4Xv8Nc3Ks6Pd1",
    );
    let n = size / unit.len() + 1;
    (unit.repeat(n), n)
}

/// pulldown-cmark's pass with the pipeline's options, as the benchmark's floor takes it.
fn parse_only(text: &str) -> usize {
    pulldown_cmark::Parser::new_ext(text, guest::core::dialect::options())
        .into_offset_iter()
        .map(|(event, range)| {
            black_box(&event);
            range.end
        })
        .max()
        .unwrap_or(0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "secrets".to_owned());
    let rounds: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(5);
    // KiB, 64 unless given: 1024 shows whether a shape grows faster than the text.
    let size: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(64) * 1024;
    let (text, planted) = match which.as_str() {
        "agent" | "parse" => (agent_reply(size), 0),
        "secrets" | "parse-secrets" | "telegram-secrets" => realistic_reply(size, true),
        "clean" | "parse-clean" | "telegram-clean" => realistic_reply(size, false),
        "assignments" => assignments(size),
        "triggers" => (trigger_words(size), 0),
        other => {
            eprintln!(
                "unknown text {other:?}: agent, secrets, clean, triggers, assignments, parse, parse-secrets, parse-clean, telegram-secrets or telegram-clean"
            );
            std::process::exit(2);
        }
    };
    let mut work = 0;
    for _ in 0..rounds {
        work += match which.as_str() {
            "parse" | "parse-secrets" | "parse-clean" => parse_only(black_box(&text)),
            "telegram-secrets" | "telegram-clean" => {
                let sent =
                    prepare(black_box(&text), &Capabilities::TELEGRAM_TEXT, u32::MAX).messages;
                // The figure is the pipeline's only if every planted secret went.
                let markers: usize = sent.iter().map(|m| m.matches("[redacted").count()).sum();
                assert!(
                    markers >= planted && !sent.is_empty(),
                    "{which}: {markers} markers for {planted} secrets"
                );
                sent.len()
            }
            _ => {
                let out = redact(black_box(&text));
                // The figure is redaction of the whole text only if every planted secret went.
                let markers = out.text.matches("[redacted").count();
                assert!(
                    markers >= planted,
                    "{which}: {markers} markers for {planted} secrets"
                );
                markers
            }
        };
    }
    println!(
        "{which}: {} bytes, {rounds} rounds, work {work}",
        text.len()
    );
}
