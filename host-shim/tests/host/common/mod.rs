//! What the host-shim tests share: a terminal wired to in-memory pipes (for the terminal
//! and conformance tests), and the end-to-end tests' real pi ([`pi`]) and real
//! nats-server ([`cluster`]).
#![allow(dead_code)] // each test module uses a different part of the harness

#[path = "../../../../tests/tests/e2e/common/cluster.rs"]
pub mod cluster;
#[path = "../../../../tests/tests/e2e/common/compiled.rs"]
pub mod compiled;
#[path = "../../../../tests/tests/e2e/common/npm.rs"]
pub mod npm;
#[path = "../../../../tests/tests/e2e/common/pi.rs"]
pub mod pi;

use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use host_shim::local::terminal::{TerminalEvent, TerminalTransport};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadBuf};
use tokio::sync::mpsc;

/// Longest a test waits for the terminal; a bug fails the test instead of hanging it.
pub const WAIT: Duration = Duration::from_secs(5);

/// Room in each pipe; far more than any test writes, so the terminal never blocks on it.
const PIPE: usize = 64 * 1024;

/// The person's side of the terminal: what they type and what they see.
pub struct Person {
    keyboard: Option<DuplexStream>,
    screen: Option<DuplexStream>,
    seen: Vec<u8>,
    /// How much of `seen` [`Person::wait_for`] has already matched.
    matched: usize,
}

/// A terminal on in-memory pipes, its event receiver and the person at it.
pub fn terminal() -> (TerminalTransport, mpsc::Receiver<TerminalEvent>, Person) {
    let (terminal_in, keyboard) = tokio::io::duplex(PIPE);
    let (terminal_out, screen) = tokio::io::duplex(PIPE);
    let (terminal, events) = TerminalTransport::new(BufReader::new(terminal_in), terminal_out);
    let person = Person {
        keyboard: Some(keyboard),
        screen: Some(screen),
        seen: Vec::new(),
        matched: 0,
    };
    (terminal, events, person)
}

impl Person {
    /// Types one line and presses Enter.
    pub async fn type_line(&mut self, line: &str) {
        let keyboard = self
            .keyboard
            .as_mut()
            .expect("input was closed by the test");
        keyboard
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("the terminal stopped reading its input");
    }

    /// Ctrl-D: ends the input.
    pub fn close_input(&mut self) {
        self.keyboard = None;
    }

    /// Closes the screen: every later write by the terminal fails.
    pub fn close_screen(&mut self) {
        self.screen();
        self.screen = None;
    }

    /// Everything the terminal has written so far (already flushed, so no waiting).
    pub fn screen(&mut self) -> String {
        let Some(screen) = self.screen.as_mut() else {
            return self.seen_text();
        };
        loop {
            let mut chunk = [0u8; 4096];
            let mut buf = ReadBuf::new(&mut chunk);
            let ready = poll_once(|cx| Pin::new(&mut *screen).poll_read(cx, &mut buf));
            match ready {
                Some(Ok(())) if !buf.filled().is_empty() => {
                    self.seen.extend_from_slice(buf.filled())
                }
                _ => break,
            }
        }
        self.seen_text()
    }

    fn seen_text(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Waits (up to [`WAIT`]) until output after the previous match contains `needle`,
    /// for output written by a task the test does not await, such as a pending question.
    pub async fn wait_for(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let seen = self.screen();
            let fresh = seen.get(self.matched..).unwrap_or_default();
            if let Some(at) = fresh.find(needle) {
                self.matched += at + needle.len();
                return seen;
            }
            let screen = self
                .screen
                .as_mut()
                .expect("the screen was closed by the test");
            let mut chunk = [0u8; 4096];
            let read = tokio::time::timeout_at(deadline, screen.read(&mut chunk)).await;
            match read {
                Ok(Ok(n)) if n > 0 => self
                    .seen
                    .extend_from_slice(chunk.get(..n).unwrap_or_default()),
                _ => panic!("{needle:?} never appeared; the screen shows {seen:?}"),
            }
        }
    }
}

/// Polls once without waiting; `None` when nothing is ready.
fn poll_once<T>(mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>) -> Option<T> {
    let mut cx = Context::from_waker(Waker::noop());
    match poll(&mut cx) {
        Poll::Ready(value) => Some(value),
        Poll::Pending => None,
    }
}

/// Awaits `future` for at most [`WAIT`].
pub async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .expect("the terminal did not respond in time")
}
