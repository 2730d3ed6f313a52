//! The operator's dashboard (docs/operations.md#dashboard): one server-rendered page on the
//! metrics listener, behind a token printed at the terminal, served only on loopback. It
//! shows the attached sessions with their chats and who they are paired with, the remote
//! approvals that wait, the bridges' last decisions about inbound messages (what `/connect
//! explain` would say of them), the readiness checks and the delivery figures as small bar
//! charts; nothing on it can change anything (the listener answers GET only, and approving
//! stays the terminal's power), and it carries no script, so the page's policy forbids all.

use std::time::{Duration, UNIX_EPOCH};

use super::health::Check;

/// The cookie a browser keeps the token in after the link printed at the terminal.
pub const COOKIE: &str = "botconnect_dashboard";

/// Sessions listed with their chats and pairings; past these the page says how many more
/// there are (10,000 sessions would be a page nobody reads, and a query each).
pub const SESSIONS_SHOWN: usize = 100;

/// One attached session as the page lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRow {
    /// Its name, as `/sessions` shows it.
    pub name: String,
    /// A turn runs.
    pub busy: bool,
    /// The chats bound to it (`transport:conversation`), and whether each is written down
    /// (its sender paired) or not yet (a stranger's, on its way to pairing).
    pub chats: Vec<(String, bool)>,
    /// The identities it is paired with (`transport:user`).
    pub paired: Vec<String>,
}

/// One decision about an inbound message as the page lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionRow {
    /// The session's name.
    pub session: String,
    /// The event, as the log names it.
    pub event: String,
    /// Its fields, redacted.
    pub detail: String,
    /// When the bridge decided, in ms since the epoch.
    pub at_ms: u64,
}

/// What the page shows. Session names as `/sessions` shows them; chat ids and identities,
/// which the page's reader (the operator, holding the token) manages; every text from a log
/// line already redacted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Attached sessions, at most [`SESSIONS_SHOWN`].
    pub sessions: Vec<SessionRow>,
    /// Attached sessions not listed.
    pub more_sessions: usize,
    /// Remote approvals waiting for an answer: session name, tool, approval id.
    pub approvals: Vec<(String, String, String)>,
    /// The last decisions about inbound messages, newest first.
    pub decisions: Vec<DecisionRow>,
    /// The readiness checks.
    pub checks: Vec<Check>,
    /// Delivery figures: label and count.
    pub figures: Vec<(String, u64)>,
}

/// A random token of 32 hex digits, printed at the terminal like a pairing code.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `offered` equals `token`, compared in time that does not depend on where they differ.
pub fn token_matches(offered: &str, token: &str) -> bool {
    let (a, b) = (offered.as_bytes(), token.as_bytes());
    if a.len() != b.len() || token.is_empty() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token a request offers: `?token=` in the query, else the dashboard's cookie.
pub fn offered_token<'a>(query: Option<&'a str>, cookies: Option<&'a str>) -> Option<&'a str> {
    let in_query = query.and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("token="))
            .filter(|t| !t.is_empty())
    });
    in_query.or_else(|| {
        cookies?.split(';').find_map(|cookie| {
            cookie
                .trim()
                .strip_prefix(COOKIE)
                .and_then(|rest| rest.strip_prefix('='))
        })
    })
}

/// `text` safe inside HTML text and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `at_ms` as HTTP writes a date (`Tue, 14 Nov 2023 22:13:20 GMT`): UTC, so two
/// operators in two time zones read the same time, and no character in it needs escaping.
fn utc_time(at_ms: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(at_ms))
}

/// `cell`, or a dash when it is empty.
fn or_none(cell: &str) -> &str {
    if cell.is_empty() { "–" } else { cell }
}

