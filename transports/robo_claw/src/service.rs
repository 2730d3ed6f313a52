//! The four RPCs of `RoboMessenger`, as the server the RoboClaw Talk app talks to.
//!
//! **ChatStream.** After the peer token is checked (call metadata, else the first
//! message's `metadata.auth_token`; a wrong or missing token ends the stream with
//! `UNAUTHENTICATED` and nothing is delivered), a stream belongs to one room: the one in
//! the `x-robo-claw-room-id` call metadata, else the first message's `metadata.room_id`
//! (`"default"` when absent). Joining the room writes its buffered replies first. A
//! message naming another room ends the stream with `FAILED_PRECONDITION` (open one
//! stream per room) instead of being delivered where its replies would never be seen.
//! Messages are normalized and handed to the session in the order the stream carried
//! them. A client may stop sending and keep reading; the stream leaves its room when the
//! client goes away.
//!
//! **Clients.** With `clients` configured ([`crate::clients`]), the token says which
//! client calls; a message whose sender is not one of that client's ends the stream (or
//! fails the call) with `PERMISSION_DENIED` before anything is delivered, rooms are the
//! client's own (`<client>:<room>` to the bridge, `<room>` on the wire), and an upload is
//! readable and attachable only by the client that made it (another's is `NOT_FOUND`,
//! like an unknown id).
//!
//! **SendCommand.** The transport cannot run a command; the bridge does. So the message
//! is delivered as an addressed, direct envelope (content with a leading `/` added when
//! missing) and every reply the bridge sends to that room while it handles this envelope
//! is taken for the command instead of the room's streams. The transport knows when the
//! handling ends because the session drops the envelope's receipt only then
//! ([`transport_core::InboundSink::deliver_and_wait`]). The answer is
//! `CommandResponse { success: true, message: <the replies, blank-line separated>,
//! result_json: {"room_id", "replies": [{"kind", "text"}]} }`.
//! Limits: one command at a time; a reply the bridge sends to that room for a message it
//! received *before* the command, while the command waits its turn, is taken too; when
//! the bridge has not finished within `commandTimeoutMs` the response says so
//! (`success: false`) and later replies go to the room's streams as usual. Commands use
//! the bridge's default `/` prefix: a bridge configured without it does not see one.
//!
//! **UploadFile.** Chunks are collected up to `maxUploadBytes` (larger → `RESOURCE_EXHAUSTED`,
//! nothing kept), stored in memory under a new random id, and answered with that id. A
//! `ChatStream` message carrying it in `metadata.file_id` becomes a prompt with that
//! attachment; the bridge fetches the bytes through `fetch_attachment`.
//!
//! **DownloadFile.** Any stored file (an upload, or one offered with
//! [`crate::RoboClawTransport::offer_file`]) by id, in 64 KiB chunks; unknown → `NOT_FOUND`.
//! `UploadFile` and `DownloadFile` carry no message metadata, so they need the token in
//! the call metadata.

use std::sync::Arc;

use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use transport_core::platform::Normalized;
use transport_core::{Envelope, InboundSink};

use crate::auth::{self, HeaderCheck};
use crate::clients::Caller;
use crate::files::{self, Upload, UploadError};
use crate::normalize::{self, check_room, normalize_message, room_of, sender_of};
use crate::peer_token::AUTH_TOKEN_KEY;
use crate::proto::robo_messenger_server::RoboMessenger;
use crate::proto::{ChatMessage, CommandResponse, DownloadRequest, FileChunk, UploadResponse};
use crate::rooms::Outlet;
use crate::shared::{LiveStream, Shared};

/// Call metadata naming the room a `ChatStream` listens to before it sends anything.
pub const ROOM_HEADER: &str = "x-robo-claw-room-id";

/// The gRPC service; one per running server.
pub(crate) struct Messenger {
    pub(crate) shared: Arc<Shared>,
    pub(crate) cancel: CancellationToken,
}

fn not_running() -> Status {
    Status::unavailable("the bridge is stopping; connect again when it runs")
}

impl Messenger {
    fn sink(&self) -> Result<InboundSink, Status> {
        self.shared.sink().ok_or_else(not_running)
    }

