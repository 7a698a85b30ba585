//! What a parsed slash command does: the workbench's own commands change the [`Model`]
//! (overlays, panes, focus, pages, answers), and the commands for the focused session
//! become the daemon call that carries them out.

use super::super::action::Action;
use super::super::answer::Choice;
use super::super::commands::{ReviewOp, SlashCommand};
use super::super::model::{Model, Overlay, Zone};
use super::super::review::ReviewMsg;
use crate::protocol::methods::{NoParams, Request};
use crate::protocol::{
    CommitParams, CreateSessionParams, DeleteSessionParams, DiffParams, ForkParams, HandoffParams,
    MergeParams, MoveParams, PrParams, RenameParams, ResetParams, RulesParams, SearchParams,
    SessionIdParams, SessionRuleParams,
};

/// Hits `/search` lists.
const SEARCH_HITS: u32 = 50;

impl Model {
    /// Runs a parsed slash command.
    pub fn handle_command(&mut self, command: SlashCommand) -> Vec<Action> {
        match command {
            SlashCommand::Sessions => self.toggle_overlay(Overlay::Sessions { selected: 0 }),
            SlashCommand::Help => self.toggle_overlay(Overlay::Help {
                scroll: 0,
                commands_first: true,
            }),
            SlashCommand::Inbox => {
                self.panes.inbox = true;
                self.zone = Zone::Inbox;
                Vec::new()
            }
            SlashCommand::Goto(n) => self.goto(n),
            SlashCommand::Next => self.cycle(1),
            SlashCommand::Prev => self.cycle(-1),
            SlashCommand::New {
                worktree,
                agent,
                task,
                driver,
                kiln,
            } => vec![Action::Call(Request::SessionCreate(CreateSessionParams {
                // Across kilns: the one named, else the focused session's.
                kiln: kiln.or_else(|| self.focused_session().and_then(|s| s.kiln.clone())),
                // Empty: the runtime starts the configured default agent.
                agent: agent.unwrap_or_default(),
                worktree,
                in_place: false,
                task,
                driver,
                allow_read: Vec::new(),
                channel: None,
            }))],
            SlashCommand::Answer(text) => match self.answer_target() {
                Some(id) => self.answer(&id, Choice::Text(text)),
                None => self.refuse("nothing to answer: no open decision or approval here"),
            },
            SlashCommand::Context(op) => match self.focused.clone() {
                Some(session_id) => {
                    self.panes.context = true;
                    vec![Action::context(session_id, op)]
                }
                None => self.refuse("no session focused"),
            },
            SlashCommand::Rules => vec![Action::Call(Request::RulesList(RulesParams {
                session_id: self.focused.clone(),
            }))],
            SlashCommand::Memory => match self.focused_session().cloned() {
                Some(s) => {
                    let lines = s
                        .context_summary
                        .map(|t| t.lines().map(str::to_string).collect())
                        .unwrap_or_default();
                    self.show_page(format!("memory of {}", s.display_name), lines);
                    Vec::new()
                }
                None => self.refuse("no session focused"),
            },
            SlashCommand::Skills => match self.focused_session().cloned() {
                Some(s) => {
                    self.show_page(format!("skills of {}", s.display_name), s.skills);
                    Vec::new()
                }
                None => self.refuse("no session focused"),
            },
            SlashCommand::Review(op) => self.review(op),
            SlashCommand::Conflicts => vec![Request::SessionConflicts(NoParams {}).into()],
            SlashCommand::Search(query) => vec![
                Request::Search(SearchParams {
                    query,
                    session_id: None,
                    types: None,
                    limit: Some(SEARCH_HITS),
                })
                .into(),
            ],
            SlashCommand::Prune(options) => vec![Request::SessionPrune(options).into()],
            SlashCommand::Approve => self.answer_approval(Choice::Approve),
            SlashCommand::Deny => self.answer_approval(Choice::Deny),
            SlashCommand::Quit => vec![Action::Quit],
            other => match self.focused.clone() {
                Some(session_id) => session_call(other, session_id)
                    .map(Action::Call)
                    .into_iter()
                    .collect(),
                None => self.refuse("no session focused"),
            },
        }
    }

