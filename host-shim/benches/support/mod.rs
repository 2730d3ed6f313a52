//! What the host benches share: an agent that does nothing and the process's memory.

use async_trait::async_trait;
use host_shim::agent::{Agent, AgentSignal, RecentWork};
use host_shim::bindings::agent::{DeliverAs, PromptImage, SessionInfo};
use tokio::sync::mpsc;

/// An agent that accepts every prompt and never starts a turn.
pub struct NullAgent;

#[async_trait]
impl Agent for NullAgent {
    fn attach(&self, _signals: mpsc::Sender<AgentSignal>) {}
    async fn send_prompt(
        &self,
        _: String,
        _: DeliverAs,
        _: Vec<PromptImage>,
    ) -> Result<(), String> {
        Ok(())
    }
    fn abort(&self) {}
    fn is_idle(&self) -> bool {
        true
    }
    fn session_info(&self) -> SessionInfo {
        SessionInfo {
            id: "bench".into(),
            name: None,
            cwd: "/bench".into(),
            accepts_images: false,
        }
    }
    fn recent_work(&self) -> RecentWork {
        RecentWork::default()
    }
}

/// Resident memory of this process, in KiB (Linux `/proc/self/statm`; 0 elsewhere).
pub fn resident_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4
}
