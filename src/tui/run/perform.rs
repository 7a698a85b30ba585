//! How the runtime carries out the model's actions: a call sent in the background (its
//! reply comes back to the loop as an outcome), the bell or a desktop notification, quit.

use std::io::Write;
use std::sync::Arc;

use super::{Outcome, Runtime};
use crate::config::{Attention, NoAgent};
use crate::protocol::methods::Request;
use crate::tui::{Action, Flash};

impl Runtime {
    /// Starts the actions; replies come back as outcomes. True on [`Action::Quit`].
    pub(super) fn perform(&mut self, actions: Vec<Action>) -> bool {
        let mut quit = false;
        for action in actions {
            match action {
                Action::Quit => quit = true,
                Action::Bell { message } => self.attention(&message),
                Action::Call(request) => self.send(request),
            }
        }
        quit
    }

    /// Sends `request` in the background; its reply comes back as an outcome, a failure
    /// as a flash saying what failed. A `session.create` without an agent starts the
    /// configured default; a transcript already being read is not asked for again.
    fn send(&mut self, mut request: Request) {
        match &mut request {
            Request::SessionCreate(p) if p.agent.is_empty() => match self.default_agent() {
                Ok(agent) => p.agent = agent,
                Err(why) => return self.model.report(Flash::error(why.to_string())),
            },
            Request::SessionTranscript(p) if !self.loading.insert(p.session_id.clone()) => {
                return;
            }
            _ => {}
        }
        let Some(link) = self.link.as_ref() else {
            self.model.report(Flash::error(
                "not connected to the daemon; try again in a moment",
            ));
            return;
        };
        let client = Arc::clone(&link.client);
        let outcomes = self.outcomes.0.clone();
        tokio::spawn(async move {
            // A stopped daemon keeps the call until it is continued; the banner says so.
            let outcome = match client.send_through(&request).await {
                Ok(reply) => Outcome::Answered(Box::new(request), Box::new(reply)),
                Err(e) => Outcome::Failed(Box::new(request), e.words()),
            };
            let _ = outcomes.send(outcome);
        });
    }

    /// The profile `/new` starts when it names none: `tui.default_agent`, else the only
    /// profile there is.
    fn default_agent(&self) -> Result<String, NoDefaultAgent> {
        if !self.settings.from_files {
            return Err(NoDefaultAgent::Unknown);
        }
        self.settings
            .config
            .chosen_agent()
            .map_err(|none| match none {
                NoAgent::None => NoDefaultAgent::None,
                NoAgent::Many(found) => NoDefaultAgent::Many(found.join(", ")),
            })
    }

    /// Rings the bell or sends a desktop notification, as configured.
    fn attention(&self, message: &str) {
        let signal = match self.settings.config.tui.attention {
            Attention::Bell => "\x07".to_string(),
            Attention::Osc9 => format!("\x1b]9;{}\x07", message.replace(['\x07', '\x1b'], "")),
            Attention::None => return,
        };
        let mut out = std::io::stdout();
        let _ = out.write_all(signal.as_bytes());
        let _ = out.flush();
    }
}

/// Why `/new` without `--agent` cannot pick an agent.
#[derive(Debug, thiserror::Error)]
enum NoDefaultAgent {
    #[error(
        "no agent found: install one (cru agents lists the known ones) or add [agents.<name>] to .crucible.toml"
    )]
    None,
    #[error("which agent? /new --agent <name> (profiles: {0}), or set tui.default_agent")]
    Many(String),
    #[error("the settings do not load, so the default agent is not known: /new --agent <name>")]
    Unknown,
}
