//! `cru session status` and `cru session logs`: one session in detail, and its
//! transcript (followed live with `-f`).

use std::io::Write;

use anyhow::Context;

use super::{goal_of, pick, short_id, state_of};
use crate::cli::output::{self, out, outln};
use crate::client::Client;
use crate::kiln::Kiln;
use crate::markdown::render;
use crate::protocol::methods as m;
use crate::protocol::{
    EntryKind, Event, Session, SessionIdParams, SessionState, Topic, TranscriptEntry,
    TranscriptParams,
};

pub(super) fn print_status(kiln: &Kiln, s: &Session) {
    outln!("{}", s.display_name);
    let mut pairs = vec![("id", s.id.clone()), ("state", state_of(s))];
    if let Some(reason) = &s.state_reason {
        pairs.push(("reason", reason.clone()));
    }
    pairs.push(("agent", format!("{} ({})", s.agent_name, s.agent_type)));
    if let Some(tag) = &s.channel {
        let closed = if tag.closed { "; closed" } else { "" };
        pairs.push((
            "channel",
            format!(
                "{} (last message {}: {}{closed})",
                tag.label(),
                tag.last_message_at,
                tag.reason.as_str()
            ),
        ));
    }
    if s.is_managed() {
        let driver = s.driver.clone().unwrap_or_default();
        pairs.push(("driver", driver.summary()));
        if !s.limits.is_empty() {
            pairs.push(("limits", s.limits.join("; ")));
        } else if driver.kind() != crate::protocol::DriverKind::Local {
            pairs.push(("limits", "none".into()));
        }
    }
    pairs.push((
        "worktree",
        s.worktree
            .clone()
            .unwrap_or_else(|| "the kiln itself".into()),
    ));
    if let Some(branch) = &s.branch {
        pairs.push(("branch", branch.clone()));
    }
    if let Some(task) = &s.task {
        pairs.push(("task", task.clone()));
    }
    pairs.push((
        "created",
        format!("{} ({} ago)", s.started_at, output::age(&s.started_at)),
    ));
    if let Some(updated) = &s.updated_at {
        pairs.push((
            "updated",
            format!("{updated} ({} ago)", output::age(updated)),
        ));
    }
    if let Some(pid) = s.agent_pid {
        pairs.push(("agent pid", pid.to_string()));
    }
    if let Some(ended) = &s.ended_at {
        let code = s
            .exit_code
            .map_or_else(|| "no exit code".to_string(), |c| format!("exit code {c}"));
        pairs.push(("ended", format!("{ended} ({code})")));
    }
    if !s.security.is_empty() {
        pairs.push(("security", security_line(&s.security)));
    }
    if s.is_managed() {
        managed_pairs(kiln, s, &mut pairs);
    }
    output::print_pairs(&pairs);
}

/// The session's security state in one line: the rules activated and disabled, what was
/// approved.
fn security_line(sec: &crate::protocol::SecurityState) -> String {
    let mut parts = Vec::new();
    if !sec.activated.is_empty() {
        let rules: Vec<&str> = sec.activated.keys().map(String::as_str).collect();
        parts.push(format!("activated {}", rules.join(", ")));
    }
    if !sec.disabled.is_empty() {
        parts.push(format!("disabled {}", sec.disabled.join(", ")));
    }
    if !sec.approved_operations.is_empty() {
        parts.push(format!(
            "{} approved operation(s)",
            sec.approved_operations.len()
        ));
    }
    if !sec.approved_credentials.is_empty() {
        parts.push(format!(
            "credentials {}",
            sec.approved_credentials.join(", ")
        ));
    }
    parts.join("; ")
}

