//! Scenarios: the agent's `send_file` (docs/media.md#files-out) goes to the chats of the
//! current turn; a remote turn's path is judged before and after the host reads it; what
//! cannot be sent is said to the agent, and nothing is read that could not be sent.

use guest::bridge::Bridge;
use guest::model::{AgentEvent, FileReadError, OutgoingFile, SendError, TurnOrigin};

use crate::support::{FakeHost, dm, pair, started};

const MIB: u64 = 1024 * 1024;

fn paired(host: &mut FakeHost) -> Bridge {
    let mut bridge = started(host, "{}", &["tg", "dc"]).0;
    pair(&mut bridge, host, "tg", "c1", "u1");
    host.clear_records();
    bridge
}

fn file(host: &mut FakeHost, path: &str, resolved: &str, data: &[u8]) {
    host.files.insert(
        path.into(),
        Ok(OutgoingFile {
            resolved_path: resolved.into(),
            size_bytes: data.len() as u64,
            data: data.to_vec(),
        }),
    );
}

/// A remote turn the chat `tg:c1` started.
fn remote_turn(bridge: &mut Bridge, host: &mut FakeHost) {
    bridge.on_envelope(host, dm("tg", "c1", "u1", "send me the report"));
    assert_eq!(host.prompts.len(), 1);
    bridge.on_agent_event(host, AgentEvent::TurnStarted(TurnOrigin::Remote));
}

#[test]
fn a_remote_turns_file_goes_to_the_chat_that_asked_read_within_the_cap() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.upload_limits.insert("tg".into(), 50 * MIB);
    file(
        &mut host,
        "out/q3.pdf",
        "/work/demo/out/q3.pdf",
        b"%PDF-1.7 q3",
    );
    remote_turn(&mut bridge, &mut host);

    let told = bridge
        .send_file(&mut host, "out/q3.pdf", Some("Q3"))
        .expect("sent");
    assert_eq!(told, "Sent q3.pdf (11 bytes) to Tg c1.");
    // The bridge's 20 MiB binds before the platform's 50.
    assert_eq!(host.reads, [("out/q3.pdf".to_string(), 20 * MIB)]);
    assert_eq!(host.uploads.len(), 1);
    let upload = &host.uploads[0];
    assert_eq!(
        (upload.transport.as_str(), upload.conversation_id.as_str()),
        ("tg", "c1")
    );
    assert_eq!(upload.name, "q3.pdf");
    assert_eq!(upload.media_type, "application/pdf");
    assert_eq!(upload.caption, "Q3");
    assert!(!upload.as_image);
    assert_eq!(upload.data, b"%PDF-1.7 q3");
}

#[test]
fn a_link_that_leads_into_a_protected_path_is_refused_after_the_read() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.upload_limits.insert("tg".into(), 50 * MIB);
    file(
        &mut host,
        "notes.txt",
        "/work/demo/.git/config",
        b"[remote]\nurl = x\n",
    );
    remote_turn(&mut bridge, &mut host);

    let refused = bridge
        .send_file(&mut host, "notes.txt", None)
        .expect_err("refused");
    assert!(
        refused.contains(".git/config") && refused.contains("protected"),
        "{refused}"
    );
    assert!(host.uploads.is_empty());
}

#[test]
fn a_protected_path_is_refused_before_anything_is_read() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.upload_limits.insert("tg".into(), 50 * MIB);
    remote_turn(&mut bridge, &mut host);
    let refused = bridge
        .send_file(&mut host, ".env", None)
        .expect_err("refused");
    assert!(refused.contains("'.env'"), "{refused}");
    assert!(host.reads.is_empty(), "{:?}", host.reads);
}

#[test]
fn a_local_turn_is_not_restricted_and_goes_to_the_chats_that_follow() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.upload_limits.insert("tg".into(), 50 * MIB);
    file(&mut host, ".env", "/work/demo/.env", b"DEBUG=1\n");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    let told = bridge.send_file(&mut host, ".env", None).expect("sent");
    assert!(told.starts_with("Sent .env"), "{told}");
    assert_eq!(host.uploads.len(), 1);
    assert_eq!(host.uploads[0].conversation_id, "c1");
}

#[test]
fn with_no_chat_in_the_turn_or_no_upload_nothing_is_read() {
    let mut host = FakeHost::new();
    let mut bridge = started(&mut host, "{}", &["tg"]).0;
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    let nobody = bridge
        .send_file(&mut host, "a.txt", None)
        .expect_err("no chat");
    assert!(
        nobody.contains("no chat takes part in this turn"),
        "{nobody}"
    );

    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    remote_turn(&mut bridge, &mut host);
    // `tg` answers 0: it cannot upload.
    let unable = bridge
        .send_file(&mut host, "a.txt", None)
        .expect_err("cannot upload");
    assert!(unable.contains("tg cannot upload files"), "{unable}");
    assert!(host.reads.is_empty(), "{:?}", host.reads);
}

#[test]
fn a_missing_file_and_a_refused_upload_are_said_to_the_agent() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.upload_limits.insert("tg".into(), 50 * MIB);
    remote_turn(&mut bridge, &mut host);
    host.files.insert(
        "gone.txt".into(),
        Err(FileReadError::Failed(
            "there is no file at 'gone.txt'".into(),
        )),
    );
    let missing = bridge
        .send_file(&mut host, "gone.txt", None)
        .expect_err("missing");
    assert_eq!(
        missing,
        "gone.txt was not sent: there is no file at 'gone.txt'"
    );

    file(&mut host, "a.txt", "/work/demo/a.txt", b"hello");
    host.fail_transport
        .insert("tg".into(), SendError::Failed("chat not found".into()));
    let refused = bridge
        .send_file(&mut host, "a.txt", None)
        .expect_err("refused");
    assert_eq!(
        refused,
        "a.txt was not sent: Tg c1 refused it: chat not found"
    );
}

#[test]
fn a_file_over_the_limit_is_said_in_the_chat_too() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.upload_limits.insert("tg".into(), 10 * MIB);
    host.files.insert(
        "big.zip".into(),
        Ok(OutgoingFile {
            resolved_path: "/work/demo/big.zip".into(),
            size_bytes: 12 * MIB,
            data: Vec::new(),
        }),
    );
    remote_turn(&mut bridge, &mut host);
    host.sent.clear();
    let refused = bridge
        .send_file(&mut host, "big.zip", None)
        .expect_err("too large");
    assert!(
        refused.starts_with("big.zip is 12.0 MB, and Tg takes files of up to 10.0 MB"),
        "{refused}"
    );
    assert_eq!(host.reads, [("big.zip".to_string(), 10 * MIB)]);
    let said = host.texts_to("tg", "c1");
    assert!(
        said.iter()
            .any(|t| t.contains("could not send a file") && t.contains("big.zip")),
        "{said:?}"
    );
}