    /// Who made the call; refuses a call whose metadata carries a wrong token, or none
    /// when one is needed and `fallback` (the message's `auth_token`) is not one either.
    fn authenticate<T>(
        &self,
        request: &Request<T>,
        fallback: Option<&str>,
    ) -> Result<Caller, Status> {
        let access = &self.shared.options.access;
        let caller = match auth::check_header(access, request.metadata()) {
            HeaderCheck::Open => Some(Caller::Anyone),
            HeaderCheck::Accepted(caller) => Some(caller),
            HeaderCheck::Refused => None,
            HeaderCheck::Absent => fallback.and_then(|offered| access.identify(offered)),
        };
        caller.ok_or_else(|| {
            self.shared.update(|stats| stats.refused += 1);
            auth::refused()
        })
    }

    /// Refuses a message whose sender the caller may not use: with per-client tokens, a
    /// client speaks only as its own senders, so it cannot pose as another client's
    /// paired identity (or answer that identity's approvals).
    fn check_sender(&self, caller: Caller, message: &ChatMessage) -> Result<(), Status> {
        let access = &self.shared.options.access;
        let sender = sender_of(message);
        if *sender == self.shared.options.self_sender_id || access.may_send_as(caller, &sender) {
            return Ok(());
        }
        self.shared.update(|stats| stats.denied += 1);
        Err(access.denied_sender(caller, &sender))
    }

    /// Hands an envelope to the session unless the server is stopping.
    async fn deliver(&self, sink: &InboundSink, envelope: Envelope) -> bool {
        tokio::select! {
            () = self.cancel.cancelled() => false,
            delivered = sink.deliver(envelope) => delivered.is_ok(),
        }
    }
}

/// One `ChatStream` after its headers were accepted.
struct ChatSession {
    messenger: Messenger,
    sink: InboundSink,
    stream: u64,
    outlet: Outlet,
    /// Who is on the other end, once its token was accepted.
    caller: Option<Caller>,
    /// The room (conversation id, namespaced per client) this stream listens to, once
    /// joined.
    room: Option<String>,
    /// The room named in the call metadata (as the client named it), joined once the
    /// first message proves the token (a stream that has not authenticated hears nothing).
    named_room: Option<String>,
    _live: LiveStream,
}

impl ChatSession {
    async fn run(mut self, mut inbound: Streaming<ChatMessage>) {
        let cancel = self.messenger.cancel.clone();
        let outlet = self.outlet.clone();
        let mut reading = true;
        loop {
            let next = tokio::select! {
                () = cancel.cancelled() => break,
                () = outlet.closed() => break,
                next = inbound.message(), if reading => next,
            };
            match next {
                Ok(Some(message)) => {
                    if let Err(status) = self.take(message).await {
                        // The status ends the client's stream; the queue has room for it
                        // (an unauthenticated stream was never written to).
                        let _ = self.outlet.try_send(Err(status));
                        break;
                    }
                }
                // The client is done sending; it may still be reading replies. Without a
                // room it never gets any, so there is nothing to keep it for.
                Ok(None) if self.room.is_some() => reading = false,
                Ok(None) | Err(_) => break,
            }
        }
        self.messenger.shared.leave(self.stream);
    }

    /// One message: authenticate, bind the room, normalize, deliver.
    async fn take(&mut self, message: ChatMessage) -> Result<(), Status> {
        let shared = self.messenger.shared.clone();
        let access = &shared.options.access;
        let caller = match self.caller {
            Some(caller) => caller,
            None => {
                let offered = message.metadata.get(AUTH_TOKEN_KEY).map(String::as_str);
                let Some(caller) = offered.and_then(|offered| access.identify(offered)) else {
                    shared.update(|stats| stats.refused += 1);
                    return Err(auth::refused());
                };
                self.caller = Some(caller);
                caller
            }
        };
        self.messenger.check_sender(caller, &message)?;
        let room = access.room_key(
            caller,
            &room_of(&message.metadata).map_err(Status::invalid_argument)?,
        );
        if self.room.is_none()
            && let Some(named) = self.named_room.take()
        {
            let named = access.room_key(caller, &named);
            shared.join(&named, self.stream, self.outlet.clone());
            self.room = Some(named);
        }
        match &self.room {
            None => {
                shared.join(&room, self.stream, self.outlet.clone());
                self.room = Some(room.clone());
            }
            Some(bound) if *bound != room => {
                return Err(Status::failed_precondition(format!(
                    "this stream belongs to room {:?} and cannot carry a message for room {:?}; open one ChatStream per room",
                    access.client_room(bound),
                    access.client_room(&room)
                )));
            }
            Some(_) => {}
        }
        match normalize_message(&message, &shared.options.self_sender_id) {
            Normalized::Message(mut envelope) => {
                envelope.conversation_id = room;
                {
                    let files = shared.files();
                    let owner = access.owner(caller);
                    for attachment in &mut envelope.attachments {
                        // Another client's upload is as absent as one never made: the
                        // bridge would otherwise fetch it for this caller's prompt.
                        if files
                            .get(&attachment.reference)
                            .is_some_and(|file| !file.readable_by(owner))
                        {
                            return Err(no_such_file(&attachment.reference));
                        }
                        files.describe(attachment);
                    }
                }
                shared.update(|stats| stats.received += 1);
                if !self.messenger.deliver(&self.sink, envelope).await {
                    return Err(not_running());
                }
            }
            Normalized::Ignored(reason) => shared.update(|stats| {
                stats.ignored += 1;
                stats.last_skip = Some(reason);
            }),
        }
        Ok(())
    }
}

