//! The bridge's only way out: every effect goes through this trait.
//!
//! In the component, `wasm.rs` implements it with the WIT imports. In native tests a fake
//! host implements it, so every bridge rule can be exercised without wasmtime.

use crate::core::pairing_budget::{BudgetView, FailureOutcome};
use crate::model::{
    BotIdentity, DeliverAs, FetchedAttachment, FileReadError, InboxError, Level, Outbound,
    OutboundFile, OutgoingFile, PromptImage, QuestionAnswer, Reaction, Receipt, SavedState,
    SendError, SessionCommand, SessionInfo, SessionReply, StateChanges, ToolDecision, WorkFacts,
};

/// The capabilities the host grants the bridge (one method per WIT import function).
pub trait Host {
    /// `transport.identify`.
    fn identify(&mut self, transport: &str) -> Result<BotIdentity, String>;
    /// `transport.listen`.
    fn listen(&mut self, transport: &str) -> Result<(), String>;
    /// `transport.send`.
    fn send(&mut self, message: &Outbound) -> Result<Receipt, SendError>;
    /// `transport.typing` (best effort).
    fn typing(&mut self, transport: &str, conversation_id: &str, thread_id: Option<&str>);
    /// `transport.react` (best effort: the error is for a log line).
    fn react(
        &mut self,
        transport: &str,
        conversation_id: &str,
        message_id: &str,
        reaction: Reaction,
        replaces: Option<Reaction>,
    ) -> Result<(), String>;
    /// `transport.draft`.
    fn draft(
        &mut self,
        transport: &str,
        conversation_id: &str,
        thread_id: Option<&str>,
        draft_id: u64,
        text: &str,
    ) -> Result<(), SendError>;
    /// `transport.fetch-attachment`.
    fn fetch_attachment(
        &mut self,
        transport: &str,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, String>;
    /// `transport.diagnose`.
    fn diagnose(&mut self, transport: &str) -> String;

    /// `agent.send-prompt`.
    fn send_prompt(
        &mut self,
        text: &str,
        deliver_as: DeliverAs,
        images: &[PromptImage],
    ) -> Result<(), String>;
    /// `agent.save-to-inbox`: writes a chat's file as `dir/name` inside the agent's working
    /// directory, never replacing one, and returns the path written. A host without an
    /// inbox (test fakes and benches written before it) refuses, so the chat hears why.
    fn save_to_inbox(&mut self, dir: &str, name: &str, data: &[u8]) -> Result<String, InboxError> {
        let _ = (dir, name, data);
        Err(InboxError::Failed("this host cannot save files".into()))
    }
    /// `agent.read-file`: the bytes of the file the agent asked to send, at most
    /// `max_bytes`. A host without it (test fakes and benches written before it) refuses,
    /// so the agent hears why.
    fn read_file(&mut self, path: &str, max_bytes: u64) -> Result<OutgoingFile, FileReadError> {
        let _ = (path, max_bytes);
        Err(FileReadError::Failed("this host cannot read files".into()))
    }
    /// `transport.upload-limit`: the most bytes one upload may hold; 0 when the transport
    /// cannot upload (the default of hosts written before files out).
    fn upload_limit(&mut self, transport: &str) -> u64 {
        let _ = transport;
        0
    }
    /// `transport.send-file`.
    /// Takes the file by value: its bytes may be a third of the bridge's memory, and a
    /// copy made only to cross the boundary could be the one that does not fit.
    fn send_file(&mut self, file: OutboundFile) -> Result<Receipt, SendError> {
        let _ = file;
        Err(SendError::Failed("this host cannot upload files".into()))
    }
    /// `speech.transcribe`: `data` (of `media_type`, named `name` for its extension) to
    /// text with `engine`, within `timeout_ms`. A host without speech (test fakes and
    /// benches written before it) refuses, so the chat hears why.
    fn transcribe(
        &mut self,
        engine: &crate::model::VoiceEngine,
        media_type: &str,
        name: &str,
        data: &[u8],
        timeout_ms: u32,
    ) -> Result<String, String> {
        let _ = (engine, media_type, name, data, timeout_ms);
        Err("this host cannot transcribe speech".into())
    }
    /// `agent.resolve-tool-call`: the verdict on a tool call left pending under `id`.
    fn resolve_tool_call(&mut self, id: &str, decision: &ToolDecision);
    /// `agent.answer-question`: the answer to the question passed to `on_question` under
    /// `id` (the host's id), exactly once.
    fn answer_question(&mut self, id: &str, answer: &QuestionAnswer);
    /// `agent.abort`.
    fn abort(&mut self);
    /// `agent.is-idle`.
    fn is_idle(&mut self) -> bool;
    /// `agent.session-info`.
    fn session_info(&mut self) -> SessionInfo;
    /// `agent.work-snapshot`: raw facts for the digest; what is unknown is `None`.
    fn work_snapshot(&mut self) -> WorkFacts;
    /// `agent.run-session-command`. A host without session commands (test fakes written
    /// before them) refuses, so the chat hears that rather than nothing.
    fn session_command(&mut self, command: &SessionCommand) -> Result<SessionReply, String> {
        let _ = command;
        Err("this agent has no session commands".into())
    }

    /// `ui.notify`: the local terminal, the only place a pairing code goes.
    fn notify(&mut self, level: Level, text: &str);
    /// `ui.confirm`: a yes/no question at the terminal (fails closed).
    fn confirm(&mut self, title: &str, message: &str) -> bool;

    /// `store.load`.
    fn load_state(&mut self) -> Option<SavedState>;
    /// `store.save`.
    fn save_state(&mut self, changes: &StateChanges) -> Result<(), String>;

    /// `clock.now-ms`.
    fn now_ms(&mut self) -> u64;
    /// `clock.request-tick`.
    fn request_tick(&mut self, at_ms: u64);

    /// `rng.random-bytes`.
    fn random_bytes(&mut self, len: u32) -> Vec<u8>;

    /// `lock.acquire`: `stale_after_ms` is how old another holder's lock must be before
    /// it is reclaimed.
    fn acquire_lock(&mut self, name: &str, stale_after_ms: u64) -> Result<(), String>;
    /// `lock.release`.
    fn release_lock(&mut self, name: &str);

    /// `pairing.closed-since`: when the host's pairing budget closed, if it is closed.
    fn pairing_closed_since(&mut self) -> Option<u64>;
    /// `pairing.record-failure`: one wrong code judged at `now_ms`.
    fn pairing_record_failure(&mut self, now_ms: u64, per_hour: u32) -> FailureOutcome;
    /// `pairing.refused-unjudged`.
    fn pairing_refused_unjudged(&mut self);
    /// `pairing.reopen`: an operator asked for a fresh code.
    fn pairing_reopen(&mut self);
    /// `pairing.view`.
    fn pairing_view(&mut self, now_ms: u64) -> BudgetView;

    /// `log.write`: event name and scalar fields, never bodies.
    fn log(&mut self, level: Level, event: &str, fields: &[(&str, String)]);
}
