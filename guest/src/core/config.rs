//! Configuration: schema, defaults, validation and merge (reference-behaviour §4.1–4.3).
//!
//! The host finds the files and hands over their raw text; everything else happens here,
//! so every message a person sees about their config is tested in one place.

use crate::model::DeliverAs;

/// Which tools a messenger-originated turn may run (§3.16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteToolPolicy {
    /// Every tool.
    Unrestricted,
    /// Only `read`, `grep`, `find`, `ls`.
    ReadOnly,
    /// No tool at all.
    NoTools,
}

/// Whether each remote tool call needs a local yes (§3.16, I39).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteToolApproval {
    /// No approval.
    Off,
    /// Ask locally for every call.
    Each,
}

/// `bridge.attachments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentSettings {
    /// Media types that may be forwarded.
    pub allowed_media_types: Vec<String>,
    /// Most attachments in one message.
    pub max_count: u32,
    /// Largest attachment in bytes.
    pub max_bytes: u64,
}

/// `bridge.broadcast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BroadcastSettings {
    /// Send progress cards.
    pub progress: bool,
    /// Send final replies.
    pub replies: bool,
}

/// `bridge.rateLimit` (0 disables a limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitSettings {
    /// Prompts per identity per minute.
    pub prompts_per_minute: u32,
    /// Commands per identity per minute.
    pub commands_per_minute: u32,
}

/// The resolved `bridge` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeConfig {
    /// Local slash command namespace (`/connect`).
    pub local_command: String,
    /// Prefixes that mark a remote command.
    pub remote_prefixes: Vec<String>,
    /// Bot user name for `@bot` mentions (without `@`).
    pub bot_username: Option<String>,
    /// How prompts are delivered while the agent is busy (`Steer` or `FollowUp`).
    pub busy_delivery: DeliverAs,
    /// Pairing code lifetime.
    pub pairing_ttl_ms: u64,
    /// Digits in a pairing code.
    pub pairing_digits: u32,
    /// Wrong attempts before a code is replaced.
    pub pairing_max_attempts: u32,
    /// Pre-trusted identities (`transport:userId`).
    pub allow_users: Vec<String>,
    /// Unknown identities must pair.
    pub require_pairing: bool,
    /// Channel messages must address the bot.
    pub require_addressing: bool,
    /// Longest digest card.
    pub digest_max_length: u32,
    /// Attachment policy.
    pub attachments: AttachmentSettings,
    /// What is broadcast.
    pub broadcast: BroadcastSettings,
    /// Remote input rate limits.
    pub rate_limit: RateLimitSettings,
    /// Minimum interval between progress card updates.
    pub progress_min_interval_ms: u64,
    /// Tool policy for remote turns.
    pub remote_tool_policy: RemoteToolPolicy,
    /// Per-call approval for remote turns.
    pub remote_tool_approval: RemoteToolApproval,
    /// Most messages one send may produce.
    pub max_chunks: u32,
}

impl Default for BridgeConfig {
    /// The original's defaults (reference-behaviour §3.1).
    fn default() -> Self {
        BridgeConfig {
            local_command: "connect".into(),
            remote_prefixes: vec!["/".into(), "connect ".into(), "bot ".into()],
            bot_username: None,
            busy_delivery: DeliverAs::FollowUp,
            pairing_ttl_ms: 300_000,
            pairing_digits: 6,
            pairing_max_attempts: 3,
            allow_users: Vec::new(),
            require_pairing: true,
            require_addressing: true,
            digest_max_length: 1500,
            attachments: AttachmentSettings {
                allowed_media_types: ["image/png", "image/jpeg", "image/gif", "image/webp"]
                    .map(String::from)
                    .to_vec(),
                max_count: 4,
                max_bytes: 8 * 1024 * 1024,
            },
            broadcast: BroadcastSettings { progress: true, replies: true },
            rate_limit: RateLimitSettings { prompts_per_minute: 30, commands_per_minute: 60 },
            progress_min_interval_ms: 1000,
            remote_tool_policy: RemoteToolPolicy::Unrestricted,
            remote_tool_approval: RemoteToolApproval::Off,
            max_chunks: 8,
        }
    }
}
