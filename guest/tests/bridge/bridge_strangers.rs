//! Scenarios: a flood of unpaired senders stays cheap and quiet
//! (docs/decisions.md#decision-18-unpaired-senders-are-bounded).
//!
//! Before: 10,000 distinct strangers gave 10,001 pending codes, 10,000 terminal lines and an
//! 829 KB state document rewritten per message.

use guest::core::strangers::{
    CODES_SHOWN_PER_WINDOW, MAX_PENDING, MAX_PENDING_PER_TRANSPORT, NOTICE_WINDOW_MS,
};
use guest::model::Level;
use proptest::prelude::*;

use crate::support::{FakeHost, default_bridge, dm, pair};

fn pending_count(host: &FakeHost, transport: &str) -> usize {
    let doc: serde_json::Value =
        serde_json::from_str(host.saved.last().map_or("{}", String::as_str)).expect("JSON");
    doc["pending"].as_object().map_or(0, |p| {
        p.keys()
            .filter(|k| k.starts_with(&format!("{transport}:")))
            .count()
    })
}

#[test]
fn ten_thousand_strangers_leave_a_bounded_state_and_a_quiet_terminal() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    for i in 0..10_000 {
        host.now += 10;
        bridge.on_envelope(
            &mut host,
            dm("tg", &format!("c{i}"), &format!("u{i}"), "hi"),
        );
    }
    // 100 s of flood: two notice windows at most.
    let code_lines = host
        .note_texts()
        .iter()
        .filter(|n| n.starts_with("Messenger pairing code"))
        .count();
    assert!(
        code_lines <= 2 * CODES_SHOWN_PER_WINDOW as usize,
        "{code_lines} code lines"
    );
    assert!(
        host.notes.len() <= 2 * CODES_SHOWN_PER_WINDOW as usize + 2,
        "{:?}",
        host.notes.len()
    );
    assert!(pending_count(&host, "tg") <= MAX_PENDING_PER_TRANSPORT);
    // Saves follow the codes actually made (rate-limited), not the messages.
    assert!(host.saved.len() <= 200, "{} saves", host.saved.len());
    let size = host.saved.last().map_or(0, String::len);
    assert!(size < 8 * 1024, "state document {size} bytes");
    // Replies too are bounded by the rate limit, not by the flood.
    assert!(host.sent.len() <= 200, "{} replies", host.sent.len());
}

#[test]
fn a_chatty_stranger_does_not_rewrite_the_state_per_message() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
    assert_eq!(host.saved.len(), 1);
    for text in ["anyone?", "hello??", "42", "meeting at 3pm"] {
        host.now += 1_000;
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", text));
    }
    assert_eq!(host.saved.len(), 1, "an unchanged document was saved again");
    // A wrong attempt changes the document (its attempt count): that one is saved.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "000000"));
    assert_eq!(host.saved.len(), 2);
}

#[test]
fn the_flood_is_summed_up_in_one_line_when_the_minute_is_over() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    let start = host.now;
    for i in 0..200 {
        bridge.on_envelope(
            &mut host,
            dm("tg", &format!("c{i}"), &format!("u{i}"), "hi"),
        );
    }
    assert_eq!(host.notes.len(), CODES_SHOWN_PER_WINDOW as usize);
    assert!(
        host.ticks.contains(&(start + NOTICE_WINDOW_MS)),
        "{:?}",
        host.ticks
    );
    host.now = start + NOTICE_WINDOW_MS;
    bridge.tick(&mut host);
    let (level, summary) = host
        .notes
        .last()
        .cloned()
        .unwrap_or((Level::Info, String::new()));
    assert_eq!(level, Level::Warning);
    assert_eq!(
        summary,
        "Unpaired senders in the last minute: 13 more pairing code(s) were made and not shown \
         here (run /connect to see the live ones); 170 message(s) were ignored: more than 30 a \
         minute on one transport or 60 in all; 14 chat(s) were told to try later: 32 codes (or \
         16 on one transport) were already waiting. If you expect no one, check who can write \
         to the bot."
    );
    bridge.tick(&mut host);
    assert_eq!(
        host.notes.len(),
        CODES_SHOWN_PER_WINDOW as usize + 1,
        "said twice"
    );
}

