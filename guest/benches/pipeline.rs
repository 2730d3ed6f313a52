//! Outbound pipeline benchmarks (architecture §7, issue 9 §1–§2).
//!
//! Budgets, natively: the whole pipeline on 64 KiB of realistic agent text (with secrets and
//! trigger words in it) ≤ 0.8 ms; redaction of that text ≤ 0.15 ms; a text full of trigger
//! words that are not secrets no slower to redact than the secret-laden one; 1 MiB ≤ 16× the
//! 64 KiB time for every text and shape; 32 KiB of bare headings ≤ 1 ms.
//!
//! `cargo bench -p guest --bench pipeline` prints criterion's time and MB/s for the whole
//! pipeline per text, profile and size, per stage, and for the adversarial shapes, then a
//! summary table with every figure next to its budget. `-- summary` prints the table alone.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use guest::core::blocks::split;
use guest::core::chunk::chunk_rendered;
use guest::core::measure::Meter;
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
/// markup, lists, code fences, a table and the odd emoji. It holds no secret and no trigger
/// word: the floor the realistic texts below are compared with.
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

/// Secrets as agents print them, one kind per planted slot in rotation, each in its
/// platform's real format (lengths and alphabets as issued).
const PLANTED: [&str; 10] = [
    "ghp_8fK2mQ9xLp4nR7tW1yB3vC6zD0aE5hJ2kS9u",
    "sk-proj-Zk3vQ9xLp2mN8rT4wY6uB1cD5eF7gH9jK0lM2nP4qR6sT8uV_x-Aa1Bb2Cc3Dd4",
    "xoxb-2718281828-3141592653589-AbCdEfGhIjKlMnOpQrStUvWx",
    "AKIAQWERTYUIOPASDFGH",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "7123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ",
    "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB",
    "sk-ant-api03-Qw3rTy7uIo9pAs1dFg5hJk8lZx2cVb4nM6qW0eR-tY_uI3oP5aS7dF9gH1jK",
    "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
];

/// One planted slot: a line an agent prints with a secret in it, in the context agents
/// print it in (a curl header, an export, a JSON field, a log line); with `None`, the same
/// line holding a harmless value in its place.
fn slot(n: usize, secret: Option<&str>) -> String {
    let s = secret.unwrap_or("$TOKEN_FROM_THE_VAULT");
    match n % 5 {
        0 => format!(
            "$ curl -sS -H \"Authorization: Bearer {s}\" https://api.example.com/v1/deploys/{n}\n"
        ),
        1 => match secret {
            Some(s) => format!("$ export SERVICE_API_KEY={s}\n"),
            None => "$ export SERVICE_BASE_URL=https://api.example.com/v1\n".to_owned(),
        },
        2 => format!("{{\"id\": {n}, \"access_token\": \"{s}\", \"token_type\": \"Bearer\"}}\n"),
        3 => format!(
            "2024-05-01T12:00:{:02}Z INFO push using {s} to origin\n",
            n % 60
        ),
        _ => format!("config: token = {s}  # from .env\n"),
    }
}

