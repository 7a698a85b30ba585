//! The sessions overlay: every session a line (number, name, state, agent, inbox, task)
//! with what else is known of it under it, filtered by what is typed
//! ([`Model::picked`]); the chosen one highlighted, Enter focuses it. Only the sessions
//! on screen are drawn, however many there are.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::overlay::centered;
use super::style::{activity_role, dim, pane};
use super::text::{channel_icon, clip, width};
use crate::protocol::Session;
use crate::tui::inbox::is_open;
use crate::tui::model::{Activity, Model};
use crate::tui::theme::{Role, Theme};

pub fn render(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme, selected: usize) {
    let picked = model.picked();
    let all = model.sessions().len();
    // Room for the kept sessions and what is known of each, up to the screen.
    let max = usize::from(area.width.saturating_sub(6).min(108));
    let mut wanted = 2 + usize::from(picked.is_empty());
    for &index in &picked {
        if wanted > usize::from(area.height) {
            break;
        }
        wanted += session_lines(model, theme, index, false, max).len();
    }
    let rect = centered(area, 110, wanted);
    let block = pane(title(model), true, theme);
    let inner = block.inner(rect);
    let max = usize::from(inner.width);
    let rows = usize::from(inner.height);
    let filter = model.picker_filter();
    let mut lines = vec![
        if filter.is_empty() {
            Line::styled(
                clip(
                    "   type to filter by number, name, agent, state or task · ↑↓ choose · enter focuses",
                    max,
                ),
                dim(theme),
            )
        } else {
            Line::from(vec![
                Span::styled(format!(" filter: {filter}▏ "), theme.style(Role::Text)),
                Span::styled(format!(" {} of {all}", picked.len()), dim(theme)),
            ])
        },
        Line::styled(
            clip(
                &format!(
                    "   #  {:<26} {:<9} {:<9} {:<9} task",
                    "session", "state", "agent", "inbox"
                ),
                max,
            ),
            dim(theme),
        ),
    ];
    if all == 0 {
        lines.push(Line::styled("   none yet — /new creates one", dim(theme)));
    } else if picked.is_empty() {
        lines.push(Line::styled("   none matches", dim(theme)));
    }
    // From the first session that keeps the chosen one on screen: back from it while
    // the sessions before fill at most two thirds of the room.
    let room = rows.saturating_sub(lines.len());
    let selected = selected.min(picked.len().saturating_sub(1));
    let mut first = selected;
    let mut above = 0;
    while first > 0 {
        let height = session_lines(model, theme, picked[first - 1], false, max).len();
        if above + height > room * 2 / 3 {
            break;
        }
        above += height;
        first -= 1;
    }
    for (at, &index) in picked.iter().enumerate().skip(first) {
        if lines.len() >= rows {
            break;
        }
        lines.extend(session_lines(model, theme, index, at == selected, max));
    }
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

/// ` sessions · 1000 · 12 working · 3 waiting · esc closes `: how many, and how many of
/// each state that asks for attention or is busy.
fn title(model: &Model) -> String {
    let mut counts = [0usize; 5];
    for session in model.sessions() {
        match model.activity(session) {
            Activity::Working => counts[0] += 1,
            Activity::Waiting => counts[1] += 1,
            Activity::Queued => counts[2] += 1,
            Activity::Parked => counts[3] += 1,
            Activity::Error => counts[4] += 1,
            _ => {}
        }
    }
    let mut parts = vec![format!(" sessions · {}", model.sessions().len())];
    let labels = ["working", "waiting", "queued", "parked", "error"];
    for (count, label) in counts.iter().zip(labels) {
        if *count > 0 {
            parts.push(format!("{count} {label}"));
        }
    }
    parts.push("esc closes ".into());
    parts.join(" · ")
}

/// One session's line and the lines of what else is known of it.
fn session_lines(
    model: &Model,
    theme: &Theme,
    index: usize,
    chosen: bool,
    max: usize,
) -> Vec<Line<'static>> {
    let mut lines = vec![head_line(model, theme, index, chosen, max)];
    lines.extend(detail_lines(model, theme, &model.sessions()[index], max));
    lines
}

