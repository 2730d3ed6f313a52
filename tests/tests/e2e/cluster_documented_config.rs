//! The nats-server config docs/scaling.md gives (docs/security.md#cluster-security) works, as
//! written: the real nats-server runs the block from the doc (only its certificate paths, store
//! directory and port replaced), an ingress and a session node each log in as their role over TLS
//! with a client certificate and do every kind of call a node makes (stream, consumer, KV buckets,
//! key listing, locks, requests and replies), and what the roles must not do is refused by the
//! server: no credentials, no client certificate, a session node publishing envelopes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use host_shim::cluster::bot_lock::{BotLocks, Holder};
use host_shim::cluster::connect_options::{NatsAuth, ResolvedAuth};
use host_shim::cluster::directory::{Directory, SessionEntry};
use host_shim::cluster::inbound::{InboundPublisher, InboundSettings, SessionConsumer};
use host_shim::cluster::outbound::{OutboundServer, RemoteTransport};
use host_shim::cluster::state_store::KvStateStore;
use host_shim::local::logging::MemoryLog;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use transport_core::{Envelope, OutboundKind, OutboundMessage, Transport, inbound};
use transport_testing::fake::{FakeConfig, FakeTransport};

use crate::common::cluster;

const DOC: &str = include_str!("../../../docs/scaling.md");
const MARKER: &str = "<!-- nats-server.conf (tested: keep it one block) -->\n```conf\n";

/// The config block of the doc, verbatim.
fn documented_config() -> &'static str {
    let start = DOC
        .find(MARKER)
        .expect("the doc keeps its marked config block")
        + MARKER.len();
    let length = DOC[start..].find("\n```").expect("the block ends");
    &DOC[start..start + length + 1]
}

/// A throw-away CA, a server certificate for 127.0.0.1 and one client certificate per
/// role, written where the config (once its paths are replaced) expects them.
fn pki(dir: &Path) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write");
    for (name, sans) in [
        (
            "server",
            vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
        ),
        ("ingress", vec!["ingress".to_owned()]),
        ("sessions", vec!["sessions".to_owned()]),
    ] {
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(sans)
            .expect("params")
            .signed_by(&key, &issuer)
            .expect("certificate");
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).expect("write");
        std::fs::write(dir.join(format!("{name}-key.pem")), key.serialize_pem()).expect("write");
    }
}

/// How a node of `role` logs in: the role's user and password from the environment
/// (injected here), the CA and the role's client certificate.
fn role(dir: &Path, user: &'static str, password: &'static str) -> ResolvedAuth {
    NatsAuth {
        user_env: Some("U".into()),
        password_env: Some("P".into()),
        ca_file: Some(dir.join("ca.pem")),
        cert_file: Some(dir.join(format!("{user}.pem"))),
        key_file: Some(dir.join(format!("{user}-key.pem"))),
        ..NatsAuth::default()
    }
    .resolve(&move |name: &str| match name {
        "U" => Some(user.to_owned()),
        "P" => Some(password.to_owned()),
        _ => None,
    })
    .expect("the role's settings resolve")
}

const INGRESS_PASSWORD: &str = "ingress-password-for-the-test";
const SESSIONS_PASSWORD: &str = "sessions-password-for-the-test";

