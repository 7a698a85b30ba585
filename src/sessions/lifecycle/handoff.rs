//! Hand-off: a session's task goes on with another agent profile, in the same worktree
//! and on the same branch. The new agent's first prompt is a brief of where the work
//! stands: the task, the context summary crucible keeps, the questions left open and the
//! diff so far. The old session is stopped first (two agents never work in one
//! worktree); each names the other (`handed_from`, `handed_to`), and the worktree is the
//! new session's to keep or remove.

use super::*;
use crate::protocol::{Diff, HandoffParams, InboxMessage};

/// How much of the diff the brief carries; the rest is a `git diff` away.
const BRIEF_DIFF_BYTES: usize = 24 * 1024;

/// A hand-off that is a switch of the fallback chain ([`super::fallback`]): what its
/// brief says beyond the plain one, and the switch kept on the session it leaves.
pub(in crate::sessions) struct Switching {
    pub switch: crate::protocol::ProfileSwitch,
    /// The task as the chain's first session had it (not the brief the session handing
    /// off started from).
    pub task: Option<String>,
    /// The sessions that had the task before, oldest first, with what they did.
    pub earlier: Vec<Session>,
}

impl Lifecycle {
    pub async fn handoff(self: &Arc<Self>, params: HandoffParams) -> Result<Session> {
        self.hand_over(params, None).await
    }

    /// [`Sessions::handoff`], for the fallback chain when `switching` says so.
    pub(in crate::sessions) async fn hand_over(
        self: &Arc<Self>,
        params: HandoffParams,
        switching: Option<Switching>,
    ) -> Result<Session> {
        let from = self.managed(&params.session_id)?;
        let Some(worktree) = from.worktree.clone().filter(|_| from.branch.is_some()) else {
            return Err(LifecycleError::NothingToHandOff { id: from.id });
        };
        if let Some(to) = &from.handed_to {
            return Err(LifecycleError::HandedOffAlready {
                id: from.id.clone(),
                to: to.clone(),
            });
        }
        // The profile is checked before anything stops.
        let config = self.settings()?;
        let given = self.runner.given(&from.id);
        given::profile(&config, &params.agent, given.as_deref())
            .map_err(LifecycleError::HandOffProfile)?;
        // Where the work stands, read before the old agent stops.
        let diff = self
            .landing
            .diff(&from.id, Some(3))
            .await
            .ok()
            .map(|d| d.diff);
        let mut open = Vec::new();
        for id in self
            .ledger
            .open_blocking(&from.id)
            .await
            .unwrap_or_default()
        {
            if let Ok(message) = self.ledger.get_message(&id).await {
                open.push(message);
            }
        }
        let brief = match &switching {
            Some(switching) => chain_brief(&from, switching, diff.as_ref(), &open),
            None => brief(&from, diff.as_ref(), &open),
        };
        self.runner.stop(&from.id).await?;
        let from = self.managed(&from.id)?;
        let create = CreateSessionParams {
            kiln: None,
            agent: params.agent.clone(),
            worktree: Some(worktree),
            in_place: false,
            task: Some(brief),
            driver: from.driver.clone().unwrap_or_default().options(),
            allow_read: from.security.read_manifest.clone().unwrap_or_default(),
            channel: None,
        };
        let to = self.create_from(create, None, given, Some(&from)).await?;
        let mut handed = from;
        handed.handed_to = Some(to.id.clone());
        handed.worktree_owned = false;
        handed.switched = switching.map(|s| s.switch);
        handed.state_reason = Some(format!("handed off to {} ({})", to.display_name, to.id));
        handed.updated_at = Some(now_rfc3339());
        self.ledger.save_managed(&handed).await?;
        Ok(to)
    }
}

/// The first prompt of the agent that takes over.
pub(in crate::sessions) fn brief(
    from: &Session,
    diff: Option<&Diff>,
    open: &[InboxMessage],
) -> String {
    let branch = from.branch.as_deref().unwrap_or("?");
    let mut text = format!(
        "You are taking over a task that another agent ({}) worked on in this worktree, on \
         branch {branch}. It has been stopped; go on from where it left off. What it \
         changed is in the worktree already.\n\nTASK:\n{}\n\nWHERE IT STANDS (crucible's \
         summary of the session):\n{}\n",
        from.agent_name,
        from.task
            .as_deref()
            .unwrap_or("(none was given; see the summary)"),
        from.context_summary
            .as_deref()
            .unwrap_or("(none: the session ended no turn)"),
    );
    if !from.queued.is_empty() {
        text.push_str("\nPROMPTS WAITING (sent to it, not yet run; they are yours now):\n");
        for prompt in &from.queued {
            text.push_str(&format!("- {}\n", first_lines(prompt, 5)));
        }
    }
    text.push_str("\nOPEN QUESTIONS (unanswered when it stopped):\n");
    if open.is_empty() {
        text.push_str("(none)\n");
    }
    for m in open {
        match m.body.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
            Some(body) => text.push_str(&format!("- {}: {}\n", m.title, first_lines(body, 3))),
            None => text.push_str(&format!("- {}\n", m.title)),
        }
    }
    match diff {
        Some(diff) if !diff.files.is_empty() => {
            let base = diff.base.get(..12).unwrap_or(&diff.base);
            text.push_str(&format!("\nTHE DIFF SO FAR (against {base}):\n"));
            for f in &diff.files {
                text.push_str(&format!(
                    "  {:?} {} (+{} -{})\n",
                    f.status, f.path, f.added, f.removed
                ));
            }
            let patch = diff.unified();
            if patch.len() > BRIEF_DIFF_BYTES {
                let cut = crate::text::clip(&patch, BRIEF_DIFF_BYTES);
                text.push_str(&format!(
                    "\n```diff\n{cut}\n```\n(cut short: `git diff {base}` shows the rest)\n"
                ));
            } else {
                text.push_str(&format!("\n```diff\n{patch}```\n"));
            }
        }
        _ => text.push_str("\nTHE DIFF SO FAR: no changes yet.\n"),
    }
    text
}