/// Realistic agent output of about `size` bytes, as the issue measured it: curl lines with
/// `Authorization:` headers, exports, diffs with `@@` lines near URLs, test output, JSON with
/// tokens. Every fourth section plants a secret (about ten per 64 KiB, of every kind in
/// turn) when `secrets` holds; otherwise the slot holds a harmless value.
fn realistic_reply(size: usize, secrets: bool) -> String {
    let mut out = String::with_capacity(size + 2048);
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!(
            "### Deploy check {i}\n\nI ran the health check against the staging API and read the logs. \
             The endpoint at https://api.example.com/v1/health answers 200, and the token refresh \
             works after the change to `client.ts` (see the diff below).\n\n"
        ));
        out.push_str(&format!(
            "```console\n$ curl -sS -H \"Authorization: Bearer $API_TOKEN\" -H \"Accept: application/json\" \\\n    \"https://api.example.com/v1/items?page={i}&per_page=50\"\n\
             {{\"items\":[{{\"id\":{i},\"name\":\"alpha\",\"url\":\"https://api.example.com/v1/items/{i}\"}}],\"next\":\"/v1/items?page={}\"}}\n```\n\n",
            i + 1
        ));
        out.push_str(&format!(
            "```diff\ndiff --git a/src/client.ts b/src/client.ts\nindex 3f2a1b4..8c9d0e1 100644\n--- a/src/client.ts\n+++ b/src/client.ts\n\
             @@ -{i},7 +{i},9 @@ export class Client {{\n-  const base = \"http://localhost:8080\";\n\
             +  const base = process.env.BASE_URL ?? \"https://api.example.com\";\n\
             +  const headers = {{ Authorization: `Bearer ${{token}}` }};\n   return fetch(`${{base}}/v1/items`, {{ headers }});\n```\n\n"
        ));
        out.push_str(&format!(
            "```text\nrunning 42 tests\ntest parser::tests::nested_blocks_{i} ... ok\ntest client::tests::refresh_token ... ok\n\
             test result: ok. 42 passed; 0 failed; 0 ignored; finished in 0.{i:02}s\n```\n\n"
        ));
        if i % 4 == 0 {
            let n = i / 4;
            let secret = secrets.then(|| PLANTED[n % PLANTED.len()]);
            out.push_str("```\n");
            out.push_str(&slot(n, secret));
            out.push_str("```\n\n");
        }
        i += 1;
    }
    out
}

/// Prose full of the words secret rules look for ("token", "key", "Bearer", "Authorization",
/// `API_KEY`, `sk-`, `://`), none of them a secret: redaction must not slow down on it.
fn trigger_words(size: usize) -> String {
    let paragraph = "The Bearer token goes in the Authorization header and the API key in X-Api-Key; \
        rotate the secret key, the token and the password every month. A token bucket limits each \
        key to 20 requests, and the refresh token outlives the access token. Set API_KEY and \
        SECRET_KEY in your shell, never in the repo, and pass a Bearer token of your own. The \
        task-runner (see the desk-top notes, ghp and npm docs) reads https://docs.example.com/auth \
        and mailto:ops@example.com. Keys: `token`, `key`, `secret`, `ACCESS_KEY`, `Bearer`.\n\n";
    paragraph.repeat(size / paragraph.len() + 1)
}

/// The texts every figure is taken on, by name.
fn texts(size: usize) -> [(&'static str, String); 4] {
    [
        ("agent", agent_reply(size)),
        ("secrets", realistic_reply(size, true)),
        ("clean", realistic_reply(size, false)),
        ("triggers", trigger_words(size)),
    ]
}

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline");
    for (size_name, size) in SIZES {
        for (text_name, text) in texts(size) {
            group.throughput(Throughput::Bytes(text.len() as u64));
            for (name, caps) in profiles() {
                let id = BenchmarkId::new(format!("{text_name}-{name}"), size_name);
                group.bench_with_input(id, &text, |b, t| {
                    b.iter(|| prepare(black_box(t), &caps, u32::MAX))
                });
            }
        }
    }
    group.finish();
}

/// Redaction on its own, per text: the stage the issue found at 95 % of the pipeline.
fn redaction(c: &mut Criterion) {
    let mut group = c.benchmark_group("redact");
    for (size_name, size) in SIZES {
        for (text_name, text) in texts(size) {
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_with_input(BenchmarkId::new(text_name, size_name), &text, |b, t| {
                b.iter(|| redact(black_box(t)))
            });
        }
    }
    group.finish();
}

