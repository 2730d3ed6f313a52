//! The Slack transport's tests, in one binary: the normalizer on real event shapes, and the
//! transport against the loopback Socket Mode and Web API servers.

mod loopback;
mod normalize;