/// What only a session crucible runs has: its turns, usage, spending, cost to the
/// machine, hand-offs, context summary and log.
fn managed_pairs(kiln: &Kiln, s: &Session, pairs: &mut Vec<(&'static str, String)>) {
    pairs.push(("turns", s.turn_count.to_string()));
    if let Some(usage) = &s.usage {
        let mut text = format!("{} of {} tokens in context", usage.used, usage.size);
        if let (Some(cost), Some(unit)) = (usage.cost, &usage.currency) {
            text.push_str(&format!("; cost so far {cost:.2} {unit}"));
        }
        pairs.push(("usage", text));
    }
    pairs.push(("spent", spent_line(s.spent.as_ref())));
    if let Some(r) = &s.resources {
        pairs.push((
            "machine",
            format!(
                "{:.1} s CPU, {} MB resident, in {} process(es)",
                r.cpu_secs,
                r.rss_bytes / (1024 * 1024),
                r.processes
            ),
        ));
    }
    if let Some(from) = &s.handed_from {
        pairs.push(("handed from", from.clone()));
    }
    if let Some(to) = &s.handed_to {
        pairs.push(("handed to", to.clone()));
    }
    if let Some(summary) = &s.context_summary {
        pairs.push(("context", summary.replace('\n', "\n  ")));
    }
    let log = crate::markdown::MarkdownLog::path_for(&kiln.sessions_dir(), &s.id);
    pairs.push(("log", log.display().to_string()));
}

/// `12345 tokens; 0.42 USD`, with `unknown` for what the agent did not report.
fn spent_line(spent: Option<&crate::protocol::Spent>) -> String {
    let tokens = spent
        .and_then(|s| s.tokens)
        .map_or("unknown tokens".to_string(), |t| format!("{t} tokens"));
    let cost = match spent {
        Some(crate::protocol::Spent {
            cost: Some(cost),
            priced,
            ..
        }) => format!(
            "{cost:.2} USD{}",
            if *priced { " (priced from tokens)" } else { "" }
        ),
        _ => "cost unknown".to_string(),
    };
    let raised = spent
        .filter(|s| s.raised_cost > 0.0 || s.raised_tokens > 0)
        .map(|s| {
            format!(
                "; budget raised by {:.2} USD, {} tokens",
                s.raised_cost, s.raised_tokens
            )
        })
        .unwrap_or_default();
    format!("{tokens}; {cost}{raised}")
}

/// Prints the transcript; with `follow`, keeps printing streamed text and new entries
/// until the agent ends.
pub(super) async fn logs(
    client: &Client,
    session: &Session,
    follow: bool,
    json: bool,
) -> anyhow::Result<()> {
    // Subscribe before reading, so nothing falls between the two.
    let mut notes = if follow {
        Some(
            client
                .subscribe(Some(vec![Topic::Transcript, Topic::Session]))
                .await?,
        )
    } else {
        None
    };
    let mut last = 0;
    loop {
        let page = client
            .call::<m::SessionTranscript>(&TranscriptParams {
                session_id: session.id.clone(),
                after: Some(last),
                limit: Some(1000),
            })
            .await?;
        let Some(end) = page.entries.last().map(|e| e.seq) else {
            break;
        };
        for entry in &page.entries {
            print_entry(entry, json)?;
        }
        last = end;
    }
    let Some(notes) = notes.as_mut() else {
        return Ok(());
    };
    if !session.state.is_some_and(|s| s.is_busy() || s.is_resting()) {
        return Ok(());
    }
    let mut out = std::io::stdout();
    // Text streamed since the last entry; its stored entry is then not printed again.
    let mut streamed = false;
    while let Some(note) = notes.recv().await {
        match Event::from_notification(&note.method, note.params) {
            Some(Event::Output(chunk)) if chunk.session_id == session.id && !json => {
                write!(out, "{}", chunk.text)?;
                out.flush()?;
                streamed = true;
            }
            Some(Event::Transcript(entry)) if entry.session_id == session.id => {
                if entry.seq <= last {
                    continue;
                }
                last = entry.seq;
                let text = matches!(entry.kind, EntryKind::Message | EntryKind::Thought);
                if text && streamed && !json {
                    writeln!(out)?;
                } else {
                    print_entry(&entry, json)?;
                }
                streamed = false;
            }
            Some(Event::SessionUpdated(s))
                if s.id == session.id
                    && matches!(s.state, Some(SessionState::Stopped | SessionState::Error))
                    && s.agent_pid.is_none() =>
            {
                break;
            }
            Some(Event::SessionDeregistered { session_id, .. }) if session_id == session.id => {
                break;
            }
            _ => {}
        }
    }
    Ok(())
}

fn print_entry(entry: &TranscriptEntry, json: bool) -> anyhow::Result<()> {
    if json {
        outln!(
            "{}",
            serde_json::to_string(entry).context("cannot print an entry")?
        );
    } else {
        out!("{}", render(entry));
    }
    Ok(())
}

/// `cru session list`: the sessions as a table, or as JSON.
pub(super) async fn list(client: &Client, json: bool) -> anyhow::Result<()> {
    // JSON carries what each agent costs the machine (`resources`).
    let list = super::listed(client, json).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&list)?);
    } else if list.is_empty() {
        outln!("no sessions");
    } else {
        // Team mode: sessions of several daemons, so say where each runs.
        let owners: std::collections::HashSet<_> =
            list.iter().filter_map(|s| s.owner.as_deref()).collect();
        let team = owners.len() > 1;
        let rows: Vec<Vec<String>> = list
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut row = list_row(i, s);
                if team {
                    row.insert(4, s.host.clone().unwrap_or_else(|| "?".into()));
                }
                row
            })
            .collect();
        let mut headers = LIST_HEADERS.to_vec();
        if team {
            headers.insert(4, "HOST");
        }
        output::print_table(&headers, &rows);
    }
    Ok(())
}

