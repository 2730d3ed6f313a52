//! Approval from the phone (docs/decisions.md#decision-11-approval-from-the-phone): a remote turn's
//! tool call that needs approval is left pending, the turn's chats (its audience,
//! docs/security.md#who-sees-what) are asked with a short id, and the first answer — the local
//! confirm, a trusted `/approve` or `/deny`, or the deadline — settles it through
//! `Host::resolve_tool_call`. Every side hears who decided.

use super::{Bridge, scope};
use crate::core::approvals::{self, AnswerOutcome, Decider, ID_LEN, Settled};
use crate::core::commands::RemoteCommand;
use crate::core::tool_policy;
use crate::host::Host;
use crate::keys::{ConversationKey, Identity};
use crate::model::{ApprovalRequest, Level, OutboundKind, ToolAnswer, ToolCall, ToolDecision};

/// Random bytes drawn per id attempt round: several candidates, so a collision with a
/// pending id costs no second host call.
const ID_CANDIDATES: usize = 4;

impl Bridge {
    /// Opens a pending approval for `tool`: the chats are asked, the host parks the call
    /// and asks locally. Returns what `on_tool_call` answers.
    pub(super) fn ask_for_approval(
        &mut self,
        host: &mut dyn Host,
        call: &ToolCall,
        detail: Option<&str>,
    ) -> ToolAnswer {
        let tool = call.name.as_str();
        let now = host.now_ms();
        // Settle what is overdue first, so its id is free and its chats hear of it.
        self.expire_approvals(host);
        let id = self.fresh_approval_id(host);
        let timeout_ms = self.config.remote_approval.timeout_ms;
        self.pending
            .approvals
            .open(&id, tool, now.saturating_add(timeout_ms));
        host.log(
            Level::Info,
            "remote approval requested",
            &[("tool", tool.to_string()), ("id", id.clone())],
        );
        self.pending
            .subjects
            .insert(id.clone(), scope::subject(call));
        let request = approvals::request_text(&id, tool, detail, timeout_ms);
        // Buttons where the platform has them (Telegram); their presses arrive as the
        // same `/approve` / `/deny` commands, so everything below treats them alike.
        let buttons = approvals::request_buttons(&id);
        // Only the turn's own chats: another chat would learn what a private prompt made
        // the agent do, and could answer for it.
        let audience = self.audience();
        self.publish_to(host, &audience, OutboundKind::Notice, &request, &buttons);
        self.pending.audiences.insert(id.clone(), audience);
        self.request_ticks(host);
        ToolAnswer::Pending(ApprovalRequest {
            id: id.clone(),
            title: tool_policy::approval_title(tool),
            message: format!(
                "{} (approval {id}; the chat that started the turn may answer with /approve {id})",
                tool_policy::approval_question(tool, detail)
            ),
        })
    }

    fn fresh_approval_id(&mut self, host: &mut dyn Host) -> String {
        for _ in 0..4 {
            let bytes = host.random_bytes(u32::try_from(ID_LEN * ID_CANDIDATES).unwrap_or(16));
            if let Some(id) = self.pending.approvals.new_id(&bytes) {
                return id;
            }
        }
        // Only a host whose randomness repeats gets here; a counter keeps ids unique.
        self.pending.fallback += 1;
        format!("x{}", self.pending.fallback)
    }

    /// The person at the terminal answered approval `id`.
    pub fn on_local_answer(&mut self, host: &mut dyn Host, id: &str, approved: bool) {
        let now = host.now_ms();
        self.expire_approvals(host);
        match self
            .pending
            .approvals
            .answer(id, approved, Decider::Local, now)
        {
            AnswerOutcome::Decided(settled) => self.settle(host, &settled, None),
            AnswerOutcome::AlreadyDecided(settled) => {
                host.notify(Level::Info, &approvals::already_decided_text(&settled));
            }
            AnswerOutcome::Unknown => host.notify(Level::Warning, &approvals::unknown_id_text(id)),
        }
    }

