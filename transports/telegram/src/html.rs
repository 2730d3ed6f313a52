//! Telegram HTML to plain text, for the one case where Telegram refuses a message's HTML
//! ("can't parse entities") and the same piece is resent without `parse_mode`.
//!
//! Why not an HTML parser crate: the input is the narrow Telegram subset the bridge
//! rendered (docs/protocols.md#telegram-html), and it is already known to be malformed, so
//! a full parser would "repair" it in ways that change the text. Only what looks like a tag
//! (`<`, optional `/`, a letter, up to the next `>`) is removed; a stray `<` (often the
//! reason for the refusal) stays as text. Entities are decoded by `html-escape`.

/// The visible text of `html`: tags removed, entities decoded. Never longer than the
/// text Telegram would have shown, so a piece within the limit stays within it.
pub fn html_to_plain(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        let from_open = &rest[open..];
        match tag_length(from_open) {
            Some(length) => rest = &from_open[length..],
            None => {
                text.push('<');
                rest = &from_open[1..];
            }
        }
    }
    text.push_str(rest);
    html_escape::decode_html_entities(&text).into_owned()
}

/// The length of the tag `text` starts with (`text` starts with `<`), if it is one.
fn tag_length(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut name = 1;
    if bytes.get(name) == Some(&b'/') {
        name += 1;
    }
    if !bytes.get(name)?.is_ascii_alphabetic() {
        return None;
    }
    let end = name + text[name..].find(['>', '<'])?;
    (bytes[end] == b'>').then_some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_go_entities_are_decoded_stray_brackets_stay() {
        let rows = [
            ("<b>bold</b> and <i>it</i>", "bold and it"),
            ("<a href=\"https://x.y/?a=1&amp;b=2\">link</a>", "link"),
            (
                "<pre><code class=\"language-rust\">a &lt; b &amp;&amp; c</code></pre>",
                "a < b && c",
            ),
            ("1 < 2 and <unknown-tag>x</unknown-tag>", "1 < 2 and x"),
            ("<b>unclosed", "unclosed"),
            ("x <3 y", "x <3 y"),
            ("a <b c", "a <b c"),
            ("&#128512; &quot;q&quot;", "😀 \"q\""),
            (
                "<tg-spoiler>s</tg-spoiler><blockquote expandable>q</blockquote>",
                "sq",
            ),
            ("", ""),
            ("<", "<"),
        ];
        for (html, plain) in rows {
            assert_eq!(html_to_plain(html), plain, "{html:?}");
        }
    }

    #[test]
    fn plain_text_is_never_longer_than_the_html() {
        for html in ["<b>a</b>", "&lt;&gt;", "plain", "<i>é😀</i>"] {
            assert!(html_to_plain(html).chars().count() <= html.chars().count());
        }
    }
}
