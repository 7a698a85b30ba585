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
    /// Every kiln's messages (`cru kilns`), each named with its kiln; waiting ones first.
    #[arg(long)]
    all_kilns: bool,
}

#[derive(Debug, Subcommand)]
enum InboxAction {
    /// Show one message in full (and mark it read).
    Show {
        /// The message's id (or enough of its start to name one).
        id: String,
        /// Print the message as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Answer a decision or approval; the waiting agent gets the answer.
    Respond {
        /// The message's id (or enough of its start to name one).
        id: String,
        /// One of the message's options (for approvals: approve or deny).
        answer: String,
        /// Print the answered message as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Mark messages read.
    Read {
        /// The messages' ids (or enough of each one's start to name it).
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
        /// The message's title, one line.
        title: String,
        /// More detail, shown with the message.
        #[arg(long)]
        body: Option<String>,
        /// A choice offered to the human (repeat for several).
        #[arg(long = "option", value_name = "CHOICE")]
        options: Vec<String>,
        /// Print the message sent as JSON.
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
    if args.all_kilns && args.action.is_none() {
        return inbox_everywhere(args.all, args.limit, args.json).await;
    }
    let action = match args.action {
        Some(InboxAction::Respond { id, answer, json }) => {
            return respond(&kiln, id, answer, json).await;
        }
        other => other,
    };
    let client = super::connect(&kiln).await?;
    match action {
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
        // Answered above, in whichever kiln holds the message.
        Some(InboxAction::Respond { .. }) => {}
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

/// Answers a message in whichever kiln holds it (this one first).
async fn respond(kiln: &Kiln, id: String, answer: String, json: bool) -> anyhow::Result<ExitCode> {
    let params = RespondParams {
        id,
        response: answer,
        asked: None,
    };
    let (one, elsewhere) = respond_anywhere(kiln, &params).await?;
    if json {
        let value = match &elsewhere {
            Some(entry) => super::across::with_kiln(&one.message, entry),
            None => serde_json::to_value(&one.message)?,
        };
        outln!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let kiln = elsewhere
            .map(|k| format!(" in kiln {}", k.name))
            .unwrap_or_default();
        outln!(
            "answered {} ({}{kiln}): {}",
            one.message.id,
            one.message.session_name,
            one.message.response.as_deref().unwrap_or("")
        );
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
    let rows: Vec<Vec<String>> = messages.iter().map(row).collect();
    output::print_table(&["", "ID", "AGE", "T", "SESSION", "STATE", "TITLE"], &rows);
}

/// One message as a row of `cru inbox`.
fn row(m: &InboxMessage) -> Vec<String> {
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
}

/// Messages of several kilns, each row named with its kiln.
fn print_list_with_kilns(rows: &[(&super::across::Place, &InboxMessage)]) {
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(kiln, m)| {
            let mut row = row(m);
            row.insert(1, kiln.name.clone());
            row
        })
        .collect();
    output::print_table(
        &["", "KILN", "ID", "AGE", "T", "SESSION", "STATE", "TITLE"],
        &table,
    );
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

/// `cru inbox --all-kilns`: every kiln's messages in one list, those waiting for an
/// answer first, each named with its kiln.
async fn inbox_everywhere(all: bool, limit: Option<u32>, json: bool) -> anyhow::Result<ExitCode> {
    let params = ListParams {
        unread_only: !all,
        limit,
        session_id: None,
    };
    let kilns = super::across::ask_all(async |client: &crate::client::Client| {
        Ok(client.call::<m::InboxList>(&params).await?.messages)
    })
    .await?;
    let mut rows: Vec<(&super::across::Place, &InboxMessage)> = kilns
        .iter()
        .flat_map(|(kiln, messages)| messages.iter().map(move |m| (kiln, m)))
        .collect();
    // What needs an answer first, then the newest.
    rows.sort_by(|(_, a), (_, b)| {
        super::kilns::waiting(b)
            .cmp(&super::kilns::waiting(a))
            .then_with(|| b.timestamp.cmp(&a.timestamp))
    });
    if json {
        let values: Vec<serde_json::Value> = rows
            .iter()
            .map(|(k, m)| super::across::with_kiln(m, k))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&values)?);
    } else if rows.is_empty() {
        outln!(
            "{}",
            if all {
                "every kiln's inbox is empty"
            } else {
                "no unread messages in any kiln"
            }
        );
    } else {
        print_list_with_kilns(&rows);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `inbox.respond` answers.
type Answered = <m::InboxRespond as m::Method>::Result;

/// Answers message `params.id` in whichever kiln holds it: this one first (when it is a
/// kiln already), then every running kiln, then through the hub (kilns on other
/// machines). Message ids are unique across kilns.
async fn respond_anywhere(
    local: &crate::kiln::Kiln,
    params: &crate::protocol::RespondParams,
) -> anyhow::Result<(Answered, Option<super::across::Place>)> {
    use crate::protocol::code::NOT_FOUND;
    if local.state_dir().is_dir() {
        let client = super::connect(local).await?;
        match client.call::<m::InboxRespond>(params).await {
            Err(e) if e.rpc_code() == Some(NOT_FOUND) => {}
            answered => return Ok((answered?, None)),
        }
    }
    for r in super::kilns::reach_all(false).await? {
        if r.entry.path == local.root() {
            continue;
        }
        let Ok(client) = r.client else { continue };
        match client.call::<m::InboxRespond>(params).await {
            Err(e) if e.rpc_code() == Some(NOT_FOUND) => continue,
            answered => return Ok((answered?, Some(super::across::Place::of(r.entry)))),
        }
    }
    if let Some(hub) = super::across::hub_to_ask().await {
        match hub.call::<m::InboxRespond>(params).await {
            Err(e) if e.rpc_code() == Some(NOT_FOUND) => {}
            answered => {
                let answered = answered?;
                let place = answered
                    .message
                    .kiln
                    .as_deref()
                    .map(super::across::Place::named);
                return Ok((answered, place));
            }
        }
    }
    anyhow::bail!(
        "no inbox message {} in this kiln or any running one (`cru kilns` lists them)",
        params.id
    )
}
