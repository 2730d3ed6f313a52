//! A fake OpenAI-compatible model for the real pi: `POST /v1/chat/completions`, streamed
//! as server-sent events, answering from the request alone.
//!
//! | the request's last message | the answer |
//! | --- | --- |
//! | a `tool` result | text `tool said: <its text>` |
//! | user text containing `TOOL` | one `bash` call running `echo hi` |
//! | user text containing `WRITE <path>` | one `write` call putting `written by pi` in `<path>` |
//! | user text containing `READ <path>` | one `read` call of `<path>` |
//! | user text containing `SEND <path>` | one `send_file` call of `<path>` with the caption `from pi` |
//! | user text containing `GREP <pattern>` | one `grep` call for `<pattern>` in `.`, with `glob` when the text holds `GLOB=<glob>` |
//! | user text containing `HOLD` | its first chunk, then nothing until [`FakeModel::release`] |
//! | user text containing `FAIL:overloaded`, the first time | an in-stream `overloaded_error` |
//! | user text containing `FAIL:overflow`, the first time | an in-stream context-overflow error |
//! | pi's compaction request (`<conversation>…`) | a short summary |
//! | anything else | `Hello from fake model. You said: <text>` |
//!
//! The `FAIL:` answers fail once per text, as a provider's bad moment does: pi's retry (or
//! its continuation after compacting) then gets the answer the rest of the text asks for.
//!
//! `HOLD` keeps pi busy for exactly as long as a test needs (a follow-up, an abort)
//! without sleeping; `HOLD` and `TOOL` together hold, then call the tool.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};

/// One request pi made.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Role of the last message (`user`, `tool`, …).
    pub last_role: String,
    /// Text of the last message.
    pub last_text: String,
    /// The model the request named (`fake-model`, `fake-model-2`).
    pub model: String,
    /// The texts of every user message in the request, oldest first: what the model was
    /// shown of the conversation.
    pub user_texts: Vec<String>,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    /// Held streams waiting for `release`.
    held: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Held streams whose client went away (pi aborted).
    cancelled: usize,
    /// Texts whose `FAIL:` answer was already given.
    failed: Vec<String>,
}

struct Inner {
    state: Mutex<State>,
    changed: Notify,
}

/// The fake model server, listening on 127.0.0.1.
#[derive(Clone)]
pub struct FakeModel {
    inner: Arc<Inner>,
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

impl FakeModel {
    /// Starts the server on a free port.
    pub async fn start() -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("local address").port();
        let inner = Arc::new(Inner {
            state: Mutex::default(),
            changed: Notify::new(),
        });
        let task = tokio::spawn(accept_loop(listener, inner.clone()));
        FakeModel {
            inner,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            task: Arc::new(task),
        }
    }

    fn state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner))
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state(|s| s.seen.clone())
    }

    /// Held streams whose client closed them.
    pub fn cancelled(&self) -> usize {
        self.state(|s| s.cancelled)
    }

    /// Lets every held stream finish.
    pub fn release(&self) {
        self.state(|s| {
            for held in s.held.drain(..) {
                let _ = held.send(());
            }
        });
    }

    /// Waits until `done` holds for the server's state, or fails the test after `timeout`.
    pub async fn wait(&self, what: &str, timeout: Duration, done: impl Fn(&FakeModel) -> bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "fake model: {what} did not happen in time; requests: {:#?}",
                    self.seen()
                );
            }
        }
    }
}

async fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let inner = inner.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let inner = inner.clone();
                async move { Ok::<_, Infallible>(handle(inner, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

/// A response body fed by a channel, so the server can hold a stream open.
struct Streamed {
    chunks: mpsc::UnboundedReceiver<Bytes>,
    /// Tells the producer the client went away (the body was dropped).
    _gone: tokio::sync::oneshot::Sender<()>,
}

impl Body for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.chunks
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(Frame::data(c))))
    }
}

