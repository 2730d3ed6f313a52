//! The wire types, the server trait and the client generated from
//! `proto/messenger.proto` (verbatim, docs/protocols.md#robo_claw-grpc). The proto is the only
//! contract with RoboClaw clients: nothing here may depend on tonic-only behaviour.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("robo_claw");
