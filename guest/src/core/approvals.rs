//! Approval from the phone (docs/decisions.md#decision-11-approval-from-the-phone): the pending
//! approvals of one session and who may settle them. Pure: time comes in as `now`, ids are made
//! from given bytes.
//!
//! Each pending approval is settled exactly once — by the local answer, by a trusted
//! chat's `/approve` or `/deny`, or by its deadline — and the first to come wins. Later
//! answers learn who decided. What was decided is remembered for a while, so a late or
//! mistyped answer is told "already decided" or "no such approval" rather than nothing.

use std::collections::{BTreeMap, VecDeque};

use crate::keys::Identity;
use crate::model::Button;

/// Letters of an approval id: lower-case, without the ones read alike on a phone
/// (`0/o`, `1/l/i`), so an id read off a screen is typed right.
pub(crate) const ID_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
/// Characters in an id: 31^4 ≈ 920,000 ids, plenty for the few pending at once.
pub const ID_LEN: usize = 4;

/// The first id the `random` bytes give ([`ID_LEN`] bytes each, read into [`ID_ALPHABET`])
/// that is not `taken`; `None` when every one is (the caller draws more bytes). Approvals
/// and agent questions draw their ids alike, so one can be typed where the other is.
pub(crate) fn draw_id(random: &[u8], taken: impl Fn(&str) -> bool) -> Option<String> {
    random.chunks_exact(ID_LEN).find_map(|chunk| {
        let id: String = chunk
            .iter()
            .map(|b| char::from(ID_ALPHABET[usize::from(*b) % ID_ALPHABET.len()]))
            .collect();
        (!taken(&id)).then_some(id)
    })
}
/// Decided approvals remembered for "already decided" answers.
const REMEMBERED: usize = 32;

/// Who settled an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    /// The person at the terminal.
    Local,
    /// A trusted identity in a chat.
    Remote(Identity),
    /// Nobody answered in time: blocked (fail closed).
    Timeout,
}

impl Decider {
    /// How the decider is named in messages.
    pub fn describe(&self) -> String {
        match self {
            Decider::Local => "at the terminal".into(),
            Decider::Remote(identity) => format!("by {identity} from the chat"),
            Decider::Timeout => "because nobody answered in time".into(),
        }
    }
}

/// What an answer chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Approve this one call (`/approve <id>`).
    Once,
    /// Approve it, and let the same tool run without asking for the rest of the turn
    /// (`/approve <id> turn`), where the ask allows that.
    Turn,
    /// Deny it (`/deny <id>`).
    Deny,
}

/// A settled approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The approval id.
    pub id: String,
    /// The tool it was for.
    pub tool: String,
    /// The call may run.
    pub approved: bool,
    /// The tool may run without asking for the rest of the turn (only with `approved`).
    pub for_turn: bool,
    /// Who decided.
    pub by: Decider,
    /// When, in ms since the Unix epoch.
    pub at_ms: u64,
}

/// What an answer did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// This answer decided the approval.
    Decided(Settled),
    /// The approval had already been decided, by someone else or by its deadline.
    AlreadyDecided(Settled),
    /// No approval with that id, now or recently: a typo, or one from before a restart.
    Unknown,
}

#[derive(Debug, Clone)]
struct Pending {
    tool: String,
    expires_at: u64,
}

/// The pending approvals of one session, in memory only: after a restart the host has
/// already blocked every parked call, so nothing is left to answer.
#[derive(Debug, Default)]
pub struct Approvals {
    pending: BTreeMap<String, Pending>,
    decided: VecDeque<Settled>,
}

impl Approvals {
    /// An id for a new approval from `random` bytes; `None` only if every candidate the
    /// bytes give is already pending (the caller draws more bytes).
    pub fn new_id(&self, random: &[u8]) -> Option<String> {
        draw_id(random, |id| {
            self.pending.contains_key(id) || self.decided.iter().any(|d| d.id == id)
        })
    }

