//! Property tests for the outbound pipeline over generated agent-like markdown, for each
//! transport profile and for random limits (I3, I4, I5, I22, I26–I29).

use guest::core::blocks::split;
use guest::core::measure::{Meter, measure_rendered};
use guest::core::outbound::prepare;
use guest::core::redact::redact;
use guest::model::{Capabilities, LengthUnit, Markup};
use proptest::prelude::*;
use pulldown_cmark::{Event, Options, Parser, Tag};

/// Secrets the generator plants in prose and in code; none may reach a message.
const SECRETS: [&str; 8] = [
    "sk-ant-api03-Zk3vQ9xLp2mN8rT4wY6uB1",
    "ghp_Q1w2E3r4T5y6U7i8O9p0AsDfGh",
    "xapp-1-A05B7C9D1E3-92837465abcdef",
    "AKIAQWERTYUIOPASDFGH",
    "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4",
    "https://deploy:Sup3rS3cret@git.example.com/repo.git",
    "/bot7123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAw1\nq9zX0+/abc=\n-----END RSA PRIVATE KEY-----",
];

/// The part of each planted secret that must never be visible.
const SECRET_CORES: [&str; 8] = [
    "Zk3vQ9xLp2mN8rT4wY6uB1",
    "Q1w2E3r4T5y6U7i8O9p0AsDfGh",
    "92837465abcdef",
    "QWERTYUIOPASDFGH",
    "SflKxwRJSMeKKF2QT4",
    "Sup3rS3cret",
    "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
    "MIIEowIBAAKCAQEAw1",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z]{1,9}",
        1 => Just("**bold**".to_owned()),
        1 => Just("_it_".to_owned()),
        1 => Just("`x < y`".to_owned()),
        1 => Just("[link](https://example.com/a?b=1&c=2)".to_owned()),
        1 => Just("a&b<c>\"d\"".to_owned()),
        1 => Just("👨\u{200d}👩\u{200d}👧".to_owned()),
        1 => Just("🇩🇪🇫🇷".to_owned()),
        1 => Just("日本語".to_owned()),
        1 => Just("é".to_owned()),
    ]
}

fn line() -> impl Strategy<Value = String> {
    prop::collection::vec(word(), 1..14).prop_map(|w| w.join(" "))
}

fn code_line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z_ (){};=<>&\"*#]{0,40}",
        1 => Just("# not a heading".to_owned()),
        1 => Just("**not bold**".to_owned()),
        1 => "[a-z]{60,400}",
    ]
}

/// One markdown element, lines joined with `\n` (CRLF is applied to the whole document).
fn element() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (1usize..=6, "[A-Za-z ]{1,24}").prop_map(|(n, t)| format!("{} {t}\n", "#".repeat(n))),
        1 => "[A-Za-z]{1,20}".prop_map(|t| format!("{t}\n=====\n")),
        6 => prop::collection::vec(line(), 1..5).prop_map(|l| l.join("\n") + "\n"),
        2 => prop::collection::vec(line(), 1..6)
            .prop_map(|l| l.iter().map(|x| format!("- {x}\n")).collect()),
        1 => prop::collection::vec(line(), 1..4)
            .prop_map(|l| l.iter().enumerate().map(|(i, x)| format!("{}. {x}\n  - nested {x}\n", i + 1)).collect()),
        1 => line().prop_map(|l| format!("> {l}\n> > {l}\n")),
        2 => ("[`~]", 3usize..6, "(rust|py|)", prop::collection::vec(code_line(), 0..30), any::<bool>())
            .prop_map(|(c, n, lang, body, closed)| {
                let marker = c.repeat(n);
                let mut s = format!("{marker}{lang}\n");
                for l in body {
                    s.push_str(&l);
                    s.push('\n');
                }
                if closed {
                    s.push_str(&marker);
                    s.push('\n');
                }
                s
            }),
        1 => "[a-zA-Z0-9]{100,3000}".prop_map(|s| s + "\n"),
        1 => Just("| a | b |\n|---|---|\n| 1 | 2 |\n".to_owned()),
        1 => (0usize..SECRETS.len()).prop_map(|i| format!("the key is {} ok\n", SECRETS[i])),
        1 => (0usize..SECRETS.len()).prop_map(|i| format!("```\nexport KEY={}\n```\n", SECRETS[i])),
    ]
}

fn document() -> impl Strategy<Value = String> {
    (
        prop::collection::vec((element(), 0usize..3), 1..40),
        any::<bool>(),
    )
        .prop_map(|(els, crlf)| {
            let mut doc = String::new();
            for (el, blanks) in els {
                doc.push_str(&el);
                doc.push_str(&"\n".repeat(blanks));
            }
            if crlf { doc.replace('\n', "\r\n") } else { doc }
        })
}

