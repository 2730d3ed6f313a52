//! Files to the chats (docs/media.md#files-out): whether the agent's `send_file` may send
//! a path, how much of it the bridge reads, what it is sent as, and what the agent and the
//! chat are told when it is refused. Pure: the host reads the file
//! ([`crate::host::Host::read_file`]) and the transport uploads it.
//!
//! A file leaves the machine for good once uploaded, so every check fails closed: a remote
//! turn sends only what it could read (the scope, judged on the path as written and on where
//! its links lead), text is redacted like every reply, and a binary file that holds a
//! secret's shape is refused rather than sent, since nothing can be cut out of it safely.

use crate::core::inbox::size_text;
use crate::core::invisible::is_invisible;
use crate::core::redact::redact;
use crate::core::scope::{AskReason, Scope, Tier};
use crate::core::secrets::contains_secret;
use crate::model::{PathAccess, ToolCall, ToolPath};

/// The tool the pi extension registers, as the agent calls it.
pub const SEND_FILE_TOOL: &str = "send_file";

/// The most bytes the bridge takes in for one file. Every byte passes through the
/// bridge's 64 MiB of memory, where a file sent to two chats is held twice for a moment,
/// so this is lower than Telegram's 50 MB and Slack's 1 GB: a bigger file is refused
/// with both figures named.
pub const BRIDGE_MAX_BYTES: u64 = 20 * 1024 * 1024;

/// The most bytes of a text file the bridge redacts: redaction holds the text and its
/// redacted copy at once, so a text file is held to a quarter of the bridge's memory.
pub const TEXT_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// Longest caption sent, in characters: Telegram's caption limit (1,024), the smallest of
/// the three platforms.
pub const MAX_CAPTION_CHARS: usize = 1024;

/// Shortest run of printable bytes in a binary file looked at for a secret's shape: the
/// shortest shapes (an `AKIA…` key id, a `ghp_…` token) are longer than this.
const MIN_PRINTABLE_RUN: usize = 8;

