//! Incoming Slack text to the plain text a prompt should read
//! (docs/protocols.md#slack-events): `<…>` tokens resolved first, then the three escapes
//! `&amp; &lt; &gt;` undone, in that order, because a token's label is escaped too and an
//! escaped `&lt;` is never a token.
//!
//! | token | becomes |
//! |---|---|
//! | `<@Ubot>`, `<@Ubot\|pi>` (the bot) | removed, and it counts as a mention |
//! | `<@U123\|ada>` / `<@W123>` | `@ada` / `@W123` |
//! | `<#C123\|general>` / `<#C123>` | `#general` / `#C123` |
//! | `<!here>`, `<!channel>`, `<!everyone>` | `@here`, `@channel`, `@everyone` |
//! | `<!subteam^S1\|@devs>` / `<!date^…\|fallback>` | the label |
//! | `<https://x.y>` | `https://x.y` |
//! | `<http://x.y\|x.y>`, `<mailto:a@b.c\|a@b.c>` (label = the address as typed) | `x.y`, `a@b.c` |
//! | `<https://x.y/a\|the docs>` | `the docs (https://x.y/a)`: the agent needs the address |
//! | `<` without a closing `>` | kept as written |
//!
//! Where the bot's mention is removed, the text closes up the way the Telegram transport's
//! does: a leading mention takes the separator after it along (`<@Ubot>, status` →
//! `status`), one in the middle leaves a single space (`please <@Ubot> look` →
//! `please look`), so the bridge's command parser sees the same text on every platform.

/// Text with the bot's mentions removed and everything else resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The text as a person would read it.
    pub text: String,
    /// The bot was mentioned (`<@bot_user_id>`).
    pub mentions_me: bool,
}

enum Piece {
    Text(String),
    /// Where a mention of the bot was.
    Cut,
}

/// Resolves `text` for the bot whose user id is `me` (empty: no mention is the bot's).
pub fn resolve(text: &str, me: &str) -> Resolved {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut mentions_me = false;
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        current.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        // A token never spans another `<`; a lone `<` (Slack escapes real ones, but a
        // pasted payload may not) stays as text.
        let Some(close) = after
            .find(['>', '<'])
            .filter(|at| after.as_bytes()[*at] == b'>')
        else {
            current.push('<');
            rest = after;
            continue;
        };
        let token = &after[..close];
        rest = &after[close + 1..];
        match token_text(token, me) {
            Some(resolved) => current.push_str(&resolved),
            None => {
                mentions_me = true;
                pieces.push(Piece::Text(std::mem::take(&mut current)));
                pieces.push(Piece::Cut);
            }
        }
    }
    current.push_str(rest);
    pieces.push(Piece::Text(current));
    Resolved {
        text: unescape(&close_up(pieces)),
        mentions_me,
    }
}

/// What one token (without its brackets) reads as; `None` for a mention of the bot.
fn token_text(token: &str, me: &str) -> Option<String> {
    let (target, label) = match token.split_once('|') {
        Some((target, label)) => (target, label.trim()),
        None => (token, ""),
    };
    if let Some(user) = target.strip_prefix('@') {
        if !me.is_empty() && user == me {
            return None;
        }
        return Some(match label {
            "" => format!("@{user}"),
            name => format!("@{}", name.trim_start_matches('@')),
        });
    }
    if let Some(channel) = target.strip_prefix('#') {
        return Some(match label {
            "" => format!("#{channel}"),
            name => format!("#{}", name.trim_start_matches('#')),
        });
    }
    if let Some(special) = target.strip_prefix('!') {
        return Some(match (special, label) {
            (_, label) if !label.is_empty() => label.to_owned(),
            ("here" | "channel" | "everyone", _) => format!("@{special}"),
            (other, _) => match other.split_once('^') {
                Some((_, id)) => format!("@{id}"),
                None => format!("@{other}"),
            },
        });
    }
    Some(link_text(target, label))
}

fn link_text(url: &str, label: &str) -> String {
    if label.is_empty() {
        return url.to_owned();
    }
    let bare = ["https://", "http://", "mailto:"]
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme))
        .unwrap_or(url);
    if label == url || label == bare || label == bare.trim_end_matches('/') {
        label.to_owned()
    } else {
        format!("{label} ({url})")
    }
}

