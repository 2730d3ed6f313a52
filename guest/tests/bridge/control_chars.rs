//! Control characters never reach a message (docs/architecture.md#the-outbound-pipeline): NUL
//! and the other controls the platforms reject become U+FFFD in every markup.

use guest::core::controls::is_rejected_control;
use guest::core::outbound::prepare;
use guest::core::render::render;
use guest::model::{Capabilities, LengthUnit, Markup};
use proptest::prelude::*;

const MARKUPS: [Markup; 4] = [
    Markup::Plain,
    Markup::Html,
    Markup::Mrkdwn,
    Markup::Markdown,
];

fn caps(markup: Markup, unit: LengthUnit, limit: u32) -> Capabilities {
    Capabilities {
        edit: true,
        ..Capabilities::text_only(markup, unit, limit)
    }
}

#[test]
fn nul_is_replaced_in_plain_and_html_like_the_other_controls() {
    let cases = [
        (Markup::Plain, "a\u{0}b \u{1b}[1m", "a\u{FFFD}b \u{FFFD}[1m"),
        (Markup::Plain, "```\nx\u{0}y\n```", "\nx\u{FFFD}y\n"),
        (Markup::Html, "a\u{0}b\u{7}", "a\u{FFFD}b\u{FFFD}"),
        (Markup::Html, "`a\u{0}b`", "<code>a\u{FFFD}b</code>"),
        (
            Markup::Html,
            "```\n<\u{0}>\n```",
            "<pre>\n&lt;\u{FFFD}&gt;\n</pre>",
        ),
        (Markup::Mrkdwn, "a\u{0}b", "a\u{FFFD}b"),
        (Markup::Markdown, "a\u{0}b\tc", "a\u{FFFD}b\tc"),
    ];
    for (markup, input, expected) in cases {
        assert_eq!(render(input, markup), expected, "{markup:?} {input:?}");
    }
}

fn text_with_controls() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-z *_`#>\\-\\[\\]()<&\n]{0,12}",
        2 => any::<char>().prop_map(String::from),
        2 => (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap_or('x').to_string()),
        1 => (0x7fu32..0xa0).prop_map(|c| char::from_u32(c).unwrap_or('x').to_string()),
        1 => Just("```\n".to_owned()),
        1 => Just("\r\n".to_owned()),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn no_message_in_any_markup_carries_a_rejected_control(
        text in text_with_controls(),
        limit in 8u32..400,
        unit in prop_oneof![Just(LengthUnit::Chars), Just(LengthUnit::Utf16), Just(LengthUnit::Bytes)],
        max_chunks in 1u32..6,
    ) {
        for markup in MARKUPS {
            let prepared = prepare(&text, &caps(markup, unit, limit), max_chunks);
            for message in prepared.messages.iter().chain(prepared.truncation_notice.iter()) {
                prop_assert!(
                    !message.chars().any(is_rejected_control),
                    "{markup:?}: {message:?}"
                );
            }
            prop_assert!(!render(&text, markup).chars().any(is_rejected_control));
        }
    }
}
