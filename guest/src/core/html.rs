//! The tokenizer of rendered Telegram HTML: tags, entities and other characters, read exactly
//! as the renderer writes them. Counting a message (`measure.rs`) and cutting it (`chunk.rs`)
//! read it with the same rules, so a message is never counted one way and cut another.

use crate::core::scan::find_byte_of;

/// Position of the first `<` or `&`: only they start a tag or an entity.
pub(crate) fn find_tag_or_entity(bytes: &[u8]) -> Option<usize> {
    find_byte_of(bytes, [b'<', b'&'])
}

/// One lexical piece of rendered HTML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HtmlToken<'a> {
    /// `<name …>` or `</name>`, the whole tag text.
    Tag {
        text: &'a str,
        name: &'a str,
        closing: bool,
    },
    /// `&…;`.
    Entity(&'a str),
    /// Any other character.
    Char(char),
}

impl HtmlToken<'_> {
    /// Length of the token's text in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            HtmlToken::Tag { text, .. } | HtmlToken::Entity(text) => text.len(),
            HtmlToken::Char(c) => c.len_utf8(),
        }
    }
}

/// Tokenizes HTML as the renderer writes it; a stray `<` or `&` is read as a character.
pub(crate) fn html_tokens(text: &str) -> impl Iterator<Item = HtmlToken<'_>> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = text.get(pos..)?;
        let token = html_token(rest)?;
        pos += token.len();
        Some(token)
    })
}

pub(crate) fn html_token(rest: &str) -> Option<HtmlToken<'_>> {
    let c = rest.chars().next()?;
    let token = match c {
        '<' => html_tag(rest),
        '&' => rest
            .bytes()
            .take(12)
            .position(|b| b == b';')
            .filter(|end| *end > 1)
            .and_then(|end| rest.get(..=end))
            .map(HtmlToken::Entity),
        _ => None,
    };
    Some(token.unwrap_or(HtmlToken::Char(c)))
}

/// `<`, optional `/`s, a name of ASCII letters, digits and `-` that ends at whitespace or at
/// the first `>`, then anything up to that `>`. Read byte by byte, and a bare `<name>` needs
/// no search for its `>`: this runs for every tag the renderer wrote, so it must cost a few
/// byte compares, not a string search and a Unicode split.
pub(crate) fn html_tag(rest: &str) -> Option<HtmlToken<'_>> {
    let bytes = rest.as_bytes();
    let slashes = bytes.iter().skip(1).take_while(|b| **b == b'/').count();
    let name_start = 1 + slashes;
    let name_len = bytes
        .iter()
        .skip(name_start)
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
        .count();
    let name_end = name_start + name_len;
    let end = match bytes.get(name_end) {
        _ if name_len == 0 => return None,
        Some(b'>') => name_end,
        _ => {
            let after = rest.get(name_end..)?;
            if !after.chars().next().is_some_and(char::is_whitespace) {
                return None;
            }
            name_end + after.find('>')?
        }
    };
    Some(HtmlToken::Tag {
        text: rest.get(..=end)?,
        name: rest.get(name_start..name_end)?,
        closing: slashes > 0,
    })
}

/// The tags of rendered HTML in order, as `(text, name, closing)`, read exactly as
/// [`html_tokens`] reads them but jumping over plain text at word speed: only `<` and `&`
/// can start a token.
pub(crate) fn html_tags(text: &str) -> impl Iterator<Item = (&str, &str, bool)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        loop {
            let i = at + find_tag_or_entity(text.as_bytes().get(at..)?)?;
            let token = html_token(text.get(i..)?)?;
            at = i + token.len();
            if let HtmlToken::Tag {
                text: tag,
                name,
                closing,
            } = token
            {
                return Some((tag, name, closing));
            }
        }
    })
}

/// The character one of the renderer's entities stands for.
pub(crate) fn entity_char(entity: &str) -> char {
    match entity {
        "&lt;" => '<',
        "&gt;" => '>',
        "&quot;" => '"',
        _ => '&',
    }
}
