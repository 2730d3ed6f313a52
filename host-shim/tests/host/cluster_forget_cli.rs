//! `host-shim cluster sessions` and `host-shim cluster forget` as an operator runs them, on a
//! real nats-server (docs/scaling.md#forgetting-a-session): the list says each session's state,
//! a session that left is forgotten (its waiting message dropped, its state kept unless
//! `--delete-state`), a running one is refused, and a wrong name or prefix says what to do.
//! Skipped, with the reason printed, where nats-server cannot be installed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use host_shim::cluster::bot_lock::{BotLocks, Holder};
use host_shim::cluster::cluster_key::ClusterKey;
use host_shim::cluster::directory::{Directory, SessionEntry};
use host_shim::cluster::inbound::{InboundPublisher, InboundSettings};
use host_shim::cluster::seal::Gate;
use host_shim::cluster::subjects::{Prefix, session_token};
use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use tokio::process::Command;
use transport_core::Envelope;

use crate::common::cluster::{self, nats_or_skip};

/// The cluster key, by variable (never argv), as the nodes get it.
const CLUSTER_KEY: &str = "an operator's cluster key of at least thirty-two bytes";
const PREFIX: &str = "ops";

/// `host-shim cluster <args> --nats … --prefix ops`, logged in as the test server's user,
/// with the key, in a home of its own.
async fn cluster_command(nats: &cluster::NatsServer, dir: &Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_host-shim"))
        .arg("cluster")
        .args(args)
        .args(["--nats", &nats.url])
        .args(["--nats-user-env", "TEST_NATS_USER"])
        .args(["--nats-password-env", "TEST_NATS_PASSWORD"])
        .args(["--cluster-key-env", "TEST_CLUSTER_KEY"])
        .env("TEST_NATS_USER", cluster::NODE_USER)
        .env("TEST_NATS_PASSWORD", &nats.password)
        .env("TEST_CLUSTER_KEY", CLUSTER_KEY)
        .current_dir(dir)
        .env("HOME", dir)
        .env("PI_BOT_CONNECT_CONFIG", dir.join("config.json"))
        .env("PI_BOT_CONNECT_STATE", dir.join("state.json"))
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output)
        .await
        .expect("the command ends in time")
        .expect("host-shim runs");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!printed.contains(&nats.password), "no password printed");
    (output.status.success(), printed)
}

