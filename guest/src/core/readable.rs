//! What a person reads of a rendered message: the text the platform shows, and on
//! Telegram each attribute it shows or opens (a link's address, a code block's language).
//!
//! Redaction reads the source, and each of its looks guesses at what a renderer makes of
//! the markup. A guess can miss: CommonMark turns a code span's line break into a space and
//! strips the span's outer spaces, so `` sk-ant-api03-Zk3`\nexport `G2E3… `` shows as one
//! key; the literal underscores an emphasis run leaves over lengthen a Telegram token (both
//! found by fuzzing the pipeline). The renderer also reads entities, so `ghp&#95;…` in the
//! source is `ghp_…` in a Slack message. The outbound pipeline therefore takes a last look
//! at these parts of every message it made (`outbound.rs`).

use std::borrow::Cow;

use crate::core::html::{HtmlToken, entity_char, find_tag_or_entity, html_token, html_tokens};
use crate::model::Markup;

/// The parts of `message` a person reads, each on its own: for Telegram HTML the text
/// between the tags with its entities read, then each attribute value; for Slack mrkdwn
/// the text with each link read as its label and the escapes read, then each link's
/// address; for the other markups the message as sent (the platform renders it, and what
/// it drops only joins text that the source's looks saw joined).
pub fn parts(message: &str, markup: Markup) -> Vec<Cow<'_, str>> {
    match markup {
        Markup::Html => html(message),
        Markup::Mrkdwn => mrkdwn(message),
        Markup::Markdown | Markup::Plain => vec![Cow::Borrowed(message)],
    }
}

/// Telegram HTML: the text between the tags with its entities read, then each attribute.
fn html(message: &str) -> Vec<Cow<'_, str>> {
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

/// Slack mrkdwn as the renderer writes it: a link is `<address|label>` (a `|` in the
/// address is written `%7C`, and `<`, `>` and `&` in text are escaped, so the first `>`
/// closes the link), shown as its label; `&amp;`, `&lt;` and `&gt;` show as the character.
/// A label glued to the text before it reads as one word (`ghp_…<https://x|…>`), and an
/// address is read on its own, as a person opens it.
fn mrkdwn(message: &str) -> Vec<Cow<'_, str>> {
    if memchr::memchr2(b'<', b'&', message.as_bytes()).is_none() {
        return vec![Cow::Borrowed(message)];
    }
    let mut text = String::with_capacity(message.len());
    let mut addresses = Vec::new();
    let mut rest = message;
    while let Some(open) = memchr::memchr(b'<', rest.as_bytes()) {
        read_escapes_into(&mut text, rest.get(..open).unwrap_or_default());
        let inside = rest.get(open + 1..).unwrap_or_default();
        let Some(close) = memchr::memchr(b'>', inside.as_bytes()) else {
            text.push('<');
            rest = inside;
            continue;
        };
        let link = inside.get(..close).unwrap_or_default();
        match link.split_once('|') {
            Some((address, label)) => {
                read_escapes_into(&mut text, label);
                let mut read = String::with_capacity(address.len());
                read_escapes_into(&mut read, address);
                addresses.push(Cow::Owned(read));
            }
            // Slack shows a bare `<address>` as the address itself.
            None => read_escapes_into(&mut text, link),
        }
        rest = inside.get(close + 1..).unwrap_or_default();
    }
    read_escapes_into(&mut text, rest);
    let mut parts = vec![Cow::Owned(text)];
    parts.extend(addresses);
    parts
}

/// Appends `text` with mrkdwn's three escapes read as their characters; any other `&`
/// stays as written, as Slack shows it.
///
/// The Slack transport reads inbound text the same way (`transports/slack/src/mrkdwn.rs`,
/// `unescape`). The two sit on either side of the component boundary, which shares no
/// code (the guest depends on no transport, nor a transport on the guest): change both
/// together.
fn read_escapes_into(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(at) = memchr::memchr(b'&', rest.as_bytes()) {
        out.push_str(rest.get(..at).unwrap_or_default());
        let tail = rest.get(at..).unwrap_or_default();
        let (shown, len) = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
            .into_iter()
            .find(|(escape, _)| tail.starts_with(escape))
            .map_or(('&', 1), |(escape, c)| (c, escape.len()));
        out.push(shown);
        rest = tail.get(len..).unwrap_or_default();
    }
    out.push_str(rest);
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
    fn slack_mrkdwn_reads_as_its_text_with_link_labels_then_the_addresses() {
        let message = "*a* x<https://x.test/?q=1&amp;r|label &amp; more> &lt;b&gt; &amp;lt; & <https://y.test> <open";
        assert_eq!(
            parts(message, Markup::Mrkdwn),
            vec![
                Cow::<str>::Owned("*a* xlabel & more <b> &lt; & https://y.test <open".into()),
                Cow::Owned("https://x.test/?q=1&r".into()),
            ]
        );
        assert_eq!(
            parts("*a* _b_ ~c~", Markup::Mrkdwn),
            vec![Cow::Borrowed("*a* _b_ ~c~")]
        );
    }

    #[test]
    fn other_markups_read_as_sent() {
        for markup in [Markup::Markdown, Markup::Plain] {
            assert_eq!(parts("*a* <b|c>", markup), vec![Cow::Borrowed("*a* <b|c>")]);
        }
    }
}
