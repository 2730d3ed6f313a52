//! Outbound pipeline benchmarks (architecture §7: 64 KiB ≤ 1 ms natively, 1 MiB ≤ 20× that).
//!
//! `cargo bench -p guest --bench pipeline` prints criterion's time and MB/s for the whole
//! pipeline per profile and size, per stage on the Telegram profile, for the adversarial
//! shapes, and then the 1 MiB / 64 KiB time ratio per profile.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use guest::core::blocks::split;
use guest::core::chunk::{Meter, chunk_rendered};
use guest::core::outbound::prepare;
use guest::core::redact::redact;
use guest::model::{Capabilities, LengthUnit, Markup};

const SIZES: [(&str, usize); 3] = [("4KiB", 4 << 10), ("64KiB", 64 << 10), ("1MiB", 1 << 20)];

fn caps(limit: u32, unit: LengthUnit, markup: Markup) -> Capabilities {
    Capabilities {
        threads: false,
        edit: false,
        attachments: false,
        typing: false,
        max_message_length: limit,
        length_unit: unit,
        markup,
    }
}

fn profiles() -> [(&'static str, Capabilities); 3] {
    [
        ("telegram", caps(4096, LengthUnit::Utf16, Markup::Html)),
        ("discord", caps(2000, LengthUnit::Utf16, Markup::Markdown)),
        ("slack", caps(4000, LengthUnit::Chars, Markup::Mrkdwn)),
    ]
}

/// Deterministic agent-like markdown of about `size` bytes: sections with prose, inline
/// markup, lists, code fences, a table and the odd emoji.
fn agent_reply(size: usize) -> String {
    let mut out = String::with_capacity(size + 1024);
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!("## Step {i}: update `module_{i}.rs`\n\n"));
        out.push_str(&format!(
            "I changed **the parser** so that _nested_ blocks close correctly (see [issue {i}](https://example.com/issues/{i})). \
             The old code compared `a < b && c > d`, which failed for inputs over 4 KiB. All 42 tests pass now ✅.\n\n"
        ));
        out.push_str("- renamed `Token::Text` to `Token::Word`\n- removed the *unused* helper\n- kept the public API 🎉\n\n");
        out.push_str(&format!(
            "```rust\nfn step_{i}(input: &str) -> Result<Vec<Token>, Error> {{\n    let mut out = Vec::new();\n    for (n, line) in input.lines().enumerate() {{\n        out.push(Token::parse(line).map_err(|e| e.at(n))?);\n    }}\n    Ok(out)\n}}\n```\n\n"
        ));
        if i % 4 == 0 {
            out.push_str(
                "| file | lines |\n|---|---|\n| parser.rs | +120 |\n| lexer.rs | -34 |\n\n",
            );
        }
        i += 1;
    }
    out
}

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline");
    for (size_name, size) in SIZES {
        let text = agent_reply(size);
        group.throughput(Throughput::Bytes(text.len() as u64));
        for (name, caps) in profiles() {
            group.bench_with_input(BenchmarkId::new(name, size_name), &text, |b, t| {
                b.iter(|| prepare(black_box(t), &caps, u32::MAX))
            });
        }
    }
    group.finish();
}

/// Stages on the Telegram profile. Rendering happens inside the split's single parse, so
/// "split" is parse + structure alone (as for markdown) and "split+render" adds rendering;
/// the render stage costs the difference.
fn stages(c: &mut Criterion) {
    let (_, caps) = profiles()[0];
    let meter = Meter::for_source(caps.length_unit, caps.markup);
    let limit = caps.max_message_length as usize;
    let mut group = c.benchmark_group("stage-telegram");
    for (size_name, size) in SIZES {
        let text = agent_reply(size);
        let redacted = redact(&text).text;
        let rendered: Vec<String> = split(&redacted, limit, meter, caps.markup)
            .into_iter()
            .map(|p| p.rendered.into_owned())
            .collect();
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(BenchmarkId::new("redact", size_name), |b| {
            b.iter(|| redact(black_box(&text)))
        });
        group.bench_function(BenchmarkId::new("split", size_name), |b| {
            b.iter(|| split(black_box(&redacted), limit, meter, Markup::Markdown))
        });
        group.bench_function(BenchmarkId::new("split+render", size_name), |b| {
            b.iter(|| split(black_box(&redacted), limit, meter, caps.markup))
        });
        group.bench_function(BenchmarkId::new("chunk", size_name), |b| {
            b.iter(|| {
                rendered
                    .iter()
                    .map(|r| {
                        chunk_rendered(black_box(r), limit, caps.length_unit, caps.markup).len()
                    })
                    .sum::<usize>()
            })
        });
    }
    group.finish();
}

/// The shapes that made the original super-linear, at 64 KiB, on the Discord profile.
fn adversarial(c: &mut Criterion) {
    const SIZE: usize = 64 << 10;
    let fill = |unit: &str| unit.repeat(SIZE / unit.len() + 1);
    let mut pem = String::new();
    while pem.len() < SIZE {
        pem.push_str("-----BEGIN RSA PRIVATE KEY-----\n");
        pem.push_str(&"lorem ipsum dolor sit amet ".repeat(150));
        pem.push('\n');
    }
    let nested: String = (0..400)
        .map(|i| format!("{}- item {i}\n", "  ".repeat(i % 100)))
        .collect();
    let quotes: String = (0..400)
        .map(|i| format!("{} quote {i}\n", ">".repeat(i % 100 + 1)))
        .collect();
    let shapes = [
        ("bare-headings", fill("## h\n")),
        ("long-line", "x".repeat(SIZE)),
        ("unclosed-fences", fill("```rust\nfn f() {}\n\n")),
        ("nested-lists", fill(&nested)),
        ("nested-quotes", fill(&quotes)),
        ("pem-no-end", pem),
        ("zwj-emoji", fill("👨\u{200d}👩\u{200d}👧\u{200d}👦")),
    ];
    let mut group = c.benchmark_group("adversarial-64KiB");
    for (name, text) in &shapes {
        group.throughput(Throughput::Bytes(text.len() as u64));
        for (profile, caps) in profiles() {
            group.bench_with_input(BenchmarkId::new(*name, profile), text, |b, t| {
                b.iter(|| prepare(black_box(t), &caps, u32::MAX))
            });
        }
    }
    group.finish();
}

/// Median wall time of `f` over enough runs to fill about 200 ms.
fn median(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    f();
    let once = start.elapsed().max(Duration::from_micros(1));
    let runs = (Duration::from_millis(200).as_nanos() / once.as_nanos()).clamp(5, 2000) as usize;
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn growth(_: &mut Criterion) {
    let small = agent_reply(64 << 10);
    let large = agent_reply(1 << 20);
    println!("\nlinear growth (median, whole pipeline):");
    for (name, caps) in profiles() {
        let t64 = median(|| drop(black_box(prepare(&small, &caps, u32::MAX))));
        let t1m = median(|| drop(black_box(prepare(&large, &caps, u32::MAX))));
        let mbps = |t: Duration, n: usize| n as f64 / t.as_secs_f64() / 1e6;
        println!(
            "  {name:9} 64KiB {:>9.3?} ({:>6.0} MB/s)  1MiB {:>9.3?} ({:>6.0} MB/s)  ratio 1MiB/64KiB = {:.1} (budget ≤ 20)",
            t64,
            mbps(t64, small.len()),
            t1m,
            mbps(t1m, large.len()),
            t1m.as_secs_f64() / t64.as_secs_f64()
        );
    }
}

criterion_group!(benches, pipeline, stages, adversarial, growth);
criterion_main!(benches);
