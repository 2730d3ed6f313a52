//! Files from the chats (docs/media.md#files-in): which attachments are images for the
//! model and which are files for the inbox, what a file is called on disk, what it may
//! cost, and how the agent is told where it is. Pure: the bridge fetches and the host
//! writes ([`crate::host::Host::save_to_inbox`]).
//!
//! A name comes from whoever sent the file, so it is treated as hostile: only its last
//! segment is kept (`../../.bashrc` is `bashrc`), control and invisible characters go (a
//! right-to-left override makes `gpj.exe` read as `exe.jpg`), anything outside letters,
//! digits and `._-+()@,=` becomes `_`, and no leading dot is left (`.env` would be a
//! hidden file every tool treats as configuration). The host refuses such names again.

use crate::core::config::{AttachmentSettings, InboxSettings};
use crate::core::invisible::is_invisible;
use crate::model::{Attachment, AttachmentKind};

/// Longest file name written, in characters, extension included.
pub const MAX_NAME_CHARS: usize = 96;

/// How many names are tried (`report.pdf`, `report-2.pdf`, ...) before a save is given up:
/// each try is one host call, and an inbox with fifty files of one name is a sign that
/// something loops.
pub const MAX_NAME_TRIES: u32 = 50;

/// The most a Telegram bot may download (the Bot API's `getFile`: "up to 20 MB").
/// Bigger files have no download path, so the bridge says so before asking.
pub const TELEGRAM_DOWNLOAD_LIMIT: u64 = 20 * 1024 * 1024;

/// A day, for the daily cap: days since the Unix epoch, in UTC.
pub fn day_of(now_ms: u64) -> u64 {
    now_ms / 86_400_000
}

/// Whether `attachment` goes to the model as an image (an allowed image type), rather
/// than into the inbox as a file.
pub fn is_model_image(attachment: &Attachment, settings: &AttachmentSettings) -> bool {
    attachment.kind == AttachmentKind::Image
        && settings
            .allowed_media_types
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&attachment.media_type))
}

/// The name a file is saved under: the sender's name made safe, or one made from the
/// media type (`voice.ogg`, `file.pdf`) when there is none worth keeping.
pub fn file_name(attachment: &Attachment) -> String {
    let original = attachment.name.as_deref().unwrap_or("");
    // Only the last segment: a name is never a path.
    let last = original.rsplit(['/', '\\']).next().unwrap_or("");
    let mut cleaned: String = last
        .chars()
        .filter(|c| !c.is_control() && !is_invisible(*c))
        .map(|c| {
            if c.is_alphanumeric() || "._-+()@,=".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = cleaned.trim_start_matches(['.', '_', ' ']);
    cleaned = trimmed.trim_end_matches(['.', ' ']).to_owned();
    let has_letters = cleaned.chars().any(char::is_alphanumeric);
    if !has_letters {
        return format!(
            "{}.{}",
            stem_for(attachment),
            extension_for(&attachment.media_type)
        );
    }
    if !cleaned.contains('.') {
        cleaned = format!("{cleaned}.{}", extension_for(&attachment.media_type));
    }
    shorten(&cleaned)
}

/// The name's `n`th candidate: the name itself first, then `stem-2.ext`, `stem-3.ext`.
pub fn candidate(name: &str, n: u32) -> String {
    if n <= 1 {
        return name.to_owned();
    }
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{n}.{ext}"),
        _ => format!("{name}-{n}"),
    }
}

/// Cuts a long name to [`MAX_NAME_CHARS`], keeping its extension (what the agent reads
/// the file as).
fn shorten(name: &str) -> String {
    if name.chars().count() <= MAX_NAME_CHARS {
        return name.to_owned();
    }
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if ext.chars().count() <= 10 => (stem, format!(".{ext}")),
        _ => (name, String::new()),
    };
    let keep = MAX_NAME_CHARS.saturating_sub(ext.chars().count());
    let stem: String = stem.chars().take(keep).collect();
    format!("{stem}{ext}")
}

fn stem_for(attachment: &Attachment) -> &'static str {
    let media = attachment.media_type.as_str();
    if media.starts_with("image/") {
        "image"
    } else if media.starts_with("audio/ogg") || media == "audio/opus" {
        "voice"
    } else if media.starts_with("audio/") {
        "audio"
    } else if media.starts_with("video/") {
        "video"
    } else {
        "file"
    }
}

/// The usual extension for a media type; `bin` when it is not a common one.
pub fn extension_for(media_type: &str) -> &'static str {
    let media = media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/heic" => "heic",
        "image/svg+xml" => "svg",
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/mp4" | "audio/m4a" | "audio/x-m4a" => "m4a",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/webm" | "video/webm" => "webm",
        "video/mp4" => "mp4",
        "video/quicktime" => "mov",
        "application/pdf" => "pdf",
        "application/zip" => "zip",
        "application/json" => "json",
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/csv" => "csv",
        "text/html" => "html",
        _ => "bin",
    }
}

