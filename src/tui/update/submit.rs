//! A line sent from the input: a slash command carried out, or a prompt for the focused
//! session; typed before the daemon answered, it is held and carried out once the state
//! is read. Tab completes a slash command.

use crate::tui::action::Action;
use crate::tui::commands::{self, SlashCommand};
use crate::tui::model::{Connection, Flash, Model, TranscriptMsg};

impl Model {
    /// Enter: sends the input's line as a slash command or a prompt to the focused
    /// session; held while the daemon is not connected.
    pub(super) fn submit(&mut self) -> Vec<Action> {
        let text = self.input.text();
        if text.trim().is_empty() {
            return Vec::new();
        }
        let command =
            (text.starts_with('/') && !text.starts_with("//")).then(|| commands::parse(&text));
        let local = matches!(
            command,
            Some(Ok(SlashCommand::Help | SlashCommand::Quit)) | Some(Err(_))
        );
        if (self.health.connection != Connection::Connected || self.partial) && !local {
            // Typed before the daemon answered (or while it is away, or before the whole
            // session list is read): kept, and carried out once the state is read.
            self.held.push(self.input.take());
            self.flash = Some(Flash::info(format!(
                "{} held until the daemon answers",
                match self.held.len() {
                    1 => "1 line".to_string(),
                    n => format!("{n} lines"),
                }
            )));
            return Vec::new();
        }
        match command {
            Some(command) => {
                self.input.take();
                match command {
                    Ok(command) => self.handle_command(command),
                    Err(e) => self.refuse(e.to_string()),
                }
            }
            None => match self.focused.clone() {
                Some(session_id) => {
                    let text = self.input.take();
                    self.prompt(session_id, text)
                }
                None => self.refuse("no session to prompt — /new creates one"),
            },
        }
    }

    /// Carries out the lines held while not connected, in order. A prompt with no session
    /// to take it goes back into the input rather than being lost.
    pub(in crate::tui) fn run_held(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        let held = std::mem::take(&mut self.held);
        // The note that lines are held is over: say they ran (a refusal below says more).
        if !held.is_empty() {
            self.flash = Some(Flash::info(match held.len() {
                1 => "the line held is carried out".to_string(),
                n => format!("the {n} lines held are carried out"),
            }));
        }
        for line in held {
            if line.starts_with('/') && !line.starts_with("//") {
                match commands::parse(&line) {
                    Ok(command) => actions.extend(self.handle_command(command)),
                    Err(e) => {
                        self.refuse(e.to_string());
                    }
                }
                continue;
            }
            match self.focused.clone() {
                Some(session_id) => actions.extend(self.prompt(session_id, line)),
                None => {
                    if self.input.is_empty() {
                        self.input.set_text(&line);
                    }
                    self.refuse("no session to prompt — /new creates one");
                }
            }
        }
        actions
    }

    fn prompt(&mut self, session_id: String, text: String) -> Vec<Action> {
        // `//` sends a prompt that starts with a slash.
        let text = text
            .strip_prefix('/')
            .filter(|t| t.starts_with('/'))
            .map_or(text.clone(), String::from);
        self.transcripts.update(TranscriptMsg::FollowTail);
        vec![Action::prompt(session_id, text)]
    }

    /// Tab: completes a slash command.
    pub(super) fn complete(&mut self) -> Vec<Action> {
        let text = self.input.text();
        if !text.starts_with('/') || !self.input.is_single_line() {
            return Vec::new();
        }
        let completion = commands::complete(&text);
        if let Some(line) = completion.line {
            self.input.set_text(&line);
        }
        if !completion.candidates.is_empty() {
            self.flash = Some(Flash::info(completion.candidates.join("  ")));
        }
        Vec::new()
    }
}
