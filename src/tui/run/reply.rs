//! What the workbench does with the daemon's answer to a call it made: focus the session a
//! call started, load a transcript page or the context stack, show the audit log, the
//! diff, the conflicts or a page, or say in a flash what the call did (a prompt that
//! waits its turn says so). Calls whose effect arrives as daemon events (a prompt taken at
//! once, an answer, a mark read) show nothing here.

use super::Runtime;
use crate::protocol::methods::{Reply, Request};
use crate::protocol::{DeleteOutcome, PruneResult};
use crate::tui::Flash;
use crate::tui::view::pages::{rules_page, security_page};

impl Runtime {
    /// Carries out what `reply`, the answer to `request`, means for the screen.
    pub(super) fn answered(&mut self, request: Request, reply: Reply) {
        let model = &mut self.model;
        match reply {
            Reply::SessionCreate(created)
            | Reply::SessionFork(created)
            | Reply::SessionHandoff(created)
            | Reply::SessionReset(created) => {
                let actions = model.focus_session_id(&created.session_id);
                self.perform(actions);
            }
            Reply::SessionTranscript(page) => {
                if let Request::SessionTranscript(p) = &request {
                    self.loading.remove(&p.session_id);
                    model.load_transcript(&p.session_id, page.entries);
                }
            }
            Reply::ContextApply(result) => {
                if let Some(what) = &result.description {
                    model.report(Flash::info(what.clone()));
                }
                model.load_context(result);
            }
            Reply::SessionAudit(log) => model.show_audit(log),
            Reply::SessionDiff(reply) => model.show_diff(&reply),
            Reply::SessionConflicts(report) => {
                model.set_conflicts(report);
                model.show_conflicts();
            }
            Reply::RulesList(reply) => model.show_page("rules".into(), rules_page(&reply)),
            Reply::SessionList(listed) => model.set_resources(&listed.sessions),
            Reply::Search(results) => {
                if let Request::Search(p) = &request {
                    model.show_search(p.query.clone(), results.hits, results.broad);
                }
            }
            Reply::InboxGet(reply) => {
                let m = reply.message;
                let mut lines = vec![format!("from {}", m.session_name)];
                lines.extend(m.body.iter().flat_map(|b| b.lines().map(str::to_string)));
                if let Some(answer) = &m.response {
                    lines.push(format!("answered: {answer}"));
                }
                model.show_page(m.title, lines);
            }
            Reply::SessionSecurity(reply) => {
                model.show_page("security state".into(), security_page(&reply.security));
            }
            Reply::SessionPrompt(reply) if reply.queued => {
                let waits = match &request {
                    Request::SessionPrompt(p) => model.is_waiting(&p.session_id),
                    _ => false,
                };
                model.report(Flash::info(if waits {
                    "queued: the agent waits for your answer first (its question is in the inbox); \
                     this prompt goes in when that turn ends"
                        .to_string()
                } else {
                    "queued: this prompt goes in when the agent's turn ends".to_string()
                }));
            }
            other => {
                if let Some(note) = note(&request, other) {
                    model.report(Flash::info(note));
                }
            }
        }
    }
}

/// What a call that changed something did, in one line.
fn note(request: &Request, reply: Reply) -> Option<String> {
    Some(match reply {
        Reply::SessionCommit(reply) => match reply.commit {
            Some(commit) => format!("committed {}", commit.get(..12).unwrap_or(&commit)),
            None => "nothing to commit".into(),
        },
        Reply::SessionMerge(reply) => format!(
            "landed on {} (now {})",
            reply.into,
            reply.head.get(..12).unwrap_or(&reply.head)
        ),
        Reply::SessionPr(reply) => format!("pull request: {}", reply.url),
        Reply::SessionRestart(_) => "restarting the agent".into(),
        Reply::SessionDelete(outcome) => deleted_note(&outcome),
        Reply::SessionPrune(result) => pruned_note(&result),
        Reply::SessionRename(reply) => format!("renamed: {}", reply.session.display_name),
        Reply::SessionMove(moved) => format!(
            "{} moved from {} to {} in {:.1} s; {} open question(s) went with it",
            moved.session.display_name,
            moved.from_host,
            moved.to_host,
            moved.millis as f64 / 1000.0,
            moved.carried
        ),
        Reply::SessionRule(_) => match request {
            Request::SessionRule(p) if p.enabled => {
                format!("rule {} is on again for this session", p.rule)
            }
            Request::SessionRule(p) => format!(
                "rule {} is off for this session: what it guarded now goes unasked",
                p.rule
            ),
            _ => return None,
        },
        Reply::SessionCancel(_) => "asked the agent to stop its turn".into(),
        Reply::SessionStop(reply) => format!(
            "{} stopped; its worktree and transcript stay",
            reply.session.display_name
        ),
        _ => return None,
    })
}

/// What a delete did, in one line.
fn deleted_note(outcome: &DeleteOutcome) -> String {
    let mut note = format!("deleted {}", outcome.session_id);
    if outcome.worktree_removed {
        note.push_str(", its worktree");
    }
    if outcome.branch_deleted {
        note.push_str(", its branch");
    }
    note
}

/// What a prune did, in one line: how many went, and the first one kept and why.
fn pruned_note(result: &PruneResult) -> String {
    let mut note = format!("pruned {} session(s)", result.deleted.len());
    if let Some(first) = result.skipped.first() {
        note.push_str(&format!(
            "; kept {} ({}: {})",
            result.skipped.len(),
            first.session_id,
            first.reason
        ));
    }
    note
}
