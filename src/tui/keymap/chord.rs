//! A key with its modifiers as a binding names it: parsed from `[ctrl-][alt-][shift-]<key>`,
//! written back the same way, and compared with the keys the terminal reports.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// A key with its modifiers, normalised so that a typed `A` and the binding `shift-a`
/// compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyChord {
    pub code: KeyCode,
    pub modifiers: KeyModifiers,
}

impl KeyChord {
    pub fn new(code: KeyCode, modifiers: KeyModifiers) -> Self {
        let modifiers =
            modifiers & (KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT);
        match code {
            // The character already says whether shift was held.
            KeyCode::Char(_) | KeyCode::BackTab => Self {
                code,
                modifiers: modifiers - KeyModifiers::SHIFT,
            },
            _ => Self { code, modifiers },
        }
    }

    pub fn from_event(key: &KeyEvent) -> Self {
        Self::new(key.code, key.modifiers)
    }

    /// Parses `alt-1`, `ctrl-n`, `f2`, `shift-tab`, `?` ….
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let mut modifiers = KeyModifiers::NONE;
        let mut rest = text.trim();
        'strip: loop {
            for (prefix, modifier) in [
                ("ctrl-", KeyModifiers::CONTROL),
                ("alt-", KeyModifiers::ALT),
                ("shift-", KeyModifiers::SHIFT),
            ] {
                let has = rest.len() > prefix.len()
                    && rest
                        .get(..prefix.len())
                        .is_some_and(|p| p.eq_ignore_ascii_case(prefix));
                if has {
                    modifiers |= modifier;
                    rest = &rest[prefix.len()..];
                    continue 'strip;
                }
            }
            break;
        }
        let code = key_code(rest, modifiers.contains(KeyModifiers::SHIFT))?;
        Ok(Self::new(code, modifiers))
    }
}

fn key_code(name: &str, shift: bool) -> Result<KeyCode, KeyError> {
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Ok(KeyCode::Char(if shift {
            c.to_ascii_uppercase()
        } else {
            c
        }));
    }
    let lower = name.to_ascii_lowercase();
    let code = match lower.as_str() {
        "" => return Err(KeyError::NoKey),
        "enter" | "return" => KeyCode::Enter,
        "tab" if shift => KeyCode::BackTab,
        "tab" => KeyCode::Tab,
        "backtab" => KeyCode::BackTab,
        "esc" | "escape" => KeyCode::Esc,
        "space" => KeyCode::Char(' '),
        "backspace" => KeyCode::Backspace,
        "delete" | "del" => KeyCode::Delete,
        "insert" | "ins" => KeyCode::Insert,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        "pageup" | "pgup" => KeyCode::PageUp,
        "pagedown" | "pgdn" => KeyCode::PageDown,
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        f if f.starts_with('f') => match f[1..].parse::<u8>() {
            Ok(n @ 1..=12) => KeyCode::F(n),
            _ => return Err(KeyError::UnknownName(name.to_string())),
        },
        _ => return Err(KeyError::UnknownName(name.to_string())),
    };
    Ok(code)
}

impl std::fmt::Display for KeyChord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (modifier, name) in [
            (KeyModifiers::CONTROL, "ctrl-"),
            (KeyModifiers::ALT, "alt-"),
            (KeyModifiers::SHIFT, "shift-"),
        ] {
            if self.modifiers.contains(modifier) {
                f.write_str(name)?;
            }
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::F(n) => write!(f, "f{n}"),
            KeyCode::Enter => f.write_str("enter"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::BackTab => f.write_str("shift-tab"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Backspace => f.write_str("backspace"),
            KeyCode::Delete => f.write_str("delete"),
            KeyCode::Insert => f.write_str("insert"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::PageUp => f.write_str("pageup"),
            KeyCode::PageDown => f.write_str("pagedown"),
            KeyCode::Up => f.write_str("up"),
            KeyCode::Down => f.write_str("down"),
            KeyCode::Left => f.write_str("left"),
            KeyCode::Right => f.write_str("right"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Why a key string does not name a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("no key after the modifiers")]
    NoKey,
    #[error("unknown key name \"{0}\"")]
    UnknownName(String),
}