/// The room named in the call metadata, if any.
fn header_room<T>(request: &Request<T>) -> Result<Option<String>, Status> {
    let Some(value) = request.metadata().get(ROOM_HEADER) else {
        return Ok(None);
    };
    let room = value
        .to_str()
        .map_err(|_| Status::invalid_argument(format!("{ROOM_HEADER} must be ASCII text")))?
        .trim();
    if room.is_empty() {
        return Ok(None);
    }
    check_room(room).map(Some).map_err(Status::invalid_argument)
}

/// The answer for a file id that is unknown or another client's: alike, so a client
/// learns nothing about other clients' files.
fn no_such_file(id: &str) -> Status {
    Status::not_found(format!(
        "there is no file {id:?}: it was never stored, or it was forgotten to keep only the most recent files"
    ))
}

fn upload_status(error: UploadError) -> Status {
    match error {
        UploadError::TooLarge { .. } => Status::resource_exhausted(error.to_string()),
        UploadError::Empty => Status::invalid_argument(error.to_string()),
    }
}

#[tonic::async_trait]
impl RoboMessenger for Messenger {
    type ChatStreamStream = ReceiverStream<Result<ChatMessage, Status>>;

    async fn chat_stream(
        &self,
        request: Request<Streaming<ChatMessage>>,
    ) -> Result<Response<Self::ChatStreamStream>, Status> {
        let sink = self.sink()?;
        let shared = self.shared.clone();
        let caller = match auth::check_header(&shared.options.access, request.metadata()) {
            HeaderCheck::Open => Some(Caller::Anyone),
            HeaderCheck::Accepted(caller) => Some(caller),
            HeaderCheck::Absent => None,
            HeaderCheck::Refused => {
                shared.update(|stats| stats.refused += 1);
                return Err(auth::refused());
            }
        };
        let room = header_room(&request)?;
        let live = shared.open_stream().ok_or_else(|| {
            Status::resource_exhausted(format!(
                "this bridge already serves {} streams; close one first",
                shared.options.max_streams
            ))
        })?;
        let (outlet, replies) =
            tokio::sync::mpsc::channel(shared.peek_rooms(|rooms| rooms.queue_capacity()));
        let stream = shared.next_id();
        // A client that named its room hears the room's replies before it sends anything;
        // an unauthenticated one hears nothing until its first message proves the token.
        let (room, named_room) = match caller {
            Some(caller) => (
                room.map(|room| shared.options.access.room_key(caller, &room)),
                None,
            ),
            None => (None, room),
        };
        if let Some(room) = &room {
            shared.join(room, stream, outlet.clone());
        }
        let session = ChatSession {
            messenger: Messenger {
                shared,
                cancel: self.cancel.clone(),
            },
            sink,
            stream,
            outlet,
            caller,
            room,
            named_room,
            _live: live,
        };
        tokio::spawn(session.run(request.into_inner()));
        Ok(Response::new(ReceiverStream::new(replies)))
    }

