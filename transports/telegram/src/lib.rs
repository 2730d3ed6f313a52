//! The Telegram transport: Bot API long polling in, `sendMessage`/`editMessageText`
//! out, typing hints and attachment downloads, on reqwest (rustls, ring) and tokio.
//!
//! Modules, the same in every platform crate: [`wire`] (Bot API types), [`normalize`]
//! (pure: update → envelope), [`client`] (HTTP, timeouts, retries, errors), [`listen`]
//! (the long-poll loop and its offset), [`settings`] (the [`PLATFORM`] declaration).
//!
//! The token is only ever in request URLs. No error, `diagnose` line or alert contains it
//! (I18): errors are built from reqwest errors without their URL, and everything the
//! server says is scrubbed of the token before it is kept.

#![warn(missing_docs)]

pub mod client;
pub mod html;
pub mod keyboard;
pub mod listen;
pub mod normalize;
pub mod offset;
pub mod settings;
mod state;
mod transport;
pub mod wire;

pub use settings::PLATFORM;
pub use transport::{CAPABILITIES, ConfigError, TelegramConfig, TelegramTransport};
