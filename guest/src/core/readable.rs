//! What a person reads of a rendered message: the text the platform shows, and on
//! Telegram each attribute it shows or opens (a link's address, a code block's language).
//!
//! Redaction reads the source, and each of its looks guesses at what a renderer makes of
//! the markup. A guess can miss: CommonMark turns a code span's line break into a space and
//! strips the span's outer spaces, so `` sk-ant-api03-Zk3`\nexport `G2E3… `` shows as one
//! key; the literal underscores an emphasis run leaves over lengthen a Telegram token (both
//! found by fuzzing the pipeline). The outbound pipeline therefore takes a last look at
//! these parts of every message it made (`outbound.rs`).

use std::borrow::Cow;

use crate::core::html::{HtmlToken, entity_char, find_tag_or_entity, html_token, html_tokens};
use crate::model::Markup;

/// The parts of `message` a person reads, each on its own: for Telegram HTML the text
/// between the tags with its entities read, then each attribute value; for the other
/// markups the message as sent (the platform renders it, and what it drops only joins
/// text that the source's looks saw joined).
pub fn parts(message: &str, markup: Markup) -> Vec<Cow<'_, str>> {
    if markup != Markup::Html {
        return vec![Cow::Borrowed(message)];
    }
    let mut text = String::with_capacity(message.len());
    let mut attributes = Vec::new();
    // Runs between tags and entities are copied whole: this reads every message sent.
    let mut at = 0;
    while let Some(found) = message
        .as_bytes()
        .get(at..)
        .and_then(find_tag_or_entity)
        .map(|i| at + i)
    {
        text.push_str(message.get(at..found).unwrap_or_default());
        let Some(token) = message.get(found..).and_then(html_token) else {
            break;
        };
        match token {
            HtmlToken::Char(c) => text.push(c),
            HtmlToken::Entity(entity) => text.push(entity_char(entity)),
            HtmlToken::Tag { text: tag, .. } => {
                if memchr::memchr(b'=', tag.as_bytes()).is_some() {
                    attributes.extend(attribute_values(tag));
                }
            }
        }
        at = found + token.len();
    }
    text.push_str(message.get(at..).unwrap_or_default());
    let mut parts = vec![Cow::Owned(text)];
    parts.extend(attributes.into_iter().map(Cow::Owned));
    parts
}

/// The values of a tag's `name="value"` attributes, entities read; the renderer writes
/// every attribute double-quoted and escapes `"` inside.
fn attribute_values(tag: &str) -> Vec<String> {
    let mut values = Vec::new();
    let mut rest = tag;
    while let Some(start) = rest.find("=\"") {
        let value = &rest[start + 2..];
        let end = value.find('"').unwrap_or(value.len());
        let mut decoded = String::with_capacity(end);
        for token in html_tokens(&value[..end]) {
            match token {
                HtmlToken::Entity(entity) => decoded.push(entity_char(entity)),
                HtmlToken::Char(c) => decoded.push(c),
                HtmlToken::Tag { text, .. } => decoded.push_str(text),
            }
        }
        values.push(decoded);
        rest = value.get(end + 1..).unwrap_or_default();
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telegram_html_reads_as_its_text_then_its_attributes() {
        let message = r#"a <b>b</b> &lt;c&gt; &amp; <a href="https://x.test/?q=&quot;1&quot;&amp;r">link</a><pre><code class="language-rust">fn</code></pre>"#;
        assert_eq!(
            parts(message, Markup::Html),
            vec![
                Cow::<str>::Owned("a b <c> & linkfn".into()),
                Cow::Owned("https://x.test/?q=\"1\"&r".into()),
                Cow::Owned("language-rust".into()),
            ]
        );
    }

    #[test]
    fn other_markups_read_as_sent() {
        for markup in [Markup::Markdown, Markup::Mrkdwn, Markup::Plain] {
            assert_eq!(parts("*a* <b|c>", markup), vec![Cow::Borrowed("*a* <b|c>")]);
        }
    }
}