    async fn send_command(
        &self,
        request: Request<ChatMessage>,
    ) -> Result<Response<CommandResponse>, Status> {
        let sink = self.sink()?;
        let offered = request.get_ref().metadata.get(AUTH_TOKEN_KEY).cloned();
        let caller = self.authenticate(&request, offered.as_deref())?;
        let message = request.into_inner();
        self.check_sender(caller, &message)?;
        let room = self.shared.options.access.room_key(
            caller,
            &room_of(&message.metadata).map_err(Status::invalid_argument)?,
        );
        let mut envelope = match normalize_message(&message, &self.shared.options.self_sender_id) {
            Normalized::Message(envelope) => envelope,
            Normalized::Ignored(reason) => {
                return Err(Status::invalid_argument(format!("not a command: {reason}")));
            }
        };
        envelope.text = normalize::command_text(&envelope.text);
        envelope.conversation_id.clone_from(&room);
        let timeout = self.shared.options.command_timeout;
        let deadline = Instant::now() + timeout;
        let seconds = timeout.as_secs_f64();
        let Ok(_turn) = tokio::time::timeout_at(deadline, self.shared.commands.lock()).await else {
            return Ok(Response::new(CommandResponse {
                success: false,
                message: format!(
                    "another command was still waiting for the bridge after {seconds} s; try again"
                ),
                result_json: serde_json::json!({ "room_id": room, "replies": [] }).to_string(),
            }));
        };
        self.shared.update(|stats| stats.commands += 1);
        self.shared.rooms(|rooms| rooms.start_capture(&room));
        let handled = tokio::select! {
            () = self.cancel.cancelled() => None,
            handled = tokio::time::timeout_at(deadline, sink.deliver_and_wait(envelope)) => Some(handled),
        };
        let replies = self.shared.rooms(|rooms| rooms.end_capture(&room));
        let result_json = serde_json::json!({
            "room_id": room,
            "replies": replies
                .iter()
                .map(|reply| serde_json::json!({ "kind": reply.kind, "text": reply.text }))
                .collect::<Vec<_>>(),
        })
        .to_string();
        let texts: Vec<&str> = replies.iter().map(|reply| reply.text.as_str()).collect();
        match handled {
            Some(Ok(Ok(()))) => Ok(Response::new(CommandResponse {
                success: true,
                message: texts.join("\n\n"),
                result_json,
            })),
            Some(Err(_elapsed)) => Ok(Response::new(CommandResponse {
                success: false,
                message: format!(
                    "the bridge did not finish the command within {seconds} s (it may be busy); anything it answers later goes to the room's streams"
                ),
                result_json,
            })),
            None | Some(Ok(Err(_))) => Err(not_running()),
        }
    }

    async fn upload_file(
        &self,
        request: Request<Streaming<FileChunk>>,
    ) -> Result<Response<UploadResponse>, Status> {
        let caller = self.authenticate(&request, None)?;
        let mut chunks = request.into_inner();
        let mut upload = Upload::new(self.shared.options.max_upload_bytes);
        while !upload.is_finished() {
            let next = tokio::select! {
                () = self.cancel.cancelled() => return Err(not_running()),
                next = chunks.message() => next?,
            };
            match next {
                Some(chunk) => upload.push(chunk).map_err(upload_status)?,
                None => break,
            }
        }
        let mut file = upload.finish().map_err(upload_status)?;
        file.owner = self.shared.options.access.owner(caller).map(str::to_owned);
        let id = self
            .shared
            .random_id("rcf")
            .map_err(|error| Status::internal(format!("could not make a file id: {error}")))?;
        let message = format!(
            "stored {:?} ({} bytes, {}); send it with metadata.file_id = {id:?}",
            file.name,
            file.data.len(),
            file.media_type
        );
        self.shared.files().insert(id.clone(), file);
        self.shared.update(|stats| stats.uploads += 1);
        Ok(Response::new(UploadResponse {
            success: true,
            file_id: id,
            message,
        }))
    }

    type DownloadFileStream = tokio_stream::Iter<std::vec::IntoIter<Result<FileChunk, Status>>>;

    async fn download_file(
        &self,
        request: Request<DownloadRequest>,
    ) -> Result<Response<Self::DownloadFileStream>, Status> {
        let caller = self.authenticate(&request, None)?;
        let id = request.into_inner().file_id.trim().to_owned();
        let owner = self.shared.options.access.owner(caller);
        let file = self
            .shared
            .files()
            .get(&id)
            .filter(|file| file.readable_by(owner))
            .ok_or_else(|| no_such_file(&id))?;
        self.shared.update(|stats| stats.downloads += 1);
        let chunks: Vec<_> = files::download_chunks(&id, &file)
            .into_iter()
            .map(Ok)
            .collect();
        Ok(Response::new(tokio_stream::iter(chunks)))
    }
}