/// The brief of a switch of the fallback chain: the plain brief with the chain's task,
/// after a word on why, and what the sessions before did.
fn chain_brief(
    from: &Session,
    switching: &Switching,
    diff: Option<&Diff>,
    open: &[InboxMessage],
) -> String {
    use crate::protocol::SwitchReason;
    let base = Session {
        task: switching.task.clone(),
        ..from.clone()
    };
    let why = match switching.switch.why {
        SwitchReason::UsageLimit => format!(
            "The agent of profile {} reached a usage limit; its fallback chain gives the \
             task to you.",
            from.agent_name
        ),
        SwitchReason::LimitReset => format!(
            "The usage limit of profile {} has reset: the task comes back to you from its \
             fallback chain.",
            switching.switch.to_agent
        ),
    };
    let mut text = format!("{why}\n\n{}", brief(&base, diff, open));
    if !switching.earlier.is_empty() {
        text.push_str(match switching.switch.why {
            SwitchReason::LimitReset => "\nWHAT WAS DONE MEANWHILE (by the fallback chain):\n",
            SwitchReason::UsageLimit => "\nEARLIER IN THE FALLBACK CHAIN:\n",
        });
        for s in &switching.earlier {
            let summary = s.context_summary.as_deref().map_or_else(
                || "no summary: it ended no turn".into(),
                |t| first_lines(t, 5),
            );
            text.push_str(&format!("- {} ({}): {summary}\n", s.agent_name, s.id));
        }
    }
    text
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{DiffLine, FileDiff, FileStatus, Hunk, LineKind, MsgType};

    #[test]
    fn the_brief_carries_the_task_the_summary_the_open_questions_and_the_diff() {
        let from = Session {
            agent_name: "claude".into(),
            branch: Some("fix-login".into()),
            task: Some("Fix the login bug".into()),
            context_summary: Some("GOAL: fix login\nDECISIONS: use bcrypt".into()),
            ..Session::default()
        };
        let diff = Diff {
            base: "0123456789abcdef".into(),
            files: vec![FileDiff {
                path: "src/login.rs".into(),
                old_path: None,
                status: FileStatus::Modified,
                binary: false,
                added: 1,
                removed: 1,
                hunks: vec![Hunk {
                    old_start: 3,
                    old_lines: 1,
                    new_start: 3,
                    new_lines: 1,
                    header: "fn check".into(),
                    lines: vec![
                        DiffLine {
                            kind: LineKind::Removed,
                            text: "md5(p)".into(),
                            old_no: Some(3),
                            new_no: None,
                        },
                        DiffLine {
                            kind: LineKind::Added,
                            text: "bcrypt(p)".into(),
                            old_no: None,
                            new_no: Some(3),
                        },
                    ],
                }],
            }],
        };
        let open = InboxMessage {
            kiln: None,
            digest: None,
            id: "m1".into(),
            session_id: "s1".into(),
            session_name: "s1".into(),
            timestamp: "2026-11-26T10:00:00Z".into(),
            msg_type: MsgType::DecisionNeeded,
            title: "Run the migration?".into(),
            body: Some("It rewrites the users table.".into()),
            options: None,
            option_kinds: None,
            rule: None,
            operation: None,
            read: false,
            responded: false,
            response: None,
            withdrawn: false,
            answered_by: None,
            purpose: None,
        };
        let text = brief(&from, Some(&diff), &[open]);
        for part in [
            "another agent (claude)",
            "branch fix-login",
            "TASK:\nFix the login bug",
            "DECISIONS: use bcrypt",
            "- Run the migration?: It rewrites the users table.",
            "against 0123456789ab",
            "Modified src/login.rs (+1 -1)",
            "@@ -3,1 +3,1 @@ fn check\n-md5(p)\n+bcrypt(p)\n",
        ] {
            assert!(text.contains(part), "{part:?} not in:\n{text}");
        }
        let bare = brief(&from, None, &[]);
        assert!(bare.contains("OPEN QUESTIONS (unanswered when it stopped):\n(none)"));
        assert!(bare.contains("no changes yet"));
    }
}
