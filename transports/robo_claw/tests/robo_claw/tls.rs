//! TLS: a handshake with a certificate made for the test (a throw-away CA and a leaf for
//! `localhost` and 127.0.0.1, generated here so nothing committed can expire), a plain
//! client refused, and unreadable files named in the start error.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use transport_core::Transport;
use transport_robo_claw::proto::robo_messenger_client::RoboMessengerClient;
use transport_robo_claw::{RoboClawConfig, RoboClawTransport, TlsFiles};

use crate::support::{self, TOKEN, chat, config, open, start};

struct Pki {
    _dir: tempfile::TempDir,
    ca_pem: String,
    files: TlsFiles,
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("leaf params")
        .signed_by(&leaf_key, &issuer)
        .expect("leaf certificate");
    let dir = tempfile::tempdir().expect("temp dir");
    let cert_path = dir.path().join("server.pem");
    let key_path = dir.path().join("server.key");
    std::fs::write(&cert_path, leaf.pem()).expect("write cert");
    std::fs::write(&key_path, leaf_key.serialize_pem()).expect("write key");
    Pki {
        _dir: dir,
        ca_pem: ca.pem(),
        files: TlsFiles {
            cert_path,
            key_path,
        },
    }
}

#[tokio::test]
async fn a_client_that_trusts_the_ca_talks_over_tls() {
    let pki = pki();
    let mut server = start(RoboClawConfig {
        tls: Some(pki.files.clone()),
        ..config()
    })
    .await;
    let channel = Channel::from_shared(format!("https://127.0.0.1:{}", server.addr.port()))
        .expect("uri")
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&pki.ca_pem))
                .domain_name("localhost"),
        )
        .expect("tls config")
        .connect_timeout(support::WAIT)
        .connect()
        .await
        .expect("the TLS handshake succeeds");
    let mut client = RoboMessengerClient::new(channel);
    let mut chat_stream = open(&mut client, Some(TOKEN), Some("secure"))
        .await
        .expect("accepted");
    chat_stream
        .send(chat("alice", "over tls", Some("secure")))
        .await;
    assert_eq!(server.next_envelope().await.text, "over tls");
    server.reply("secure", "encrypted answer").await;
    assert_eq!(chat_stream.next_text().await, "encrypted answer");
    assert!(server.transport.diagnose().contains("(TLS)"));

    // A client speaking plain HTTP/2 to the TLS port gets nowhere.
    let plain = Channel::from_shared(format!("http://127.0.0.1:{}", server.addr.port()))
        .expect("uri")
        .connect_timeout(support::WAIT)
        .timeout(support::WAIT)
        .connect()
        .await;
    if let Ok(plain) = plain {
        let mut plain = RoboMessengerClient::new(plain);
        let refused = open(&mut plain, Some(TOKEN), None).await;
        assert!(refused.is_err(), "a plain client must not be served");
    }
    server.transport.stop().await;
}

#[tokio::test]
async fn unreadable_tls_files_fail_start_naming_the_file() {
    let pki = pki();
    let missing = TlsFiles {
        cert_path: PathBuf::from("/nonexistent/robo_claw/cert.pem"),
        key_path: pki.files.key_path.clone(),
    };
    let transport = RoboClawTransport::new(RoboClawConfig {
        tls: Some(missing),
        ..config()
    });
    let (sink, _inbound) = transport_core::inbound::channel(4);
    let error = transport.start(sink).await.expect_err("refused");
    let text = error.to_string();
    assert!(text.contains("/nonexistent/robo_claw/cert.pem"), "{text}");
    assert!(text.contains("tlsCertPath"), "{text}");

    // A key file that holds a certificate instead of a key.
    let swapped = TlsFiles {
        cert_path: pki.files.cert_path.clone(),
        key_path: pki.files.cert_path.clone(),
    };
    let transport = RoboClawTransport::new(RoboClawConfig {
        tls: Some(swapped),
        ..config()
    });
    let (sink, _inbound) = transport_core::inbound::channel(4);
    let error = transport.start(sink).await.expect_err("refused");
    assert!(error.to_string().contains("tlsKeyPath"), "{error}");
    assert!(
        transport.diagnose().contains("last error"),
        "{}",
        transport.diagnose()
    );
}
