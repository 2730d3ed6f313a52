//! The wire types, the server trait and the client generated from
//! `proto/messenger.proto` (reference-behaviour §5.3, verbatim). The proto is the only
//! contract with RoboClaw clients: nothing here may depend on tonic-only behaviour.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("robo_claw");
