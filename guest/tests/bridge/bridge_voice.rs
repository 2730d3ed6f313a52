//! Scenarios: a voice note becomes a prompt (docs/media.md#voice): transcribed by the
//! configured engine, echoed to the chat first, given to the agent marked as speech; and
//! every way it can go wrong is a reply, with nothing forwarded.

use guest::bridge::Bridge;
use guest::model::{Attachment, AttachmentKind, Envelope, FetchedAttachment, VoiceEngine};

use crate::support::{FakeHost, dm, pair, started};

const OPENAI: &str = r#"{"bridge":{"voice":{"engine":"openai","baseUrl":"http://127.0.0.1:9/v1","apiKeyEnv":"MY_WHISPER_KEY","model":"whisper-large-v3","language":"de","timeoutMs":5000,"maxSeconds":120}}}"#;

fn paired(host: &mut FakeHost, config: &str) -> Bridge {
    let mut bridge = started(host, config, &["tg", "dc"]).0;
    pair(&mut bridge, host, "tg", "c1", "u1");
    host.clear_records();
    bridge
}

fn voice_note(seconds: Option<u32>) -> Envelope {
    Envelope {
        attachments: vec![Attachment {
            kind: AttachmentKind::File,
            media_type: "audio/ogg".into(),
            reference: "v1".into(),
            name: None,
            size_bytes: Some(6),
            duration_seconds: seconds,
        }],
        ..dm("tg", "c1", "u1", "")
    }
}

fn serve_voice(host: &mut FakeHost) {
    host.attachments.insert(
        "v1".into(),
        Ok(FetchedAttachment {
            media_type: "audio/ogg".into(),
            data: b"OggS..".to_vec(),
        }),
    );
}

#[test]
fn a_voice_note_is_transcribed_echoed_first_and_sent_as_speech() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, OPENAI);
    serve_voice(&mut host);
    host.transcripts
        .push_back(Ok("  Bitte führe die Tests aus.\n".into()));

    bridge.on_envelope(&mut host, voice_note(Some(4)));

    assert_eq!(
        host.transcribed,
        vec![(
            VoiceEngine::Http {
                base_url: "http://127.0.0.1:9/v1".into(),
                api_key_env: Some("MY_WHISPER_KEY".into()),
                model: "whisper-large-v3".into(),
                language: Some("de".into()),
            },
            "audio/ogg".into(),
            "voice.ogg".into(),
            6,
            5000,
        )]
    );
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["🎙️ Heard: Bitte führe die Tests aus."]
    );
    assert_eq!(host.prompts.len(), 1);
    assert_eq!(
        host.prompts[0].text,
        "[bot-connect: transcribed from a voice note by speech recognition; a word may be \
         misheard]\nBitte führe die Tests aus."
    );
    // The voice note is not also saved as a file.
    assert!(host.inbox.is_empty());
    // The transcript, like typed text, is never logged.
    assert!(
        host.all_log_strings()
            .iter()
            .all(|line| !line.contains("Tests aus"))
    );
}

#[test]
fn without_an_engine_the_reply_says_how_to_set_one_up() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, "{}");
    serve_voice(&mut host);

    bridge.on_envelope(&mut host, voice_note(Some(4)));

    let replies = host.texts_to("tg", "c1");
    assert_eq!(replies.len(), 1);
    assert!(
        replies[0].contains("no transcription engine is set up")
            && replies[0].contains("\"engine\": \"openai\"")
            && replies[0].contains("whisper-cli"),
        "{replies:?}"
    );
    assert!(host.fetches.is_empty() && host.prompts.is_empty());
}

#[test]
fn a_note_over_the_duration_cap_is_refused_before_downloading() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, OPENAI);
    serve_voice(&mut host);

    bridge.on_envelope(&mut host, voice_note(Some(121)));

    let replies = host.texts_to("tg", "c1");
    assert!(
        replies[0].contains("2 min 1 s") && replies[0].contains("bridge.voice.maxSeconds"),
        "{replies:?}"
    );
    assert!(host.fetches.is_empty() && host.transcribed.is_empty() && host.prompts.is_empty());
}

#[test]
fn an_engine_that_fails_or_answers_nothing_or_garbage_gets_a_reply_and_nothing_is_forwarded() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host, OPENAI);
    serve_voice(&mut host);
    host.transcripts.push_back(Err(
        "the transcription server did not answer within 5 s".into()
    ));
    host.transcripts.push_back(Ok("   ".into()));
    host.transcripts
        .push_back(Ok("\u{FFFD}\u{FFFD}\u{FFFD}\u{1}\u{2}x".into()));

    for _ in 0..3 {
        bridge.on_envelope(&mut host, voice_note(None));
    }

    let replies = host.texts_to("tg", "c1");
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert!(
        replies[0].contains("did not answer within 5 s"),
        "{replies:?}"
    );
    assert!(
        replies[1].contains("could not make out any speech"),
        "{replies:?}"
    );
    assert!(replies[2].contains("not readable text"), "{replies:?}");
    assert!(host.prompts.is_empty());
}

