//! Scenarios: files from a chat go into the session's inbox (docs/media.md#files-in), the
//! agent is told where, and every refusal is a reply naming the file and the limit.

use guest::bridge::Bridge;
use guest::model::{Attachment, AttachmentKind, Envelope, FetchedAttachment};

use crate::support::{FakeHost, dm, image, pair, started};

fn paired(host: &mut FakeHost, config: &str) -> Bridge {
    let mut bridge = started(host, config, &["tg", "dc"]).0;
    pair(&mut bridge, host, "tg", "c1", "u1");
    host.clear_records();
    bridge
}

fn document(reference: &str, name: &str, size: Option<u64>) -> Attachment {
    Attachment {
        kind: AttachmentKind::File,
        media_type: "application/pdf".into(),
        reference: reference.into(),
        name: Some(name.into()),
        size_bytes: size,
        duration_seconds: None,
    }
}

fn with(text: &str, attachments: Vec<Attachment>) -> Envelope {
    Envelope {
        attachments,
        ..dm("tg", "c1", "u1", text)
    }
}

fn serve(host: &mut FakeHost, reference: &str, media_type: &str, data: &[u8]) {
    host.attachments.insert(
        reference.into(),
        Ok(FetchedAttachment {
            media_type: media_type.into(),
            data: data.to_vec(),
        }),
    );
}

#[test]
fn a_file_is_saved_under_a_safe_name_and_its_path_reaches_the_agent() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, "{}");
    serve(&mut host, "f1", "application/pdf", b"%PDF-1.7 body");

    bridge.on_envelope(
        &mut host,
        with(
            "summarise it",
            vec![document("f1", "../../.report.pdf", Some(13))],
        ),
    );

    assert_eq!(host.inbox.len(), 1, "{:?}", host.inbox.keys());
    assert_eq!(host.inbox[".pi/inbox/report.pdf"], b"%PDF-1.7 body");
    assert_eq!(host.prompts.len(), 1);
    assert_eq!(
        host.prompts[0].text,
        "summarise it\n\n[bot-connect: the sender attached a file, saved in the working \
         directory at\n- .pi/inbox/report.pdf (application/pdf, 13 bytes)]"
    );
    assert!(host.prompts[0].images.is_empty());
    assert!(host.texts_to("tg", "c1").is_empty(), "{:?}", host.sent);
    // Only the file's size is counted for the day, nothing of its bytes is logged.
    assert!(
        host.logs
            .iter()
            .all(|l| l.fields.iter().all(|(_, v)| !v.contains("PDF")))
    );
}

#[test]
fn a_second_file_of_the_same_name_gets_the_next_name_and_replaces_nothing() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, "{}");
    serve(&mut host, "f1", "application/pdf", b"first");
    serve(&mut host, "f2", "application/pdf", b"second");

    bridge.on_envelope(&mut host, with("", vec![document("f1", "notes.pdf", None)]));
    bridge.on_envelope(&mut host, with("", vec![document("f2", "notes.pdf", None)]));

    assert_eq!(host.inbox[".pi/inbox/notes.pdf"], b"first");
    assert_eq!(host.inbox[".pi/inbox/notes-2.pdf"], b"second");
    assert_eq!(host.prompts.len(), 2);
    // Files with no text get a prompt that says what to do with them.
    assert!(
        host.prompts[1]
            .text
            .starts_with("Have a look at the file I sent.\n\n"),
        "{}",
        host.prompts[1].text
    );
    assert!(host.prompts[1].text.contains(".pi/inbox/notes-2.pdf"));
}

#[test]
fn an_image_goes_to_the_model_and_a_file_beside_it_to_the_inbox() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, "{}");
    serve(&mut host, "img", "image/png", &[1, 2, 3]);
    serve(&mut host, "f1", "text/csv", b"a,b\n1,2\n");
    let csv = Attachment {
        media_type: "text/csv".into(),
        ..document("f1", "data.csv", Some(8))
    };

    bridge.on_envelope(&mut host, with("compare", vec![image("img"), csv]));

    assert_eq!(host.prompts.len(), 1);
    assert_eq!(host.prompts[0].images.len(), 1);
    assert!(
        host.prompts[0]
            .text
            .contains(".pi/inbox/data.csv (text/csv, 8 bytes)")
    );
    assert_eq!(
        host.inbox.keys().collect::<Vec<_>>(),
        [".pi/inbox/data.csv"]
    );
}

