//! `cru search QUERY [--session N] [--type KIND]… [--limit N] [--json]`: transcripts,
//! inbox messages and sessions' names and tasks holding every word of the query, best
//! first, the matched words marked.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::cli::output::{self, outln};
use crate::kiln::Kiln;
use crate::protocol::methods as m;
use crate::protocol::{HitKind, SearchHit, SearchParams, Session};

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The words to find (every one must be there; "failing" also finds "failed").
    #[arg(required = true)]
    query: Vec<String>,
    /// Only in this session (its number, name or id).
    #[arg(long, conflicts_with = "all_kilns")]
    session: Option<String>,
    /// Only hits of this kind (repeat for several).
    #[arg(long = "type", value_enum)]
    types: Vec<Kind>,
    /// The most hits.
    #[arg(long, default_value_t = crate::ledger::DEFAULT_HITS)]
    limit: u32,
    /// Print the hits as JSON (their snippets unmarked, with the marked ranges).
    #[arg(long)]
    json: bool,
    /// In every kiln (`cru kilns`): their hits merged, best first, each named with its
    /// kiln.
    #[arg(long)]
    all_kilns: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    Transcript,
    Inbox,
    Session,
}

impl From<Kind> for HitKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Transcript => HitKind::Transcript,
            Kind::Inbox => HitKind::Inbox,
            Kind::Session => HitKind::Session,
        }
    }
}

pub async fn run(kiln: Kiln, args: SearchArgs) -> anyhow::Result<ExitCode> {
    if args.all_kilns {
        return everywhere(&args).await;
    }
    let client = super::connect(&kiln).await?;
    let sessions = super::session::list(&client).await?;
    let session_id = match &args.session {
        Some(name) => Some(super::session::pick(&sessions, name)?.id.clone()),
        None => None,
    };
    let found = client.call::<m::Search>(&params(&args, session_id)).await?;
    let hits = found.hits;
    let broad = found.broad.then(broad_note);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&hits)?);
        if let Some(note) = broad {
            eprintln!("{note}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if hits.is_empty() {
        outln!("Nothing found for {:?}.", args.query.join(" "));
        return Ok(ExitCode::from(1));
    }
    let bold = output::styled();
    let rows: Vec<Vec<String>> = hits
        .iter()
        .map(|hit| {
            vec![
                place(hit, &sessions),
                output::age(&hit.at),
                marked(hit, bold),
            ]
        })
        .collect();
    output::print_table(&["WHERE", "AGE", "FOUND"], &rows);
    if let Some(note) = broad {
        outln!("\n{note}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What is asked of a kiln's daemon.
fn params(args: &SearchArgs, session_id: Option<String>) -> SearchParams {
    SearchParams {
        query: args.query.join(" "),
        session_id,
        types: (!args.types.is_empty())
            .then(|| args.types.iter().map(|&k| HitKind::from(k)).collect()),
        limit: Some(args.limit),
    }
}

fn broad_note() -> String {
    format!(
        "Not all ranked: the words are in more than {} transcript entries or inbox \
         messages, and these are the best of the first found. Add a word, or --session, to narrow it.",
        crate::store::RANK_CAP
    )
}

/// One kiln's answer: its sessions (to number the hits as its list does) and hits.
#[derive(Default)]
struct Found {
    sessions: Vec<Session>,
    hits: Vec<SearchHit>,
    broad: bool,
}

impl super::across::ByKiln for Found {
    fn by_kiln(self) -> std::collections::HashMap<String, Self> {
        let broad = self.broad;
        let mut parts: std::collections::HashMap<String, Self> = self
            .sessions
            .by_kiln()
            .into_iter()
            .map(|(kiln, sessions)| {
                let found = Found {
                    sessions,
                    hits: Vec::new(),
                    broad,
                };
                (kiln, found)
            })
            .collect();
        for (kiln, hits) in self.hits.by_kiln() {
            let part = parts.entry(kiln).or_default();
            part.hits = hits;
            part.broad = broad;
        }
        parts
    }
}

/// `cru search --all-kilns`: every kiln searched at once, the hits merged best first
/// (each kiln ranks its own; the best `--limit` of all are kept), each named with its
/// kiln.
async fn everywhere(args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let asked = params(args, None);
    let kilns = super::across::ask_all(async |client: &crate::client::Client| {
        let sessions = super::session::list(client).await?;
        let found = client.call::<m::Search>(&asked).await?;
        Ok(Found {
            sessions,
            hits: found.hits,
            broad: found.broad,
        })
    })
    .await?;
    let broad = kilns.iter().any(|(_, f)| f.broad).then(broad_note);
    let mut hits: Vec<(&super::across::Place, &Found, &SearchHit)> = kilns
        .iter()
        .flat_map(|(kiln, found)| found.hits.iter().map(move |hit| (kiln, found, hit)))
        .collect();
    hits.sort_by(|a, b| b.2.score.total_cmp(&a.2.score));
    hits.truncate(args.limit as usize);
    if args.json {
        let values: Vec<serde_json::Value> = hits
            .iter()
            .map(|(kiln, _, hit)| super::across::with_kiln(hit, kiln))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&values)?);
        if let Some(note) = broad {
            eprintln!("{note}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if hits.is_empty() {
        outln!("Nothing found for {:?} in any kiln.", asked.query);
        return Ok(ExitCode::from(1));
    }
    let bold = output::styled();
    let rows: Vec<Vec<String>> = hits
        .iter()
        .map(|(kiln, found, hit)| {
            vec![
                kiln.name.clone(),
                place(hit, &found.sessions),
                output::age(&hit.at),
                marked(hit, bold),
            ]
        })
        .collect();
    output::print_table(&["KILN", "WHERE", "AGE", "FOUND"], &rows);
    if let Some(note) = broad {
        outln!("\n{note}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Where a hit is: the session's number and name, and the entry or message.
fn place(hit: &SearchHit, sessions: &[Session]) -> String {
    let number = sessions
        .iter()
        .position(|s| s.id == hit.session_id)
        .map(|i| format!("[{}] ", i + 1))
        .unwrap_or_default();
    let session = format!("{number}{}", hit.session_name);
    match hit.kind {
        HitKind::Transcript => format!(
            "{session} #{}",
            hit.seq.map(|s| s.to_string()).unwrap_or_default()
        ),
        HitKind::Inbox => format!(
            "inbox {} ({session})",
            hit.message_id.as_deref().unwrap_or("")
        ),
        HitKind::Session => format!("session {session}"),
    }
}

/// The snippet, its matched words in bold and underlined on a terminal (unless
/// `NO_COLOR` or `--color never`), in «» elsewhere.
fn marked(hit: &SearchHit, terminal: bool) -> String {
    let (open, close) = if terminal {
        ("\x1b[1;4m", "\x1b[0m")
    } else {
        ("«", "»")
    };
    let mut out = String::with_capacity(hit.snippet.len() + 16);
    for (i, c) in hit.snippet.chars().enumerate() {
        if hit.marks.iter().any(|&(s, _)| s == i) {
            out.push_str(open);
        }
        out.push(c);
        if hit.marks.iter().any(|&(_, e)| e == i + 1) {
            out.push_str(close);
        }
    }
    out
}
