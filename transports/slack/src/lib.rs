//! The Slack transport: Socket Mode in (a WebSocket the app opens, so no public URL is
//! needed), the Web API out (`chat.postMessage`, `chat.update`), attachment downloads, on
//! reqwest and tokio-tungstenite (rustls on ring) and tokio.
//!
//! Modules, the same as in every platform crate: [`wire`] (Slack's shapes), [`normalize`]
//! (pure: payload → envelope, with [`mrkdwn`] for the text), [`client`] (the Web API:
//! timeouts, retries, errors), [`listen`] (keeping Socket Mode connected, and the
//! dispatcher) with [`socket`] (one connection) and [`dedupe`], [`settings`] (the
//! [`PLATFORM`] declaration); buttons go out as Block Kit [`blocks`].
//!
//! Two credentials, both read by the host from environment variables the config names:
//! the bot token (`xoxb-…`, `tokenEnv`) for the Web API and downloads, and the app-level
//! token (`xapp-…`, `appTokenEnv`) for `apps.connections.open` only. They only ever go
//! into `Authorization` headers; no error, `diagnose` line or alert contains them (I18).
//!
//! Typing: Slack's Web API has no typing indicator for bots (the old RTM `typing` event
//! is gone with RTM), so [`CAPABILITIES`] says `typing: false` and `typing` does nothing,
//! rather than faking one with a placeholder message.

#![warn(missing_docs)]

pub mod blocks;
pub mod client;
pub mod dedupe;
pub mod listen;
pub mod mrkdwn;
pub mod normalize;
pub mod settings;
pub mod socket;
mod state;
mod transport;
pub mod wire;

pub use settings::PLATFORM;
pub use socket::SocketTimings;
pub use transport::{CAPABILITIES, ConfigError, SlackConfig, SlackTransport};