/// The headers of `cru session list`'s table, each row as [`list_row`] makes it.
pub(super) const LIST_HEADERS: [&str; 9] = [
    "#", "SESSION", "STATE", "AGENT", "TASK", "TURNS", "CONTEXT", "AGE", "ID",
];

/// Session `s`, the `i`th of its kiln (from 0), as a row of `cru session list`.
pub(super) fn list_row(i: usize, s: &Session) -> Vec<String> {
    vec![
        format!("[{}]", i + 1),
        match &s.channel {
            Some(tag) => format!("{} [{}]", s.display_name, tag.label()),
            None => s.display_name.clone(),
        },
        state_of(s),
        s.agent_name.clone(),
        output::clip(s.task.as_deref().unwrap_or(""), 40),
        s.turn_count.to_string(),
        output::clip(goal_of(s), 40),
        output::age(&s.started_at),
        s.id.clone(),
    ]
}

/// `cru session status`: one session in detail; a registered session that ended is
/// found by its full id through its termination record.
pub(super) async fn status(
    kiln: &Kiln,
    client: &Client,
    session: &str,
    json: bool,
) -> anyhow::Result<()> {
    let found = super::listed(client, true)
        .await
        .and_then(|sessions| pick(&sessions, session).cloned());
    let s = match found {
        Ok(s) => s,
        // A registered session that ended is no longer listed, but its
        // termination record answers to its full id for a while.
        Err(e) => match client
            .call::<m::SessionGet>(&SessionIdParams {
                session_id: session.trim().to_string(),
            })
            .await
        {
            Ok(reply) => reply.session,
            Err(_) => return Err(e),
        },
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print_status(kiln, &s);
    }
    Ok(())
}

/// What `cru session new` made, in words or JSON.
/// Sessions made at once (`--count`, `--tasks`): a list, or a line each.
pub(super) fn made(sessions: &[Session], json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(sessions)?);
        return Ok(());
    }
    outln!("created {} sessions:", sessions.len());
    for s in sessions {
        outln!(
            "  {} ({}) {}",
            s.display_name,
            short_id(&s.id),
            s.worktree.as_deref().unwrap_or("the kiln itself")
        );
    }
    Ok(())
}

pub(super) fn created(s: &Session, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(s)?);
    } else {
        outln!("created {} ({})", s.display_name, s.id);
        outln!(
            "  worktree: {}",
            s.worktree.as_deref().unwrap_or("the kiln itself")
        );
        outln!("  follow it: cru session logs -f {}", short_id(&s.id));
    }
    Ok(())
}
