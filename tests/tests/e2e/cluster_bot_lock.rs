//! The cluster-wide bot lock on a real nats-server
//! (docs/decisions.md#decision-19-past-one-host-on-nats-jetstream): one ingress per bot credential,
//! and a standby that takes over after the TTL when the holder dies.

use std::time::Duration;

use host_shim::cluster::bot_lock::{BotLockError, BotLocks, Holder};
use host_shim::cluster::subjects::bot_lock_key;
use tokio::time::Instant;

use crate::common::cluster::{self, nats_or_skip};

/// Real time: the server ages the key out, so the TTL is short.
const TTL: Duration = Duration::from_secs(1);
const RENEW_EVERY: Duration = Duration::from_millis(250);

fn holder(name: &str) -> Holder {
    Holder {
        id: name.to_owned(),
        description: format!("ingress {name}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ingress_is_refused_while_the_first_renews_and_takes_over_after_the_ttl() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("lock1");
    let first_node = BotLocks::open(&server.jetstream().await, &prefix, TTL)
        .await
        .expect("lock bucket");
    let second_node = BotLocks::open(&server.jetstream().await, &prefix, TTL)
        .await
        .expect("lock bucket");
    let key = bot_lock_key("telegram", "TELEGRAM_BOT_TOKEN");

    let first = first_node
        .try_acquire(&key, &holder("a"))
        .await
        .expect("a free lock is taken");
    let mut kept = first.keep_alive(RENEW_EVERY, TTL);

    // For three TTLs the second is refused every time, told who holds the bot.
    let refusing_until = Instant::now() + TTL * 3;
    let mut refusals = 0;
    let mut pace = tokio::time::interval(Duration::from_millis(100));
    while Instant::now() < refusing_until {
        pace.tick().await;
        match second_node.try_acquire(&key, &holder("b")).await {
            Err(BotLockError::Held { holder, key: held }) => {
                assert_eq!(
                    (holder.as_str(), held.as_str()),
                    ("ingress a", key.as_str())
                );
                refusals += 1;
            }
            Ok(_) => panic!("a second holder got the lock while the first renewed it"),
            Err(other) => panic!("unexpected: {other}"),
        }
    }
    assert!(refusals >= 10, "only {refusals} attempts were made");
    let refused = second_node
        .try_acquire(&key, &holder("b"))
        .await
        .expect_err("still held");
    assert!(
        refused.to_string().contains("Keep this node as a standby"),
        "{refused}"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(10), kept.lost())
            .await
            .is_err(),
        "a renewed lock is not lost"
    );

    // The first dies (stops renewing, releases nothing); the second takes it after the TTL.
    let died = Instant::now();
    kept.abandon();
    let taken = cluster::eventually("the standby takes the lock", || async {
        second_node.try_acquire(&key, &holder("b")).await.ok()
    })
    .await;
    let takeover = died.elapsed();
    eprintln!(
        "takeover after the holder died: {takeover:?} (TTL {TTL:?}, renewal every {RENEW_EVERY:?})"
    );
    assert!(
        takeover >= TTL - RENEW_EVERY,
        "taken after {takeover:?}, before the TTL could have run out"
    );
    assert_eq!(taken.key(), key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_was_taken_over_is_told_it_lost_the_lock_and_release_frees_it_at_once() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("lock2");
    let locks = BotLocks::open(&server.jetstream().await, &prefix, TTL)
        .await
        .expect("lock bucket");
    let key = bot_lock_key("slack", "SLACK_BOT_TOKEN");

    // A holder that stalls past the TTL (a long pause, a partition) ...
    let mut stalled = locks.try_acquire(&key, &holder("a")).await.expect("free");
    let mut taker = cluster::eventually("another node takes the aged-out lock", || async {
        locks.try_acquire(&key, &holder("b")).await.ok()
    })
    .await;
    // ... learns on its next renewal that it lost the lock, and must stop.
    let lost = stalled
        .renew()
        .await
        .expect_err("the lock is someone else's");
    assert_eq!(lost, BotLockError::Lost { key: key.clone() });
    assert!(
        lost.to_string()
            .contains("Stop this bot's platform connection now"),
        "{lost}"
    );
    // Its release deletes nothing: the lock stays with the taker.
    stalled
        .release()
        .await
        .expect("releasing a lost lock is a no-op");
    taker.renew().await.expect("the taker still holds it");

    // A clean stop releases the key, so a standby need not wait for the TTL.
    let released = Instant::now();
    taker.release().await.expect("released");
    locks
        .try_acquire(&key, &holder("c"))
        .await
        .expect("free at once after a release");
    assert!(released.elapsed() < TTL, "{:?}", released.elapsed());

    // Another credential is another lock.
    locks
        .try_acquire(&bot_lock_key("slack", "OTHER_SLACK_TOKEN"), &holder("d"))
        .await
        .expect("a different bot's lock is free");
}
