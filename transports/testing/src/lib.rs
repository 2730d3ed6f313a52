//! Test-only pieces for transports: an in-memory [`fake`] transport, the [`conformance`]
//! kit every transport passes (I41), and loopback servers that speak a platform's real
//! wire protocol on 127.0.0.1. Used only as a dev-dependency: nothing here ships.

pub mod conformance;
pub mod discord;
pub mod fake;
pub mod multipart;
pub mod slack;
pub mod telegram;