    /// Opens an approval for `tool` under `id`, due to be blocked at `expires_at`.
    pub fn open(&mut self, id: &str, tool: &str, expires_at: u64) {
        self.pending.insert(
            id.to_string(),
            Pending {
                tool: tool.to_string(),
                expires_at,
            },
        );
    }

    /// Answers approval `id` yes or no, for this call only. See [`Approvals::choose`].
    pub fn answer(&mut self, id: &str, approved: bool, by: Decider, now: u64) -> AnswerOutcome {
        let choice = if approved { Choice::Once } else { Choice::Deny };
        self.choose(id, choice, by, now)
    }

    /// Answers approval `id` (any case, surrounding spaces ignored) with `choice`. Expired
    /// approvals are settled by their deadline first, so an answer after the deadline
    /// never wins even when the tick that would have expired it has not come yet.
    pub fn choose(&mut self, id: &str, choice: Choice, by: Decider, now: u64) -> AnswerOutcome {
        let id = normalize_id(id);
        let expired = self.expire(now);
        if let Some(settled) = expired.into_iter().find(|s| s.id == id) {
            return AnswerOutcome::AlreadyDecided(settled);
        }
        match self.pending.remove(&id) {
            Some(pending) => AnswerOutcome::Decided(self.remember(Settled {
                id,
                tool: pending.tool,
                approved: choice != Choice::Deny,
                for_turn: choice == Choice::Turn,
                by,
                at_ms: now,
            })),
            None => self
                .decided
                .iter()
                .find(|d| d.id == id)
                .cloned()
                .map_or(AnswerOutcome::Unknown, AnswerOutcome::AlreadyDecided),
        }
    }

    /// Settles every approval whose deadline has come as blocked by timeout.
    pub fn expire(&mut self, now: u64) -> Vec<Settled> {
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| now >= p.expires_at)
            .map(|(id, _)| id.clone())
            .collect();
        due.into_iter()
            .filter_map(|id| {
                let pending = self.pending.remove(&id)?;
                let at_ms = pending.expires_at;
                Some(self.remember(Settled {
                    id,
                    tool: pending.tool,
                    approved: false,
                    for_turn: false,
                    by: Decider::Timeout,
                    at_ms,
                }))
            })
            .collect()
    }

    /// The earliest deadline of a pending approval.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending.values().map(|p| p.expires_at).min()
    }

    /// How approval `id` was settled, if it was recently; nothing is settled by asking.
    pub fn settled(&self, id: &str) -> Option<Settled> {
        let id = normalize_id(id);
        self.decided.iter().find(|d| d.id == id).cloned()
    }

    /// When pending approval `id` is due, if it is still pending.
    pub fn deadline(&self, id: &str) -> Option<u64> {
        self.pending.get(&normalize_id(id)).map(|p| p.expires_at)
    }

    /// Ids still waiting for an answer.
    pub fn pending_ids(&self) -> Vec<String> {
        self.pending.keys().cloned().collect()
    }

    fn remember(&mut self, settled: Settled) -> Settled {
        if self.decided.len() == REMEMBERED {
            self.decided.pop_front();
        }
        self.decided.push_back(settled.clone());
        settled
    }
}

/// An id as typed: trimmed, lower-case, a leading `#` dropped.
pub fn normalize_id(id: &str) -> String {
    id.trim().trim_start_matches('#').to_lowercase()
}

/// The request a chat receives: the tool's name and the id, never its arguments (I11).
/// `for_turn` says whether `/approve <id> turn` is offered (see [`request_buttons`]).
pub fn request_text(
    id: &str,
    tool: &str,
    detail: Option<&str>,
    timeout_ms: u64,
    for_turn: bool,
) -> String {
    let on = detail.map(|d| format!(" on {d}")).unwrap_or_default();
    let turn = if for_turn {
        format!(" (/approve {id} turn also lets '{tool}' run unasked for the rest of this turn)")
    } else {
        String::new()
    };
    format!(
        "Approval needed ({id}): a messenger-started turn wants to run '{tool}'{on}. Reply /approve {id}{turn} or /deny {id} within {}; /details {id} shows what it touches. The terminal can answer too; the first answer counts.",
        crate::core::text::format_duration(i64::try_from(timeout_ms).unwrap_or(i64::MAX))
    )
}