fn text_of(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn event(delta: Value, finish: Option<&str>) -> Bytes {
    let chunk = json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    Bytes::from(format!("data: {chunk}\n\n"))
}

fn ending(finish: &str) -> Vec<Bytes> {
    let usage = json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
        "model": "fake-model", "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    });
    vec![
        event(json!({}), Some(finish)),
        Bytes::from(format!("data: {usage}\n\n")),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ]
}

fn text_reply(text: &str) -> Vec<Bytes> {
    let mut chunks = vec![event(json!({"role": "assistant", "content": ""}), None)];
    // Two deltas, as a real model streams.
    let middle = text
        .char_indices()
        .nth(text.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    chunks.push(event(json!({"content": &text[..middle]}), None));
    chunks.push(event(json!({"content": &text[middle..]}), None));
    chunks.extend(ending("stop"));
    chunks
}

/// A stream that starts, then ends in an error chunk, as providers report an overload or an
/// over-long prompt mid-stream (the OpenAI SDK throws it as an `APIError` with `message`).
fn error_reply(kind: &str, message: &str) -> Vec<Bytes> {
    let error = json!({"error": {"message": message, "type": kind}});
    vec![
        event(json!({"role": "assistant", "content": ""}), None),
        Bytes::from(format!("data: {error}\n\n")),
    ]
}

/// The failure `text` asks for, if it asks for one.
fn failure(text: &str) -> Option<Vec<Bytes>> {
    if text.contains("FAIL:overloaded") {
        Some(error_reply("overloaded_error", "Overloaded"))
    } else if text.contains("FAIL:overflow") {
        Some(error_reply(
            "invalid_request_error",
            "prompt is too long: 40000 tokens > 32000 maximum",
        ))
    } else {
        None
    }
}

fn tool_call_reply(name: &str, arguments: &Value) -> Vec<Bytes> {
    let mut chunks = vec![
        event(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_fake_1", "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            None,
        ),
        event(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": arguments.to_string()}}]}),
            None,
        ),
    ];
    chunks.extend(ending("tool_calls"));
    chunks
}

async fn handle(inner: Arc<Inner>, request: Request<Incoming>) -> Response<Streamed> {
    let body = request
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let last = request
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let user_texts = request
        .get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                .map(text_of)
                .collect()
        })
        .unwrap_or_default();
    let seen = Seen {
        model: request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        user_texts,
        last_role: last
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        last_text: text_of(&last),
    };
    let fail_now = {
        let mut state = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        // pi's compaction request quotes the conversation, `FAIL:` and all: it never fails.
        let first = seen.last_role == "user"
            && !seen.last_text.starts_with("<conversation>")
            && !state.failed.contains(&seen.last_text);
        let reply = failure(&seen.last_text).filter(|_| first);
        if reply.is_some() {
            state.failed.push(seen.last_text.clone());
        }
        reply
    };
    let (chunks, hold) = if let Some(reply) = fail_now {
        (reply, false)
    } else if seen.last_text.starts_with("<conversation>") {
        (
            text_reply("## Goal\nThe summary of the work so far."),
            false,
        )
    } else if seen.last_role == "tool" {
        (
            text_reply(&format!("tool said: {}", seen.last_text.trim())),
            false,
        )
    } else {
        let hold = seen.last_text.contains("HOLD");
        let write_to = seen
            .last_text
            .split_once("WRITE ")
            .and_then(|(_, rest)| rest.split_whitespace().next());
        let word_after = |marker: &str| {
            seen.last_text
                .split_once(marker)
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .map(str::to_string)
        };
        if let Some(pattern) = word_after("GREP ") {
            let mut arguments = json!({"pattern": pattern, "path": "."});
            if let Some(glob) = word_after("GLOB=") {
                arguments["glob"] = json!(glob);
            }
            (tool_call_reply("grep", &arguments), hold)
        } else if let Some(path) = word_after("SEND ") {
            let arguments = json!({"path": path, "caption": "from pi"});
            (tool_call_reply("send_file", &arguments), hold)
        } else if let Some(path) = word_after("READ ") {
            (tool_call_reply("read", &json!({"path": path})), hold)
        } else if let Some(path) = write_to {
            let arguments = json!({"path": path, "content": "written by pi"});
            (tool_call_reply("write", &arguments), hold)
        } else if seen.last_text.contains("TOOL") {
            (
                tool_call_reply("bash", &json!({"command": "echo hi"})),
                hold,
            )
        } else {
            (
                text_reply(&format!(
                    "Hello from fake model. You said: {}",
                    seen.last_text
                )),
                hold,
            )
        }
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let (gone_tx, gone_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel();
    {
        let mut state = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.seen.push(seen);
        if hold {
            state.held.push(release_tx);
        }
    }
    inner.changed.notify_waiters();
    let producer_inner = inner.clone();
    tokio::spawn(async move {
        let mut chunks = chunks.into_iter();
        if hold {
            // The first chunk makes pi stream (busy); the rest waits for the test.
            if let Some(first) = chunks.next() {
                let _ = tx.send(first);
            }
            tokio::select! {
                _ = release_rx => {}
                _ = gone_rx => {
                    producer_inner.state.lock().unwrap_or_else(PoisonError::into_inner).cancelled += 1;
                    producer_inner.changed.notify_waiters();
                    return;
                }
            }
        }
        for chunk in chunks {
            let _ = tx.send(chunk);
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Streamed {
            chunks: rx,
            _gone: gone_tx,
        })
        .unwrap_or_else(|_| unreachable!("static headers are valid"))
}