/// The page.
pub fn render(view: &View) -> String {
    let mut html = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <title>bot-connect</title><style>\
         body{font:14px system-ui,sans-serif;margin:2em;max-width:50em;color:#222}\
         table{border-collapse:collapse}td,th{padding:.2em .8em;text-align:left}\
         .bar{fill:#4a7bd0}.no{color:#b00}.ok{color:#070}\
         </style></head><body><h1>bot-connect</h1>",
    );
    html.push_str("<h2>Sessions</h2>");
    if view.sessions.is_empty() {
        html.push_str("<p>No session is attached.</p>");
    } else {
        html.push_str(
            "<table><tr><th>session</th><th>state</th><th>chats</th><th>paired with</th></tr>",
        );
        for row in &view.sessions {
            let chats: Vec<String> = row
                .chats
                .iter()
                .map(|(chat, kept)| {
                    format!(
                        "<span data-chat=\"{0}\">{0} ({1})</span>",
                        escape(chat),
                        // A stranger's chat is bound in memory only; the broker writes it
                        // down at its first message after pairing.
                        if *kept { "kept" } else { "new" }
                    )
                })
                .collect();
            let paired: Vec<String> = row
                .paired
                .iter()
                .map(|identity| format!("<span data-paired>{}</span>", escape(identity)))
                .collect();
            html.push_str(&format!(
                "<tr data-session=\"{0}\"><td>{0}</td><td>{1}</td><td>{2}</td><td>{3}</td></tr>",
                escape(&row.name),
                if row.busy { "active" } else { "idle" },
                or_none(&chats.join("<br>")),
                or_none(&paired.join("<br>")),
            ));
        }
        html.push_str("</table>");
        if view.more_sessions > 0 {
            html.push_str(&format!(
                "<p>and {} more (<code>host-shim doctor</code> lists them all).</p>",
                view.more_sessions
            ));
        }
    }
    html.push_str("<h2>Approvals waiting</h2>");
    if view.approvals.is_empty() {
        html.push_str("<p>None.</p>");
    } else {
        html.push_str("<table><tr><th>session</th><th>tool</th><th>id</th></tr>");
        for (session, tool, id) in &view.approvals {
            html.push_str(&format!(
                "<tr data-approval=\"{2}\"><td>{0}</td><td>{1}</td><td>{2}</td></tr>",
                escape(session),
                escape(tool),
                escape(id)
            ));
        }
        html.push_str("</table>");
    }
    html.push_str("<h2>Last decisions</h2>");
    if view.decisions.is_empty() {
        html.push_str("<p>None yet.</p>");
    } else {
        html.push_str(
            "<table><tr><th>when (UTC)</th><th>session</th><th>what</th><th>details</th></tr>",
        );
        for decision in &view.decisions {
            html.push_str(&format!(
                "<tr data-decision=\"{2}\"><td data-at>{0}</td><td>{1}</td><td>{2}</td>\
                 <td>{3}</td></tr>",
                utc_time(decision.at_ms),
                escape(&decision.session),
                escape(&decision.event),
                escape(&decision.detail)
            ));
        }
        html.push_str("</table>");
    }
    html.push_str("<h2>Readiness</h2>");
    if view.checks.is_empty() {
        html.push_str("<p>No bot has been asked for yet.</p>");
    }
    html.push_str("<table>");
    for check in &view.checks {
        html.push_str(&format!(
            "<tr data-check><td>{}</td><td class=\"{}\">{}</td></tr>",
            escape(&check.name),
            if check.ready { "ok" } else { "no" },
            escape(&check.detail)
        ));
    }
    html.push_str("</table><h2>Deliveries</h2>");
    let most = view
        .figures
        .iter()
        .map(|(_, n)| *n)
        .max()
        .unwrap_or(0)
        .max(1);
    let height = 22 * view.figures.len().max(1);
    html.push_str(&format!(
        "<svg width=\"480\" height=\"{height}\" role=\"img\" aria-label=\"delivery figures\">"
    ));
    for (row, (label, count)) in view.figures.iter().enumerate() {
        let y = row * 22;
        // Whole pixels of 240 for the largest figure: integer arithmetic, no float casts.
        let width = count.saturating_mul(240) / most;
        html.push_str(&format!(
            "<g data-figure=\"{0}\"><text x=\"0\" y=\"{1}\">{0}</text>\
             <rect class=\"bar\" x=\"170\" y=\"{2}\" width=\"{width}\" height=\"14\"></rect>\
             <text x=\"{3}\" y=\"{1}\">{count}</text></g>",
            escape(label),
            y + 14,
            y + 3,
            175 + width
        ));
    }
    html.push_str(
        "</svg><p>Read-only. Approvals are answered at the session's terminal or in its chat, \
         not here.</p></body></html>",
    );
    html
}

/// The page asking for the token.
pub fn refused() -> String {
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>bot-connect</title>\
     </head><body><p>This dashboard needs the link printed at the terminal where \
     <code>host-shim serve</code> started (it holds a token).</p></body></html>"
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_name_cannot_inject_markup() {
        let hostile = "<script>alert(1)</script>\"x";
        let view = View {
            sessions: vec![SessionRow {
                name: hostile.into(),
                chats: vec![(hostile.into(), false)],
                paired: vec![hostile.into()],
                ..SessionRow::default()
            }],
            approvals: vec![(hostile.into(), hostile.into(), hostile.into())],
            decisions: vec![DecisionRow {
                session: hostile.into(),
                event: hostile.into(),
                detail: hostile.into(),
                at_ms: 0,
            }],
            ..View::default()
        };
        let page = render(&view);
        assert!(!page.contains("<script>"), "{page}");
        // Every place a text from a session or a chat lands.
        assert_eq!(
            page.matches("&lt;script&gt;alert(1)&lt;/script&gt;&quot;x")
                .count(),
            13,
            "{page}"
        );
    }

    #[test]
    fn each_decision_shows_its_time_in_utc() {
        let decision = |event: &str, at_ms| DecisionRow {
            session: "web".into(),
            event: event.into(),
            detail: String::new(),
            at_ms,
        };
        let view = View {
            decisions: vec![
                decision("paired remote identity", 1_700_000_005_000),
                decision("wrong pairing code", 1_700_000_000_000),
            ],
            ..View::default()
        };
        let page = render(&view);
        // 1,700,000,000 s after the epoch is 22:13:20 UTC on 14 November 2023.
        assert!(
            page.contains(
                "<tr data-decision=\"paired remote identity\">\
                 <td data-at>Tue, 14 Nov 2023 22:13:25 GMT</td>"
            ),
            "{page}"
        );
        assert!(
            page.contains(
                "<tr data-decision=\"wrong pairing code\">\
                 <td data-at>Tue, 14 Nov 2023 22:13:20 GMT</td>"
            ),
            "{page}"
        );
    }

    #[test]
    fn the_token_comes_from_the_query_or_the_cookie_and_must_match_whole() {
        assert_eq!(offered_token(Some("a=1&token=abc"), None), Some("abc"));
        assert_eq!(
            offered_token(None, Some("x=1; botconnect_dashboard=def")),
            Some("def")
        );
        assert_eq!(offered_token(Some("token="), None), None);
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abd", "abc"));
        assert!(!token_matches("ab", "abc"));
        assert!(!token_matches("", ""));
        let token = new_token().expect("random");
        assert_eq!(token.len(), 32);
    }
}
