//! The Discord transport: Gateway v10 over a WebSocket in, REST v10 out (create and edit
//! messages with no pings, typing), attachment downloads from the CDN, on tokio,
//! tokio-tungstenite and reqwest (rustls on ring; no OpenSSL).
//!
//! Modules, the same as in every platform crate: [`wire`] (gateway and REST types),
//! [`normalize`] (pure: payload → envelope), [`client`] (REST: timeouts, retries,
//! [`ratelimit`] buckets, token-free errors), [`gateway`] (the connection state machine),
//! [`settings`] (the [`PLATFORM`] declaration); buttons go out as [`components`] and their
//! clicks are acknowledged by [`interactions`].
//!
//! The token is only ever in the `Authorization` header and in IDENTIFY/RESUME. No error,
//! `diagnose` line or alert contains it (I18): every text from a server or a library is
//! scrubbed of it before it is kept.

#![warn(missing_docs)]

pub mod client;
pub mod components;
pub mod gateway;
pub mod interactions;
pub mod normalize;
pub mod ratelimit;
pub mod settings;
mod state;
mod transport;
pub mod wire;

pub use settings::PLATFORM;
pub use transport::{
    CAPABILITIES, ConfigError, DiscordConfig, DiscordTransport, served_media_type,
};