/// The first reason the files of one message cannot be taken, as the reply the chat
/// gets, judged on what the platform declared (the bytes are checked again once fetched):
/// the inbox switched off, a file over `maxFileBytes` or over Telegram's download limit,
/// or the day's cap reached.
pub fn files_problem(
    files: &[&Attachment],
    transport: &str,
    settings: &InboxSettings,
    used_today: u64,
) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    if !settings.enabled {
        return Some(INBOX_OFF_NOTICE.to_owned());
    }
    let mut declared_total = 0u64;
    for file in files {
        let name = shown_name(file);
        let Some(size) = file.size_bytes else {
            continue;
        };
        declared_total = declared_total.saturating_add(size);
        if transport == "telegram" && size > TELEGRAM_DOWNLOAD_LIMIT {
            return Some(format!(
                "{name} is {}, and Telegram lets bots download files of up to 20 MB only, so \
                 I could not fetch it and sent nothing to pi. Send a smaller file, split it, or \
                 share a link to it.",
                size_text(size)
            ));
        }
        if size > settings.max_file_bytes {
            return Some(too_large_notice(&name, size, settings.max_file_bytes));
        }
    }
    over_day(used_today, declared_total, settings.max_bytes_per_day)
}

/// The reply when a file's bytes, as received, are over the per-file cap.
pub fn too_large_notice(name: &str, size: u64, limit: u64) -> String {
    format!(
        "{name} is {}, more than the {} this session takes per file (bridge.inbox.maxFileBytes), \
         so nothing was sent to pi. Send a smaller file or share a link to it.",
        size_text(size),
        size_text(limit)
    )
}

/// The reply when `adding` more bytes would pass today's cap, or none.
pub fn over_day(used_today: u64, adding: u64, cap: u64) -> Option<String> {
    (used_today.saturating_add(adding) > cap).then(|| {
        format!(
            "The inbox has taken {} of files today and takes at most {} a day \
             (bridge.inbox.maxBytesPerDay), so this was not saved and nothing was sent to pi. \
             Try again tomorrow (UTC), or ask the operator to raise the limit.",
            size_text(used_today),
            size_text(cap)
        )
    })
}

/// Reply when a file arrives but `bridge.inbox.enabled` is off.
pub const INBOX_OFF_NOTICE: &str = "This session does not take files (bridge.inbox.enabled is \
     off), so nothing was sent to pi. Paste the text you need, or ask the operator to switch \
     the inbox on.";

/// The reply when a file could not be downloaded: the transport's reason is for a person
/// and names no credential.
pub fn fetch_failed_notice(name: &str, reason: &str) -> String {
    format!("I could not download {name}, so nothing was sent to pi: {reason}")
}

/// The reply when a file could not be saved.
pub fn save_failed_notice(name: &str, reason: &str) -> String {
    format!("I could not save {name} in the inbox, so nothing was sent to pi: {reason}")
}

/// How a file is named in a reply: its declared name cleaned for the chat, or its kind.
pub fn shown_name(attachment: &Attachment) -> String {
    let name = file_name(attachment);
    format!("\"{name}\"")
}

/// One file saved for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedFile {
    /// The path written, relative to the working directory.
    pub path: String,
    /// Its media type as served.
    pub media_type: String,
    /// Its size.
    pub bytes: u64,
}

/// The prompt the agent reads: the sender's text, then where each file is. The paths are
/// the host's (relative to the working directory the agent works in).
pub fn prompt_with_files(text: &str, saved: &[SavedFile]) -> String {
    if saved.is_empty() {
        return text.to_owned();
    }
    let mut out = String::from(text);
    out.push_str("\n\n[bot-connect: the sender attached ");
    out.push_str(if saved.len() == 1 {
        "a file, saved in the working directory at"
    } else {
        "files, saved in the working directory at"
    });
    for file in saved {
        out.push_str(&format!(
            "\n- {} ({}, {})",
            file.path,
            file.media_type,
            size_text(file.bytes)
        ));
    }
    out.push(']');
    out
}

/// The prompt sent with files and no text.
pub const FILES_FALLBACK_PROMPT: &str = "Have a look at the file I sent.";

