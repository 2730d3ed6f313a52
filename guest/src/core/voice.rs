//! Voice notes to prompts (docs/media.md#voice): which attachments are speech, whether
//! they may be transcribed, whether what came back is a transcript, and how the chat and
//! the agent see it. Pure: the bridge fetches and the host runs the engine
//! ([`crate::host::Host::transcribe`]).

use crate::core::config::VoiceSettings;
use crate::core::inbox::{TELEGRAM_DOWNLOAD_LIMIT, size_text};
use crate::model::Attachment;

/// Whether `attachment` is speech to transcribe: any audio (Telegram's voice notes and
/// audio files, Discord's voice messages, Slack's audio clips).
pub fn is_voice(attachment: &Attachment) -> bool {
    attachment
        .media_type
        .trim()
        .to_ascii_lowercase()
        .starts_with("audio/")
}

/// Reply to a voice note when no engine is configured: what to write, where.
pub const NO_ENGINE_NOTICE: &str = "I cannot listen to voice notes yet: no transcription engine \
     is set up, so nothing was sent to pi. Type the message instead, or ask the operator to set \
     bridge.voice in ~/.pi/agent/bot-connect.json: {\"engine\": \"openai\", \"apiKeyEnv\": \
     \"OPENAI_API_KEY\"} for OpenAI or any OpenAI-compatible server (with \"baseUrl\"), or \
     {\"engine\": \"command\", \"command\": [\"whisper-cli\", \"-nt\", \"-f\", \"{file}\"]} for a \
     local one (docs/media.md#voice).";

/// The first reason `voice` cannot be transcribed, judged before anything is downloaded:
/// no engine, longer than `maxSeconds`, bigger than `maxBytes`, or over Telegram's 20 MB
/// download limit. The reply for the chat.
pub fn voice_problem(
    voice: &Attachment,
    transport: &str,
    settings: &VoiceSettings,
) -> Option<String> {
    if settings.engine.is_none() {
        return Some(NO_ENGINE_NOTICE.to_owned());
    }
    if let Some(seconds) = voice.duration_seconds
        && seconds > settings.max_seconds
    {
        return Some(format!(
            "That voice note is {}, and this session transcribes at most {} \
             (bridge.voice.maxSeconds), so nothing was sent to pi. Send a shorter one, or split it.",
            duration_text(seconds),
            duration_text(settings.max_seconds)
        ));
    }
    let size = voice.size_bytes?;
    if transport == "telegram" && size > TELEGRAM_DOWNLOAD_LIMIT {
        return Some(format!(
            "That recording is {}, and Telegram lets bots download files of up to 20 MB only, so \
             nothing was sent to pi. Send a shorter one.",
            size_text(size)
        ));
    }
    (size > settings.max_bytes).then(|| too_large_notice(size, settings.max_bytes))
}

/// Reply when a recording's bytes are over `maxBytes`.
pub fn too_large_notice(size: u64, limit: u64) -> String {
    format!(
        "That recording is {}, more than the {} this session transcribes (bridge.voice.maxBytes), \
         so nothing was sent to pi. Send a shorter one.",
        size_text(size),
        size_text(limit)
    )
}

/// `12 s`, `4 min 5 s`.
fn duration_text(seconds: u32) -> String {
    match (seconds / 60, seconds % 60) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s} s"),
    }
}

/// Reply when the engine failed; its reason names no key.
pub fn failed_notice(reason: &str) -> String {
    format!("I could not transcribe that voice note, so nothing was sent to pi: {reason}")
}

/// What came back, judged: the transcript trimmed, or the reply when it is nothing or not
/// text a person said (an engine that printed its progress bars or binary output).
pub fn judge_transcript(raw: &str) -> Result<String, String> {
    let text = raw.trim();
    if text.is_empty() || text == "[BLANK_AUDIO]" {
        return Err(
            "I could not make out any speech in that voice note, so nothing was sent to \
             pi. Try again closer to the microphone, or type it."
                .to_owned(),
        );
    }
    let total = text.chars().count();
    let odd = text
        .chars()
        .filter(|c| *c == '\u{FFFD}' || (c.is_control() && !c.is_whitespace()))
        .count();
    // A few odd characters happen in real speech output; a fifth of them is not speech.
    if odd * 5 > total {
        return Err(
            "The transcription engine answered something that is not readable text, so \
             nothing was sent to pi. The operator can check bridge.voice (its logs say more)."
                .to_owned(),
        );
    }
    Ok(text
        .chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .collect())
}

/// What the chat sees first, so the sender knows what the agent got.
pub fn echo(transcript: &str) -> String {
    format!("🎙️ Heard: {transcript}")
}

