//! Themes: semantic roles (`session.waiting`, `border.focused`…) mapped to colours by a
//! TOML file. Components ask for a role's [`Style`]; they never name a colour.
//!
//! ```toml
//! name = "mine"
//! extends = "light"        # optional; roles not listed come from this built-in (dark)
//! [colors]
//! "session.waiting" = "#ff8800"   # #rrggbb, a colour name (red, darkgray…) or 0–255
//! ```
//!
//! The built-in themes (`themes/dark.toml`, `themes/light.toml`) are compiled in and must
//! name every role. A file with an unknown key, role or colour is refused with its name.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use ratatui::style::{Color, Style};
use serde::Deserialize;

use crate::tui::palette::Colours;

/// A semantic colour role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Text,
    TextDim,
    Border,
    BorderFocused,
    /// A background.
    StatusBarBg,
    StatusBarFocused,
    SessionWorking,
    SessionWaiting,
    SessionDone,
    /// Stopped, or a self-registered session that is idle.
    SessionIdle,
    SessionError,
    InboxUnread,
    InboxRead,
    /// A background.
    SelectionBg,
    TranscriptPrompt,
    TranscriptTool,
    /// Error text, flashes and the daemon-gone banner.
    Error,
    /// Lines a diff adds, removes, and its hunk headers.
    DiffAdded,
    DiffRemoved,
    DiffHunk,
    /// A session whose branch changes the same files as another's (the conflict radar).
    Conflict,
}

impl Role {
    pub const ALL: [Role; 21] = [
        Role::Text,
        Role::TextDim,
        Role::Border,
        Role::BorderFocused,
        Role::StatusBarBg,
        Role::StatusBarFocused,
        Role::SessionWorking,
        Role::SessionWaiting,
        Role::SessionDone,
        Role::SessionIdle,
        Role::SessionError,
        Role::InboxUnread,
        Role::InboxRead,
        Role::SelectionBg,
        Role::TranscriptPrompt,
        Role::TranscriptTool,
        Role::Error,
        Role::DiffAdded,
        Role::DiffRemoved,
        Role::DiffHunk,
        Role::Conflict,
    ];

    /// The key in a theme file.
    pub fn key(self) -> &'static str {
        match self {
            Role::Text => "text",
            Role::TextDim => "text.dim",
            Role::Border => "border",
            Role::BorderFocused => "border.focused",
            Role::StatusBarBg => "status_bar.bg",
            Role::StatusBarFocused => "status_bar.focused",
            Role::SessionWorking => "session.working",
            Role::SessionWaiting => "session.waiting",
            Role::SessionDone => "session.done",
            Role::SessionIdle => "session.idle",
            Role::SessionError => "session.error",
            Role::InboxUnread => "inbox.unread",
            Role::InboxRead => "inbox.read",
            Role::SelectionBg => "selection.bg",
            Role::TranscriptPrompt => "transcript.prompt",
            Role::TranscriptTool => "transcript.tool",
            Role::Error => "error",
            Role::DiffAdded => "diff.added",
            Role::DiffRemoved => "diff.removed",
            Role::DiffHunk => "diff.hunk",
            Role::Conflict => "conflict",
        }
    }

    fn is_background(self) -> bool {
        matches!(self, Role::StatusBarBg | Role::SelectionBg)
    }

    fn parse(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.key() == key)
    }
}

/// Why a theme was refused.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error("theme {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("theme: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("theme {theme}: unknown colour key \"{key}\"")]
    UnknownRole { theme: String, key: String },
    #[error(
        "theme {theme}: \"{key}\" = \"{value}\" is not a colour (use #rrggbb, a name or 0–255)"
    )]
    BadColour {
        theme: String,
        key: String,
        value: String,
    },
    #[error(
        "theme {theme}: extends \"{base}\", which is not a built-in theme (dark, light, terminal)"
    )]
    UnknownBase { theme: String, base: String },
    #[error("no built-in theme \"{name}\" (dark, light, terminal)")]
    NoSuchBuiltin { name: String },
    #[error("built-in theme {theme} lacks \"{key}\"")]
    Incomplete { theme: String, key: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: String,
    #[serde(default)]
    extends: Option<String>,
    #[serde(default)]
    colors: BTreeMap<String, String>,
}

