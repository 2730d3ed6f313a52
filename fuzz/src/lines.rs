//! The agent-link and pi RPC line parsers, and the JSON-lines reader both streams go
//! through (`host-shim`'s `pi::link`, `pi::rpc` and `pi::json_lines`).
//!
//! Properties: no panic on any line; a reason for refusing a line never repeats a secret
//! the line held (it is printed on the terminal and sent back to the extension); and the
//! reader splits any byte stream exactly as its framing rule says.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use host_shim::pi::json_lines::{Record, next_record};
use host_shim::pi::link::{self, FromExtension};
use host_shim::pi::rpc::{self, RpcLine};

use crate::secrets::secrets_in_documents;

/// `refusal` of `line` repeats no secret of the line. A secret counts only when it came
/// from the line: with every occurrence replaced by as many `Q`s the refusal no longer
/// holds it (a fuzzer can write `TOKEN==expected value at line 1`, whose "secret" is
/// part of serde's own wording).
fn assert_no_secret_of(line: &str, refusal: &str, refuse: impl Fn(&str) -> Option<String>) {
    for secret in secrets_in_documents(&[line]) {
        if !refusal.contains(&secret) {
            continue;
        }
        let neutral = line.replace(&secret, &"Q".repeat(secret.len()));
        let from_the_line = refuse(&neutral).is_none_or(|other| !other.contains(&secret));
        assert!(
            !from_the_line,
            "a refusal repeats a secret of its line: {refusal:?}"
        );
    }
}

/// One line from the pi extension over the agent link.
pub fn agent_link_line(data: &[u8]) {
    let line = String::from_utf8_lossy(data);
    match link::parse(&line) {
        Ok(message) => {
            let event = link::agent_event(&message);
            if let FromExtension::Hello {
                protocol, session, ..
            } = &message
            {
                assert!(event.is_none());
                if let Err(why) = link::check_hello(*protocol, session, Some("fuzz-session")) {
                    assert!(!why.is_empty());
                }
            }
        }
        Err(why) => {
            assert!(!why.is_empty());
            assert_no_secret_of(&line, &why, |other| link::parse(other).err());
        }
    }
}

/// One stdout line of `pi --mode rpc`.
pub fn pi_rpc_line(data: &[u8]) {
    let line = String::from_utf8_lossy(data);
    match rpc::parse_line(&line) {
        RpcLine::Invalid(why) => {
            assert!(!why.is_empty());
            assert_no_secret_of(&line, &why, |other| match rpc::parse_line(other) {
                RpcLine::Invalid(why) => Some(why),
                _ => None,
            });
        }
        RpcLine::Response(response) => {
            // What the client reads from a `get_state` answer; total as well.
            let _ = rpc::parse_state(response.data.as_ref());
        }
        RpcLine::Event(_) | RpcLine::Ui(_) | RpcLine::Ignored(_) => {}
    }
}

/// Runs a future that never waits (an in-memory reader is always ready).
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

/// The records the framing rule gives for `input`: lines end at `\n` only, a trailing
/// `\r` is dropped, invalid UTF-8 is replaced, a line longer than `cap` (counted before the
/// `\r` is dropped) is reported by its length, and a last line without `\n` still counts.
pub fn expected_records(input: &[u8], cap: usize) -> Vec<Record> {
    let mut pieces: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    if pieces.last().is_some_and(|last| last.is_empty()) {
        pieces.pop();
    }
    pieces
        .into_iter()
        .map(|piece| {
            if piece.len() > cap {
                Record::TooLong(piece.len())
            } else {
                let piece = piece.strip_suffix(b"\r").unwrap_or(piece);
                Record::Line(String::from_utf8_lossy(piece).into_owned())
            }
        })
        .collect()
}

/// A byte stream through the JSON-lines reader: the first byte picks the cap (0..=63) and
/// the reader's buffer size (1..=4, so records span many fills), the rest is the stream.
pub fn json_lines(data: &[u8]) {
    let Some((&knobs, input)) = data.split_first() else {
        return;
    };
    let cap = usize::from(knobs & 0x3f);
    let buffer = usize::from(knobs >> 6) + 1;
    let mut reader = tokio::io::BufReader::with_capacity(buffer, input);
    let mut records = Vec::new();
    loop {
        match ready(next_record(&mut reader, cap)) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => break,
            Err(error) => panic!("an in-memory read failed: {error}"),
        }
    }
    assert_eq!(records, expected_records(input, cap), "input {input:?}");
    for record in &records {
        if let Record::Line(line) = record {
            assert!(!line.contains('\n'));
            if let Ok(message) = link::parse(line) {
                let _ = link::agent_event(&message);
            }
            let _ = rpc::parse_line(line);
        }
    }
}
