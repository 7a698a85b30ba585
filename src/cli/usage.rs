//! `cru usage [--by session|agent|day] [--since DAY] [--json]`: what the sessions spent,
//! in tokens and US dollars, as their agents reported it. A session whose agent reported
//! nothing is counted as unknown, never as zero. The profile switches of fallback chains
//! are listed under the table, and in each JSON row's `switches`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::cli::output::{self, outln};
use crate::kiln::Kiln;
use crate::protocol::Session;

mod switches;
use switches::Switch;

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// What a row is.
    #[arg(long, value_enum, default_value_t = By::Day)]
    by: By,
    /// Only spending from this UTC day on: `YYYY-MM-DD`, or `Nd` for the last N days
    /// (`1d` is today).
    #[arg(long)]
    since: Option<String>,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
    /// Every kiln's spending (`cru kilns`), by kiln, and what they add up to.
    #[arg(long)]
    all_kilns: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum By {
    Session,
    Agent,
    Day,
}

/// One row: what its sessions spent, and how many of them told nothing of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
struct Row {
    pub key: String,
    pub sessions: usize,
    /// Tokens reported (`None`: no session of the row reported any).
    pub tokens: Option<u64>,
    /// US dollars reported or priced (`None`: none known).
    pub cost_usd: Option<f64>,
    /// Sessions of the row whose tokens, or cost, are unknown.
    pub tokens_unknown: usize,
    pub cost_unknown: usize,
    /// The profile switches of the row: made from its session, from its agent, or on
    /// its day.
    pub switches: Vec<Switch>,
}

pub async fn run(kiln: Kiln, args: UsageArgs) -> anyhow::Result<ExitCode> {
    let since = match args.since.as_deref() {
        Some(text) => Some(since_day(text, chrono::Utc::now().date_naive())?),
        None => None,
    };
    if args.all_kilns {
        return everywhere(args.by, since.as_deref(), args.json).await;
    }
    let client = super::connect(&kiln).await?;
    let sessions = super::session::list(&client).await?;
    let rows = rows(&sessions, args.by, since.as_deref());
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        nothing_spent(since.as_deref());
    } else {
        let table: Vec<Vec<String>> = rows.iter().map(cells).collect();
        output::print_table(&headers(args.by), &table);
        switches::print(rows.iter().flat_map(|r| &r.switches));
    }
    Ok(ExitCode::SUCCESS)
}

/// `cru usage --all-kilns`: each kiln's rows, named with their kiln, then what the kilns
/// add up to (by the same key; `--by session`: one row for all). In JSON the totals are
/// the rows whose `kiln` is null and `total` true.
async fn everywhere(by: By, since: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let kilns = super::across::ask_all(async |client: &crate::client::Client| {
        super::session::list(client).await
    })
    .await?;
    let kilns: Vec<(super::across::Place, Vec<Row>)> = kilns
        .into_iter()
        .map(|(kiln, sessions)| (kiln, rows(&sessions, by, since)))
        .collect();
    let total = totals(kilns.iter().flat_map(|(_, rows)| rows), by);
    if json {
        let mut values: Vec<serde_json::Value> = kilns
            .iter()
            .flat_map(|(kiln, rows)| rows.iter().map(move |r| super::across::with_kiln(r, kiln)))
            .collect();
        for row in &total {
            let mut value = serde_json::to_value(row)?;
            if let Some(object) = value.as_object_mut() {
                object.insert("kiln".into(), serde_json::Value::Null);
                object.insert("total".into(), true.into());
            }
            values.push(value);
        }
        outln!("{}", serde_json::to_string_pretty(&values)?);
    } else if total.is_empty() {
        nothing_spent(since);
    } else {
        let labelled = |kiln: &str, row: &Row| {
            let mut cells = cells(row);
            cells.insert(0, kiln.to_string());
            cells
        };
        let mut table: Vec<Vec<String>> = kilns
            .iter()
            .flat_map(|(kiln, rows)| rows.iter().map(|r| labelled(&kiln.name, r)))
            .collect();
        table.extend(total.iter().map(|r| labelled("all kilns", r)));
        let mut headers = headers(by).to_vec();
        headers.insert(0, "KILN");
        output::print_table(&headers, &table);
        switches::print(
            kilns
                .iter()
                .flat_map(|(_, rows)| rows)
                .flat_map(|r| &r.switches),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn nothing_spent(since: Option<&str>) {
    outln!(
        "Nothing spent{}.",
        since.map(|d| format!(" since {d}")).unwrap_or_default()
    );
}

fn headers(by: By) -> [&'static str; 4] {
    let head = match by {
        By::Session => "SESSION",
        By::Agent => "AGENT",
        By::Day => "DAY (UTC)",
    };
    [head, "SESSIONS", "TOKENS", "COST (USD)"]
}

/// A row as the table shows it.
fn cells(r: &Row) -> Vec<String> {
    vec![
        r.key.clone(),
        r.sessions.to_string(),
        amount(r.tokens.map(|t| t.to_string()), r.tokens_unknown),
        amount(r.cost_usd.map(|c| format!("{c:.2}")), r.cost_unknown),
    ]
}

/// What rows of several kilns add up to, by key (`--by session`: all in one row, as a
/// session is in one kiln only). Unknown stays unknown: a sum is known only where some
/// row knew it, and the sessions that told nothing are counted beside it.
fn totals<'a>(rows: impl IntoIterator<Item = &'a Row>, by: By) -> Vec<Row> {
    let mut totals: BTreeMap<String, Row> = BTreeMap::new();
    for row in rows {
        let key = match by {
            By::Session => "all sessions".to_string(),
            By::Agent | By::Day => row.key.clone(),
        };
        let total = totals.entry(key.clone()).or_insert_with(|| Row {
            key,
            ..Row::default()
        });
        total.sessions += row.sessions;
        total.tokens = sum(total.tokens, row.tokens);
        total.cost_usd = sum(total.cost_usd, row.cost_usd);
        total.tokens_unknown += row.tokens_unknown;
        total.cost_unknown += row.cost_unknown;
        total.switches.extend(row.switches.iter().cloned());
    }
    totals.into_values().collect()
}

/// Two amounts added, unknown only when both are.
fn sum<T: std::ops::Add<Output = T> + Default>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or_default() + b.unwrap_or_default()),
    }
}

