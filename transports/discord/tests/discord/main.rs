//! The Discord transport's tests, in one binary: the normalizer on real payload shapes
//! (`tests/payloads/`), and the transport against the loopback gateway and REST server.

mod loopback;
mod normalize;
