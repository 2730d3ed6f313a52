//! Characters that must never reach a person's screen from a platform id or name.
//!
//! Why: ids and display names come from whoever sends the message. A RoboClaw room id
//! carrying an OSC 52 escape (`ESC ] 52 ; c ; …`) writes the clipboard of the terminal
//! that prints it; a screen-clear repaints over a local approval prompt; U+202E (right-to-
//! left override) shows `moc.elgoog` as `google.com`; a zero-width space makes `alice` and
//! `al\u{200B}ice` two identities that look the same; U+2028 breaks a line where no `\n`
//! is. Every normaliser strips them from ids and names, and the host strips them again
//! from every local notice and log line.

use std::borrow::Cow;

use crate::Envelope;

/// True for a character no id, name or local notice may carry: C0/C1 controls (ESC,
/// BEL, CR, DEL, …), the bidi embeddings and overrides U+202A–U+202E and isolates
/// U+2066–U+2069, the zero-width and direction marks U+200B–U+200F, the invisible
/// operators U+2060–U+2064, the byte-order mark U+FEFF, and the line and paragraph
/// separators U+2028/U+2029.
pub fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// `text` without the characters [`is_invisible`] names; borrowed when it had none.
pub fn strip_invisible(text: &str) -> Cow<'_, str> {
    if text.chars().any(is_invisible) {
        Cow::Owned(text.chars().filter(|c| !is_invisible(*c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// Like [`strip_invisible`], but keeps `\n` and `\t` (a multi-line local notice keeps
/// its layout; the caller lays out lines itself).
pub fn strip_invisible_keep_lines(text: &str) -> Cow<'_, str> {
    let drop = |c: char| c != '\n' && c != '\t' && is_invisible(c);
    if text.chars().any(drop) {
        Cow::Owned(text.chars().filter(|c| !drop(*c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// `envelope` with [`strip_invisible`] applied to every id and name in it (conversation,
/// user, thread, message id, attachment names), never to the text: the message itself is
/// the bridge's to judge. Every normaliser passes its envelope through this, so no
/// platform's ids reach a notice, a log line or the state file with an escape in them.
/// Real platform ids never hold such characters, so for them this changes nothing.
pub fn clean_ids(mut envelope: Envelope) -> Envelope {
    let clean = |text: &mut String| {
        if let Cow::Owned(cleaned) = strip_invisible(text) {
            *text = cleaned;
        }
    };
    clean(&mut envelope.conversation_id);
    clean(&mut envelope.user_id);
    if let Some(thread) = &mut envelope.thread_id {
        clean(thread);
    }
    if let Some(id) = &mut envelope.message_id {
        clean(id);
    }
    // A transport remembers a press under the id the envelope ends up with, so the id
    // the bridge answers with is this cleaned one.
    if let Some(press) = &mut envelope.press {
        clean(press);
    }
    for attachment in &mut envelope.attachments {
        if let Some(name) = &mut attachment.name {
            clean(name);
        }
    }
    envelope
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_character_is_stripped_and_ordinary_text_is_kept() {
        let hostile = "a\u{1b}]52;c;ZXZpbA==\u{7}b\u{1b}[2J\u{9b}c\u{202E}d\u{202A}\u{2066}\u{2069}e\u{200B}\u{200F}\u{2060}\u{2064}\u{FEFF}f\u{2028}\u{2029}g\r\n\t\u{7f}";
        assert_eq!(strip_invisible(hostile), "a]52;c;ZXZpbA==b[2Jcdefg");
        assert_eq!(
            strip_invisible_keep_lines("x\u{202E}\ny\tz\u{1b}"),
            "x\ny\tz"
        );
        for kept in ["alice", "Zoë 🦀", "名前", "مرحبا", "a-b_c.d@e:f"] {
            assert!(matches!(strip_invisible(kept), Cow::Borrowed(_)), "{kept}");
        }
        // Each range boundary, so an off-by-one in a range shows here.
        for c in [
            '\u{0}', '\u{1f}', '\u{7f}', '\u{80}', '\u{9f}', '\u{200B}', '\u{200F}', '\u{2028}',
            '\u{2029}', '\u{202A}', '\u{202E}', '\u{2060}', '\u{2064}', '\u{2066}', '\u{2069}',
            '\u{FEFF}',
        ] {
            assert!(is_invisible(c), "{:?}", c);
        }
        let envelope = clean_ids(Envelope {
            transport: "robo_claw".into(),
            conversation_id: "lab\u{1b}]52;c;ZXZpbA==\u{7}".into(),
            user_id: "ad\u{202E}nimda".into(),
            thread_id: Some("t\u{2028}1".into()),
            timestamp: 0,
            text: "text \u{202E} is kept".into(),
            is_direct: true,
            addressed: true,
            attachments: Vec::new(),
            message_id: Some("m\u{200B}1".into()),
            press: Some("p\u{200B}1".into()),
        });
        assert_eq!(envelope.conversation_id, "lab]52;c;ZXZpbA==");
        assert_eq!(envelope.user_id, "adnimda");
        assert_eq!(envelope.thread_id.as_deref(), Some("t1"));
        assert_eq!(envelope.message_id.as_deref(), Some("m1"));
        assert_eq!(envelope.press.as_deref(), Some("p1"));
        assert_eq!(envelope.text, "text \u{202E} is kept");
        for c in [
            '\u{200A}', '\u{2010}', '\u{2027}', '\u{202F}', '\u{205F}', '\u{2065}', '\u{206A}', ' ',
        ] {
            assert!(!is_invisible(c), "{:?}", c);
        }
    }
}