/// `1234`, `1234 (+2 unknown)`, or `unknown`.
fn amount(known: Option<String>, unknown: usize) -> String {
    match (known, unknown) {
        (Some(k), 0) => k,
        (Some(k), n) => format!("{k} (+{n} unknown)"),
        (None, _) => "unknown".into(),
    }
}

/// The first day counted: `YYYY-MM-DD` as given, or `Nd` counted back from `today`.
fn since_day(text: &str, today: chrono::NaiveDate) -> anyhow::Result<String> {
    if let Some(n) = text.strip_suffix('d')
        && let Ok(n) = n.parse::<u64>()
        && n >= 1
    {
        let first = today - chrono::Days::new(n - 1);
        return Ok(first.format("%Y-%m-%d").to_string());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|d| d.format("%Y-%m-%d").to_string())
        .map_err(|_| {
            anyhow::anyhow!("--since {text:?}: give a day (2026-11-20) or a count of days (7d)")
        })
}

/// The rows, in key order (days oldest first).
fn rows(sessions: &[Session], by: By, since: Option<&str>) -> Vec<Row> {
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for s in sessions {
        let name = || format!("{} ({})", s.display_name, short(&s.id));
        let Some(spent) = &s.spent else {
            // Nothing reported: unknown, on the day it started.
            let day = s.started_at.get(..10).unwrap_or_default().to_string();
            if since.is_some_and(|since| day.as_str() < since) {
                continue;
            }
            let key = match by {
                By::Session => name(),
                By::Agent => s.agent_name.clone(),
                By::Day => day,
            };
            let row = rows.entry(key.clone()).or_insert_with(|| Row {
                key,
                ..Row::default()
            });
            row.sessions += 1;
            row.tokens_unknown += 1;
            row.cost_unknown += 1;
            continue;
        };
        let days: Vec<_> = spent
            .days
            .iter()
            .filter(|(day, _)| since.is_none_or(|since| day.as_str() >= since))
            .collect();
        if days.is_empty() {
            continue;
        }
        let mut counted = std::collections::HashSet::new();
        for (day, on_day) in days {
            let key = match by {
                By::Session => name(),
                By::Agent => s.agent_name.clone(),
                By::Day => day.clone(),
            };
            let row = rows.entry(key.clone()).or_insert_with(|| Row {
                key: key.clone(),
                ..Row::default()
            });
            if counted.insert(key) {
                row.sessions += 1;
                if spent.tokens.is_none() {
                    row.tokens_unknown += 1;
                }
                if spent.cost.is_none() {
                    row.cost_unknown += 1;
                }
            }
            if let Some(t) = on_day.tokens {
                row.tokens = Some(row.tokens.unwrap_or(0) + t);
            }
            if let Some(c) = on_day.cost {
                row.cost_usd = Some(row.cost_usd.unwrap_or(0.0) + c);
            }
        }
    }
    add_switches(&mut rows, sessions, by, since);
    rows.into_values().collect()
}

/// Each profile switch in the row it falls in (made if the row has no spending).
fn add_switches(
    rows: &mut BTreeMap<String, Row>,
    sessions: &[Session],
    by: By,
    since: Option<&str>,
) {
    for s in sessions {
        let Some(switch) = switches::of(s) else {
            continue;
        };
        let day = switch.at.get(..10).unwrap_or_default().to_string();
        if since.is_some_and(|since| day.as_str() < since) {
            continue;
        }
        let key = match by {
            By::Session => format!("{} ({})", s.display_name, short(&s.id)),
            By::Agent => s.agent_name.clone(),
            By::Day => day,
        };
        rows.entry(key.clone())
            .or_insert_with(|| Row {
                key,
                ..Row::default()
            })
            .switches
            .push(switch);
    }
}