#[test]
fn a_person_pairs_once_the_flood_has_passed_and_paired_people_never_notice_it() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "dc", "home", "me");
    for i in 0..500 {
        bridge.on_envelope(
            &mut host,
            dm("tg", &format!("c{i}"), &format!("u{i}"), "hi"),
        );
    }
    // The paired person is not a stranger: their prompt goes through during the flood.
    bridge.on_envelope(&mut host, dm("dc", "home", "me", "run the tests"));
    assert_eq!(host.prompts.len(), 1);

    // Later (the codes expired): a new person on the flooded transport pairs as usual.
    host.now += 10 * 60_000;
    host.clear_records();
    host.script_code("246810");
    bridge.on_envelope(&mut host, dm("tg", "new", "friend", "hello"));
    bridge.on_envelope(&mut host, dm("tg", "new", "friend", "246810"));
    assert!(
        host.note_texts().contains(&"Paired tg:friend".to_string()),
        "{:?}",
        host.notes
    );
}

#[test]
fn a_full_table_tells_the_new_chat_to_try_later() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    for i in 0..MAX_PENDING_PER_TRANSPORT {
        host.now += 2_000;
        bridge.on_envelope(
            &mut host,
            dm("tg", &format!("c{i}"), &format!("u{i}"), "hi"),
        );
    }
    host.now += 2_000;
    bridge.on_envelope(&mut host, dm("tg", "late", "u-late", "hi"));
    assert_eq!(
        host.texts_to("tg", "late"),
        vec!["This pi session has too many pairing requests waiting. Try again in a few minutes."]
    );
    assert_eq!(pending_count(&host, "tg"), MAX_PENDING_PER_TRANSPORT);
    // Another transport still has room.
    bridge.on_envelope(&mut host, dm("dc", "c", "u", "hi"));
    assert_eq!(pending_count(&host, "dc"), 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Fault test over any mix of strangers, transports, texts and timing: live codes never
    /// exceed the caps, no save repeats the document before it, and the terminal shows at
    /// most a few codes per window plus one summary.
    #[test]
    fn strangers_stay_bounded_whatever_they_send(
        messages in prop::collection::vec(
            (
                prop::sample::select(&["tg", "dc"][..]),
                0u32..400,
                prop_oneof![Just("hi".to_string()), "[0-9]{6}", "[a-z ]{0,12}"],
                0u64..3_000,
            ),
            1..400,
        ),
    ) {
        let mut host = FakeHost::new();
        let mut bridge = default_bridge(&mut host);
        let mut code_lines_at: Vec<u64> = Vec::new();
        for (transport, who, text, dt) in messages {
            host.now += dt;
            let before = host.notes.len();
            bridge.on_envelope(&mut host, dm(transport, &format!("c{who}"), &format!("u{who}"), &text));
            bridge.tick(&mut host);
            for (_, note) in &host.notes[before..] {
                if note.starts_with("Messenger pairing code") {
                    code_lines_at.push(host.now);
                }
            }
        }
        // Every saved document, not only the last, respects the caps.
        for doc in &host.saved {
            let doc: serde_json::Value = serde_json::from_str(doc).expect("JSON");
            let keys: Vec<&String> = doc["pending"].as_object().map(|p| p.keys().collect()).unwrap_or_default();
            let on = |t: &str| keys.iter().filter(|k| k.starts_with(&format!("{t}:"))).count();
            prop_assert!(on("tg") <= MAX_PENDING_PER_TRANSPORT && on("dc") <= MAX_PENDING_PER_TRANSPORT);
            prop_assert!(keys.len() <= MAX_PENDING);
        }
        for pair in host.saved.windows(2) {
            prop_assert_ne!(&pair[0], &pair[1], "an unchanged document was saved");
        }
        // In any stretch shorter than a window, at most twice the per-window quota (the
        // stretch can straddle two windows).
        for (i, at) in code_lines_at.iter().enumerate() {
            let within = code_lines_at[i..].iter().take_while(|t| **t < at + NOTICE_WINDOW_MS).count();
            prop_assert!(within <= 2 * CODES_SHOWN_PER_WINDOW as usize, "{within} code lines within a minute");
        }
    }
}