/// Whether a turn may send the file at `path` (as the agent wrote it), and `resolved`
/// (where its links lead, absolute) once the host has read it. `scope` is the remote
/// turn's frozen scope; `None` for a turn typed at the terminal, which is never restricted
/// (I34). A remote turn may send what it may read, and nothing protected or outside the
/// working directory, not even with an approval: a send cannot be taken back.
pub fn judge_path(
    scope: Option<&Scope>,
    path: &str,
    resolved: Option<&str>,
    cwd: &str,
) -> Result<(), String> {
    let Some(scope) = scope else {
        return Ok(());
    };
    if path.trim().is_empty() {
        return Err(
            "send_file needs a path: the file to send, relative to the working directory.".into(),
        );
    }
    let mut paths = vec![ToolPath {
        path: path.to_owned(),
        access: PathAccess::Read,
        bridge_owned: false,
    }];
    if let Some(resolved) = resolved {
        paths.push(ToolPath {
            path: resolved.to_owned(),
            access: PathAccess::Read,
            bridge_owned: false,
        });
    }
    // Judged as the `read` it is: sending a file discloses exactly what reading it would,
    // so a read-only remote turn may send and a no-tools one may not.
    let call = ToolCall {
        name: "read".into(),
        paths,
    };
    match scope.judge(&call, cwd) {
        Tier::Allowed | Tier::Approval(AskReason::AskTool | AskReason::EachCall) => Ok(()),
        Tier::Approval(AskReason::Protected(rel)) => Err(format!(
            "send_file refused '{rel}': it is a protected path (docs/security.md), and a \
             messenger-originated turn never sends one. Ask the operator to send it locally."
        )),
        Tier::Approval(AskReason::OutsideWorkingDirectory(abs)) => Err(format!(
            "send_file refused '{abs}': it is outside the working directory, and a \
             messenger-originated turn sends only files inside it. Copy what is needed into \
             the working directory first, or ask the operator."
        )),
        Tier::Approval(_) => Err(format!(
            "send_file refused '{path}': this remote turn may not read it."
        )),
        Tier::Refused(reason) => Err(format!(
            "send_file refused '{path}': sending a file reads it, and {}",
            lower_first(&reason)
        )),
    }
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// How many bytes to ask the host for when the platform takes `platform_limit` (0: it
/// cannot upload).
pub fn read_cap(platform_limit: u64) -> u64 {
    platform_limit.min(BRIDGE_MAX_BYTES)
}

/// What the agent is told when `name` (`size` bytes) is over what `platform` takes
/// (`platform_limit`) or over the bridge's own cap.
pub fn too_large(name: &str, size: u64, platform: &str, platform_limit: u64) -> String {
    if size > platform_limit {
        format!(
            "{name} is {}, and {platform} takes files of up to {} from a bot, so it was not \
             sent. Send a smaller file (compress it, or split it).",
            size_text(size),
            size_text(platform_limit)
        )
    } else {
        format!(
            "{name} is {}, and the bridge sends files of up to {} ({platform} itself would \
             take {}), so it was not sent. Send a smaller file (compress it, or split it).",
            size_text(size),
            size_text(BRIDGE_MAX_BYTES),
            size_text(platform_limit)
        )
    }
}

/// The name the chat shows: the path's last segment without control or invisible
/// characters (a right-to-left override would make `gpj.exe` read as `exe.jpg`).
pub fn display_name(path: &str) -> String {
    let last = path
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("");
    let cleaned: String = last
        .chars()
        .filter(|c| !c.is_control() && !is_invisible(*c))
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() || cleaned == "." || cleaned == ".." {
        "file".into()
    } else {
        cleaned.to_owned()
    }
}

/// The caption as sent: redacted like any reply, without control characters but line
/// breaks, cut to [`MAX_CAPTION_CHARS`].
pub fn caption(text: Option<&str>) -> String {
    let Some(text) = text else {
        return String::new();
    };
    let plain: String = text
        .chars()
        .filter(|c| *c == '\n' || (!c.is_control() && !is_invisible(*c)))
        .collect();
    let redacted = redact(plain.trim()).text;
    if redacted.chars().count() <= MAX_CAPTION_CHARS {
        return redacted;
    }
    let mut cut: String = redacted.chars().take(MAX_CAPTION_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// A file ready to upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Media type (from the bytes for images and PDFs, else from the extension).
    pub media_type: String,
    /// A picture the platform shows inline.
    pub as_image: bool,
    /// The bytes to send: the file's, or its redacted text.
    pub data: Vec<u8>,
    /// The redaction rules that changed a text file (never the secrets themselves).
    pub redacted: Vec<&'static str>,
}

/// What the bytes of `name` are sent as: text is redacted (and sent in UTF-8), a binary
/// holding a secret's shape is refused with the reason for the agent.
pub fn prepare(name: &str, data: Vec<u8>) -> Result<Prepared, String> {
    if let Some(image) = image_type(&data) {
        // An image's pixels cannot be redacted, but its metadata (EXIF comments, PNG text
        // chunks) is text like any other: checked as a binary.
        refuse_binary_secret(name, &data)?;
        return Ok(Prepared {
            media_type: image.into(),
            as_image: true,
            data,
            redacted: Vec::new(),
        });
    }
    let text = if data.contains(&0) {
        None
    } else {
        std::str::from_utf8(&data).ok()
    };
    let Some(text) = text else {
        refuse_binary_secret(name, &data)?;
        return Ok(Prepared {
            media_type: binary_type(name, &data).into(),
            as_image: false,
            data,
            redacted: Vec::new(),
        });
    };
    if text.len() as u64 > TEXT_MAX_BYTES {
        return Err(format!(
            "{name} is a text file of {}; the bridge redacts text files of up to {} before \
             sending them, so it was not sent. Send the part that matters.",
            size_text(text.len() as u64),
            size_text(TEXT_MAX_BYTES)
        ));
    }
    let redacted = redact(text);
    let data = if redacted.rules.is_empty() {
        data
    } else {
        redacted.text.into_bytes()
    };
    // A PDF written in ASCII only is still a PDF: its media type comes from its bytes.
    let media_type = if data.starts_with(b"%PDF-") {
        "application/pdf"
    } else {
        text_type(name)
    };
    Ok(Prepared {
        media_type: media_type.into(),
        as_image: false,
        data,
        redacted: redacted.rules,
    })
}

/// Refuses a binary file in which a run of printable bytes holds a secret's shape: a key
/// inside a SQLite database or a core dump is as leaked as one in a text file, and bytes
/// cut out of a binary would break it.
fn refuse_binary_secret(name: &str, data: &[u8]) -> Result<(), String> {
    if binary_holds_secret(data) {
        return Err(format!(
            "{name} was not sent: it is a binary file, and it holds text shaped like a secret \
             (a key or a token). A binary file cannot be redacted, so it is refused whole. \
             Remove the secret from it, or send the parts that matter as text."
        ));
    }
    Ok(())
}

/// Whether a run of printable ASCII in `data` holds a secret's shape (what `strings`
/// would show).
pub fn binary_holds_secret(data: &[u8]) -> bool {
    data.split(|b| !(b.is_ascii_graphic() || *b == b' ' || *b == b'\t'))
        .filter(|run| run.len() >= MIN_PRINTABLE_RUN)
        .any(|run| std::str::from_utf8(run).is_ok_and(contains_secret))
}

/// An image type the chats show inline, from the file's first bytes (never its name: a
/// `.png` that is not one is sent as a document).
fn image_type(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if data.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn extension(name: &str) -> String {
    name.rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default()
}

fn binary_type(name: &str, data: &[u8]) -> &'static str {
    if data.starts_with(b"%PDF-") {
        return "application/pdf";
    }
    match extension(name).as_str() {
        "zip" => "application/zip",
        "gz" | "tgz" => "application/gzip",
        "pdf" => "application/pdf",
        "ogg" | "oga" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    }
}

fn text_type(name: &str) -> &'static str {
    match extension(name).as_str() {
        "md" | "markdown" => "text/markdown; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "json" => "application/json",
        "html" | "htm" => "text/html; charset=utf-8",
        "svg" => "image/svg+xml",
        _ => "text/plain; charset=utf-8",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::{RemoteToolApproval, RemoteToolPolicy};

    const CWD: &str = "/work/project";
    // Assembled so no scanner of this repository mistakes the test for a leak.
    fn github_token() -> String {
        format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")
    }

    fn scope(policy: RemoteToolPolicy) -> Scope {
        Scope::new(policy, RemoteToolApproval::Off, None)
    }

    #[test]
    fn a_remote_turn_sends_what_it_may_read_and_nothing_protected_or_outside() {
        let read_only = scope(RemoteToolPolicy::ReadOnly);
        assert_eq!(
            judge_path(Some(&read_only), "out/report.pdf", None, CWD),
            Ok(())
        );
        let env = judge_path(Some(&read_only), ".env", None, CWD).unwrap_err();
        assert!(env.contains("'.env'") && env.contains("protected"), "{env}");
        let outside = judge_path(Some(&read_only), "/etc/passwd", None, CWD).unwrap_err();
        assert!(
            outside.contains("outside the working directory"),
            "{outside}"
        );
        let up = judge_path(Some(&read_only), "../other/secret.txt", None, CWD).unwrap_err();
        assert!(up.contains("outside the working directory"), "{up}");
        // A link with an innocent name is judged where it leads.
        let link = judge_path(
            Some(&read_only),
            "notes.txt",
            Some("/work/project/.git/config"),
            CWD,
        )
        .unwrap_err();
        assert!(link.contains(".git/config"), "{link}");
        let no_tools = scope(RemoteToolPolicy::NoTools);
        let refused = judge_path(Some(&no_tools), "out/report.pdf", None, CWD).unwrap_err();
        assert!(
            refused.starts_with("send_file refused 'out/report.pdf': sending a file reads it"),
            "{refused}"
        );
        // The terminal's own turns are not restricted.
        assert_eq!(judge_path(None, ".env", None, CWD), Ok(()));
    }

    #[test]
    fn text_is_redacted_and_a_binary_with_a_secret_is_refused() {
        let token = github_token();
        let text = format!("deploy notes\nTOKEN={token}\nend\n").into_bytes();
        let prepared = prepare("notes.txt", text).unwrap();
        let sent = String::from_utf8(prepared.data).unwrap();
        assert!(!sent.contains(&token), "{sent}");
        assert!(
            sent.starts_with("deploy notes\n") && sent.ends_with("end\n"),
            "{sent}"
        );
        assert!(!prepared.redacted.is_empty());
        assert_eq!(prepared.media_type, "text/plain; charset=utf-8");

        let mut binary = vec![0u8, 1, 2, 3, 0xff, 0xfe];
        binary.extend_from_slice(token.as_bytes());
        binary.extend_from_slice(&[0, 0, 7]);
        let refused = prepare("dump.bin", binary).unwrap_err();
        assert!(
            refused.contains("dump.bin was not sent") && refused.contains("binary"),
            "{refused}"
        );
        assert!(!refused.contains(&token));

        let clean = prepare("blob.bin", vec![0, 1, 2, 3, 0xff, b'h', b'i']).unwrap();
        assert_eq!(clean.media_type, "application/octet-stream");
        assert_eq!(clean.data, vec![0, 1, 2, 3, 0xff, b'h', b'i']);
    }

    #[test]
    fn images_are_known_by_their_bytes_not_their_names() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        let prepared = prepare("chart.dat", png.clone()).unwrap();
        assert!(prepared.as_image);
        assert_eq!(prepared.media_type, "image/png");
        assert_eq!(prepared.data, png);
        let fake = prepare("chart.png", b"not a picture".to_vec()).unwrap();
        assert!(!fake.as_image);
        assert_eq!(fake.media_type, "text/plain; charset=utf-8");
        let pdf = prepare("a.bin", b"%PDF-1.7\n\xe2\xe3\xcf\xd3".to_vec()).unwrap();
        assert_eq!(pdf.media_type, "application/pdf");
    }

    #[test]
    fn sizes_are_said_with_the_limit_that_refused_them() {
        let telegram = too_large("big.zip", 60 * 1024 * 1024, "Telegram", 50 * 1024 * 1024);
        assert!(
            telegram.contains("big.zip is 60.0 MB, and Telegram takes files of up to 50.0 MB"),
            "{telegram}"
        );
        let bridge = too_large("big.zip", 30 * 1024 * 1024, "Telegram", 50 * 1024 * 1024);
        assert!(
            bridge.contains(
                "the bridge sends files of up to 20.0 MB (Telegram itself would take 50.0 MB)"
            ),
            "{bridge}"
        );
        assert_eq!(read_cap(50 * 1024 * 1024), BRIDGE_MAX_BYTES);
        assert_eq!(read_cap(10 * 1024 * 1024), 10 * 1024 * 1024);
        let text = prepare("huge.log", vec![b'a'; TEXT_MAX_BYTES as usize + 1]).unwrap_err();
        assert!(
            text.contains("redacts text files of up to 8.0 MB"),
            "{text}"
        );
    }

    #[test]
    fn names_and_captions_are_what_a_person_should_see() {
        assert_eq!(display_name("out/report.pdf"), "report.pdf");
        assert_eq!(display_name("a\\b\\gpj\u{202e}.exe"), "gpj.exe");
        assert_eq!(display_name("dir/"), "dir");
        assert_eq!(display_name(".."), "file");
        let token = github_token();
        let said = caption(Some(&format!("here \u{7}it is {token}")));
        assert!(
            said.starts_with("here it is ") && !said.contains(&token),
            "{said}"
        );
        let long = caption(Some(&"x".repeat(5000)));
        assert_eq!(long.chars().count(), MAX_CAPTION_CHARS);
        assert!(long.ends_with('…'));
        assert_eq!(caption(None), "");
    }
}
