//! The robo_claw transport's tests, in one binary: the normalizer, the server with real
//! tonic clients (loopback, per-client tokens, TLS, the conformance kit) and a Python
//! grpcio client (`tests/interop/`); the shared server set-up is in [`support`].

mod support;

mod clients;
mod conformance;
mod interop;
mod loopback;
mod normalize;
mod tls;