/// Stages per profile on the secret-laden text. Rendering happens inside the split's single
/// parse, so "split" is parse + structure alone (as for markdown) and "split+render" adds
/// rendering; the render stage costs the difference. "chunk" cuts the rendered pieces to the
/// platform's limit.
fn stages(c: &mut Criterion) {
    for (name, caps) in profiles() {
        let meter = Meter::for_source(caps.length_unit, caps.markup);
        let limit = caps.max_message_length as usize;
        let mut group = c.benchmark_group(format!("stage-{name}"));
        for (size_name, size) in SIZES {
            let text = realistic_reply(size, true);
            let redacted = redact(&text).text;
            let rendered: Vec<(String, usize)> = split(&redacted, limit, meter, caps.markup)
                .into_iter()
                .map(|p| (p.rendered.into_owned(), p.visible))
                .collect();
            group.throughput(Throughput::Bytes(text.len() as u64));
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

/// The shapes that made the original super-linear, about `size` bytes each.
fn shapes(size: usize) -> Vec<(&'static str, String)> {
    let fill = |unit: &str| unit.repeat(size / unit.len() + 1);
    let mut pem = String::new();
    while pem.len() < size {
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
        ("long-line", "x".repeat(size)),
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
    for (name, text) in &shapes(64 << 10) {
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
        pulldown_cmark::Parser::new_ext(text, guest::core::dialect::options()).into_offset_iter()
    {
        black_box(&item);
    }
}

/// Timing jobs run in interleaved rounds, each keeping its fastest time. This machine shows up
/// to half its CPU time stolen in phases lasting seconds: interference only ever adds time,
/// and interleaving makes every job see the same phases, so the figures compare fairly.
/// Criterion's groups above report the full distribution.
#[derive(Default)]
struct Rounds<'a> {
    jobs: Vec<(Box<dyn FnMut() + 'a>, u32)>,
}

impl<'a> Rounds<'a> {
    /// Adds a job; returns its index into [`Rounds::run`]'s result. Quick jobs are repeated
    /// within a sample so each sample lasts about a millisecond, well above timer resolution.
    fn add(&mut self, mut f: impl FnMut() + 'a) -> usize {
        let start = Instant::now();
        f();
        let once = start.elapsed().max(Duration::from_nanos(100));
        let reps = (Duration::from_millis(1).as_nanos() / once.as_nanos()).clamp(1, 10_000);
        self.jobs.push((Box::new(f), reps as u32));
        self.jobs.len() - 1
    }

    /// Fastest time per run of each job over rounds filling about `budget` (at least 5).
    fn run(mut self, budget: Duration) -> Vec<Duration> {
        let mut best = vec![Duration::MAX; self.jobs.len()];
        let start = Instant::now();
        let mut rounds = 0;
        while rounds < 5 || (start.elapsed() < budget && rounds < 1000) {
            for ((job, reps), best) in self.jobs.iter_mut().zip(&mut best) {
                let t = Instant::now();
                for _ in 0..*reps {
                    job();
                }
                *best = (*best).min(t.elapsed() / *reps);
            }
            rounds += 1;
        }
        best
    }
}

fn mbps(t: Duration, n: usize) -> f64 {
    n as f64 / t.as_secs_f64() / 1e6
}

/// `ok` when `figure` is within `budget`, else how far over: the summary is read for this.
fn verdict(figure: f64, budget: f64) -> String {
    if figure <= budget {
        "ok".to_owned()
    } else {
        format!("OVER x{:.1}", figure / budget)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One table at the end, every figure beside its budget: the whole pipeline per text, profile
/// and size with the 1 MiB / 64 KiB ratio; redaction alone per text; the stages on the
/// secret-laden text; each adversarial shape at 64 KiB and 1 MiB; bare headings at 32 KiB.
fn summary(_: &mut Criterion) {
    const PIPELINE_64K_MS: f64 = 0.8;
    const REDACT_64K_MS: f64 = 0.15;
    const RATIO: f64 = 16.0;
    const HEADINGS_32K_MS: f64 = 1.0;
    let all_caps = profiles();
    let by_size: Vec<[(&str, String); 4]> = SIZES.iter().map(|(_, s)| texts(*s)).collect();
    let secrets64 = realistic_reply(64 << 10, true);
    let redacted64 = redact(&secrets64).text;
    let rendered64: Vec<Vec<(String, usize)>> = all_caps
        .iter()
        .map(|(_, caps)| {
            let meter = Meter::for_source(caps.length_unit, caps.markup);
            split(
                &redacted64,
                caps.max_message_length as usize,
                meter,
                caps.markup,
            )
            .into_iter()
            .map(|p| (p.rendered.into_owned(), p.visible))
            .collect()
        })
        .collect();
    let shapes64 = shapes(64 << 10);
    let shapes1m = shapes(1 << 20);
    let headings32 = shapes(32 << 10).swap_remove(0).1;

    let mut rounds = Rounds::default();
    // [text][profile][size]
    let pipeline_jobs: Vec<Vec<Vec<usize>>> = (0..4)
        .map(|t| {
            all_caps
                .iter()
                .map(|(_, caps)| {
                    by_size
                        .iter()
                        .map(|texts| {
                            let text = &texts[t].1;
                            rounds.add(move || drop(black_box(prepare(text, caps, u32::MAX))))
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    // [text][size]
    let redact_jobs: Vec<Vec<usize>> = (0..4)
        .map(|t| {
            by_size
                .iter()
                .map(|texts| {
                    let text = &texts[t].1;
                    rounds.add(move || drop(black_box(redact(text))))
                })
                .collect()
        })
        .collect();
    // [profile] -> [split, split+render, chunk]
    let stage_jobs: Vec<[usize; 3]> = all_caps
        .iter()
        .zip(&rendered64)
        .map(|((_, caps), rendered)| {
            let meter = Meter::for_source(caps.length_unit, caps.markup);
            let limit = caps.max_message_length as usize;
            let redacted = &redacted64;
            [
                rounds
                    .add(move || drop(black_box(split(redacted, limit, meter, Markup::Markdown)))),
                rounds.add(move || drop(black_box(split(redacted, limit, meter, caps.markup)))),
                // Includes copying the pieces, which chunking takes by value.
                rounds.add(move || {
                    for (r, v) in rendered.clone() {
                        drop(black_box(chunk_rendered(
                            r,
                            v,
                            limit,
                            caps.length_unit,
                            caps.markup,
                        )));
                    }
                }),
            ]
        })
        .collect();
    let floor = rounds.add(|| parse_only(&secrets64));
    // [shape] -> (parser alone at 64 KiB, at 1 MiB): the floor the shape's ratio is read against.
    let shape_floors: Vec<(usize, usize)> = shapes64
        .iter()
        .zip(&shapes1m)
        .map(|((_, small), (_, big))| {
            (
                rounds.add(move || parse_only(small)),
                rounds.add(move || parse_only(big)),
            )
        })
        .collect();
    // [shape][profile] -> (64 KiB, 1 MiB)
    let shape_jobs: Vec<Vec<(usize, usize)>> = shapes64
        .iter()
        .zip(&shapes1m)
        .map(|((_, small), (_, big))| {
            all_caps
                .iter()
                .map(|(_, caps)| {
                    (
                        rounds.add(move || drop(black_box(prepare(small, caps, u32::MAX)))),
                        rounds.add(move || drop(black_box(prepare(big, caps, u32::MAX)))),
                    )
                })
                .collect()
        })
        .collect();
    let heading_jobs: Vec<usize> = all_caps
        .iter()
        .map(|(_, caps)| {
            let text = &headings32;
            rounds.add(move || drop(black_box(prepare(text, caps, u32::MAX))))
        })
        .collect();
    let t = rounds.run(Duration::from_secs(8));

    println!("\nsummary (fastest of interleaved rounds; each figure beside its budget)");
    println!(
        "whole pipeline: 64KiB ≤ {PIPELINE_64K_MS} ms, 1MiB ≤ {RATIO}x 64KiB\n  {:9} {:9} {:>10} {:>10} {:>10} {:>8} {:>12} {:>10}",
        "text", "profile", "4KiB", "64KiB", "1MiB", "MB/s", "64KiB", "ratio"
    );
    for (t_i, per_profile) in pipeline_jobs.iter().enumerate() {
        for ((profile, _), jobs) in all_caps.iter().zip(per_profile) {
            let [small, mid, big] = [jobs[0], jobs[1], jobs[2]].map(|j| t[j]);
            let ratio = big.as_secs_f64() / mid.as_secs_f64();
            println!(
                "  {:9} {:9} {:>10.3?} {:>10.3?} {:>10.3?} {:>8.0} {:>12} {:>5.1} {}",
                by_size[1][t_i].0,
                profile,
                small,
                mid,
                big,
                mbps(mid, by_size[1][t_i].1.len()),
                verdict(ms(mid), PIPELINE_64K_MS),
                ratio,
                verdict(ratio, RATIO),
            );
        }
    }
    let secret_redact = t[redact_jobs[1][1]];
    println!(
        "redaction alone: 64KiB with secrets ≤ {REDACT_64K_MS} ms; trigger words ≤ the secret-laden time; 1MiB ≤ {RATIO}x"
    );
    for (t_i, jobs) in redact_jobs.iter().enumerate() {
        let [small, mid, big] = [jobs[0], jobs[1], jobs[2]].map(|j| t[j]);
        let name = by_size[1][t_i].0;
        let budget = match name {
            "secrets" => verdict(ms(mid), REDACT_64K_MS),
            "triggers" => verdict(ms(mid), ms(secret_redact)),
            _ => "-".to_owned(),
        };
        let ratio = big.as_secs_f64() / mid.as_secs_f64();
        println!(
            "  {name:9} 4KiB {small:>10.3?}  64KiB {mid:>10.3?} {:>6.0} MB/s {budget:>10}  1MiB {big:>10.3?}  ratio {ratio:>5.1} {}",
            mbps(mid, by_size[1][t_i].1.len()),
            verdict(ratio, RATIO),
        );
    }
    println!("stages on the 64KiB secret-laden text (redaction above)");
    for ((profile, _), [spl, spl_render, chk]) in all_caps.iter().zip(&stage_jobs) {
        println!(
            "  {profile:9} split {:>10.3?}  render {:>10.3?}  chunk {:>10.3?}",
            t[*spl],
            t[*spl_render].saturating_sub(t[*spl]),
            t[*chk],
        );
    }
    println!("  parser floor: pulldown-cmark alone {:>10.3?}", t[floor]);
    println!(
        "adversarial shapes through the whole pipeline: 64KiB / 1MiB and ratio, 1MiB ≤ {RATIO}x 64KiB; then pulldown-cmark alone"
    );
    for (((shape, _), per_profile), (floor64, floor1m)) in
        shapes64.iter().zip(&shape_jobs).zip(&shape_floors)
    {
        let cells: Vec<String> = all_caps
            .iter()
            .zip(per_profile)
            .map(|((profile, _), (small, big))| {
                let ratio = t[*big].as_secs_f64() / t[*small].as_secs_f64();
                format!(
                    "{profile} {:>9.3?} / {:>9.3?} x{ratio:<5.1} {:6}",
                    t[*small],
                    t[*big],
                    verdict(ratio, RATIO)
                )
            })
            .collect();
        let floor_ratio = t[*floor1m].as_secs_f64() / t[*floor64].as_secs_f64();
        println!(
            "  {shape:16} {} || parser {:>9.3?} / {:>9.3?} x{floor_ratio:.1}",
            cells.join(" | "),
            t[*floor64],
            t[*floor1m],
        );
    }
    let cells: Vec<String> = all_caps
        .iter()
        .zip(&heading_jobs)
        .map(|((profile, _), j)| {
            format!(
                "{profile} {:>9.3?} {}",
                t[*j],
                verdict(ms(t[*j]), HEADINGS_32K_MS)
            )
        })
        .collect();
    println!(
        "  bare headings 32KiB ≤ {HEADINGS_32K_MS} ms: {}",
        cells.join(" | ")
    );
}

criterion_group!(benches, pipeline, redaction, stages, adversarial, summary);
criterion_main!(benches);
