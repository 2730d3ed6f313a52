//! Scenarios: the failure budget for pairing codes (docs/security.md#pairing), tried the way a
//! guesser would: many identities, two transports, thousands of guesses, and the real user pairing
//! in the middle of it.

use guest::bridge::Bridge;

use crate::support::{FakeHost, default_bridge, dm, started};

const MISMATCH: &str = "That code did not match.";
const LOCKED: &str = "Too many wrong attempts.";
const CLOSED: &str = "Pairing is closed after too many wrong codes. The person at the local pi terminal can run /connect pair for a fresh code.";

/// Replies that can only follow a judged wrong code.
fn judged(host: &FakeHost) -> usize {
    host.all_send_texts()
        .iter()
        .filter(|t| t.starts_with(MISMATCH) || t.starts_with(LOCKED))
        .count()
}

fn closed_notices(host: &FakeHost) -> usize {
    host.note_texts()
        .iter()
        .filter(|n| n.starts_with("Pairing is closed: "))
        .count()
}

/// `count` wrong guesses, each from a fresh conversation and identity after its first
/// message made it a code, alternating `tg` and `dc`. The clock moves on 1 s per message,
/// so the strangers' rate limit (30 a minute per transport) lets every one through: only
/// the failure budget stands between the guesser and the codes.
fn guess_wrong(bridge: &mut Bridge, host: &mut FakeHost, tag: &str, count: usize) {
    for i in 0..count {
        let transport = if i % 2 == 0 { "tg" } else { "dc" };
        let chat = format!("{tag}{}", i % 500);
        let user = format!("{tag}u{}", i % 500);
        host.now += 1_000;
        bridge.on_envelope(host, dm(transport, &chat, &user, "hello"));
        host.now += 1_000;
        // Codes are drawn from zeros unless scripted: 000000. Every guess differs from it.
        let guess = format!("{:06}", (i % 999_999) + 1);
        bridge.on_envelope(host, dm(transport, &chat, &user, &guess));
    }
}

#[test]
fn ten_thousand_wrong_guesses_from_many_identities_judge_at_most_the_budget() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);

    guess_wrong(&mut bridge, &mut host, "x", 10_000);

    assert!(
        !host.note_texts().iter().any(|n| n.starts_with("Paired ")),
        "a guess paired"
    );
    assert!(host.prompts.is_empty());
    assert_eq!(judged(&host), 10, "wrong codes judged past the budget");
    // The terminal hears of it once, not per guess.
    assert_eq!(closed_notices(&host), 1, "{:?}", host.note_texts());
    assert!(
        host.all_send_texts()
            .iter()
            .filter(|t| *t == CLOSED)
            .count()
            > 9_000,
        "the rest were not told pairing is closed"
    );

    // Not judged means not compared: the code that is live for a chat does not pair it
    // while closed (no oracle), even hours later.
    host.now += 3 * 3_600_000;
    bridge.on_envelope(&mut host, dm("tg", "x0", "xu0", "000000"));
    assert_eq!(
        host.all_send_texts().last().map(String::as_str),
        Some(CLOSED)
    );
    assert!(!host.note_texts().iter().any(|n| n.starts_with("Paired ")));

    let doctor = bridge.on_local_command(&mut host, "doctor").text;
    assert!(
        doctor.contains("- pairing: CLOSED ")
            && doctor.contains("after 10 wrong codes in an hour; "),
        "{doctor}"
    );
}

#[test]
fn the_real_user_pairs_with_a_terminal_code_even_when_strangers_close_pairing_again() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    guess_wrong(&mut bridge, &mut host, "x", 12);
    assert_eq!(closed_notices(&host), 1);

    // The real user writes while closed: told so, nothing judged.
    host.now += 1_000;
    bridge.on_envelope(&mut host, dm("tg", "me", "owner", "hi"));
    assert_eq!(host.texts_to("tg", "me"), vec![CLOSED]);

    // At the terminal the operator asks for a code: pairing opens, and every chat waiting,
    // the one that wrote while closed included, gets a terminal code (scripted: 111111).
    host.clear_records();
    for _ in 0..40 {
        host.script_code("111111");
    }
    let reply = bridge.on_local_command(&mut host, "pair").text;
    assert!(
        reply.starts_with(
            "Pairing was closed after too many wrong codes; it is open again with fresh codes, which work at once.\n"
        ),
        "{reply}"
    );
    assert!(reply.contains("- tg:me: 111 111"), "{reply}");

    // Strangers close it again at once, from fresh chats.
    guess_wrong(&mut bridge, &mut host, "y", 12);
    assert_eq!(closed_notices(&host), 1, "{:?}", host.note_texts());

    // The real user's terminal code still works.
    host.now += 1_000;
    bridge.on_envelope(&mut host, dm("tg", "me", "owner", "111 111"));
    assert!(
        host.note_texts().contains(&"Paired tg:owner".to_string()),
        "{:?}",
        host.note_texts()
    );
}