fn entry(key: &str, name: &str, machine: &str) -> SessionEntry {
    SessionEntry {
        key: key.into(),
        name: name.into(),
        cwd: format!("/srv/{name}"),
        node: format!("pid 7 on {machine}"),
        node_id: machine.into(),
        machine: machine.into(),
        ..SessionEntry::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_lists_the_sessions_forgets_one_that_left_and_is_refused_a_running_one() {
    let nats = nats_or_skip!();
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("config.json"), "{}").expect("config");
    let jetstream = nats.jetstream().await;
    let prefix = Prefix::new(PREFIX).expect("prefix");
    let key = ClusterKey::from_material(CLUSTER_KEY.as_bytes(), "test").expect("key");
    let gate = Gate::new(
        key.clone(),
        Arc::new(SystemClock),
        Arc::new(MemoryLog::default()),
    );

    // Before any node made the cluster: a mistyped prefix is said, nothing is made.
    let (ok, printed) = cluster_command(&nats, dir.path(), &["sessions", "--prefix", PREFIX]).await;
    assert!(!ok, "{printed}");
    assert!(
        printed.contains("there is no cluster called \"ops\"")
            && printed.contains("Pass the --prefix its nodes were started with"),
        "{printed}"
    );

    // `api` on build left (its node is gone); `web` runs on laptop (its lease and node live).
    let directory = Directory::open(&jetstream, &prefix, &gate)
        .await
        .expect("directory");
    for listed in [
        entry("pi:api", "api", "build"),
        entry("pi:web", "web", "laptop"),
    ] {
        directory.announce(&listed).await.expect("announced");
    }
    let ttl = Duration::from_secs(60);
    let laptop = Holder {
        id: "laptop".into(),
        description: "pid 7 on laptop".into(),
    };
    let nodes = BotLocks::open_bucket(&jetstream, prefix.node_bucket(), "nodes", ttl)
        .await
        .expect("node bucket");
    let _node = nodes
        .try_acquire("node-laptop", &laptop)
        .await
        .expect("laptop is live");
    let leases = BotLocks::open_bucket(&jetstream, prefix.lease_bucket(), "leases", ttl)
        .await
        .expect("lease bucket");
    let _lease = leases
        .try_acquire(&session_token("pi:web"), &laptop)
        .await
        .expect("laptop runs web");
    // A message waits for api.
    let publisher = InboundPublisher::open(
        jetstream.clone(),
        prefix.clone(),
        &InboundSettings::for_lease_ttl(Duration::from_secs(2)),
        gate.clone(),
    )
    .await
    .expect("inbound stream");
    publisher
        .publish(
            "pi:api",
            &Envelope {
                transport: "telegram".into(),
                conversation_id: "4242".into(),
                user_id: "4242".into(),
                message_id: Some("4242:9".into()),
                text: "are you there?".into(),
                ..Envelope::default()
            },
        )
        .await
        .expect("published");

    let (ok, printed) = cluster_command(&nats, dir.path(), &["sessions", "--prefix", PREFIX]).await;
    assert!(ok, "{printed}");
    assert!(
        printed.contains("api@build — /srv/api · offline, last seen just now · key pi:api"),
        "{printed}"
    );
    assert!(
        printed.contains("web@laptop — /srv/web · idle, active just now · key pi:web"),
        "{printed}"
    );

    // A running session is refused, with what to do.
    let (ok, printed) =
        cluster_command(&nats, dir.path(), &["forget", "web", "--prefix", PREFIX]).await;
    assert!(!ok, "{printed}");
    assert!(
        printed.contains("web@laptop is running (idle, on node pid 7 on laptop)")
            && printed.contains("Stop it there first"),
        "{printed}"
    );
    // A name nobody has lists the ones there are.
    let (ok, printed) =
        cluster_command(&nats, dir.path(), &["forget", "docs", "--prefix", PREFIX]).await;
    assert!(!ok, "{printed}");
    assert!(
        printed.contains(
            "no session in the cluster is called \"docs\" (there are: api@build, web@laptop)"
        ),
        "{printed}"
    );

    cluster::plant_state_with_key(&nats, &prefix, &key, "pi:api", r#"{"trusted":{}}"#).await;
    let (ok, printed) = cluster_command(
        &nats,
        dir.path(),
        &["forget", "api@build", "--prefix", PREFIX],
    )
    .await;
    assert!(ok, "{printed}");
    assert!(
        printed.contains("Forgot api@build (offline, last seen just now); 1 message(s) waiting for it were dropped"),
        "{printed}"
    );
    assert!(printed.contains("is kept"), "{printed}");
    let tombstone = directory
        .entry("pi:api")
        .await
        .expect("read")
        .expect("a tombstone");
    assert!(tombstone.entry.forgotten.is_some(), "{tombstone:?}");
    assert_eq!(directory.sessions().await.expect("sessions").len(), 1);
    let states = jetstream
        .get_key_value(prefix.state_bucket())
        .await
        .expect("state bucket");
    assert!(
        states
            .get(session_token("pi:api"))
            .await
            .expect("get")
            .is_some()
    );

    let (ok, printed) = cluster_command(&nats, dir.path(), &["sessions", "--prefix", PREFIX]).await;
    assert!(ok, "{printed}");
    assert!(
        printed.contains(
            "api@build — /srv/api · forgotten by its operator just now, its chats not told yet"
        ),
        "{printed}"
    );
    // Forgotten already: nothing to do, unless its state goes too.
    let (ok, printed) =
        cluster_command(&nats, dir.path(), &["forget", "api", "--prefix", PREFIX]).await;
    assert!(ok && printed.contains("was forgotten already"), "{printed}");
    let (ok, printed) = cluster_command(
        &nats,
        dir.path(),
        &["forget", "api", "--delete-state", "--prefix", PREFIX],
    )
    .await;
    assert!(ok, "{printed}");
    assert!(
        printed.contains("Its saved state (pairings, remembered chats) was deleted"),
        "{printed}"
    );
    assert!(
        states
            .get(session_token("pi:api"))
            .await
            .expect("get")
            .is_none()
    );
}