/// The prompt: the sender's typed text (a caption), then the transcript marked as speech,
/// so the agent weighs misheard words accordingly.
pub fn prompt_with_transcript(typed: &str, transcripts: &[String]) -> String {
    let mut out = String::new();
    if !typed.trim().is_empty() {
        out.push_str(typed.trim());
        out.push_str("\n\n");
    }
    out.push_str(
        "[bot-connect: transcribed from a voice note by speech recognition; a word may be \
         misheard]\n",
    );
    out.push_str(&transcripts.join("\n\n"));
    out
}

/// The name the engine reads the format from: `voice.ogg` for Opus in Ogg.
pub fn audio_name(media_type: &str) -> String {
    format!("voice.{}", crate::core::inbox::extension_for(media_type))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AttachmentKind, VoiceEngine};

    fn voice(size: Option<u64>, seconds: Option<u32>) -> Attachment {
        Attachment {
            kind: AttachmentKind::File,
            media_type: "audio/ogg".into(),
            reference: "v".into(),
            name: None,
            size_bytes: size,
            duration_seconds: seconds,
        }
    }

    fn configured() -> VoiceSettings {
        VoiceSettings {
            engine: Some(VoiceEngine::Command {
                argv: vec!["whisper-cli".into(), "{file}".into()],
            }),
            ..VoiceSettings::default()
        }
    }

    #[test]
    fn audio_is_speech_and_nothing_else_is() {
        assert!(is_voice(&voice(None, None)));
        let mut mp3 = voice(None, None);
        mp3.media_type = "Audio/MPEG".into();
        assert!(is_voice(&mp3));
        let mut video = voice(None, None);
        video.media_type = "video/mp4".into();
        assert!(!is_voice(&video));
    }

    #[test]
    fn caps_and_a_missing_engine_are_said_before_any_download() {
        let none = VoiceSettings::default();
        assert_eq!(
            voice_problem(&voice(Some(10), Some(3)), "slack", &none).as_deref(),
            Some(NO_ENGINE_NOTICE)
        );
        assert!(NO_ENGINE_NOTICE.contains("bridge.voice") && NO_ENGINE_NOTICE.contains("{file}"));
        let settings = configured();
        assert_eq!(
            voice_problem(&voice(Some(10), Some(3)), "telegram", &settings),
            None
        );
        assert_eq!(
            voice_problem(&voice(None, None), "telegram", &settings),
            None
        );
        let long = voice_problem(&voice(Some(10), Some(601)), "telegram", &settings).unwrap();
        assert!(
            long.contains("10 min 1 s") && long.contains("at most 10 min"),
            "{long}"
        );
        let big =
            voice_problem(&voice(Some(11 * 1024 * 1024), None), "discord", &settings).unwrap();
        assert!(
            big.contains("11.0 MB") && big.contains("bridge.voice.maxBytes"),
            "{big}"
        );
        let huge = VoiceSettings {
            max_bytes: 25 * 1024 * 1024,
            ..configured()
        };
        let tg = voice_problem(&voice(Some(21 * 1024 * 1024), None), "telegram", &huge).unwrap();
        assert!(
            tg.contains("Telegram lets bots download files of up to 20 MB"),
            "{tg}"
        );
    }

    #[test]
    fn only_readable_speech_is_a_transcript() {
        assert_eq!(
            judge_transcript("  run the tests \n").as_deref(),
            Ok("run the tests")
        );
        assert!(
            judge_transcript("   ")
                .unwrap_err()
                .contains("could not make out")
        );
        assert!(
            judge_transcript("[BLANK_AUDIO]")
                .unwrap_err()
                .contains("could not make out")
        );
        let garbage = "\u{FFFD}\u{FFFD}\u{1}\u{2}ab";
        assert!(
            judge_transcript(garbage)
                .unwrap_err()
                .contains("not readable text")
        );
        // A stray control character is dropped, not a reason to refuse.
        assert_eq!(
            judge_transcript("deploy the\u{7} staging branch").as_deref(),
            Ok("deploy the staging branch")
        );
    }

    #[test]
    fn the_agent_reads_the_transcript_marked_as_speech_after_any_caption() {
        assert_eq!(
            prompt_with_transcript("", &["fix the login bug".into()]),
            "[bot-connect: transcribed from a voice note by speech recognition; a word may be \
             misheard]\nfix the login bug"
        );
        assert!(
            prompt_with_transcript("urgent", &["fix it".into()])
                .starts_with("urgent\n\n[bot-connect: transcribed")
        );
        assert_eq!(echo("fix it"), "🎙️ Heard: fix it");
        assert_eq!(audio_name("audio/ogg"), "voice.ogg");
        assert_eq!(audio_name("audio/mpeg"), "voice.mp3");
    }
}
