//! The HTTP client every platform builds, and how its failures are described.
//!
//! Why shared: each of these settings prevents a failure, and a platform that forgot one
//! would bring it back. The TLS provider is chosen here (rustls on ring, the operating
//! system's verifier) instead of a process-wide default another crate's choice could
//! break; redirects are never followed (a redirect would carry a token in the URL or the
//! `Authorization` header to wherever `Location` points); a loopback server (the tests',
//! a local Bot API) is never reached through a proxy meant for the outside world; and a
//! failure is described without its URL, which for Telegram holds the token.

use std::sync::Arc;
use std::time::Duration;

/// The `User-Agent` the platforms send unless their API asks for its own shape.
pub const USER_AGENT: &str = concat!("bot-connect/", env!("CARGO_PKG_VERSION"));

/// Why a client could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// The TLS configuration (provider, verifier) could not be built.
    #[error("could not set up TLS for {platform}: {detail}")]
    Tls {
        /// The platform's name, as a person knows it.
        platform: &'static str,
        /// What rustls said.
        detail: String,
    },
    /// reqwest refused the client's settings.
    #[error("could not set up the HTTP client for {platform}: {detail}")]
    Client {
        /// The platform's name, as a person knows it.
        platform: &'static str,
        /// What reqwest said, without a URL.
        detail: String,
    },
}

/// rustls on the ring provider with the operating system's certificate verifier. `alpn`
/// is what the connection may speak: `h2` and `http/1.1` for a REST API (a preconfigured
/// config gets no ALPN from reqwest, and without it HTTP/2 is never chosen); only
/// `http/1.1` for a WebSocket, whose upgrade fails over a connection that chose h2.
pub fn tls_config(
    platform: &'static str,
    alpn: &[&[u8]],
) -> Result<rustls::ClientConfig, SetupError> {
    use rustls_platform_verifier::BuilderVerifierExt as _;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_platform_verifier())
        .map_err(|error| SetupError::Tls {
            platform,
            detail: error.to_string(),
        })?
        .with_no_client_auth();
    tls.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Ok(tls)
}

/// Whether `host` (a URL's host, brackets allowed) is a loopback name or address.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The client for `platform`'s API at `base`: TLS as [`tls_config`] sets it up, no
/// redirects, a 10 s connect timeout, `user_agent`, and no proxy for a loopback `base`.
pub fn http_client(
    platform: &'static str,
    base: &reqwest::Url,
    user_agent: &str,
) -> Result<reqwest::Client, SetupError> {
    let tls = tls_config(platform, &[b"h2", b"http/1.1"])?;
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .user_agent(user_agent);
    if base.host_str().is_some_and(is_loopback) {
        builder = builder.no_proxy();
    }
    builder.build().map_err(|error| SetupError::Client {
        platform,
        detail: error.without_url().to_string(),
    })
}

/// Scheme, host and port of `url`: all an error message may show of it (a path can hold
/// a token, a query a signature).
pub fn origin(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or("?");
    match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// What the network stack said, every cause in the chain once, with no URL in it.
pub fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut parts: Vec<String> = Vec::new();
    let mut current: Option<&dyn std::error::Error> = Some(&error);
    while let Some(cause) = current {
        let text = cause.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = cause.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised_and_others_are_not() {
        for host in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.9.9.9",
            "[::1]",
            "::1",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "api.telegram.org",
            "10.0.0.1",
            "localhost.evil.example",
            "[::2]",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn the_origin_shows_no_path_query_or_credentials() {
        let url = reqwest::Url::parse("https://user:pw@example.com:8443/bot123:SECRET/getMe?q=1")
            .expect("url");
        assert_eq!(origin(&url), "https://example.com:8443");
        let url = reqwest::Url::parse("https://example.com/x").expect("url");
        assert_eq!(origin(&url), "https://example.com");
    }

    #[tokio::test]
    async fn a_refused_connection_is_described_without_its_url() {
        let base = reqwest::Url::parse("http://127.0.0.1:9/").expect("url");
        let client = http_client("Test", &base, USER_AGENT).expect("client");
        let error = client
            .get("http://127.0.0.1:9/bot123:SECRET/getMe")
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .expect_err("nothing listens on port 9");
        let text = describe(error);
        assert!(!text.contains("SECRET") && !text.contains("/bot"), "{text}");
        assert!(!text.is_empty());
    }
}
