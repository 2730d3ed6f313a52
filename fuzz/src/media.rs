//! What a chat sends besides text (docs/media.md): the names files are saved under and the
//! transcripts an engine hands back, both from strangers' bytes.
//!
//! Property: a saved name is one visible path segment that is not hidden and fits the cap,
//! for every candidate the bridge may try; a transcript the bridge accepts carries no
//! control character but newlines; neither panics.

use guest::core::inbox::{MAX_NAME_CHARS, candidate, file_name};
use guest::core::invisible::is_invisible;
use guest::core::voice::judge_transcript;
use guest::model::{Attachment, AttachmentKind};

/// Media types the first byte picks from, so the extension table is reached too.
const MEDIA: &[&str] = &[
    "application/pdf",
    "audio/ogg",
    "image/png",
    "text/plain",
    "application/octet-stream",
    "",
];

/// The first byte picks a media type; the rest, as text, is the sender's file name and
/// the engine's transcript.
pub fn media_names(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let attachment = Attachment {
        kind: AttachmentKind::File,
        media_type: MEDIA[usize::from(pick) % MEDIA.len()].to_owned(),
        reference: "r".to_owned(),
        name: Some(text.clone().into_owned()),
        size_bytes: None,
        duration_seconds: None,
    };
    let name = file_name(&attachment);
    for n in [1, 2, 50] {
        let tried = candidate(&name, n);
        assert!(!tried.is_empty(), "an empty name for {text:?}");
        assert!(
            !tried.starts_with('.'),
            "a hidden name {tried:?} for {text:?}"
        );
        assert!(
            !tried.contains(['/', '\\']) && tried != "..",
            "a path {tried:?} for {text:?}"
        );
        assert!(
            !tried.chars().any(|c| c.is_control() || is_invisible(c)),
            "an unreadable name {tried:?} for {text:?}"
        );
        // The candidates' suffix (`-50`) may pass the cap by a few characters, never more.
        assert!(
            tried.chars().count() <= MAX_NAME_CHARS + 3,
            "a name of {} characters for {text:?}",
            tried.chars().count()
        );
    }
    if let Ok(transcript) = judge_transcript(&text) {
        assert!(
            !transcript.trim().is_empty(),
            "an empty transcript accepted"
        );
        assert!(
            !transcript.chars().any(|c| c.is_control() && c != '\n'),
            "a control character in {transcript:?}"
        );
    }
}