    /// `/review`: the focused session's comments listed, sent as one prompt, or dropped.
    pub(super) fn review(&mut self, op: ReviewOp) -> Vec<Action> {
        let Some(session_id) = self.focused.clone() else {
            return self.refuse("no session focused");
        };
        let reviewed = self.review.update(ReviewMsg::Op { op, session_id });
        self.on_reviewed(reviewed)
    }

    /// `make`'s action for the focused session, or a refusal when none is focused.
    pub(super) fn on_focused(&mut self, make: impl FnOnce(String) -> Action) -> Vec<Action> {
        match self.focused.clone() {
            Some(session_id) => vec![make(session_id)],
            None => self.refuse("no session focused"),
        }
    }
}

/// The call a command for the focused session makes; `None` for the workbench's own
/// commands, which [`Model::handle_command`] carries out itself.
fn session_call(command: SlashCommand, session_id: String) -> Option<Request> {
    let on = |make: fn(SessionIdParams) -> Request| {
        Some(make(SessionIdParams {
            session_id: session_id.clone(),
        }))
    };
    match command {
        SlashCommand::Audit => on(Request::SessionAudit),
        SlashCommand::Session => on(Request::SessionSecurity),
        SlashCommand::Cancel => on(Request::SessionCancel),
        SlashCommand::Stop => on(Request::SessionStop),
        SlashCommand::Restart => on(Request::SessionRestart),
        SlashCommand::Resend => on(Request::SessionResend),
        SlashCommand::Diff => Some(diff_request(session_id)),
        SlashCommand::Rule { rule, enabled } => Some(Request::SessionRule(SessionRuleParams {
            session_id,
            rule,
            enabled,
        })),
        SlashCommand::Commit(message) => Some(Request::SessionCommit(CommitParams {
            session_id,
            message,
        })),
        SlashCommand::Merge(strategy) => Some(Request::SessionMerge(MergeParams {
            session_id,
            strategy,
            message: None,
        })),
        SlashCommand::Pr => Some(Request::SessionPr(PrParams {
            session_id,
            title: None,
            body: None,
        })),
        SlashCommand::Delete(options) => Some(Request::SessionDelete(DeleteSessionParams {
            session_id,
            options,
        })),
        SlashCommand::Rename(name) => {
            Some(Request::SessionRename(RenameParams { session_id, name }))
        }
        SlashCommand::Fork { worktree, task } => Some(Request::SessionFork(ForkParams {
            session_id,
            worktree,
            task,
        })),
        SlashCommand::Handoff(agent) => {
            Some(Request::SessionHandoff(HandoffParams { session_id, agent }))
        }
        SlashCommand::Move(to) => Some(Request::SessionMove(MoveParams { session_id, to })),
        SlashCommand::Reset { keep_disabled } => Some(Request::SessionReset(ResetParams {
            session_id,
            keep_disabled,
        })),
        SlashCommand::Sessions
        | SlashCommand::Help
        | SlashCommand::Inbox
        | SlashCommand::Goto(_)
        | SlashCommand::Next
        | SlashCommand::Prev
        | SlashCommand::New { .. }
        | SlashCommand::Answer(_)
        | SlashCommand::Context(_)
        | SlashCommand::Rules
        | SlashCommand::Memory
        | SlashCommand::Skills
        | SlashCommand::Review(_)
        | SlashCommand::Conflicts
        | SlashCommand::Search(_)
        | SlashCommand::Prune(_)
        | SlashCommand::Approve
        | SlashCommand::Deny
        | SlashCommand::Quit => None,
    }
}

/// `session.resend` of a session: its turn that was cut short, sent again.
pub(super) fn resend(session_id: String) -> Action {
    Action::on_session(Request::SessionResend, session_id)
}

/// `session.diff` of a session, shown in the diff view.
pub(super) fn diff(session_id: String) -> Action {
    Action::Call(diff_request(session_id))
}

fn diff_request(session_id: String) -> Request {
    Request::SessionDiff(DiffParams {
        session_id,
        context: None,
    })
}
