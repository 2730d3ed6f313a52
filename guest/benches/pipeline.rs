//! Outbound pipeline benchmarks (architecture §7: 64 KiB ≤ 1 ms natively, 1 MiB ≤ 20× that).
//!
//! `cargo bench -p guest --bench pipeline` prints criterion's time and MB/s for the whole
//! pipeline per profile and size, per stage and profile, for the adversarial shapes, and then
//! a summary table: time, MB/s and stage times per profile and size, the 1 MiB / 64 KiB
//! ratio, and each adversarial shape per 64 KiB. `-- summary` prints the table alone.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
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

/// Stages per profile. Rendering happens inside the split's single parse, so "split" is
/// parse + structure alone (as for markdown) and "split+render" adds rendering; the render
/// stage costs the difference. "chunk" cuts the rendered pieces to the platform's limit.
fn stages(c: &mut Criterion) {
    for (name, caps) in profiles() {
        let meter = Meter::for_source(caps.length_unit, caps.markup);
        let limit = caps.max_message_length as usize;
        let mut group = c.benchmark_group(format!("stage-{name}"));
        for (size_name, size) in SIZES {
            let text = agent_reply(size);
            let redacted = redact(&text).text;
            let rendered: Vec<(String, usize)> = split(&redacted, limit, meter, caps.markup)
                .into_iter()
                .map(|p| (p.rendered.into_owned(), p.visible))
                .collect();
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_function(BenchmarkId::new("redact", size_name), |b| {
                b.iter(|| redact(black_box(&text)))
            });
            group.bench_function(BenchmarkId::new("split", size_name), |b| {
                b.iter(|| split(black_box(&redacted), limit, meter, Markup::Markdown))
            });
            if caps.markup != Markup::Markdown {
                group.bench_function(BenchmarkId::new("split+render", size_name), |b| {
                    b.iter(|| split(black_box(&redacted), limit, meter, caps.markup))
                });
                // Chunking takes the pieces by value: the copies are made outside the timing.
                group.bench_function(BenchmarkId::new("chunk", size_name), |b| {
                    b.iter_batched(
                        || rendered.clone(),
                        |pieces| {
                            pieces
                                .into_iter()
                                .map(|(r, v)| {
                                    chunk_rendered(r, v, limit, caps.length_unit, caps.markup).len()
                                })
                                .sum::<usize>()
                        },
                        BatchSize::LargeInput,
                    )
                });
            }
        }
        group.finish();
    }
}

/// The shapes that made the original super-linear, about 64 KiB each.
fn shapes() -> Vec<(&'static str, String)> {
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
    vec![
        ("bare-headings", fill("## h\n")),
        ("long-line", "x".repeat(SIZE)),
        ("unclosed-fences", fill("```rust\nfn f() {}\n\n")),
        ("nested-lists", fill(&nested)),
        ("nested-quotes", fill(&quotes)),
        ("pem-no-end", pem),
        ("zwj-emoji", fill("👨\u{200d}👩\u{200d}👧\u{200d}👦")),
    ]
}

/// The adversarial shapes through the whole pipeline on every profile.
fn adversarial(c: &mut Criterion) {
    let mut group = c.benchmark_group("adversarial-64KiB");
    for (name, text) in &shapes() {
        group.throughput(Throughput::Bytes(text.len() as u64));
        for (profile, caps) in profiles() {
            group.bench_with_input(BenchmarkId::new(*name, profile), text, |b, t| {
                b.iter(|| prepare(black_box(t), &caps, u32::MAX))
            });
        }
    }
    group.finish();
}

/// pulldown-cmark's own pass over `text` with the pipeline's options, every event consumed:
/// the floor under any split that takes its structure from the parser.
fn parse_only(text: &str) {
    for item in
        pulldown_cmark::Parser::new_ext(text, guest::core::blocks::options()).into_offset_iter()
    {
        black_box(&item);
    }
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

fn mbps(t: Duration, n: usize) -> f64 {
    n as f64 / t.as_secs_f64() / 1e6
}

/// One table at the end, with the budgets beside the figures: the whole pipeline and each
/// stage per profile and size, the 1 MiB / 64 KiB ratio, and each adversarial shape scaled
/// to 64 KiB. Medians, so a busy machine shifts them less than means.
fn summary(_: &mut Criterion) {
    println!(
        "\nsummary (median wall time; budgets: 64KiB ≤ 1 ms, ratio ≤ 20, shapes ≤ 2 ms/64KiB)"
    );
    for (name, caps) in profiles() {
        let meter = Meter::for_source(caps.length_unit, caps.markup);
        let limit = caps.max_message_length as usize;
        let mut whole = Vec::new();
        for (size_name, size) in SIZES {
            let text = agent_reply(size);
            let redacted = redact(&text).text;
            let rendered: Vec<(String, usize)> = split(&redacted, limit, meter, caps.markup)
                .into_iter()
                .map(|p| (p.rendered.into_owned(), p.visible))
                .collect();
            let t = median(|| drop(black_box(prepare(&text, &caps, u32::MAX))));
            let t_redact = median(|| drop(black_box(redact(&text))));
            let t_split = median(|| drop(black_box(split(&redacted, limit, meter, caps.markup))));
            // Includes copying the pieces, which chunking takes by value.
            let t_chunk = median(|| {
                for (r, v) in rendered.clone() {
                    drop(black_box(chunk_rendered(
                        r,
                        v,
                        limit,
                        caps.length_unit,
                        caps.markup,
                    )));
                }
            });
            println!(
                "  {name:9} {size_name:>5} {t:>10.3?} {:>6.0} MB/s | redact {t_redact:>9.3?}  split+render {t_split:>9.3?}  chunk {t_chunk:>9.3?}",
                mbps(t, text.len())
            );
            whole.push(t);
        }
        if let [_, t64, t1m] = whole[..] {
            println!(
                "  {name:9} ratio 1MiB/64KiB = {:.1}",
                t1m.as_secs_f64() / t64.as_secs_f64()
            );
        }
    }
    let agent = agent_reply(64 << 10);
    println!(
        "  parser floor: pulldown-cmark alone on the 64KiB reply {:>9.3?}",
        median(|| parse_only(&agent))
    );
    for (shape, text) in shapes() {
        let per64 = |t: Duration| t.mul_f64((64 << 10) as f64 / text.len() as f64);
        let times: Vec<String> = profiles()
            .iter()
            .map(|(name, caps)| {
                let t = median(|| drop(black_box(prepare(&text, caps, u32::MAX))));
                format!("{name} {:>9.3?}", per64(t))
            })
            .collect();
        let floor = per64(median(|| parse_only(&text)));
        println!(
            "  {shape:16} per 64KiB: {}  | parser alone {floor:>9.3?}",
            times.join("  ")
        );
    }
}

criterion_group!(benches, pipeline, stages, adversarial, summary);
criterion_main!(benches);