/// The request's buttons: Approve once · Deny · Allow this tool for the rest of this turn
/// (only when `for_turn`: never for a protected path or a call outside the working
/// directory) · Details. Each stands for the command the request text names, so a press
/// and a typed answer are one and the same (and a transport without buttons loses
/// nothing). `/approve qd4k turn` is far below Telegram's 64-byte `callback_data`.
pub fn request_buttons(id: &str, for_turn: bool) -> Vec<Button> {
    let mut buttons = decision_buttons(id, for_turn);
    buttons.push(Button {
        label: "Details".into(),
        command: format!("/details {id}"),
    });
    buttons
}

/// The buttons that decide: what stays under the request once its details are shown.
pub fn decision_buttons(id: &str, for_turn: bool) -> Vec<Button> {
    let mut buttons = vec![
        Button {
            label: "Approve once".into(),
            command: format!("/approve {id}"),
        },
        Button {
            label: "Deny".into(),
            command: format!("/deny {id}"),
        },
    ];
    if for_turn {
        buttons.push(Button {
            label: "Allow for this turn".into(),
            command: format!("/approve {id} turn"),
        });
    }
    buttons
}

/// `HH:MM UTC` of `ms` since the Unix epoch.
pub fn clock(ms: u64) -> String {
    let minutes = ms / 60_000;
    format!("{:02}:{:02} UTC", (minutes / 60) % 24, minutes % 60)
}

/// What the request message becomes once the approval is settled: the request's first
/// line (what was asked) and the outcome (who, when), with no buttons left under it.
pub fn outcome_text(settled: &Settled, asked: &str) -> String {
    let at = clock(settled.at_ms);
    let outcome = match (&settled.by, settled.approved, settled.for_turn) {
        (Decider::Timeout, _, _) => {
            format!("Expired at {at}: nobody answered, so the call was blocked.")
        }
        (by, true, true) => format!(
            "Allowed for the rest of this turn {} at {at}: '{}' runs unasked until the turn ends.",
            by.describe(),
            settled.tool
        ),
        (by, true, false) => format!("Approved once {} at {at}.", by.describe()),
        (by, false, _) => format!("Denied {} at {at}.", by.describe()),
    };
    format!("{asked}\n{outcome}")
}

/// Paths `/details` lists at most; more are counted.
const DETAIL_PATHS: usize = 5;
/// Characters of one path `/details` shows.
const DETAIL_PATH_CHARS: usize = 80;

/// What `/details <id>` shows under the request: why it asks, and the paths the call
/// touches (each shortened, at most five), never the tool's other arguments (I11: the
/// guest never holds them). `paths` are `(access, path)` pairs as the host named them.
pub fn details_text(tool: &str, why: &str, paths: &[(&str, &str)], left_ms: u64) -> String {
    let mut lines = vec![format!("Details: '{tool}' is asked about because {why}.")];
    if paths.is_empty() {
        lines.push("It names no path the host could read (a shell command, say).".into());
    }
    for (access, path) in paths.iter().take(DETAIL_PATHS) {
        lines.push(format!(
            "- {access} {}",
            crate::core::text::one_line(path, DETAIL_PATH_CHARS)
        ));
    }
    if paths.len() > DETAIL_PATHS {
        lines.push(format!("- …and {} more", paths.len() - DETAIL_PATHS));
    }
    lines.push(format!(
        "Undecided; it is blocked in {} without an answer.",
        crate::core::text::format_duration(i64::try_from(left_ms).unwrap_or(i64::MAX))
    ));
    lines.join("\n")
}