    /// `/approve <id>` or `/deny <id>` from `identity` in `conversation`; returns the
    /// reply for that chat. Only an identity this session trusts decides: trust by
    /// pairing or `allowUsers`, never merely `requirePairing: false` (an approval lets a
    /// tool run that the policy held back, so "anyone may prompt" is not enough).
    pub(super) fn answer_from_chat(
        &mut self,
        host: &mut dyn Host,
        command: RemoteCommand,
        args: &str,
        identity: &Identity,
        conversation: &ConversationKey,
    ) -> String {
        let name = command.name();
        let Some(id) = args.split_whitespace().next() else {
            return format!("Usage: /{name} <id> (the id is in the approval request).");
        };
        if !self.state.is_trusted(identity) && !self.config.allow_users.contains(identity) {
            host.log(
                Level::Warning,
                "approval answer from an untrusted identity refused",
                &[("identity", identity.to_string())],
            );
            return "Only a paired identity can answer approvals. Pair this chat first.".into();
        }
        let now = host.now_ms();
        self.expire_approvals(host);
        // Asked elsewhere: this chat was never shown the request, so an id typed here is a
        // guess or a leak, and answering it would let one chat decide another's turn.
        if let Some(audience) = self.pending.audiences.get(id)
            && !audience.iter().any(|t| t.key() == *conversation)
        {
            host.log(
                Level::Warning,
                "approval answer from a chat that was not asked refused",
                &[("identity", identity.to_string()), ("id", id.to_string())],
            );
            return format!(
                "Approval {id} was not asked in this chat. Only the chat that started the turn, or the terminal, can answer it."
            );
        }
        let approved = command == RemoteCommand::Approve;
        match self
            .pending
            .approvals
            .answer(id, approved, Decider::Remote(identity.clone()), now)
        {
            AnswerOutcome::Decided(settled) => {
                self.settle(host, &settled, Some(conversation));
                approvals::settled_text(&settled)
            }
            AnswerOutcome::AlreadyDecided(settled) => approvals::already_decided_text(&settled),
            AnswerOutcome::Unknown => approvals::unknown_id_text(id),
        }
    }

    /// Settles every overdue approval as blocked and says so everywhere.
    pub(super) fn expire_approvals(&mut self, host: &mut dyn Host) {
        let now = host.now_ms();
        for settled in self.pending.approvals.expire(now) {
            self.settle(host, &settled, None);
        }
    }

    /// Gives the verdict to the host (exactly once per id: `Approvals` hands each id out
    /// settled once), shows it on the cards, and tells the terminal and the chats — all
    /// but `answered_in`, whose command reply says it.
    fn settle(
        &mut self,
        host: &mut dyn Host,
        settled: &Settled,
        answered_in: Option<&ConversationKey>,
    ) {
        let narrowing = self.pending.narrowing.remove(&settled.id);
        let decision = match (&settled.by, settled.approved) {
            // A yes lets the call run as it would have without the question: a search
            // still leaves the protected paths out.
            (_, true) => match narrowing {
                Some(arguments) => ToolDecision::Narrowed(arguments),
                None => ToolDecision::Allow,
            },
            (Decider::Timeout, false) => {
                ToolDecision::Block(approvals::timeout_reason(&settled.tool))
            }
            (_, false) => ToolDecision::Block(tool_policy::declined_reason(&settled.tool)),
        };
        host.resolve_tool_call(&settled.id, &decision);
        let subject = self
            .pending
            .subjects
            .remove(&settled.id)
            .unwrap_or_else(|| format!("`{}`", settled.tool));
        let verdict = match (&settled.by, settled.approved) {
            (Decider::Timeout, _) => format!("blocked {subject}: no answer in time"),
            (by, true) => format!("approved {subject} {}", by.describe()),
            (by, false) => format!("denied {subject} {}", by.describe()),
        };
        self.work.verdicts.push(verdict);
        let by = match &settled.by {
            Decider::Local => "local".to_string(),
            Decider::Remote(identity) => identity.to_string(),
            Decider::Timeout => "timeout".to_string(),
        };
        host.log(
            Level::Info,
            "remote approval settled",
            &[
                ("id", settled.id.clone()),
                ("tool", settled.tool.clone()),
                ("approved", settled.approved.to_string()),
                ("by", by),
            ],
        );
        self.show_verdict(host, &settled.tool, &decision);
        let text = approvals::settled_text(settled);
        if settled.by != Decider::Local {
            host.notify(
                if settled.approved {
                    Level::Info
                } else {
                    Level::Warning
                },
                &text,
            );
        }
        // The verdict goes where the request went (still reachable), not to every chat.
        let asked = self
            .pending
            .audiences
            .remove(&settled.id)
            .unwrap_or_else(|| self.audience());
        let reachable = self.reachable();
        for target in asked {
            if Some(&target.key()) != answered_in && reachable.contains(&target) {
                self.reply(host, &target, &text);
            }
        }
        self.request_ticks(host);
    }
}