fn short(id: &str) -> &str {
    id.get(id.len().saturating_sub(6)..).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{DaySpent, Spent};

    fn session(id: &str, agent: &str, days: &[(&str, Option<u64>, Option<f64>)]) -> Session {
        let mut spent = Spent::default();
        for (day, tokens, cost) in days {
            spent.days.insert(
                day.to_string(),
                DaySpent {
                    tokens: *tokens,
                    cost: *cost,
                },
            );
            if let Some(t) = tokens {
                spent.tokens = Some(spent.tokens.unwrap_or(0) + t);
            }
            if let Some(c) = cost {
                spent.cost = Some(spent.cost.unwrap_or(0.0) + c);
            }
        }
        Session {
            id: id.into(),
            agent_name: agent.into(),
            display_name: format!("{id} @ {agent}"),
            started_at: "2026-11-24T10:00:00Z".into(),
            spent: (!days.is_empty()).then_some(spent),
            ..Session::default()
        }
    }

    #[test]
    fn what_no_agent_reported_is_unknown_never_zero() {
        let sessions = [
            session(
                "s1",
                "claude",
                &[
                    ("2026-11-24", Some(100), Some(0.5)),
                    ("2026-11-25", Some(50), Some(0.25)),
                ],
            ),
            session("s2", "codex", &[("2026-11-25", Some(1000), None)]),
            session("s3", "opencode", &[]),
        ];
        let by_day = rows(&sessions, By::Day, None);
        assert_eq!(by_day.len(), 2);
        assert_eq!(by_day[0].key, "2026-11-24");
        // s1 and s3 (which reported nothing, counted on the day it started).
        assert_eq!(by_day[0].sessions, 2);
        assert_eq!(by_day[0].tokens, Some(100));
        assert_eq!(by_day[0].tokens_unknown, 1);
        assert_eq!(by_day[1].tokens, Some(1050));
        assert_eq!(by_day[1].cost_usd, Some(0.25));
        assert_eq!(by_day[1].cost_unknown, 1, "codex reported no cost");
        let by_agent = rows(&sessions, By::Agent, None);
        let opencode = by_agent.iter().find(|r| r.key == "opencode").unwrap();
        assert_eq!((opencode.tokens, opencode.cost_usd), (None, None));
        assert_eq!(amount(None, 1), "unknown");
        assert_eq!(amount(Some("3".into()), 2), "3 (+2 unknown)");
        let since = rows(&sessions, By::Agent, Some("2026-11-25"));
        let claude = since.iter().find(|r| r.key == "claude").unwrap();
        assert_eq!(claude.tokens, Some(50));
        assert!(since.iter().all(|r| r.key != "opencode"));
    }

    #[test]
    fn kilns_add_up_by_key_and_unknown_is_never_summed_as_zero() {
        let alpha = rows(
            &[
                session("a1", "claude", &[("2026-11-24", Some(100), Some(0.5))]),
                session("a2", "opencode", &[]),
            ],
            By::Agent,
            None,
        );
        let beta = rows(
            &[
                session("b1", "claude", &[("2026-11-24", Some(20), None)]),
                session("b2", "opencode", &[]),
            ],
            By::Agent,
            None,
        );
        let total = totals(alpha.iter().chain(&beta), By::Agent);
        let claude = total.iter().find(|r| r.key == "claude").unwrap();
        assert_eq!(claude.sessions, 2);
        assert_eq!(claude.tokens, Some(120));
        assert_eq!(claude.cost_usd, Some(0.5));
        assert_eq!((claude.tokens_unknown, claude.cost_unknown), (0, 1));
        let opencode = total.iter().find(|r| r.key == "opencode").unwrap();
        assert_eq!((opencode.tokens, opencode.cost_usd), (None, None));
        assert_eq!((opencode.sessions, opencode.tokens_unknown), (2, 2));
        assert_eq!(cells(opencode)[2], "unknown");
        let by_session = totals(alpha.iter().chain(&beta), By::Session);
        let all = rows_of(&by_session, "all sessions");
        assert_eq!(
            (all.sessions, all.tokens, all.tokens_unknown),
            (4, Some(120), 2)
        );
    }

    fn rows_of<'a>(rows: &'a [Row], key: &str) -> &'a Row {
        assert_eq!(rows.len(), 1, "{rows:?}");
        rows.iter().find(|r| r.key == key).unwrap()
    }

    #[test]
    fn since_takes_a_day_or_a_count_of_days() {
        let today = chrono::NaiveDate::from_ymd_opt(2026, 11, 26).unwrap();
        assert_eq!(since_day("1d", today).unwrap(), "2026-11-26");
        assert_eq!(since_day("7d", today).unwrap(), "2026-11-20");
        assert_eq!(since_day("2026-11-01", today).unwrap(), "2026-11-01");
        assert!(since_day("last week", today).is_err());
        assert!(since_day("0d", today).is_err());
    }
}