fn caps(markup: Markup, unit: LengthUnit, limit: u32) -> Capabilities {
    Capabilities::text_only(markup, unit, limit)
}

/// Lines that are only a fence marker (with optional info), dropped when comparing a fence
/// repair with its source: repair may only repeat these.
fn without_fence_lines_and_breaks(s: &str) -> String {
    s.split('\n')
        .filter(|l| {
            let t = l.trim();
            !(t.starts_with("```") || t.starts_with("~~~"))
        })
        .collect::<String>()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

/// The heading owning the body at the end of `msg`, if the message ends with one.
/// The raw text of the last top-level block of `msg` when that block is a heading.
fn trailing_heading(msg: &str) -> Option<&str> {
    let mut last = None;
    let mut depth = 0;
    for (event, range) in Parser::new_ext(msg, guest::core::dialect::options()).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    last = matches!(tag, Tag::Heading { .. }).then(|| &msg[range]);
                }
                depth += 1;
            }
            Event::End(_) => depth -= 1,
            _ if depth == 0 => last = None,
            _ => {}
        }
    }
    last
}

/// `true` when `msg` ends with a heading that is a heading in the source too. A piece cut out
/// of a long paragraph can look like a setext heading on its own (lazy continuation lines
/// inside a quote, for one), and that is no heading left without its body.
fn ends_with_heading(msg: &str, source_headings: &[&str]) -> bool {
    trailing_heading(msg)
        .is_some_and(|h| source_headings.iter().any(|s| s.trim_end() == h.trim_end()))
}

/// Raw text of every heading in `doc`.
fn headings(doc: &str) -> Vec<&str> {
    Parser::new_ext(doc, guest::core::dialect::options())
        .into_offset_iter()
        .filter(|(e, _)| matches!(e, Event::Start(Tag::Heading { .. })))
        .map(|(_, r)| &doc[r])
        .collect()
}

const ALLOWED_TAGS: [&str; 8] = ["b", "i", "s", "u", "a", "code", "pre", "blockquote"];

/// Telegram accepts the message: only allowed tags, balanced and nested; every `<` and `&`
/// begins a tag or one of the four named entities.
fn telegram_well_formed(msg: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = msg;
    while let Some(i) = rest.find(['<', '&']) {
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix('&') {
            let ok = ["lt;", "gt;", "amp;", "quot;"]
                .iter()
                .any(|e| after.starts_with(e));
            if !ok {
                return Err(format!(
                    "bare & before {:?}",
                    after.chars().take(20).collect::<String>()
                ));
            }
            rest = after;
            continue;
        }
        let end = tail.find('>').ok_or("unterminated tag")?;
        let inner = &tail[1..end];
        if let Some(name) = inner.strip_prefix('/') {
            if stack.pop() != Some(name) {
                return Err(format!("unbalanced </{name}>"));
            }
        } else {
            let name = inner.split(' ').next().unwrap_or_default();
            if !ALLOWED_TAGS.contains(&name) {
                return Err(format!("tag {name:?} not allowed"));
            }
            stack.push(name);
        }
        rest = &tail[end + 1..];
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(format!("unclosed {stack:?}"))
    }
}

fn strip_edge_tags(mut s: &str) -> &str {
    while s.ends_with('>') {
        match s.rfind('<') {
            Some(i) => s = &s[..i],
            None => break,
        }
    }
    while s.starts_with('<') {
        match s.find('>') {
            Some(i) => s = &s[i + 1..],
            None => break,
        }
    }
    s
}

fn check(doc: &str, markup: Markup, unit: LengthUnit, limit: u32) -> Result<(), TestCaseError> {
    let p = prepare(doc, &caps(markup, unit, limit), u32::MAX);
    let limit = limit as usize;
    for m in &p.messages {
        let len = measure_rendered(m, unit, markup);
        prop_assert!(len <= limit, "{len} > {limit} in {:?}", m);
        for core in SECRET_CORES {
            prop_assert!(!m.contains(core), "secret {core} leaked in {:?}", m);
        }
        if markup == Markup::Html {
            let verdict = telegram_well_formed(m);
            prop_assert!(verdict.is_ok(), "{:?}: {:?}", verdict, m);
        }
    }
    for pair in p.messages.windows(2) {
        let (a, b) = (strip_edge_tags(&pair[0]), strip_edge_tags(&pair[1]));
        prop_assert!(
            !(a.ends_with('\r') && b.starts_with('\n')),
            "CRLF split: {:?} | {:?}",
            a,
            b
        );
    }
    if markup == Markup::Markdown {
        let source = redact(doc).text;
        let joined = p.messages.concat();
        let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        if joined != source && squeeze(&joined) != squeeze(&source) {
            // Beyond dropped blank pieces, only a fence repair may change the text: it adds
            // fence lines. Messages are joined on line breaks for this comparison, so a
            // dropped blank piece cannot glue a fence line onto the line before it.
            prop_assert_eq!(
                without_fence_lines_and_breaks(&p.messages.join("\n")),
                without_fence_lines_and_breaks(&source)
            );
        }
        if limit >= 300 && longest_heading(&source) < limit / 4 {
            let source_headings = headings(&source);
            for pair in p.messages.windows(2) {
                let owned = ends_with_heading(&pair[0], &source_headings)
                    && !ends_with_heading_run_start(&pair[1]);
                prop_assert!(
                    !owned,
                    "heading left without its body: {:?} | {:?}",
                    pair[0],
                    pair[1]
                );
            }
        }
    }
    Ok(())
}

