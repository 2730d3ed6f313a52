//! Past one machine (docs/decisions.md#decision-19-past-one-host-on-nats-jetstream,
//! docs/scaling.md): the building blocks of running bot-connect on NATS JetStream. Ingress nodes
//! hold the platform connections under a cluster-wide [`bot_lock`], publish each session's
//! envelopes to its subject ([`inbound::InboundPublisher`]) and serve the sessions' sends
//! ([`outbound::OutboundServer`]); session nodes consume those subjects
//! ([`inbound::SessionConsumer`]), send through [`outbound::RemoteTransport`]s and keep session
//! state in a KV bucket with compare-and-set ([`state_store`]).
//!
//! Every name on the wire comes from [`subjects`]: never a token, a path or a chat id.

pub mod bot_lock;
pub mod cluster_key;
pub mod connect_options;
pub mod directory;
pub mod forgetting;
pub mod handed;
pub mod inbound;
pub mod ingress;
pub mod offline_told;
pub mod outbound;
pub mod outbox;
pub mod paired_seen;
pub mod placement;
pub mod posted;
pub mod readiness;
pub mod seal;
pub mod sealed_kv;
pub mod session_node;
pub mod settle;
pub mod state_store;
pub mod subjects;
pub mod topics;
pub mod trust_settings;

/// The NATS client this module is built on, so callers (and tests) use the same version.
pub use async_nats;

/// How long connecting to NATS may take before it is reported.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// NATS could not be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot reach NATS at {url}: {detail}. Start nats-server with JetStream (nats-server -js), \
     or pass the right address to --nats"
)]
pub struct ConnectError {
    /// The address, with any user and password replaced by `***`.
    pub url: String,
    /// What the client said.
    pub detail: String,
}

/// Connects to `url` logging in with `auth`, and checks that JetStream answers, within
/// [`CONNECT_TIMEOUT`]. A password in the URL never appears in the error.
pub async fn connect(
    url: &str,
    auth: &connect_options::ResolvedAuth,
) -> Result<(async_nats::Client, async_nats::jetstream::Context), ConnectError> {
    let failed = |detail: String| ConnectError {
        url: redacted(url),
        detail,
    };
    let attempt = async {
        let options = auth
            .options(connect_options::wants_tls(url))
            .map_err(|error| failed(error.to_string()))?;
        let client = options.connect(url).await.map_err(|error| {
            if error.kind() == async_nats::ConnectErrorKind::AuthorizationViolation {
                failed(
                    "the server refused this node's credentials (authorization violation); \
                     check --nats-creds, --nats-nkey, --nats-user-env/--nats-password-env or \
                     --nats-token-env against the server's accounts"
                        .to_owned(),
                )
            } else {
                failed(error.to_string())
            }
        })?;
        let jetstream = async_nats::jetstream::new(client.clone());
        jetstream.query_account().await.map_err(|error| {
            failed(format!(
                "the server answers but JetStream does not ({error}); is it started with -js?"
            ))
        })?;
        Ok((client, jetstream))
    };
    tokio::time::timeout(CONNECT_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| Err(failed(format!("no answer within {CONNECT_TIMEOUT:?}"))))
}

/// `url` with the user-info part (`user:password@`) of each comma-separated address
/// replaced by `***@`.
pub fn redacted(url: &str) -> String {
    url.split(',')
        .map(|address| {
            let (scheme, rest) = match address.split_once("://") {
                Some((scheme, rest)) => (format!("{scheme}://"), rest),
                None => (String::new(), address),
            };
            match rest.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}***@{host}"),
                None => format!("{scheme}{rest}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

use crate::local::logging::{LogLine, LogSink};
use crate::wit::types::Level;

/// The "session" cluster log lines are filed under: they belong to a node, not a session.
pub const LOG_SCOPE: &str = "cluster";

/// Logs a warning about something NATS handed over or refused. Fields are ids, subjects
/// and error texts, never a payload (a payload holds message text).
pub(crate) fn warn(log: &dyn LogSink, event: &str, fields: &[(&str, String)]) {
    log.write(LOG_SCOPE, LogLine::new(Level::Warning, event, fields));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_nats_url_is_never_shown() {
        assert_eq!(redacted("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(
            redacted("nats://bot:s3cret@nats.internal:4222"),
            "nats://***@nats.internal:4222"
        );
        assert_eq!(
            redacted("tok3n@host,tls://a:b@c:1"),
            "***@host,tls://***@c:1"
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_is_reported_with_what_to_do() {
        // Port 1 on loopback: nothing listens, the refusal is immediate.
        let error = connect(
            "nats://user:pw@127.0.0.1:1",
            &connect_options::ResolvedAuth::anonymous(),
        )
        .await
        .expect_err("nothing there");
        let text = error.to_string();
        assert!(
            text.starts_with("cannot reach NATS at nats://***@127.0.0.1:1: "),
            "{text}"
        );
        assert!(
            text.contains("nats-server -js") && !text.contains("pw"),
            "{text}"
        );
    }
}
