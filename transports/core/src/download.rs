//! The capped download every platform's `fetch_attachment` ends in (I19), and the media
//! type of what was served (I25).
//!
//! Why here: the cap has to hold on the bytes received, not only on what the server
//! declared (a server may declare nothing, or lie), and each copy of the reading loop was
//! one more place to get that wrong. The platform does its own request (its URL rules,
//! its credential, its redirects) and hands the response here.

use crate::capped::{CappedBody, OverCap};

/// A finished download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    /// The `Content-Type` header as served, if any.
    pub content_type: Option<String>,
    /// The body, never more than the limit.
    pub data: Vec<u8>,
}

/// Why a download was not finished.
#[derive(Debug, thiserror::Error)]
pub enum DownloadFailure {
    /// The server answered with a status other than 2xx; what it means is the platform's
    /// to say (an expired link, a deleted file).
    #[error("the file server answered HTTP {0}")]
    Status(u16),
    /// The body was, or would have been, over the limit.
    #[error(transparent)]
    TooLarge(#[from] OverCap),
    /// Reading the body failed (a timeout, a dropped connection); the platform describes
    /// it in its own error dialect, without the URL.
    #[error("the download failed while reading")]
    Read(reqwest::Error),
}

/// Reads `response`'s body, refusing more than `limit` bytes: a declared
/// `Content-Length` over it before reading anything, then the bytes actually received.
/// Returning early drops the response, which closes the connection: nothing more is read.
pub async fn read_capped(
    mut response: reqwest::Response,
    limit: u64,
) -> Result<Downloaded, DownloadFailure> {
    if !response.status().is_success() {
        return Err(DownloadFailure::Status(response.status().as_u16()));
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let mut body = CappedBody::new(response.content_length(), limit)?;
    while let Some(chunk) = response.chunk().await.map_err(DownloadFailure::Read)? {
        body.push(&chunk)?;
    }
    Ok(Downloaded {
        content_type,
        data: body.into_bytes(),
    })
}

/// The media type as served (before `;`, trimmed, lower-cased); when the server gives
/// none or only `application/octet-stream`, what the bytes' magic numbers say (I25).
pub fn served_media_type(header: Option<&str>, data: &[u8]) -> String {
    let declared = header
        .and_then(|value| value.split(';').next())
        .map(|value| value.trim().to_ascii_lowercase())
        .filter(|value| !value.is_empty() && value != "application/octet-stream");
    declared.unwrap_or_else(|| {
        infer::get(data).map_or_else(
            || "application/octet-stream".to_owned(),
            |kind| kind.mime_type().to_owned(),
        )
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;
    use crate::http_client::{USER_AGENT, http_client};

    /// Serves one HTTP/1.1 answer on 127.0.0.1: `head` (status line and headers, without
    /// the blank line), then `body`, then closes. Returns its URL.
    async fn serve_once(head: &'static str, body: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let _ = socket.write_all(format!("{head}\r\n\r\n").as_bytes()).await;
            // A client that stopped reading closes the connection: the rest is refused.
            let _ = socket.write_all(&body).await;
            let _ = socket.shutdown().await;
        });
        format!("http://{address}/file")
    }

    async fn fetch(head: &'static str, body: Vec<u8>, limit: u64) -> Result<Downloaded, String> {
        let url = serve_once(head, body).await;
        let base = reqwest::Url::parse(&url).expect("url");
        // The platforms' client: with `rustls-no-provider`, a bare reqwest client has no TLS.
        let response = http_client("Test", &base, USER_AGENT)
            .expect("client")
            .get(url)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .expect("the loopback server answers");
        read_capped(response, limit)
            .await
            .map_err(|failure| failure.to_string())
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole_with_its_type() {
        let downloaded = fetch(
            "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 5",
            b"abcde".to_vec(),
            5,
        )
        .await;
        assert_eq!(
            downloaded,
            Ok(Downloaded {
                content_type: Some("image/png".to_owned()),
                data: b"abcde".to_vec(),
            })
        );
    }

    #[tokio::test]
    async fn a_declared_size_over_the_limit_is_refused_with_a_clear_error() {
        let refused = fetch(
            "HTTP/1.1 200 OK\r\nContent-Length: 6",
            b"abcdef".to_vec(),
            5,
        )
        .await;
        assert_eq!(
            refused,
            Err("the attachment is 6 bytes, over the 5 byte limit; it was not downloaded".into())
        );
    }

    #[tokio::test]
    async fn a_server_sending_more_than_the_limit_is_stopped_at_the_cap() {
        // No length declared (the body ends when the connection closes): only the bytes
        // received can tell.
        let refused = fetch(
            "HTTP/1.1 200 OK\r\nConnection: close",
            vec![b'x'; 64 * 1024],
            1_000,
        )
        .await;
        assert_eq!(
            refused,
            Err(
                "the attachment is larger than the 1000 byte limit; the download was stopped there"
                    .into()
            )
        );
    }

    #[tokio::test]
    async fn an_error_status_is_not_read_as_a_file() {
        let refused = fetch(
            "HTTP/1.1 404 Not Found\r\nContent-Length: 3",
            b"no!".to_vec(),
            5,
        )
        .await;
        assert_eq!(refused, Err("the file server answered HTTP 404".into()));
    }

    #[test]
    fn the_served_type_wins_unless_it_says_nothing() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(served_media_type(Some("Image/PNG; q=1"), b""), "image/png");
        assert_eq!(
            served_media_type(Some("application/octet-stream"), png),
            "image/png"
        );
        assert_eq!(served_media_type(None, png), "image/png");
        assert_eq!(served_media_type(None, b"?"), "application/octet-stream");
    }
}
