//! Questions the agent asks while it waits (pi's `ctx.ui.select`, `confirm`, `input`,
//! `editor`), answered from the chat or the terminal. Pure: time comes in as `now`, ids are
//! made from given bytes.
//!
//! Each open question is answered exactly once — by a trusted chat (a button, `/answer <id>
//! …`, or the next plain message in a chat it was asked in), by the terminal (`/connect
//! answer <id> …`), or dismissed by its deadline — and the first to come wins, as approvals
//! are (docs/decisions.md#decision-11-approval-from-the-phone). Before this, a headless pi's
//! select, input and editor were dismissed at once and its confirm waited on a terminal
//! nobody watched: the agent went on as if the person had said no.

use std::collections::{BTreeMap, VecDeque};

use crate::core::approvals::{Decider, draw_id, normalize_id};
use crate::core::redact;
use crate::core::state::ConversationTarget;
use crate::keys::ConversationKey;
use crate::model::{AgentQuestion, Button, QuestionAnswer, QuestionKind};

/// Options shown as buttons at most; a longer list is a numbered list answered by number.
/// Five is the smallest row a platform holds (a Discord action row), and more than five
/// labels in one Telegram row are cut to a few letters each.
pub const MAX_OPTION_BUTTONS: usize = 5;
/// How long a question the agent set no timeout for stays open. pi would wait for ever
/// for it, and a headless pi has nobody else to ask: the turn would hang.
pub const DEFAULT_TIMEOUT_MS: u64 = 10 * 60 * 1000;
/// Characters of an option shown on its button (the list in the text has them whole).
const LABEL_CHARS: usize = 32;
/// Answered questions remembered for "already answered" replies.
const REMEMBERED: usize = 32;

/// An answered (or dismissed) question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// The bridge's short id.
    pub id: String,
    /// The host's id, for `answer-question`.
    pub host_id: String,
    /// The question's title.
    pub title: String,
    /// What the agent gets.
    pub answer: QuestionAnswer,
    /// Who answered.
    pub by: Decider,
    /// The answer was typed (input, editor), not chosen: it is not repeated to the chats.
    pub typed: bool,
    /// Where it was asked: those chats hear the outcome.
    pub asked_in: Vec<ConversationTarget>,
}

/// What an answer did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// This answer closed the question.
    Answered(Closed),
    /// The answer does not fit the question; the text says what would (the question stays
    /// open).
    Unfit(String),
    /// The question was answered already, or its time ran out.
    AlreadyClosed(Closed),
    /// No question with that id, now or recently.
    Unknown,
}

#[derive(Debug, Clone)]
struct Open {
    question: AgentQuestion,
    expires_at: u64,
    asked_in: Vec<ConversationTarget>,
}

/// The open questions of one session, in memory only: when the instance goes, the host
/// dismisses what it still holds.
#[derive(Debug, Default)]
pub struct Questions {
    open: BTreeMap<String, Open>,
    closed: VecDeque<Closed>,
}

impl Questions {
    /// An id for a new question from `random` bytes; `None` only when every candidate is
    /// taken (the caller draws more).
    pub fn new_id(&self, random: &[u8]) -> Option<String> {
        draw_id(random, |id| {
            self.open.contains_key(id) || self.closed.iter().any(|c| c.id == id)
        })
    }

    /// Opens `question` under `id`, asked in `asked_in`, dismissed at `expires_at`.
    pub fn open(
        &mut self,
        id: &str,
        question: AgentQuestion,
        expires_at: u64,
        asked_in: Vec<ConversationTarget>,
    ) {
        self.open.insert(
            id.to_string(),
            Open {
                question,
                expires_at,
                asked_in,
            },
        );
    }

    /// The host's id is already open under another short id (a host that repeats itself):
    /// the bridge must not answer one host question twice.
    pub fn holds_host_id(&self, host_id: &str) -> bool {
        self.open.values().any(|o| o.question.id == host_id)
    }

