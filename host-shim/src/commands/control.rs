//! The control socket of a process that serves pi sessions for others: the broker
//! (`host-shim serve`) and a cluster's session node (`serve --nats --role sessions`). The
//! pi extension starts `host-shim attach` as always; `attach` finds this socket in the
//! state directory and asks it to serve its session (this process then listens on that
//! session's link socket), and stays alive only to tie the session's life to pi's: when pi
//! exits, `attach` exits, its control connection closes, and the session is ended here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use crate::agent::Agent;
use crate::commands::process;
use crate::local::logging::TARGET;
use crate::local::ui::Ui;
use crate::pi::attach::{self, Bound, BoxFuture, Link, Served};
use crate::pi::link::LinkSession;

/// The longest control line read.
const MAX_CONTROL_LINE: u64 = 64 * 1024;

/// One request on the control socket.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ControlRequest {
    /// Serve the pi session `session` until this connection closes.
    Serve {
        /// pi's session id.
        session: String,
    },
}

/// Where the sessions asked for on the control socket are started.
pub trait SessionHome: Send + Sync + 'static {
    /// Starts the bridge session of the pi that described itself as `described`, with its
    /// link's agent and terminal. On failure nothing of it stays behind.
    fn start(
        self: Arc<Self>,
        described: LinkSession,
        agent: Arc<dyn Agent>,
        ui: Arc<dyn Ui>,
    ) -> BoxFuture<anyhow::Result<Served>>;
}

/// The name a session goes by in `/sessions`: pi's session name, else its directory's.
pub fn session_name(name: Option<&str>, cwd: &str) -> String {
    name.filter(|n| !n.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| {
            Path::new(cwd)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "session".into())
}

/// Answers `host-shim attach` on `listener` until `stop` resolves, then ends every session
/// it serves (each reporting what it could not send) before returning.
pub async fn serve(
    listener: UnixListener,
    state_dir: PathBuf,
    home: Arc<dyn SessionHome>,
    stop: impl std::future::Future<Output = ()>,
) {
    let (stop_tx, stopping) = watch::channel(false);
    let mut links = tokio::task::JoinSet::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    links.spawn(control(stream, state_dir.clone(), home.clone(), stopping.clone()));
                }
                Err(e) => tracing::warn!(target: TARGET, scope = "broker", "a control connection failed: {e}"),
            },
            Some(_) = links.join_next(), if !links.is_empty() => {}
        }
    }
    stop_tx.send_replace(true);
    while links.join_next().await.is_some() {}
}

async fn control(
    stream: UnixStream,
    state_dir: PathBuf,
    home: Arc<dyn SessionHome>,
    stopping: watch::Receiver<bool>,
) {
    let (read, write) = stream.into_split();
    let mut reader = BufReader::new(read.take(MAX_CONTROL_LINE));
    let mut line = String::new();
    let request =
        match tokio::time::timeout(process::ANSWER_TIMEOUT, reader.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 => serde_json::from_str::<ControlRequest>(line.trim()),
            _ => return,
        };
    let Ok(stream) = reader.into_inner().into_inner().reunite(write) else {
        return;
    };
    match request {
        Ok(ControlRequest::Serve { session }) => {
            serve_link(session, stream, state_dir, home, stopping).await
        }
        Err(error) => {
            let mut stream = stream;
            let _ = stream
                .write_all(
                    error_line(&format!(
                        "the broker did not understand the request ({error}); is this \
                         host-shim attach from the same build as host-shim serve?"
                    ))
                    .as_bytes(),
                )
                .await;
        }
    }
}

/// Serves one pi session's link until its `attach` goes away or this process stops.
async fn serve_link(
    key: String,
    mut control: UnixStream,
    state_dir: PathBuf,
    home: Arc<dyn SessionHome>,
    mut stopping: watch::Receiver<bool>,
) {
    let socket = attach::socket_path(&state_dir, &key);
    let listener = match attach::bind(&socket).await {
        Ok(Bound::Listening(listener)) => listener,
        Ok(Bound::AlreadyServed) => {
            let _ = control
                .write_all(attach::ready_line(&socket, false).as_bytes())
                .await;
            return;
        }
        Err(error) => {
            let _ = control
                .write_all(error_line(&error.to_string()).as_bytes())
                .await;
            return;
        }
    };
    let link = Link::new();
    let starter: attach::SessionStarter = {
        let (agent, ui) = (link.agent(), link.ui());
        Box::new(move |described: LinkSession| home.start(described, agent, ui))
    };
    if control
        .write_all(attach::ready_line(&socket, true).as_bytes())
        .await
        .is_err()
    {
        let _ = std::fs::remove_file(&socket);
        return;
    }
    let stop = async move {
        // `attach` never writes again: anything read, or the end, means it is gone.
        let mut byte = [0u8; 1];
        tokio::select! {
            _ = control.read(&mut byte) => {}
            _ = stopping.wait_for(|stop| *stop) => {}
        }
    };
    attach::serve(listener, link, Some(key), starter, stop).await;
    let _ = std::fs::remove_file(&socket);
}

fn error_line(message: &str) -> String {
    let mut line = serde_json::json!({"type": "error", "message": message}).to_string();
    line.push('\n');
    line
}
