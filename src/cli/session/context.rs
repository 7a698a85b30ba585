//! `cru session context <session> [show|pop N|checkpoint NAME|rollback NAME|
//! replace-top TEXT|reset|summarize]`: look at and reshape a session's context stack.

use clap::Subcommand;

use crate::cli::output;
use crate::cli::output::outln;
use crate::client::Client;
use crate::context::{ContextOp, Entry, Message};
use crate::protocol::methods::ContextApply;
use crate::protocol::{ContextApplyParams, ContextCall, ContextResult, Session};

#[derive(Debug, Clone, Subcommand)]
pub(super) enum ContextAction {
    /// Show the stack, bottom (the system entry) to top (the default).
    Show,
    /// Remove the top N entries.
    Pop {
        /// How many entries.
        n: usize,
    },
    /// Name the current top entry, to roll back to later.
    Checkpoint {
        /// The checkpoint's name.
        name: String,
    },
    /// Remove everything above the checkpoint's entry.
    Rollback {
        /// The checkpoint's name.
        name: String,
    },
    /// Replace the top entry by a summary you write.
    #[command(name = "replace-top")]
    ReplaceTop {
        /// The summary (its words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Remove everything above the system entry, and every checkpoint.
    Reset,
    /// Replace everything above the system entry by one summary (the session's model's
    /// for internal agents, otherwise the deterministic one).
    Summarize,
}

pub(super) async fn run(
    client: &Client,
    session: &Session,
    action: Option<ContextAction>,
    json: bool,
) -> anyhow::Result<()> {
    let op = match action.unwrap_or(ContextAction::Show) {
        ContextAction::Show => ContextCall::Get,
        ContextAction::Pop { n } => ContextCall::Apply(ContextOp::Pop(n)),
        ContextAction::Checkpoint { name } => ContextCall::Apply(ContextOp::Checkpoint(name)),
        ContextAction::Rollback { name } => ContextCall::Apply(ContextOp::Rollback(name)),
        ContextAction::ReplaceTop { text } => {
            ContextCall::Apply(ContextOp::ReplaceTop(text.join(" ")))
        }
        ContextAction::Reset => ContextCall::Apply(ContextOp::Reset),
        ContextAction::Summarize => ContextCall::Apply(ContextOp::Summarize(None)),
    };
    let params = ContextApplyParams {
        session_id: session.id.clone(),
        op,
    };
    let result = client.call::<ContextApply>(&params).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    outln!("context of {}", session.display_name);
    print_stack(&result);
    if let Some(description) = &result.description {
        outln!("\n{description}");
    }
    if result.fresh_start {
        outln!("the next prompt starts a fresh agent session seeded with this stack");
    }
    Ok(())
}

fn print_stack(result: &ContextResult) {
    let stack = &result.stack;
    let rows: Vec<Vec<String>> = stack
        .entries()
        .iter()
        .map(|e| {
            let marks: Vec<&str> = stack
                .checkpoints()
                .iter()
                .filter(|c| c.seq == e.seq)
                .map(|c| c.name.as_str())
                .collect();
            vec![
                format!("#{}", e.seq),
                e.message.kind().to_string(),
                output::clip(&one_line(e), 70),
                marks.join(", "),
            ]
        })
        .collect();
    output::print_table(&["SEQ", "KIND", "TEXT", "CHECKPOINT"], &rows);
}

fn one_line(entry: &Entry) -> String {
    let text = match &entry.message {
        Message::ToolCall {
            tool, arguments, ..
        } => format!("{tool} {arguments}"),
        Message::ToolResult {
            ok: false, text, ..
        } => format!("error: {text}"),
        other => other.text().to_string(),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
