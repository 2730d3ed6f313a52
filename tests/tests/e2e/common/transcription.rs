//! A fake OpenAI-compatible transcription server on 127.0.0.1: answers every
//! `POST /v1/audio/transcriptions` with one JSON transcript and keeps each request's bytes,
//! so a test sees the multipart upload the host really sent.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The running server.
pub struct TranscriptionServer {
    /// `http://127.0.0.1:<port>/v1`, the engine's `baseUrl`.
    pub base_url: String,
    /// Every request, head and body.
    pub requests: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl TranscriptionServer {
    /// Serves `text` as every transcript.
    pub async fn start(text: &'static str) -> TranscriptionServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let request = read_request(&mut socket).await;
                seen.lock().unwrap().push(request);
                let body = serde_json::json!({ "text": text }).to_string();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        TranscriptionServer { base_url, requests }
    }
}

/// One request: the head, then as many body bytes as `Content-Length` says (the client
/// closing early ends it).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut request = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = socket.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return request;
        }
        request.extend_from_slice(&buf[..n]);
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                return request;
            }
        }
    }
}
