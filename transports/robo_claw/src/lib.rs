//! The robo_claw transport: bot-connect is the gRPC server (`RoboMessenger`,
//! `proto/messenger.proto`), the RoboClaw Talk app and any other gRPC client connect to it.
//!
//! Modules, as in every platform crate: [`proto`] (the generated wire types), [`normalize`]
//! (pure: `ChatMessage` → envelope, reply → `ChatMessage`), [`service`] (the four RPCs),
//! [`serve`] (binding, TLS, the server task), [`rooms`] (who gets a reply), [`files`]
//! (uploads and downloads), [`auth`] (the peer token), [`clients`] (per-client tokens,
//! senders and room namespaces), [`settings`] (the [`PLATFORM`] declaration).
//!
//! What it does beyond the original (docs/protocols.md#robo_claw-grpc): replies go only to
//! the addressed room
//! (docs/decisions.md#decision-8-robo_claw-sends-only-to-the-addressed-room-and-knows-only-its-own-sender)
//! and wait in a bounded, reported buffer while the room is offline; only the configured
//! sender id is the bot; `SendCommand`, `UploadFile` and `DownloadFile` work; optional TLS;
//! `127.0.0.1` by default instead of `0.0.0.0`.
//!
//! The peer token is only compared, never written anywhere: no error, `diagnose` line or
//! alert contains it (I18).

#![warn(missing_docs)]

pub mod auth;
pub mod clients;
pub mod files;
pub mod normalize;
pub mod peer_token;
pub mod proto;
pub mod rooms;
pub mod serve;
pub mod service;
pub mod settings;
mod shared;
mod transport;

pub use rooms::RoomStatus;
pub use serve::TlsFiles;
pub use settings::PLATFORM;
pub use shared::{Clock, Random};
pub use transport::{
    CAPABILITIES, ClientConfig, MAX_STREAMS, RoboClawConfig, RoboClawTransport, client_notes,
    start_notes,
};