/// What every side hears once an approval is settled.
pub fn settled_text(settled: &Settled) -> String {
    match (&settled.by, settled.approved) {
        (Decider::Timeout, _) => format!(
            "Approval {} ('{}'): no answer in time, so the call was blocked.",
            settled.id, settled.tool
        ),
        (by, true) if settled.for_turn => format!(
            "Approval {} ('{}'): approved {}, and '{}' runs unasked for the rest of this turn.",
            settled.id,
            settled.tool,
            by.describe(),
            settled.tool
        ),
        (by, true) => format!(
            "Approval {} ('{}'): approved {}.",
            settled.id,
            settled.tool,
            by.describe()
        ),
        (by, false) => format!(
            "Approval {} ('{}'): denied {}.",
            settled.id,
            settled.tool,
            by.describe()
        ),
    }
}

/// The answer to a late or repeated answer.
pub fn already_decided_text(settled: &Settled) -> String {
    format!(
        "Approval {} was already decided; your answer changed nothing. {}",
        settled.id,
        settled_text(settled)
    )
}

/// The answer to an id that names no approval.
pub fn unknown_id_text(id: &str) -> String {
    let id = normalize_id(id);
    format!(
        "No approval '{id}' is waiting: the id is wrong, or it is from before the bridge restarted (then the call was already blocked)."
    )
}