#[test]
fn the_documented_config_binds_to_loopback_and_asks_for_tls() {
    let config = documented_config();
    assert!(config.starts_with("listen: 127.0.0.1:4222\n"), "{config}");
    assert!(config.contains("verify: true"), "{config}");
    assert!(
        !config.contains("password: \""),
        "passwords come from the environment"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_nats_config_runs_a_cluster_and_refuses_what_the_roles_may_not_do() {
    let pki_dir = tempfile::tempdir().expect("temp dir");
    pki(pki_dir.path());
    let certs = pki_dir.path().to_path_buf();
    let server = match cluster::NatsServer::start_with(
        |store| {
            documented_config()
                .replace("/etc/bot-connect/nats/", &format!("{}/", certs.display()))
                .replace(
                    "/var/lib/bot-connect/nats",
                    &store.join("js").display().to_string(),
                )
                .replace("127.0.0.1:4222", "127.0.0.1:PORT")
        },
        String::new(),
        // The server reads the passwords from its environment, as the doc says.
        &[
            ("INGRESS_PASSWORD", INGRESS_PASSWORD),
            ("SESSIONS_PASSWORD", SESSIONS_PASSWORD),
        ],
    ) {
        Ok(server) => server,
        Err(cluster::Unavailable(reason)) => {
            eprintln!("SKIPPED (no nats-server): {reason}");
            return;
        }
    };
    let url = server.url.replace("nats://", "tls://");
    let dir = pki_dir.path();
    let ingress_auth = role(dir, "ingress", INGRESS_PASSWORD);
    let sessions_auth = role(dir, "sessions", SESSIONS_PASSWORD);

    // Refused by the server: no login at all, and the right login without a certificate.
    let anonymous = NatsAuth {
        ca_file: Some(dir.join("ca.pem")),
        ..NatsAuth::default()
    }
    .resolve(&|_: &str| None)
    .unwrap();
    assert!(host_shim::cluster::connect(&url, &anonymous).await.is_err());
    let no_cert = NatsAuth {
        user_env: Some("U".into()),
        password_env: Some("P".into()),
        ca_file: Some(dir.join("ca.pem")),
        ..NatsAuth::default()
    }
    .resolve(&|name: &str| {
        Some(
            if name == "U" {
                "ingress"
            } else {
                INGRESS_PASSWORD
            }
            .to_owned(),
        )
    })
    .unwrap();
    assert!(host_shim::cluster::connect(&url, &no_cert).await.is_err());

    // Each role logs in and does what a node of it does.
    let (ingress, ingress_js) = host_shim::cluster::connect(&url, &ingress_auth)
        .await
        .expect("the ingress logs in over TLS");
    let (sessions, sessions_js) = host_shim::cluster::connect(&url, &sessions_auth)
        .await
        .expect("the session node logs in over TLS");
    let prefix = cluster::prefix("botconnect");
    let settings = InboundSettings::for_lease_ttl(Duration::from_secs(2));
    let gate = cluster::gate();
    let log = Arc::new(MemoryLog::default());

    let locks = BotLocks::open(&ingress_js, &prefix, Duration::from_secs(2))
        .await
        .expect("the ingress opens the lock bucket");
    let holder = Holder::this_process();
    let _bot_lock = locks
        .try_acquire("bot-x", &holder)
        .await
        .expect("and takes a lock");
    let directory = Directory::open(&ingress_js, &prefix, &gate)
        .await
        .expect("the ingress opens the directory");
    let publisher =
        InboundPublisher::open(ingress_js.clone(), prefix.clone(), &settings, gate.clone())
            .await
            .expect("the ingress opens the inbound stream");
    let fake = FakeTransport::new(FakeConfig {
        id: "telegram".into(),
        ..FakeConfig::default()
    });
    let (platform_sink, _platform) = inbound::channel(4);
    fake.start(platform_sink).await.expect("the fake starts");
    let posts =
        host_shim::cluster::posted::PostLedger::open(&ingress_js, &prefix, &gate, log.clone())
            .await
            .expect("the ingress opens the posted ledger");
    let _outbound = OutboundServer::start(
        ingress.clone(),
        &prefix,
        Arc::new(fake.handle()),
        posts,
        gate.clone(),
        log.clone(),
    )
    .await
    .expect("the ingress serves sends");

    let leases = BotLocks::open_bucket(
        &sessions_js,
        prefix.lease_bucket(),
        "leases",
        Duration::from_secs(2),
    )
    .await
    .expect("the session node opens the lease bucket");
    let _lease = leases
        .try_acquire("s1", &holder)
        .await
        .expect("and takes a lease");
    let node_directory = Directory::open(&sessions_js, &prefix, &gate)
        .await
        .expect("the session node opens the directory");
    node_directory
        .announce(&SessionEntry {
            key: "serve:api".into(),
            name: "api".into(),
            cwd: "/work/api".into(),
            busy: false,
            node: "n".into(),
            ..SessionEntry::default()
        })
        .await
        .expect("and announces its session");
    let listed = directory
        .sessions()
        .await
        .expect("the ingress lists the sessions");
    assert_eq!(listed.len(), 1);
    let states = KvStateStore::open(&sessions_js, &prefix, &gate)
        .await
        .expect("the session node opens the state bucket");
    states
        .save("serve:api", r#"{"trusted":{}}"#, 0)
        .await
        .expect("and saves");
    let ingress_states = KvStateStore::open(&ingress_js, &prefix, &gate)
        .await
        .unwrap();
    assert!(
        ingress_states
            .load("serve:api")
            .await
            .unwrap()
            .document
            .is_some()
    );

    let envelope = Envelope {
        transport: "telegram".into(),
        conversation_id: "1".into(),
        user_id: "1".into(),
        text: "hello".into(),
        is_direct: true,
        message_id: Some("1:1".into()),
        ..Envelope::default()
    };
    publisher
        .publish("serve:api", &envelope)
        .await
        .expect("the ingress publishes an envelope");
    let (sink, mut stream) = inbound::channel(4);
    let _consumer = SessionConsumer::start(
        sessions_js.clone(),
        &prefix,
        "serve:api",
        sink,
        &settings,
        gate.clone(),
        log.clone(),
    )
    .await
    .expect("the session node consumes");
    let delivered = tokio::time::timeout(cluster::WAIT, stream.recv())
        .await
        .expect("delivered in time")
        .expect("a message");
    let transport_core::Inbound::Message { envelope: got, .. } = delivered else {
        panic!("not a message");
    };
    assert_eq!(got.text, "hello");
    let (remote, _) = RemoteTransport::discover(
        sessions.clone(),
        &prefix,
        "telegram",
        Duration::from_secs(5),
        gate.clone(),
    )
    .await
    .expect("the session node asks the ingress");
    let (sink, _stream) = inbound::channel(4);
    remote.start(sink).await.unwrap();
    remote
        .send(OutboundMessage {
            conversation_id: "1".into(),
            thread_id: None,
            kind: OutboundKind::Reply,
            text: "answer".into(),
            edit_key: None,
            buttons: Vec::new(),
            answers_press: None,
            reply_to: None,
        })
        .await
        .expect("a send round-trips");
    assert_eq!(fake.sent().len(), 1);

    // A session node may not publish envelopes: the server refuses, nothing is stored.
    let refused = tokio::time::timeout(cluster::WAIT, async {
        sessions_js
            .publish(prefix.inbound_subject("serve:api"), "x".into())
            .await?
            .await
    })
    .await
    .expect("the server answers in time");
    assert!(refused.is_err(), "a session node published an envelope");
}
