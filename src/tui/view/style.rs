//! The styles the components share: bordered panes, secondary text, and the colour of a
//! session's activity, each from a theme role.

use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Block;

use crate::tui::model::Activity;
use crate::tui::theme::{Role, Theme};

/// A bordered block, highlighted when it has the keyboard.
pub(super) fn pane<'a>(title: impl Into<Line<'a>>, focused: bool, theme: &Theme) -> Block<'a> {
    let border = if focused {
        Role::BorderFocused
    } else {
        Role::Border
    };
    Block::bordered()
        .border_style(theme.style(border))
        .title(title)
        .title_style(theme.style(Role::Text).add_modifier(Modifier::BOLD))
}

/// The colour role of a session's activity.
pub(super) fn activity_role(activity: Activity) -> Role {
    match activity {
        Activity::Starting | Activity::Working | Activity::Active => Role::SessionWorking,
        // A turn that did not end asks for attention, as a question does.
        // So does one held back for memory: the person may free some or lower the bar.
        Activity::Waiting | Activity::Interrupted | Activity::Queued => Role::SessionWaiting,
        Activity::Done => Role::SessionDone,
        Activity::Cancelled | Activity::Stopped | Activity::Parked | Activity::Idle => {
            Role::SessionIdle
        }
        Activity::Error => Role::SessionError,
    }
}

/// Style of text that is secondary.
pub(super) fn dim(theme: &Theme) -> Style {
    theme.style(Role::TextDim)
}