    /// Answers question `id` with `text` as typed. Expired questions are closed by their
    /// deadline first, so an answer after it never wins even before the tick comes.
    pub fn answer(&mut self, id: &str, text: &str, by: Decider, now: u64) -> AnswerOutcome {
        let id = normalize_id(id);
        if let Some(closed) = self.expire(now).into_iter().find(|c| c.id == id) {
            return AnswerOutcome::AlreadyClosed(closed);
        }
        let Some(open) = self.open.get(&id) else {
            return self
                .closed
                .iter()
                .find(|c| c.id == id)
                .cloned()
                .map_or(AnswerOutcome::Unknown, AnswerOutcome::AlreadyClosed);
        };
        let answer = match parse_answer(&open.question.kind, text) {
            Ok(answer) => answer,
            Err(hint) => return AnswerOutcome::Unfit(hint),
        };
        let Some(open) = self.open.remove(&id) else {
            return AnswerOutcome::Unknown;
        };
        AnswerOutcome::Answered(self.remember(Closed {
            id,
            host_id: open.question.id,
            typed: is_typed(&open.question.kind),
            title: open.question.title,
            answer,
            by,
            asked_in: open.asked_in,
        }))
    }

    /// The terminal where the agent asked too answered the question the host knows as
    /// `host_id`, with `answer` as given there (no parsing: it came from the agent's own
    /// dialog). Expired questions are closed by their deadline first.
    pub fn answer_by_host_id(
        &mut self,
        host_id: &str,
        answer: QuestionAnswer,
        now: u64,
    ) -> AnswerOutcome {
        if let Some(closed) = self.expire(now).into_iter().find(|c| c.host_id == host_id) {
            return AnswerOutcome::AlreadyClosed(closed);
        }
        let id = self
            .open
            .iter()
            .find(|(_, o)| o.question.id == host_id)
            .map(|(id, _)| id.clone());
        let Some(open) = id.and_then(|id| self.open.remove_entry(&id)) else {
            return self
                .closed
                .iter()
                .rev()
                .find(|c| c.host_id == host_id)
                .cloned()
                .map_or(AnswerOutcome::Unknown, AnswerOutcome::AlreadyClosed);
        };
        let (id, open) = open;
        AnswerOutcome::Answered(self.remember(Closed {
            id,
            typed: is_typed(&open.question.kind),
            host_id: open.question.id,
            title: open.question.title,
            answer,
            by: Decider::Local,
            asked_in: open.asked_in,
        }))
    }

    /// Closes every question whose deadline has come, as dismissed.
    pub fn expire(&mut self, now: u64) -> Vec<Closed> {
        let due: Vec<String> = self
            .open
            .iter()
            .filter(|(_, o)| now >= o.expires_at)
            .map(|(id, _)| id.clone())
            .collect();
        due.into_iter()
            .filter_map(|id| {
                let open = self.open.remove(&id)?;
                Some(self.remember(Closed {
                    id,
                    typed: is_typed(&open.question.kind),
                    host_id: open.question.id,
                    title: open.question.title,
                    answer: QuestionAnswer::Cancelled,
                    by: Decider::Timeout,
                    asked_in: open.asked_in,
                }))
            })
            .collect()
    }

    /// The earliest deadline of an open question.
    pub fn next_deadline(&self) -> Option<u64> {
        self.open.values().map(|o| o.expires_at).min()
    }

    /// The oldest open question asked in `conversation` (the ids sort by nothing useful,
    /// so by deadline): a plain message there answers it.
    pub fn waiting_in(&self, conversation: &ConversationKey) -> Option<String> {
        self.open
            .iter()
            .filter(|(_, o)| o.asked_in.iter().any(|t| t.key() == *conversation))
            .min_by_key(|(_, o)| o.expires_at)
            .map(|(id, _)| id.clone())
    }

    /// Where question `id` was asked, while it is open.
    pub fn asked_in(&self, id: &str) -> Option<&[ConversationTarget]> {
        self.open
            .get(&normalize_id(id))
            .map(|o| o.asked_in.as_slice())
    }