/// Bytes of the longest heading: a heading near the limit cannot travel with its body, and a
/// setext heading may be a whole long paragraph.
fn longest_heading(doc: &str) -> usize {
    Parser::new_ext(doc, Options::empty())
        .into_offset_iter()
        .filter(|(e, _)| matches!(e, Event::Start(Tag::Heading { .. })))
        .map(|(_, r)| r.len())
        .max()
        .unwrap_or(0)
}

/// `true` when `msg` begins with a heading (so a heading ending the previous message owns none).
fn ends_with_heading_run_start(msg: &str) -> bool {
    Parser::new_ext(msg, Options::empty())
        .next()
        .is_none_or(|e| matches!(e, Event::Start(Tag::Heading { .. })))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn discord_profile(doc in document()) {
        check(&doc, Markup::Markdown, LengthUnit::Utf16, 2000)?;
    }

    #[test]
    fn telegram_profile(doc in document()) {
        check(&doc, Markup::Html, LengthUnit::Utf16, 4096)?;
    }

    #[test]
    fn slack_profile(doc in document()) {
        check(&doc, Markup::Mrkdwn, LengthUnit::Chars, 4000)?;
    }

    #[test]
    fn fake_profile(doc in document()) {
        check(&doc, Markup::Markdown, LengthUnit::Chars, 4000)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_limits(
        doc in document(),
        markup in prop_oneof![Just(Markup::Markdown), Just(Markup::Html), Just(Markup::Mrkdwn), Just(Markup::Plain)],
        unit in prop_oneof![Just(LengthUnit::Chars), Just(LengthUnit::Utf16), Just(LengthUnit::Bytes)],
        limit in 60u32..1500,
    ) {
        check(&doc, markup, unit, limit)?;
    }

    /// The length the renderer counts while writing is the one chunking would measure: a
    /// wrong count would let an over-long message through or split one that fits.
    #[test]
    fn rendered_length_is_counted_while_writing(
        doc in document(),
        markup in prop_oneof![Just(Markup::Markdown), Just(Markup::Html), Just(Markup::Mrkdwn), Just(Markup::Plain)],
        unit in prop_oneof![Just(LengthUnit::Chars), Just(LengthUnit::Utf16), Just(LengthUnit::Bytes)],
        limit in 60usize..3000,
    ) {
        let doc = format!(
            "{doc}\n[rel](docs/a&b.md) ![i](x \"t\") [e]() \\\n- [x] done\n\n---\n\n> q &\n> > r\n\n```rust\n<&>\n```\n"
        );
        for piece in split(&doc, limit, Meter::for_source(unit, markup), markup) {
            prop_assert_eq!(
                piece.visible,
                measure_rendered(&piece.rendered, unit, markup),
                "{:?}",
                piece.rendered
            );
        }
    }

    #[test]
    fn redaction_is_idempotent(doc in document()) {
        let once = redact(&doc);
        let twice = redact(&once.text);
        prop_assert_eq!(&twice.text, &once.text);
        prop_assert!(twice.rules.is_empty(), "{:?}", twice.rules);
    }
}

/// Ordinary prose of `n` times the limit needs at most `n + 1` messages on each platform.
#[test]
fn prose_is_not_split_wastefully() {
    let sentence = "The build finished and all tests passed after the refactor of the parser. ";
    let profiles = [
        (Markup::Markdown, LengthUnit::Utf16, 2000u32),
        (Markup::Html, LengthUnit::Utf16, 4096),
        (Markup::Mrkdwn, LengthUnit::Chars, 4000),
        (Markup::Markdown, LengthUnit::Chars, 4000),
    ];
    for (markup, unit, limit) in profiles {
        for n in 1..=6usize {
            let mut text = String::new();
            let mut para = 0;
            while text.len() < n * limit as usize - 200 {
                text.push_str(sentence);
                para += 1;
                if para % 6 == 0 {
                    text.push_str("\n\n");
                }
            }
            let p = prepare(&text, &caps(markup, unit, limit), u32::MAX);
            assert!(
                p.messages.len() <= n + 1,
                "{markup:?} n={n}: {} messages",
                p.messages.len()
            );
        }
    }
}