#[test]
fn a_caption_comes_first_and_a_command_engine_is_configured_with_its_file() {
    let mut host = FakeHost::new();
    let mut bridge = paired(
        &mut host,
        r#"{"bridge":{"voice":{"engine":"command","command":["whisper-cli","-nt","-f","{file}"]}}}"#,
    );
    serve_voice(&mut host);
    host.transcripts
        .push_back(Ok("and add a changelog entry".into()));
    let mut note = voice_note(None);
    note.text = "about the release".into();

    bridge.on_envelope(&mut host, note);

    assert_eq!(
        host.transcribed[0].0,
        VoiceEngine::Command {
            argv: ["whisper-cli", "-nt", "-f", "{file}"]
                .map(String::from)
                .to_vec()
        }
    );
    assert!(
        host.prompts[0]
            .text
            .starts_with("about the release\n\n[bot-connect: transcribed"),
        "{}",
        host.prompts[0].text
    );
}

#[test]
fn a_bad_voice_section_is_reported_and_leaves_no_engine() {
    for (config, expected) in [
        (
            r#"{"bridge":{"voice":{"engine":"command","command":["whisper-cli","in.ogg"]}}}"#,
            "bridge.voice.command: one argument must hold {file}",
        ),
        (
            r#"{"bridge":{"voice":{"engine":"openai","apiKeyEnv":"my key"}}}"#,
            "bridge.voice.apiKeyEnv: expected the NAME of an environment variable",
        ),
        // A key pasted where its variable's name belongs: the whole section is refused by
        // the config's secret check, and the key is not repeated.
        (
            r#"{"bridge":{"voice":{"engine":"openai","apiKeyEnv":"sk-proj-abcdef123456"}}}"#,
            "bridge.voice: this looks like a secret",
        ),
        (
            r#"{"bridge":{"voice":{"engine":"whisper"}}}"#,
            "bridge.voice.engine: expected ",
        ),
    ] {
        let mut host = FakeHost::new();
        let (mut bridge, configuration, _) = started(&mut host, config, &["tg"]);
        let text = format!("{configuration:?}");
        assert!(text.contains(expected), "{config}: {text}");
        // The key-looking value is not repeated in the report.
        assert!(!text.contains("sk-proj-abcdef123456"), "{text}");
        pair(&mut bridge, &mut host, "tg", "c1", "u1");
        host.clear_records();
        serve_voice(&mut host);
        bridge.on_envelope(&mut host, voice_note(None));
        assert!(
            host.texts_to("tg", "c1")[0].contains("no transcription engine"),
            "{config}"
        );
    }
}

#[test]
fn explain_says_what_would_happen_to_a_voice_note_a_photo_and_a_document() {
    let mut host = FakeHost::new();
    let bridge = paired(&mut host, OPENAI);
    let photo = Attachment {
        kind: AttachmentKind::Image,
        media_type: "image/jpeg".into(),
        reference: "p".into(),
        name: None,
        size_bytes: Some(98_000),
        duration_seconds: None,
    };
    let document = Attachment {
        kind: AttachmentKind::File,
        media_type: "application/pdf".into(),
        reference: "d".into(),
        name: Some("../Q3 report.pdf".into()),
        size_bytes: Some(2048),
        duration_seconds: None,
    };
    let mut message = voice_note(Some(7));
    message.attachments.push(photo);
    message.attachments.push(document.clone());

    let preview = bridge.preview_envelope(&mut host, &message);
    assert!(
        preview.contains(
            "prompt: forwarded to the agent now (the agent is idle) with 3 attachment(s)"
        ) && preview.contains("1 image(s) for the model")
            && preview.contains(
                "voice note (audio/ogg, 7 s) transcribed by the OpenAI-compatible endpoint \
                 (whisper-large-v3)"
            )
            && preview.contains(
                "file \"Q3_report.pdf\" (application/pdf, 2.0 KB) saved as \
                 .pi/inbox/Q3_report.pdf"
            ),
        "{preview}"
    );
    // A preview does nothing: no fetch, no transcription, no file, no reply.
    assert!(host.fetches.is_empty() && host.transcribed.is_empty() && host.inbox.is_empty());
    assert!(host.sent.is_empty());

    // What would be refused is said with the reply the chat would get.
    let preview = bridge.preview_envelope(&mut host, &voice_note(Some(3_000)));
    assert!(
        preview.contains("refused the file(s) before downloading; the chat would be told: That voice note is 50 min"),
        "{preview}"
    );
    let mut without = FakeHost::new();
    let bridge = paired(&mut without, "{}");
    let preview = bridge.preview_envelope(&mut without, &voice_note(Some(3)));
    assert!(
        preview.contains("no transcription engine is set up"),
        "{preview}"
    );
}