const BUILT_IN: [(&str, &str); 3] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    // The terminal's own sixteen colours, by name.
    ("terminal", include_str!("../../themes/terminal.toml")),
];

/// The colours of every role.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    name: String,
    colors: BTreeMap<Role, Color>,
}

impl Default for Theme {
    /// The built-in dark theme.
    fn default() -> Self {
        Self::builtin("dark").unwrap_or_else(|_| Self::plain())
    }
}

impl Theme {
    /// The terminal's own colours for every role (for `NO_COLOR`, and plain snapshots).
    pub fn plain() -> Self {
        Self {
            name: "plain".into(),
            colors: Role::ALL.into_iter().map(|r| (r, Color::Reset)).collect(),
        }
    }

    /// A built-in theme by name (`dark`, `light`, `terminal`).
    pub fn builtin(name: &str) -> Result<Self, ThemeError> {
        let (_, text) = BUILT_IN
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| ThemeError::NoSuchBuiltin { name: name.into() })?;
        let file: ThemeFile = toml::from_str(text)?;
        if let Some(missing) = Role::ALL
            .into_iter()
            .find(|r| !file.colors.contains_key(r.key()))
        {
            return Err(ThemeError::Incomplete {
                theme: name.into(),
                key: missing.key().into(),
            });
        }
        Self::plain().patched(file)
    }

    /// A user theme from TOML: its roles over those of the built-in it extends.
    pub fn parse(text: &str) -> Result<Self, ThemeError> {
        let file: ThemeFile = toml::from_str(text)?;
        let base_name = file.extends.clone().unwrap_or_else(|| "dark".into());
        let base = Self::builtin(&base_name).map_err(|_| ThemeError::UnknownBase {
            theme: file.name.clone(),
            base: base_name,
        })?;
        base.patched(file)
    }

    /// Reads a theme file (see [`Theme::parse`]).
    pub fn load(path: &Path) -> Result<Self, ThemeError> {
        let text = std::fs::read_to_string(path).map_err(|source| ThemeError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }

    fn patched(mut self, file: ThemeFile) -> Result<Self, ThemeError> {
        for (key, value) in &file.colors {
            let role = Role::parse(key).ok_or_else(|| ThemeError::UnknownRole {
                theme: file.name.clone(),
                key: key.clone(),
            })?;
            let color = Color::from_str(value).map_err(|_| ThemeError::BadColour {
                theme: file.name.clone(),
                key: key.clone(),
                value: value.clone(),
            })?;
            self.colors.insert(role, color);
        }
        self.name = file.name;
        Ok(self)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// This theme as a terminal with `colours` shows it: the plain theme with none
    /// (`NO_COLOR`), its 24-bit colours as the nearest of the 256-colour palette where
    /// truecolor is missing.
    pub fn fitted(self, colours: Colours) -> Self {
        if colours == Colours::None {
            return Self::plain();
        }
        Self {
            name: self.name,
            colors: self
                .colors
                .into_iter()
                .map(|(role, color)| (role, colours.fit(color)))
                .collect(),
        }
    }

    pub fn color(&self, role: Role) -> Color {
        self.colors.get(&role).copied().unwrap_or(Color::Reset)
    }

    /// The role's style: a foreground, or a background for `*.bg` roles.
    pub fn style(&self, role: Role) -> Style {
        if role.is_background() {
            Style::new().bg(self.color(role))
        } else {
            Style::new().fg(self.color(role))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_themes_name_every_role() {
        for (name, _) in BUILT_IN {
            let theme = Theme::builtin(name).unwrap();
            assert_eq!(theme.name(), name);
        }
        let dark = Theme::builtin("dark").unwrap();
        let light = Theme::builtin("light").unwrap();
        assert_eq!(
            dark.color(Role::SessionWaiting),
            Color::Rgb(0xeb, 0xcb, 0x8b)
        );
        assert_ne!(dark.color(Role::Text), light.color(Role::Text));
        assert_eq!(Theme::default(), dark);
    }

    #[test]
    fn styles_put_backgrounds_in_the_background() {
        let dark = Theme::default();
        assert_eq!(
            dark.style(Role::StatusBarBg).bg,
            Some(dark.color(Role::StatusBarBg))
        );
        assert_eq!(dark.style(Role::StatusBarBg).fg, None);
        assert_eq!(dark.style(Role::Error).fg, Some(dark.color(Role::Error)));
    }

    #[test]
    fn a_user_theme_patches_its_base() {
        let theme = Theme::parse(
            "name = \"mine\"\nextends = \"light\"\n[colors]\n\"session.waiting\" = \"red\"\n\"text\" = \"#010203\"",
        )
        .unwrap();
        let light = Theme::builtin("light").unwrap();
        assert_eq!(theme.name(), "mine");
        assert_eq!(theme.color(Role::SessionWaiting), Color::Red);
        assert_eq!(theme.color(Role::Text), Color::Rgb(1, 2, 3));
        assert_eq!(theme.color(Role::Border), light.color(Role::Border));
    }

    #[test]
    fn unknown_keys_and_bad_colours_are_refused_by_name() {
        let err = Theme::parse("name = \"x\"\n[colors]\n\"session.wating\" = \"red\"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "theme x: unknown colour key \"session.wating\""
        );
        let err = Theme::parse("name = \"x\"\n[colors]\n\"text\" = \"#12345\"").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("theme x: \"text\" = \"#12345\" is not a colour"),
            "{err}"
        );
        let err = Theme::parse("name = \"x\"\nextends = \"solar\"").unwrap_err();
        assert!(err.to_string().contains("extends \"solar\""), "{err}");
        let err = Theme::parse("name = \"x\"\ncolours = {}").unwrap_err();
        assert!(err.to_string().contains("colours"), "{err}");
    }

    #[test]
    fn a_theme_fits_the_colours_the_terminal_has() {
        let dark = Theme::default();
        assert_eq!(dark.clone().fitted(Colours::TrueColor), dark);
        assert_eq!(dark.clone().fitted(Colours::None), Theme::plain());
        let fitted = dark.fitted(Colours::Palette256);
        assert_eq!(fitted.name(), "dark");
        assert!(
            Role::ALL
                .into_iter()
                .all(|r| matches!(fitted.color(r), Color::Indexed(_))),
            "{fitted:?}"
        );
        assert_eq!(fitted.color(Role::SessionWaiting), Color::Indexed(186));
    }

    #[test]
    fn the_terminal_theme_is_the_terminals_own_sixteen_colours_at_any_depth() {
        let terminal = Theme::builtin("terminal").unwrap();
        let own = |c: Color| {
            matches!(
                c,
                Color::Reset
                    | Color::Black
                    | Color::Red
                    | Color::Green
                    | Color::Yellow
                    | Color::Blue
                    | Color::Magenta
                    | Color::Cyan
                    | Color::Gray
                    | Color::DarkGray
                    | Color::LightRed
                    | Color::LightGreen
                    | Color::LightYellow
                    | Color::LightBlue
                    | Color::LightMagenta
                    | Color::LightCyan
                    | Color::White
            )
        };
        for depth in [Colours::TrueColor, Colours::Palette256] {
            let fitted = terminal.clone().fitted(depth);
            assert!(
                Role::ALL.into_iter().all(|r| own(fitted.color(r))),
                "{fitted:?}"
            );
        }
        assert_eq!(terminal.color(Role::SessionWaiting), Color::Yellow);
    }

    #[test]
    fn a_missing_file_names_its_path() {
        let err = Theme::load(Path::new("/nonexistent/theme.toml")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("theme /nonexistent/theme.toml:"),
            "{err}"
        );
    }
}