/// A session's line: its number, name, state, agent, inbox and task.
fn head_line(
    model: &Model,
    theme: &Theme,
    index: usize,
    chosen: bool,
    max: usize,
) -> Line<'static> {
    let session = &model.sessions()[index];
    let focused = model.focused_session().is_some_and(|f| f.id == session.id);
    let activity = model.activity(session);
    let (unread, open) = model
        .inbox()
        .messages()
        .iter()
        .filter(|m| m.session_id == session.id)
        .fold((0, 0), |(u, o), m| {
            (u + usize::from(!m.read), o + usize::from(is_open(m)))
        });
    let inbox = match (unread, open) {
        (0, 0) => "—".to_string(),
        (u, 0) => format!("{u} new"),
        (_, o) => format!("{o} open"),
    };
    let marker = match (focused, chosen) {
        (true, _) => "▸",
        (false, true) => "›",
        (false, false) => " ",
    };
    // Across kilns, the session's kiln before its name.
    let name = match &session.kiln {
        Some(kiln) => format!("{kiln}: {}", session.display_name),
        None => session.display_name.clone(),
    };
    let head = format!(
        "{marker}{:>3}  {:<26} ",
        format!("[{}]", index + 1),
        clip(&name, 26)
    );
    let rest = format!(" {:<9} {:<9} ", clip(&session.agent_name, 9), inbox);
    let room = max.saturating_sub(width(&head) + 9 + width(&rest));
    let task = clip(session.task.as_deref().unwrap_or(""), room);
    let base = |role: Role| {
        let style = theme.style(role);
        if chosen {
            style.patch(theme.style(Role::SelectionBg))
        } else {
            style
        }
    };
    Line::from(vec![
        Span::styled(head, base(Role::Text)),
        Span::styled(
            format!("{:<9}", activity.label()),
            base(activity_role(activity)),
        ),
        Span::styled(rest, base(Role::TextDim)),
        Span::styled(task, base(Role::Text)),
    ])
}

/// The lines under a session's: where it was started from, the files it changes with
/// others, its lineage, what it costs the machine, where it runs, its context summary.
fn detail_lines(model: &Model, theme: &Theme, session: &Session, max: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    // Started from outside: the channel, the conversation and how the last
    // message found it.
    if let Some(tag) = &session.channel {
        let closed = if tag.closed { ", closed" } else { "" };
        lines.push(Line::styled(
            clip(
                &format!(
                    "        {} {} ({}{closed})",
                    channel_icon(&tag.kind),
                    tag.label(),
                    tag.reason.as_str()
                ),
                max,
            ),
            dim(theme),
        ));
    }
    // The conflict radar: the sessions it changes the same files (or lines) as.
    let conflicts = model.conflicts_of(&session.id);
    if !conflicts.is_empty() {
        let with: Vec<String> = conflicts
            .iter()
            .map(|(n, same_lines)| {
                format!("[{n}]{}", if *same_lines { " (same lines)" } else { "" })
            })
            .collect();
        lines.push(Line::styled(
            clip(
                &format!("        ⚠ changes the same files as {}", with.join(", ")),
                max,
            ),
            theme.style(Role::Conflict),
        ));
    }
    if let Some(text) = lineage(model, session) {
        lines.push(Line::styled(clip(&text, max), dim(theme)));
    }
    if let Some(text) = machine(model, session) {
        lines.push(Line::styled(clip(&text, max), dim(theme)));
    }
    // Where a contained session runs, and the limits on it.
    if let Some(driver) = contained(session) {
        lines.push(Line::styled(
            clip(&format!("        {driver}"), max),
            dim(theme),
        ));
    }
    // The context summary the session keeps of its turns, on one line under its session.
    if let Some(summary) = &session.context_summary {
        let text = format!(
            "        {} turn(s) · {}",
            session.turn_count,
            summary.lines().collect::<Vec<_>>().join(" · ")
        );
        lines.push(Line::styled(clip(&text, max), dim(theme)));
    }
    lines
}

/// What a session's agent costs the machine, as read when the list was opened.
fn machine(model: &Model, session: &Session) -> Option<String> {
    let r = model.picker.resources_of(&session.id)?;
    Some(format!(
        "        machine: {:.1} s CPU · {} MB resident · {} process(es)",
        r.cpu_secs,
        r.rss_bytes / (1024 * 1024),
        r.processes
    ))
}

/// `⇄ handed off from [2] · to [5]`: the sessions a hand-off links this one with.
fn lineage(model: &Model, session: &Session) -> Option<String> {
    let name = |id: &str| {
        model
            .number_of(id)
            .map_or_else(|| id.to_string(), |n| format!("[{n}]"))
    };
    let from = session
        .handed_from
        .as_deref()
        .map(|id| format!("from {}", name(id)));
    let to = session
        .handed_to
        .as_deref()
        .map(|id| format!("to {}", name(id)));
    let parts: Vec<String> = from.into_iter().chain(to).collect();
    (!parts.is_empty()).then(|| format!("        ⇄ handed off {}", parts.join(" · ")))
}

/// `sandbox (network none, …) · limits …` for a session not run as the user.
fn contained(session: &Session) -> Option<String> {
    let driver = session.driver.as_ref()?;
    if driver.kind() == crate::protocol::DriverKind::Local {
        return None;
    }
    let mut text = format!("driver {}", driver.summary());
    if !session.limits.is_empty() {
        text.push_str(&format!(" · limits: {}", session.limits.join("; ")));
    }
    Some(text)
}