#[test]
fn a_file_over_the_per_file_cap_is_refused_by_its_declared_size_and_by_its_bytes() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, r#"{"bridge":{"inbox":{"maxFileBytes":1024}}}"#);

    // Declared too big: refused before any download.
    bridge.on_envelope(
        &mut host,
        with("", vec![document("f1", "big.pdf", Some(4096))]),
    );
    assert!(host.fetches.is_empty());
    let replies = host.texts_to("tg", "c1");
    assert_eq!(replies.len(), 1);
    assert!(
        replies[0].contains("\"big.pdf\" is 4.0 KB, more than the 1.0 KB")
            && replies[0].contains("bridge.inbox.maxFileBytes"),
        "{replies:?}"
    );

    // Declared nothing, served too much: refused on the bytes.
    serve(&mut host, "f2", "application/pdf", &[0; 2000]);
    bridge.on_envelope(&mut host, with("", vec![document("f2", "quiet.pdf", None)]));
    assert_eq!(host.fetches, vec![("tg".into(), "f2".into(), 1024)]);
    let replies = host.texts_to("tg", "c1");
    assert!(
        replies[1].contains("\"quiet.pdf\" is 2.0 KB"),
        "{replies:?}"
    );
    assert!(host.inbox.is_empty() && host.prompts.is_empty());
}

#[test]
fn the_daily_cap_holds_across_messages_and_opens_again_the_next_day() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, r#"{"bridge":{"inbox":{"maxBytesPerDay":2048}}}"#);
    serve(&mut host, "f1", "application/pdf", &[1; 1500]);
    serve(&mut host, "f2", "application/pdf", &[2; 1000]);

    bridge.on_envelope(&mut host, with("", vec![document("f1", "a.pdf", None)]));
    bridge.on_envelope(&mut host, with("", vec![document("f2", "b.pdf", None)]));

    assert_eq!(host.inbox.len(), 1);
    assert_eq!(host.prompts.len(), 1);
    let replies = host.texts_to("tg", "c1");
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert!(
        replies[0].contains("taken 1.5 KB of files today") && replies[0].contains("maxBytesPerDay"),
        "{replies:?}"
    );
    // The count is in the saved state, so a restart does not reset it.
    let stored = host.stored.clone().expect("saved");
    assert!(stored.contains(r#""inbox":{"#), "{stored}");

    host.now += 86_400_000;
    bridge.on_envelope(&mut host, with("", vec![document("f2", "b.pdf", None)]));
    assert_eq!(host.inbox.len(), 2);
    assert_eq!(host.prompts.len(), 2);
}

#[test]
fn a_failed_download_or_save_is_said_with_its_reason_and_nothing_is_forwarded() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, "{}");
    host.attachments.insert(
        "gone".into(),
        Err("the file server answered HTTP 404 (download links expire after an hour)".into()),
    );
    bridge.on_envelope(
        &mut host,
        with("read", vec![document("gone", "x.pdf", None)]),
    );

    serve(&mut host, "f1", "application/pdf", b"x");
    host.inbox_error = Some("could not save the file in '.pi/inbox/': disk full".into());
    bridge.on_envelope(&mut host, with("read", vec![document("f1", "y.pdf", None)]));

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "I could not download \"x.pdf\", so nothing was sent to pi: the file server answered \
             HTTP 404 (download links expire after an hour)",
            "I could not save \"y.pdf\" in the inbox, so nothing was sent to pi: could not save \
             the file in '.pi/inbox/': disk full",
        ]
    );
    assert!(host.prompts.is_empty());
}

#[test]
fn with_the_inbox_off_a_file_is_refused_with_a_reply_and_an_agent_without_images_still_gets_files()
{
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, r#"{"bridge":{"inbox":{"enabled":false}}}"#);
    bridge.on_envelope(&mut host, with("read", vec![document("f1", "x.pdf", None)]));
    assert_eq!(host.texts_to("tg", "c1").len(), 1);
    assert!(host.texts_to("tg", "c1")[0].contains("bridge.inbox.enabled is off"));
    assert!(host.fetches.is_empty() && host.prompts.is_empty());

    let mut host = FakeHost::new();
    host.session.accepts_images = false;
    let mut bridge = paired(&mut host, "{}");
    serve(&mut host, "f1", "application/pdf", b"x");
    bridge.on_envelope(&mut host, with("read", vec![document("f1", "x.pdf", None)]));
    assert_eq!(host.prompts.len(), 1);
    assert!(host.prompts[0].text.contains(".pi/inbox/x.pdf"));
}

#[test]
fn a_configured_inbox_directory_is_used_and_a_bad_one_is_refused_at_configure() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, r#"{"bridge":{"inbox":{"dir":"uploads"}}}"#);
    serve(&mut host, "f1", "application/pdf", b"x");
    bridge.on_envelope(&mut host, with("read", vec![document("f1", "x.pdf", None)]));
    assert_eq!(host.inbox_tries, vec![("uploads".into(), "x.pdf".into())]);

    let mut host = FakeHost::new();
    let (_, configuration, _) = started(
        &mut host,
        r#"{"bridge":{"inbox":{"dir":"../outside"}}}"#,
        &["tg"],
    );
    let text = format!("{configuration:?}");
    assert!(
        text.contains("bridge.inbox.dir: must not contain '..'"),
        "{text}"
    );
}