/// A size as a person reads it: `812 bytes`, `14.2 KB`, `31.0 MB` (1024-based, as the
/// platforms' limits are).
pub fn size_text(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else if b < KB * KB {
        format!("{:.1} KB", b / KB)
    } else {
        format!("{:.1} MB", b / (KB * KB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: Option<&str>, media_type: &str, size: Option<u64>) -> Attachment {
        Attachment {
            kind: AttachmentKind::File,
            media_type: media_type.into(),
            reference: "ref".into(),
            name: name.map(String::from),
            size_bytes: size,
            duration_seconds: None,
        }
    }

    #[test]
    fn a_name_is_one_safe_visible_segment_that_is_never_hidden() {
        let cases = [
            (Some("report.pdf"), "application/pdf", "report.pdf"),
            (Some("../../.bashrc"), "text/plain", "bashrc.txt"),
            (Some("..\\..\\win.ini"), "text/plain", "win.ini"),
            (Some(".env"), "text/plain", "env.txt"),
            (Some("..."), "application/pdf", "file.pdf"),
            (Some("a\u{0}b\nc.txt"), "text/plain", "abc.txt"),
            // A right-to-left override would show `evil\u{202e}gpj.exe` as `evilexe.jpg`.
            (Some("evil\u{202e}gpj.exe"), "image/jpeg", "evilgpj.exe"),
            (
                Some("my notes; rm -rf.md"),
                "text/markdown",
                "my_notes__rm_-rf.md",
            ),
            (
                Some("Übersicht 2024.xlsx"),
                "application/x",
                "Übersicht_2024.xlsx",
            ),
            (None, "audio/ogg", "voice.ogg"),
            (None, "application/pdf", "file.pdf"),
            (Some("noext"), "application/pdf", "noext.pdf"),
        ];
        for (name, media, expected) in cases {
            let got = file_name(&file(name, media, None));
            assert_eq!(got, expected, "{name:?}");
            assert!(!got.starts_with('.') && !got.contains(['/', '\\']), "{got}");
        }
    }

    #[test]
    fn a_long_name_keeps_its_extension() {
        let long = format!("{}.pdf", "a".repeat(300));
        let name = file_name(&file(Some(&long), "application/pdf", None));
        assert_eq!(name.chars().count(), MAX_NAME_CHARS);
        assert!(name.ends_with(".pdf"));
    }

    #[test]
    fn candidates_never_repeat_the_name() {
        assert_eq!(candidate("report.pdf", 1), "report.pdf");
        assert_eq!(candidate("report.pdf", 2), "report-2.pdf");
        assert_eq!(candidate("archive.tar.gz", 3), "archive.tar-3.gz");
        assert_eq!(candidate("README", 2), "README-2");
    }

    #[test]
    fn declared_sizes_are_judged_before_any_download() {
        let settings = InboxSettings::default();
        let big = file(Some("big.zip"), "application/zip", Some(21 * 1024 * 1024));
        let telegram = files_problem(&[&big], "telegram", &settings, 0).expect("refused");
        assert!(
            telegram.contains("Telegram lets bots download files of up to 20 MB"),
            "{telegram}"
        );
        assert!(telegram.contains("\"big.zip\" is 21.0 MB"), "{telegram}");
        let elsewhere = files_problem(&[&big], "discord", &settings, 0).expect("refused");
        assert!(
            elsewhere.contains("bridge.inbox.maxFileBytes"),
            "{elsewhere}"
        );
        let small = file(Some("a.txt"), "text/plain", Some(10));
        assert_eq!(files_problem(&[&small], "telegram", &settings, 0), None);
        // The day's cap counts what was saved before.
        let day = files_problem(
            &[&small],
            "telegram",
            &settings,
            settings.max_bytes_per_day - 5,
        );
        assert!(day.expect("refused").contains("maxBytesPerDay"));
        let off = InboxSettings {
            enabled: false,
            ..InboxSettings::default()
        };
        assert_eq!(
            files_problem(&[&small], "slack", &off, 0).as_deref(),
            Some(INBOX_OFF_NOTICE)
        );
    }

    #[test]
    fn the_prompt_names_every_saved_path() {
        let saved = [
            SavedFile {
                path: ".pi/inbox/report.pdf".into(),
                media_type: "application/pdf".into(),
                bytes: 2048,
            },
            SavedFile {
                path: ".pi/inbox/data.csv".into(),
                media_type: "text/csv".into(),
                bytes: 12,
            },
        ];
        let prompt = prompt_with_files("summarise these", &saved);
        assert_eq!(
            prompt,
            "summarise these\n\n[bot-connect: the sender attached files, saved in the working \
             directory at\n- .pi/inbox/report.pdf (application/pdf, 2.0 KB)\n- .pi/inbox/data.csv \
             (text/csv, 12 bytes)]"
        );
        assert_eq!(prompt_with_files("plain", &[]), "plain");
    }
}
