//! `cru inbox`: list, show, answer, clear and send inbox messages from any terminal.

use super::output::outln;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::output;
use crate::kiln::Kiln;
use crate::protocol::methods as m;
use crate::protocol::{
    IdParams, IdsParams, InboxMessage, ListParams, MsgType, RespondParams, SendParams,
};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct InboxArgs {
    #[command(subcommand)]
    action: Option<InboxAction>,
    /// List read messages too, not only unread ones.
    #[arg(long)]
    all: bool,
    /// How many messages at most (default: `inbox.default_limit`).
    #[arg(long, value_name = "N")]
    limit: Option<u32>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum InboxAction {
    /// Show one message in full (and mark it read).
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Answer a decision or approval; the waiting agent gets the answer.
    Respond {
        id: String,
        /// One of the message's options (for approvals: approve or deny).
        answer: String,
        #[arg(long)]
        json: bool,
    },
    /// Mark messages read.
    Read {
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Delete read messages that need no answer.
    Clear,
    /// Send a message (for scripts and agents).
    Send {
        /// The session the message is from.
        #[arg(long)]
        session: String,
        /// decision_needed, approval_required, task_complete, error or info.
        #[arg(long = "type", value_parser = parse_msg_type, default_value = "info")]
        msg_type: MsgType,
        title: String,
        #[arg(long)]
        body: Option<String>,
        /// A choice offered to the human (repeat for several).
        #[arg(long = "option", value_name = "CHOICE")]
        options: Vec<String>,
        #[arg(long)]
        json: bool,
    },
}

/// A `--type` that names no message type.
#[derive(Debug, thiserror::Error)]
#[error("unknown type {given:?}; use one of {known}")]
struct UnknownType {
    given: String,
    known: String,
}

fn parse_msg_type(s: &str) -> Result<MsgType, UnknownType> {
    MsgType::parse(s).ok_or_else(|| {
        let names: Vec<&str> = MsgType::ALL.iter().map(|t| t.as_str()).collect();
        UnknownType {
            given: s.to_string(),
            known: names.join(", "),
        }
    })
}

pub async fn run(kiln: Kiln, args: InboxArgs) -> anyhow::Result<ExitCode> {
    let client = super::connect(&kiln).await?;
    match args.action {
        None => {
            let params = ListParams {
                unread_only: !args.all,
                limit: args.limit,
                session_id: None,
            };
            let list = client.call::<m::InboxList>(&params).await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&list.messages)?);
            } else if list.messages.is_empty() {
                outln!(
                    "{}",
                    if args.all {
                        "the inbox is empty"
                    } else {
                        "no unread messages"
                    }
                );
            } else {
                print_list(&list.messages);
            }
        }
        Some(InboxAction::Show { id, json }) => {
            let mut one = client
                .call::<m::InboxGet>(&IdParams { id: id.clone() })
                .await?;
            if !one.message.read {
                client
                    .call::<m::InboxMarkRead>(&IdsParams { ids: vec![id] })
                    .await?;
                one.message.read = true;
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&one.message)?);
            } else {
                print_message(&one.message);
            }
        }
        Some(InboxAction::Respond { id, answer, json }) => {
            let one = client
                .call::<m::InboxRespond>(&RespondParams {
                    id,
                    response: answer,
                })
                .await?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&one.message)?);
            } else {
                outln!(
                    "answered {} ({}): {}",
                    one.message.id,
                    one.message.session_name,
                    one.message.response.as_deref().unwrap_or("")
                );
            }
        }
        Some(InboxAction::Read { ids }) => {
            let result = client.call::<m::InboxMarkRead>(&IdsParams { ids }).await?;
            outln!("{} marked read", result.updated);
        }
        Some(InboxAction::Clear) => {
            let result = client.call::<m::InboxClear>(&m::NoParams {}).await?;
            outln!("{} read messages deleted", result.deleted);
        }
        Some(InboxAction::Send {
            session,
            msg_type,
            title,
            body,
            options,
            json,
        }) => {
            let params = SendParams {
                session_id: session,
                msg_type,
                title,
                body,
                options: (!options.is_empty()).then_some(options),
                option_kinds: None,
                flagged: None,
            };
            let one = client.call::<m::InboxSend>(&params).await?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&one.message)?);
            } else {
                outln!("{}", one.message.id);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn state(m: &InboxMessage) -> String {
    match (&m.response, m.read, m.msg_type.blocks()) {
        (Some(answer), _, _) => format!("answered: {}", output::clip(answer, 20)),
        (None, _, true) => "waiting".into(),
        (None, false, _) => "unread".into(),
        (None, true, _) => "read".into(),
    }
}

fn print_list(messages: &[InboxMessage]) {
    let rows: Vec<Vec<String>> = messages
        .iter()
        .map(|m| {
            let mut title = output::clip(&m.title, 60);
            if let Some(options) = &m.options {
                title.push_str(&format!(" [{}]", options.join("/")));
            }
            vec![
                if m.read { " ".into() } else { "•".into() },
                m.id.clone(),
                output::age(&m.timestamp),
                output::glyph(m.msg_type).into(),
                m.session_name.clone(),
                state(m),
                title,
            ]
        })
        .collect();
    output::print_table(&["", "ID", "AGE", "T", "SESSION", "STATE", "TITLE"], &rows);
}

fn print_message(m: &InboxMessage) {
    outln!("{} {}", output::glyph(m.msg_type), m.title);
    output::print_pairs(&[
        ("id", m.id.clone()),
        ("type", m.msg_type.to_string()),
        ("session", format!("{} ({})", m.session_name, m.session_id)),
        (
            "sent",
            format!("{} ({} ago)", m.timestamp, output::age(&m.timestamp)),
        ),
        ("state", state(m)),
    ]);
    if let Some(body) = &m.body {
        outln!();
        for line in body.lines() {
            outln!("  {line}");
        }
    }
    if let Some(answers) = m.accepted_answers().filter(|_| !m.responded) {
        outln!();
        if answers.is_empty() {
            outln!("answer with: cru inbox respond {} \"<your answer>\"", m.id);
        } else {
            for (i, answer) in answers.iter().enumerate() {
                let kind = m
                    .option_kinds
                    .as_ref()
                    .and_then(|k| k.get(i))
                    .map(|k| format!("  ({})", k.replace('_', " ")))
                    .unwrap_or_default();
                outln!("  {}. {answer}{kind}", i + 1);
            }
            let intent = if m.msg_type == crate::protocol::MsgType::ApprovalRequired {
                ", or approve / deny"
            } else {
                ""
            };
            outln!(
                "answer with: cru inbox respond {} <{}> (or its number{intent})",
                m.id,
                answers.join("|")
            );
        }
    }
}
