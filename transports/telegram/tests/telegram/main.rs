//! The Telegram transport's tests, in one binary: the normalizer on real update shapes,
//! and the transport against a loopback Bot API server.

mod loopback;
mod normalize;