fn is_gap(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Joins the pieces around removed mentions (see the module docs).
fn close_up(pieces: Vec<Piece>) -> String {
    let mut text = String::new();
    let mut leading = true;
    let mut after_cut = false;
    for piece in pieces {
        let piece = match piece {
            Piece::Cut => {
                after_cut = true;
                continue;
            }
            Piece::Text(piece) => piece,
        };
        if !after_cut {
            text.push_str(&piece);
            leading = text.trim().is_empty();
            continue;
        }
        after_cut = false;
        if leading {
            // Everything so far was the mention (and whitespace before it).
            text = piece
                .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ':' | '-'))
                .to_owned();
            leading = text.trim().is_empty();
            continue;
        }
        let kept = text.trim_end_matches(is_gap).len();
        let gap = kept < text.len() || piece.starts_with(is_gap);
        text.truncate(kept);
        // `thanks <@bot>, nice` → `thanks nice`: the comma belonged to the mention.
        let right = piece.trim_start_matches(is_gap);
        let right = right
            .strip_prefix([',', ':'])
            .map_or(right, |after| after.trim_start_matches(is_gap));
        if gap && !text.is_empty() && !right.is_empty() {
            text.push(' ');
        }
        text.push_str(right);
    }
    text.trim().to_owned()
}

/// Undoes Slack's three escapes in one pass, so `&amp;lt;` (a person typing `&lt;`)
/// becomes `&lt;`, not `<`.
///
/// The bridge reads outbound mrkdwn the same way for its last look at a message
/// (`guest/src/core/readable.rs`, `read_escapes_into`), across the component boundary,
/// which shares no code: change both together.
pub fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (replacement, length) = if tail.starts_with("&amp;") {
            ('&', 5)
        } else if tail.starts_with("&lt;") {
            ('<', 4)
        } else if tail.starts_with("&gt;") {
            ('>', 4)
        } else {
            ('&', 1)
        };
        out.push(replacement);
        rest = &tail[length..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(input: &str) -> String {
        resolve(input, "UBOT").text
    }

    #[test]
    fn tokens_resolve_as_the_table_says() {
        let rows = [
            ("<@UBOT> status", "status"),
            ("<@UBOT|pi>, status please", "status please"),
            ("<@UBOT>: hi", "hi"),
            ("please <@UBOT> look", "please look"),
            ("thanks <@UBOT>, nice", "thanks nice"),
            ("<@UBOT>", ""),
            ("ask <@U123|ada> and <@W999>", "ask @ada and @W999"),
            ("see <#C123|general> or <#C9>", "see #general or #C9"),
            ("<!here> <!channel> <!everyone>", "@here @channel @everyone"),
            ("<!subteam^S1|@devs> <!subteam^S2>", "@devs @S2"),
            ("<!date^1392734382^{date}|Feb 18, 2014>", "Feb 18, 2014"),
            ("go <https://x.y/a?b=1&amp;c=2>", "go https://x.y/a?b=1&c=2"),
            ("<http://x.y|x.y> <mailto:a@b.c|a@b.c>", "x.y a@b.c"),
            ("<https://x.y/a|the docs>", "the docs (https://x.y/a)"),
            ("a &lt; b &amp;&amp; c &gt; d", "a < b && c > d"),
            ("typed &amp;lt; literally", "typed &lt; literally"),
            ("1 <2 and <3>", "1 <2 and 3"),
            ("broken <tail", "broken <tail"),
            ("  spaced\n  code  ", "spaced\n  code"),
        ];
        for (input, expected) in rows {
            assert_eq!(text(input), expected, "{input:?}");
        }
    }

    #[test]
    fn only_the_bots_own_mention_counts() {
        assert!(resolve("<@UBOT> hi", "UBOT").mentions_me);
        assert!(resolve("hi <@UBOT|pi>", "UBOT").mentions_me);
        assert!(!resolve("<@U123> hi", "UBOT").mentions_me);
        // An unknown bot id mentions nobody: the text keeps the mention.
        let unknown = resolve("<@UBOT> hi", "");
        assert!(!unknown.mentions_me);
        assert_eq!(unknown.text, "@UBOT hi");
    }

    #[test]
    fn any_text_resolves_without_panicking() {
        for input in [
            "<",
            ">",
            "<>",
            "<|>",
            "<@>",
            "<!>",
            "&",
            "&amp",
            "<@UBOT",
            "é<@UBOT>é",
            "<<@UBOT>>",
        ] {
            let _ = resolve(input, "UBOT");
        }
        assert_eq!(text("é<@UBOT>é"), "éé");
    }
}