#[test]
fn pair_while_open_only_lists_codes_and_the_budget_is_per_config() {
    let mut host = FakeHost::new();
    let (mut bridge, _, notes) = started(
        &mut host,
        r#"{"bridge":{"pairingMaxFailuresPerHour":2}}"#,
        &["tg", "dc"],
    );
    assert!(notes.is_empty(), "{notes:?}");
    guess_wrong(&mut bridge, &mut host, "x", 1);
    let listed = bridge.on_local_command(&mut host, "pair").text;
    assert!(listed.starts_with("Pending pairing codes:\n"), "{listed}");
    let doctor = bridge.on_local_command(&mut host, "doctor").text;
    assert!(
        doctor.contains(
            "- pairing: open, 1 wrong code(s) in the last hour over this host's sessions (closes at 2, bridge.pairingMaxFailuresPerHour)"
        ),
        "{doctor}"
    );
    guess_wrong(&mut bridge, &mut host, "y", 5);
    assert_eq!(judged(&host), 2);
    assert_eq!(closed_notices(&host), 1);
}

#[test]
fn guesses_an_hour_apart_stay_within_the_budget_and_pairing_stays_open() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    for hour in 0..3 {
        guess_wrong(&mut bridge, &mut host, &format!("h{hour}-"), 9);
        host.now += 3_600_000;
    }
    assert_eq!(judged(&host), 27);
    assert_eq!(closed_notices(&host), 0);
}

/// Two sessions of one broker: each bridge has its own fake host (its own terminal and
/// transports), and the two hosts hold the same budget, as `serve` gives every attached
/// session its broker's.
fn two_sessions_of_one_host() -> ((Bridge, FakeHost), (Bridge, FakeHost)) {
    let mut host_a = FakeHost::new();
    let bridge_a = default_bridge(&mut host_a);
    let mut host_b = FakeHost::new();
    host_b.pairing = host_a.pairing.clone();
    let bridge_b = default_bridge(&mut host_b);
    ((bridge_a, host_a), (bridge_b, host_b))
}

#[test]
fn sessions_of_one_host_share_one_budget_and_each_terminal_hears_of_the_closing_once() {
    let ((mut a, mut host_a), (mut b, mut host_b)) = two_sessions_of_one_host();

    // A guesser alternates between the two sessions, 30 guesses at each: per-session
    // budgets would judge 20.
    for round in 0..6 {
        guess_wrong(&mut a, &mut host_a, &format!("a{round}-"), 5);
        host_b.now = host_a.now;
        guess_wrong(&mut b, &mut host_b, &format!("b{round}-"), 5);
        host_a.now = host_b.now;
    }
    assert_eq!(
        judged(&host_a) + judged(&host_b),
        10,
        "wrong codes judged over both sessions"
    );
    for host in [&host_a, &host_b] {
        assert!(!host.note_texts().iter().any(|n| n.starts_with("Paired ")));
        // Each operator hears of it once, whichever session's guesser closed it.
        assert_eq!(closed_notices(host), 1, "{:?}", host.note_texts());
    }

    // Both doctors count the host's failures, not their own.
    for (bridge, host) in [(&mut a, &mut host_a), (&mut b, &mut host_b)] {
        let doctor = bridge.on_local_command(host, "doctor").text;
        assert!(doctor.contains("- pairing: CLOSED "), "{doctor}");
    }

    // B's real user writes while closed; B's operator asks for a code: it works at once.
    host_b.now += 1_000;
    b.on_envelope(&mut host_b, dm("tg", "me", "owner", "hi"));
    for _ in 0..40 {
        host_b.script_code("222222");
    }
    let reply = b.on_local_command(&mut host_b, "pair").text;
    assert!(reply.contains("- tg:me: 222 222"), "{reply}");
    host_b.now += 1_000;
    b.on_envelope(&mut host_b, dm("tg", "me", "owner", "222222"));
    assert!(
        host_b.note_texts().contains(&"Paired tg:owner".to_string()),
        "{:?}",
        host_b.note_texts()
    );

    // Reopened for the host: the next closing is told to both terminals again.
    host_a.now = host_b.now;
    guess_wrong(&mut a, &mut host_a, "again", 20);
    host_b.now = host_a.now;
    b.on_envelope(&mut host_b, dm("tg", "late", "stranger", "hello"));
    assert_eq!(closed_notices(&host_a), 2, "{:?}", host_a.note_texts());
    assert_eq!(closed_notices(&host_b), 2, "{:?}", host_b.note_texts());
}