    fn remember(&mut self, closed: Closed) -> Closed {
        if self.closed.len() == REMEMBERED {
            self.closed.pop_front();
        }
        self.closed.push_back(closed.clone());
        closed
    }
}

fn is_typed(kind: &QuestionKind) -> bool {
    matches!(kind, QuestionKind::Input | QuestionKind::Editor)
}

/// Reads an answer as typed for a question of `kind`; `Err` says what would fit.
///
/// A select takes the option's number (the list and the buttons are numbered) or its text;
/// a confirm takes yes or no; input and editor take any text that is not blank.
pub fn parse_answer(kind: &QuestionKind, text: &str) -> Result<QuestionAnswer, String> {
    let text = text.trim();
    match kind {
        QuestionKind::Select(options) => {
            let by_number = text
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|at| options.get(at));
            let by_text = || options.iter().find(|o| o.trim().eq_ignore_ascii_case(text));
            by_number
                .or_else(by_text)
                .map(|option| QuestionAnswer::Value(option.clone()))
                .ok_or_else(|| match options.len() {
                    0 => "This question has no options to choose from.".to_string(),
                    n => format!("Answer with a number from 1 to {n}."),
                })
        }
        QuestionKind::Confirm => match text.to_ascii_lowercase().as_str() {
            "yes" | "y" | "ok" | "true" => Ok(QuestionAnswer::Confirmed(true)),
            "no" | "n" | "false" => Ok(QuestionAnswer::Confirmed(false)),
            _ => Err("Answer yes or no.".into()),
        },
        QuestionKind::Input | QuestionKind::Editor if text.is_empty() => {
            Err("The answer is empty; write it after the id.".into())
        }
        QuestionKind::Input | QuestionKind::Editor => Ok(QuestionAnswer::Value(text.to_string())),
    }
}

/// What the chats receive: the question, what to answer and how, and its deadline. The
/// outbound pipeline redacts it like every text; the buttons' labels are redacted here
/// (`question_buttons`), since labels do not pass through that pipeline.
pub fn question_text(id: &str, question: &AgentQuestion, timeout_ms: u64) -> String {
    let within = crate::core::text::format_duration(i64::try_from(timeout_ms).unwrap_or(i64::MAX));
    let mut text = format!("Question from the agent ({id}): {}", question.title.trim());
    let detail = question.message.trim();
    match &question.kind {
        QuestionKind::Select(options) => {
            if !detail.is_empty() {
                text.push_str(&format!("\n{detail}"));
            }
            for (n, option) in options.iter().enumerate() {
                text.push_str(&format!("\n{}. {}", n + 1, option.trim()));
            }
            let how = if options.len() <= MAX_OPTION_BUTTONS {
                "Tap an option, or reply with its number"
            } else {
                "Reply with the number of your choice"
            };
            text.push_str(&format!(
                "\n{how} (or /answer {id} <number>) within {within}."
            ));
        }
        QuestionKind::Confirm => {
            if !detail.is_empty() {
                text.push_str(&format!("\n{detail}"));
            }
            text.push_str(&format!(
                "\nReply yes or no (or /answer {id} yes) within {within}."
            ));
        }
        QuestionKind::Input | QuestionKind::Editor => {
            if !detail.is_empty() {
                let what = if matches!(question.kind, QuestionKind::Editor) {
                    "Current text"
                } else {
                    "Hint"
                };
                text.push_str(&format!("\n{what}: {detail}"));
            }
            text.push_str(&format!(
                "\nReply with your answer: your next message in this chat is taken as it (or /answer {id} <text>), within {within}."
            ));
        }
    }
    text.push_str(" The terminal can answer too; the first answer counts.");
    text
}

