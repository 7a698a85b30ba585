//! The workbench TUI's pure core: state, keys, slash commands, themes and drawing. No I/O
//! (beyond reading a theme file) and no terminal: the runtime owns the terminal and the
//! daemon client and drives this core.
//!
//! How the runtime uses it:
//!
//! 1. Build a [`Keymap`] (`Keymap::default()` or [`Keymap::with_overrides`] with the
//!    `[tui.keys]` table) and a [`Theme`] ([`Theme::builtin`] or [`Theme::load`]), then
//!    [`Model::new`].
//! 2. After connecting (and after every reconnect or `events.lagged`), read
//!    `session.list` and `inbox.list` and call [`Model::sync`].
//! 3. Feed every daemon notification to [`Model::apply`], every key to
//!    [`Model::handle_key`], every mouse event to [`Model::handle_mouse`] (with the screen
//!    size) and every paste to [`Model::handle_paste`].
//! 4. Perform the returned [`Action`]s; hand `session.transcript` results to
//!    [`Model::load_transcript`], the id `session.create` returns to
//!    [`Model::focus_session_id`], and failures to [`Model::report`].
//! 5. Redraw with [`render`] when something changed, passing the [`ViewState`] the runtime
//!    keeps between frames, then hand its scroll extent to [`Model::set_scroll_extent`];
//!    [`Model::set_connection`] shows or hides the daemon-gone banner.

mod action;
mod answer;
pub mod commands;
mod inbox;
mod input;
pub mod keymap;
mod model;
pub mod palette;
mod review;
pub mod run;
pub mod theme;
mod transcript;
mod update;
mod view;

#[cfg(test)]
mod answer_tests;
#[cfg(test)]
mod fixture;
#[cfg(test)]
mod tests;

pub use action::Action;
pub use inbox::{Inbox, is_open};
pub use keymap::{KeyAction, Keymap, KeymapError};
pub use model::{Activity, Connection, Flash, Model, Overlay, Panes, ScrollExtent, Zone};
pub use theme::{Role, Theme, ThemeError};
pub use transcript::{Streamed, TRANSCRIPT_CAP, Transcript};
/// Display widths and cutting to columns, for the command line's tables too.
pub(crate) use view::text::{clip as clip_columns, width as display_width};
pub use view::{MIN_HEIGHT, MIN_WIDTH, ViewState, render};