/// The reason the agent gets when nobody answered in time.
pub fn timeout_reason(tool: &str) -> String {
    format!(
        "Nobody approved '{tool}' in time, so it was blocked (fail closed). Ask the operator to run it locally."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phone() -> Decider {
        Decider::Remote(Identity::new("tg", "u1"))
    }

    #[test]
    fn the_first_answer_wins_and_later_ones_learn_who_decided() {
        let mut approvals = Approvals::default();
        approvals.open("ab3k", "bash", 1_000);
        let first = approvals.answer(" AB3K ", true, phone(), 10);
        let AnswerOutcome::Decided(settled) = first else {
            panic!("{first:?}");
        };
        assert_eq!(settled.tool, "bash");
        assert_eq!(
            settled_text(&settled),
            "Approval ab3k ('bash'): approved by tg:u1 from the chat."
        );
        assert_eq!(
            approvals.answer("ab3k", false, Decider::Local, 20),
            AnswerOutcome::AlreadyDecided(settled)
        );
        assert_eq!(
            approvals.answer("zzzz", true, Decider::Local, 20),
            AnswerOutcome::Unknown
        );
    }

    #[test]
    fn an_answer_after_the_deadline_never_wins() {
        let mut approvals = Approvals::default();
        approvals.open("ab3k", "bash", 1_000);
        let late = approvals.answer("ab3k", true, phone(), 1_000);
        let AnswerOutcome::AlreadyDecided(settled) = late else {
            panic!("{late:?}");
        };
        assert_eq!(settled.by, Decider::Timeout);
        assert!(!settled.approved);
        assert!(approvals.expire(5_000).is_empty());
    }

    #[test]
    fn the_buttons_stand_for_the_commands_the_request_names() {
        for for_turn in [true, false] {
            let text = request_text("qd4k", "bash", None, 60_000, for_turn);
            let buttons = request_buttons("qd4k", for_turn);
            let labels: Vec<&str> = buttons.iter().map(|b| b.label.as_str()).collect();
            if for_turn {
                assert_eq!(
                    labels,
                    ["Approve once", "Deny", "Allow for this turn", "Details"]
                );
            } else {
                assert_eq!(labels, ["Approve once", "Deny", "Details"]);
                assert!(!text.contains("turn also"), "{text}");
            }
            for button in &buttons {
                assert!(
                    text.contains(&button.command),
                    "{text} / {}",
                    button.command
                );
                assert!(button.command.len() <= 64, "fits Telegram's callback_data");
            }
        }
        // The longest id a host with repeating randomness makes still fits.
        let long = request_buttons("x4294967295", true);
        assert!(long.iter().all(|b| b.command.len() <= 64), "{long:?}");
    }

    #[test]
    fn the_outcome_says_who_decided_what_and_when() {
        let settled = |approved, for_turn, by| Settled {
            id: "ab3k".into(),
            tool: "bash".into(),
            approved,
            for_turn,
            by,
            at_ms: 1_700_000_000_000 + 120_000,
        };
        assert_eq!(clock(1_700_000_000_000), "22:13 UTC");
        assert_eq!(
            outcome_text(&settled(true, false, phone()), "Asked."),
            "Asked.\nApproved once by tg:u1 from the chat at 22:15 UTC."
        );
        assert_eq!(
            outcome_text(&settled(false, false, Decider::Local), "Asked."),
            "Asked.\nDenied at the terminal at 22:15 UTC."
        );
        assert_eq!(
            outcome_text(&settled(true, true, phone()), "Asked."),
            "Asked.\nAllowed for the rest of this turn by tg:u1 from the chat at 22:15 UTC: 'bash' runs unasked until the turn ends."
        );
        assert_eq!(
            outcome_text(&settled(false, false, Decider::Timeout), "Asked."),
            "Asked.\nExpired at 22:15 UTC: nobody answered, so the call was blocked."
        );
    }

    #[test]
    fn details_name_why_and_the_paths_shortened_and_counted() {
        let long = "d/".repeat(60);
        let paths: Vec<(&str, &str)> = vec![
            ("writes", "src/a.rs"),
            ("reads", long.as_str()),
            ("reads", "3"),
            ("reads", "4"),
            ("reads", "5"),
            ("reads", "6"),
        ];
        let text = details_text("edit", "it is in askTools", &paths, 61_000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "Details: 'edit' is asked about because it is in askTools."
        );
        assert_eq!(lines[1], "- writes src/a.rs");
        assert_eq!(lines[2].chars().count(), "- reads ".len() + 80);
        assert_eq!(lines[6], "- …and 1 more");
        assert_eq!(
            lines[7],
            "Undecided; it is blocked in 1m without an answer."
        );
        let bare = details_text("bash", "every call is asked about", &[], 0);
        assert!(bare.contains("names no path"), "{bare}");
    }

    #[test]
    fn a_turn_choice_is_remembered_and_an_expiry_is_dated_at_its_deadline() {
        let mut approvals = Approvals::default();
        approvals.open("ab3k", "bash", 1_000);
        approvals.open("cd4m", "bash", 2_000);
        let AnswerOutcome::Decided(settled) = approvals.choose("ab3k", Choice::Turn, phone(), 10)
        else {
            panic!("decided");
        };
        assert!(settled.approved && settled.for_turn);
        assert_eq!(settled.at_ms, 10);
        assert_eq!(approvals.deadline("cd4m"), Some(2_000));
        let expired = approvals.expire(9_000);
        assert_eq!(
            expired[0].at_ms, 2_000,
            "expired when due, not when noticed"
        );
        assert_eq!(approvals.deadline("cd4m"), None);
    }

    #[test]
    fn ids_avoid_look_alikes_and_pending_ones() {
        let mut approvals = Approvals::default();
        let id = approvals.new_id(&[0, 1, 2, 3]).expect("an id");
        assert_eq!(id, "abcd");
        approvals.open(&id, "bash", 10);
        assert_eq!(
            approvals.new_id(&[0, 1, 2, 3, 30, 30, 30, 30]),
            Some("9999".into())
        );
        assert_eq!(approvals.new_id(&[0, 1, 2, 3]), None);
        for byte in 0..=255u8 {
            let id = Approvals::default().new_id(&[byte; 4]).expect("an id");
            assert!(!id.contains(['0', 'o', '1', 'l', 'i']), "{id}");
        }
    }
}
