//! Session state in a JetStream KV bucket on a real nats-server
//! (docs/decisions.md#decision-19-past-one-host-on-nats-jetstream): saves are compare-and-set on
//! the revision, so a stale writer is refused and writes nothing.

use host_shim::cluster::state_store::{
    KvSessionStates, KvStateError, KvStateStore, Loaded, STATE_FORMAT,
};
use host_shim::disk::state_store::{StateChanges, StateStore, StateStoreError};

use crate::common::cluster::{self, nats_or_skip};

/// Whether `error` is the store refusing a save made on a revision that is no longer the
/// last (another node saved since).
fn is_conflict(error: &StateStoreError) -> bool {
    matches!(
        error,
        StateStoreError::Backend(error)
            if matches!(error.downcast_ref(), Some(KvStateError::Conflict { .. }))
    )
}

const SESSION: &str = "/home/me/project:main";

/// The document `store` holds for [`SESSION`], if any.
async fn document(store: &dyn StateStore) -> Option<String> {
    store.load(SESSION).await.expect("load").map(|s| s.document)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_cas_refuses_a_stale_writer() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("state1");
    let node_a = KvStateStore::open(&server.jetstream().await, &prefix, &cluster::gate())
        .await
        .expect("state bucket");
    let node_b = KvStateStore::open(&server.jetstream().await, &prefix, &cluster::gate())
        .await
        .expect("state bucket");

    assert_eq!(
        node_a.load(SESSION).await.expect("load"),
        Loaded {
            document: None,
            revision: 0,
            format: 0
        }
    );
    let first = node_a
        .save(SESSION, r#"{"trusted":{}}"#, 0)
        .await
        .expect("the first save creates the document");

    // Both nodes load the same revision; B saves first, so A's copy is stale.
    let seen_by_a = node_a.load(SESSION).await.expect("load");
    let seen_by_b = node_b.load(SESSION).await.expect("load");
    assert_eq!(seen_by_a.revision, first);
    assert_eq!(seen_by_b, seen_by_a);
    let by_b = node_b
        .save(
            SESSION,
            r#"{"trusted":{"telegram:1":1}}"#,
            seen_by_b.revision,
        )
        .await
        .expect("B's save");
    assert!(by_b > first);

    let stale = node_a
        .save(SESSION, r#"{"trusted":{}}"#, seen_by_a.revision)
        .await
        .expect_err("A's copy is stale");
    assert_eq!(
        stale,
        KvStateError::Conflict {
            session_key: SESSION.to_owned(),
            expected_revision: first
        }
    );
    let message = stale.to_string();
    assert!(
        message.contains(SESSION) && message.contains("stop it on this node"),
        "{message}"
    );
    // Nothing was written: B's pairing is still there.
    assert_eq!(
        node_a.load(SESSION).await.expect("load"),
        Loaded {
            document: Some(r#"{"trusted":{"telegram:1":1}}"#.to_owned()),
            revision: by_b,
            format: STATE_FORMAT
        }
    );
    // Creating a document that exists is a conflict too (two nodes starting one session).
    assert!(matches!(
        node_b.save(SESSION, "{}", 0).await,
        Err(KvStateError::Conflict { .. })
    ));
    // Other sessions are other keys.
    node_b
        .save("another session", "{}", 0)
        .await
        .expect("another session's first save");
    // A document that is not an object never reaches NATS.
    assert!(matches!(
        node_b.save(SESSION, "[1]", by_b).await,
        Err(KvStateError::NotAnObject { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_the_state_store_seam_a_stale_node_is_refused_like_a_stale_state_file() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("state2");
    let open = || async {
        KvSessionStates::new(
            KvStateStore::open(&server.jetstream().await, &prefix, &cluster::gate())
                .await
                .expect("state bucket"),
        )
    };
    let node_a: Box<dyn StateStore> = Box::new(open().await);
    let node_b: Box<dyn StateStore> = Box::new(open().await);
    assert_eq!(node_a.path(), None);

    assert_eq!(node_a.load(SESSION).await.expect("load"), None);
    node_a
        .save(SESSION, &StateChanges::document(r#"{"n":1}"#))
        .await
        .expect("first save");
    node_a
        .save(SESSION, &StateChanges::document(r#"{"n":2}"#))
        .await
        .expect("its own next save");
    // B takes the session over: loads, saves.
    assert_eq!(
        document(node_b.as_ref()).await.as_deref(),
        Some(r#"{"n":2}"#)
    );
    node_b
        .save(SESSION, &StateChanges::document(r#"{"n":3}"#))
        .await
        .expect("B saves");
    // A, which still thinks it runs the session, is refused.
    let refused = node_a
        .save(SESSION, &StateChanges::document(r#"{"n":99}"#))
        .await
        .expect_err("stale");
    assert!(is_conflict(&refused), "{refused}");
    assert_eq!(
        document(node_b.as_ref()).await.as_deref(),
        Some(r#"{"n":3}"#)
    );
    // The queue goes inside the bucket's document, and a save that changes only it
    // keeps the document.
    let entry = |c: &str| format!(r#"{{"transport":"t","conversationId":"{c}"}}"#);
    node_b
        .save(
            SESSION,
            &StateChanges {
                document: None,
                dequeued: 0,
                enqueued: vec![entry("a"), entry("b")],
            },
        )
        .await
        .expect("B queues two");
    node_b
        .save(
            SESSION,
            &StateChanges {
                document: None,
                dequeued: 1,
                enqueued: vec![],
            },
        )
        .await
        .expect("B takes one");
    let node_c: Box<dyn StateStore> = Box::new(open().await);
    let seen = node_c.load(SESSION).await.expect("load").expect("a state");
    assert_eq!(seen.document, r#"{"n":3}"#);
    let queued: Vec<serde_json::Value> = seen
        .queued
        .iter()
        .map(|e| serde_json::from_str(e).expect("JSON"))
        .collect();
    assert_eq!(
        queued,
        [serde_json::from_str::<serde_json::Value>(&entry("b")).unwrap()]
    );
}

/// A node whose host-shim is older than the one that last saved a session would drop what
/// it cannot read at its next save: it is refused the document, and, knowing no revision,
/// writes nothing over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_newer_than_this_host_shim_reads_is_refused_and_never_overwritten() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("state3");
    let newer = format!(
        r#"{{"stateFormat":{},"trusted":{{"telegram:1":1}},"shinyNewThing":{{"kept":true}}}}"#,
        STATE_FORMAT + 1
    );
    cluster::plant_state(&server, &prefix, SESSION, &newer).await;
    let store = KvStateStore::open(&server.jetstream().await, &prefix, &cluster::gate())
        .await
        .expect("state bucket");
    let states = KvSessionStates::new(store.clone());
    let refused = states.load(SESSION).await.expect_err("newer");
    let text = refused.to_string();
    for needed in [
        format!("state format {}", STATE_FORMAT + 1),
        format!("reads up to {STATE_FORMAT}"),
        "upgrade host-shim".to_owned(),
    ] {
        assert!(text.contains(&needed), "{needed}: {text}");
    }
    let overwrite = states
        .save(SESSION, &StateChanges::document(r#"{"trusted":{}}"#))
        .await
        .expect_err("no revision known: nothing written");
    assert!(is_conflict(&overwrite), "{overwrite}");
    let kept = store.load(SESSION).await.expect("load");
    assert_eq!(kept.format, STATE_FORMAT + 1);
    assert!(
        kept.document
            .as_deref()
            .is_some_and(|d| d.contains("shinyNewThing")),
        "{kept:?}"
    );
}