/// The buttons under a question: one per option of a short select, Yes / No for a
/// confirm, none for text. Each stands for the `/answer` the text names, so a press and a
/// typed answer are one and the same; a select's button carries the option's number,
/// never its text (which may be long, and reaches the platform as button data).
pub fn question_buttons(id: &str, kind: &QuestionKind) -> Vec<Button> {
    match kind {
        QuestionKind::Select(options) if options.len() <= MAX_OPTION_BUTTONS => options
            .iter()
            .enumerate()
            .map(|(n, option)| Button {
                label: label(option),
                command: format!("/answer {id} {}", n + 1),
            })
            .collect(),
        QuestionKind::Confirm => vec![
            Button {
                label: "Yes".into(),
                command: format!("/answer {id} yes"),
            },
            Button {
                label: "No".into(),
                command: format!("/answer {id} no"),
            },
        ],
        _ => Vec::new(),
    }
}

/// An option as its button shows it: redacted (a label skips the outbound pipeline),
/// on one line, shortened.
fn label(option: &str) -> String {
    let clean = redact::redact(option).text;
    let one_line: String = clean.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= LABEL_CHARS {
        return one_line;
    }
    let mut short: String = one_line.chars().take(LABEL_CHARS - 1).collect();
    short.push('…');
    short
}

/// What every side hears once a question is closed. A typed answer is not repeated (it
/// may be long, or private to the one who wrote it); a choice and a yes/no are.
pub fn closed_text(closed: &Closed) -> String {
    let what = match &closed.answer {
        QuestionAnswer::Cancelled => {
            return format!(
                "Question {} ('{}'): no answer in time, so the agent went on without one.",
                closed.id,
                closed.title.trim()
            );
        }
        QuestionAnswer::Confirmed(true) => "yes".to_string(),
        QuestionAnswer::Confirmed(false) => "no".to_string(),
        QuestionAnswer::Value(_) if closed.typed => "with a text".to_string(),
        QuestionAnswer::Value(value) => format!("'{}'", value.trim()),
    };
    format!(
        "Question {} ('{}'): answered {what} {}.",
        closed.id,
        closed.title.trim(),
        closed.by.describe()
    )
}

/// The answer to a late or repeated answer.
pub fn already_closed_text(closed: &Closed) -> String {
    format!(
        "Question {} was already closed; your answer changed nothing. {}",
        closed.id,
        closed_text(closed)
    )
}

/// The answer to an id that names no question.
pub fn unknown_id_text(id: &str) -> String {
    format!(
        "No question '{}' is waiting: the id is wrong, or it is from before the bridge restarted.",
        normalize_id(id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Identity;

    fn question(kind: QuestionKind) -> AgentQuestion {
        AgentQuestion {
            id: "uuid-1".into(),
            kind,
            title: "Deploy where?".into(),
            message: String::new(),
            timeout_ms: None,
        }
    }

    fn phone() -> Decider {
        Decider::Remote(Identity::new("telegram", "42"))
    }

    fn select(n: usize) -> QuestionKind {
        QuestionKind::Select((1..=n).map(|i| format!("option {i}")).collect())
    }

    #[test]
    fn a_select_is_answered_by_number_or_by_text() {
        let kind = select(3);
        assert_eq!(
            parse_answer(&kind, " 2 "),
            Ok(QuestionAnswer::Value("option 2".into()))
        );
        assert_eq!(
            parse_answer(&kind, "OPTION 3"),
            Ok(QuestionAnswer::Value("option 3".into()))
        );
        for wrong in ["0", "4", "", "maybe"] {
            assert_eq!(
                parse_answer(&kind, wrong),
                Err("Answer with a number from 1 to 3.".into()),
                "{wrong:?}"
            );
        }
    }

    #[test]
    fn a_confirm_takes_yes_or_no_and_text_takes_anything_but_blank() {
        assert_eq!(
            parse_answer(&QuestionKind::Confirm, "Yes"),
            Ok(QuestionAnswer::Confirmed(true))
        );
        assert_eq!(
            parse_answer(&QuestionKind::Confirm, "n"),
            Ok(QuestionAnswer::Confirmed(false))
        );
        assert!(parse_answer(&QuestionKind::Confirm, "perhaps").is_err());
        assert_eq!(
            parse_answer(&QuestionKind::Input, " staging "),
            Ok(QuestionAnswer::Value("staging".into()))
        );
        assert!(parse_answer(&QuestionKind::Editor, "  ").is_err());
    }

    #[test]
    fn the_first_answer_wins_and_an_unfit_one_leaves_it_open() {
        let mut questions = Questions::default();
        questions.open("qd4k", question(QuestionKind::Confirm), 1_000, Vec::new());
        assert_eq!(
            questions.answer("qd4k", "perhaps", phone(), 10),
            AnswerOutcome::Unfit("Answer yes or no.".into())
        );
        let AnswerOutcome::Answered(closed) = questions.answer("QD4K", "yes", phone(), 20) else {
            panic!("the first fitting answer closes it");
        };
        assert_eq!(closed.host_id, "uuid-1");
        assert_eq!(closed.answer, QuestionAnswer::Confirmed(true));
        assert!(matches!(
            questions.answer("qd4k", "no", Decider::Local, 30),
            AnswerOutcome::AlreadyClosed(c) if c.by == phone()
        ));
        assert_eq!(
            questions.answer("zzzz", "no", phone(), 30),
            AnswerOutcome::Unknown
        );
    }

    #[test]
    fn an_answer_after_the_deadline_never_wins() {
        let mut questions = Questions::default();
        questions.open("qd4k", question(select(2)), 1_000, Vec::new());
        assert_eq!(questions.next_deadline(), Some(1_000));
        assert!(matches!(
            questions.answer("qd4k", "1", phone(), 1_000),
            AnswerOutcome::AlreadyClosed(Closed {
                answer: QuestionAnswer::Cancelled,
                by: Decider::Timeout,
                ..
            })
        ));
        assert_eq!(questions.next_deadline(), None);
    }

    #[test]
    fn a_short_select_gets_numbered_buttons_and_a_long_one_a_numbered_list() {
        let short = question_buttons("qd4k", &select(MAX_OPTION_BUTTONS));
        assert_eq!(short.len(), MAX_OPTION_BUTTONS);
        assert_eq!(short[0].command, "/answer qd4k 1");
        assert_eq!(short[0].label, "option 1");
        assert!(question_buttons("qd4k", &select(MAX_OPTION_BUTTONS + 1)).is_empty());
        let long = question_text("qd4k", &question(select(7)), 60_000);
        assert!(long.contains("\n7. option 7"), "{long}");
        assert!(long.contains("Reply with the number"), "{long}");
        let yes_no = question_buttons("qd4k", &QuestionKind::Confirm);
        assert_eq!(
            yes_no
                .iter()
                .map(|b| b.command.as_str())
                .collect::<Vec<_>>(),
            ["/answer qd4k yes", "/answer qd4k no"]
        );
        assert!(question_buttons("qd4k", &QuestionKind::Input).is_empty());
    }

    #[test]
    fn button_labels_are_redacted_and_short() {
        let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
        let kind = QuestionKind::Select(vec![format!("use {secret}"), "x".repeat(100)]);
        let buttons = question_buttons("qd4k", &kind);
        assert!(!buttons[0].label.contains(secret), "{}", buttons[0].label);
        assert_eq!(buttons[1].label.chars().count(), LABEL_CHARS);
        // The data stays within Telegram's 64 bytes whatever the option.
        assert!(buttons.iter().all(|b| b.command.len() <= 64));
    }

    #[test]
    fn a_plain_reply_answers_the_oldest_question_of_its_chat() {
        let chat = ConversationTarget {
            transport: "telegram".into(),
            conversation_id: "1".into(),
            thread_id: None,
        };
        let mut questions = Questions::default();
        questions.open(
            "late",
            question(QuestionKind::Input),
            2_000,
            vec![chat.clone()],
        );
        questions.open(
            "soon",
            question(QuestionKind::Input),
            1_000,
            vec![chat.clone()],
        );
        questions.open("else", question(QuestionKind::Input), 500, Vec::new());
        assert_eq!(questions.waiting_in(&chat.key()), Some("soon".into()));
    }
}
