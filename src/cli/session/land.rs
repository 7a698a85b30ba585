//! `cru session diff|commit|merge|pr` and `cru session conflicts`: reviewing and landing
//! a session's work.

use crate::cli::output::{self, outln};
use crate::client::Client;
use crate::protocol::methods as m;
use crate::protocol::{
    CommitParams, DiffParams, LineKind, MergeParams, MergeStrategy, PrParams, Session,
};

pub(super) async fn diff(
    client: &Client,
    session: &Session,
    stat: bool,
    json: bool,
) -> anyhow::Result<()> {
    let reply = client
        .call::<m::SessionDiff>(&DiffParams {
            session_id: session.id.clone(),
            context: None,
        })
        .await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&reply)?);
        return Ok(());
    }
    let files = &reply.diff.files;
    if files.is_empty() {
        outln!("{}: no changes against {}", reply.branch, reply.base_branch);
        return Ok(());
    }
    if stat {
        let rows: Vec<Vec<String>> = files
            .iter()
            .map(|f| {
                vec![
                    format!("{:?}", f.status).to_lowercase(),
                    f.path.clone(),
                    if f.binary {
                        "binary".into()
                    } else {
                        format!("+{} -{}", f.added, f.removed)
                    },
                ]
            })
            .collect();
        output::print_table(&["STATUS", "FILE", "CHANGE"], &rows);
        let (added, removed) = files
            .iter()
            .fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
        outln!(
            "{} file(s), +{added} -{removed} against {} ({})",
            files.len(),
            reply.base_branch,
            reply.diff.base.get(..12).unwrap_or(&reply.diff.base)
        );
        return Ok(());
    }
    for file in files {
        outln!(
            "{} ({:?}, +{} -{})",
            file.path,
            file.status,
            file.added,
            file.removed
        );
        if file.binary {
            outln!("  binary file");
        }
        for hunk in &file.hunks {
            outln!(
                "@@ -{},{} +{},{} @@ {}",
                hunk.old_start,
                hunk.old_lines,
                hunk.new_start,
                hunk.new_lines,
                hunk.header
            );
            for line in &hunk.lines {
                let mark = match line.kind {
                    LineKind::Added => '+',
                    LineKind::Removed => '-',
                    LineKind::Context => ' ',
                };
                outln!("{mark}{}", line.text);
            }
        }
    }
    Ok(())
}

pub(super) async fn commit(
    client: &Client,
    session: &Session,
    message: Option<String>,
) -> anyhow::Result<()> {
    let reply = client
        .call::<m::SessionCommit>(&CommitParams {
            session_id: session.id.clone(),
            message,
        })
        .await?;
    match reply.commit {
        Some(commit) => outln!(
            "committed {} in {}",
            commit.get(..12).unwrap_or(&commit),
            session.display_name
        ),
        None => outln!("nothing to commit in {}", session.display_name),
    }
    Ok(())
}

pub(super) async fn merge(
    client: &Client,
    session: &Session,
    strategy: MergeStrategy,
    message: Option<String>,
) -> anyhow::Result<()> {
    let reply = client
        .call::<m::SessionMerge>(&MergeParams {
            session_id: session.id.clone(),
            strategy,
            message,
        })
        .await?;
    outln!(
        "landed {} on {} (now {})",
        session.branch.as_deref().unwrap_or(&session.display_name),
        reply.into,
        reply.head.get(..12).unwrap_or(&reply.head)
    );
    Ok(())
}

pub(super) async fn pr(
    client: &Client,
    session: &Session,
    title: Option<String>,
    body: Option<String>,
) -> anyhow::Result<()> {
    let reply = client
        .call::<m::SessionPr>(&PrParams {
            session_id: session.id.clone(),
            title,
            body,
        })
        .await?;
    outln!("{}", reply.url);
    Ok(())
}

pub(super) async fn conflicts(client: &Client, json: bool) -> anyhow::Result<()> {
    let report = client.call::<m::SessionConflicts>(&m::NoParams {}).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    if report.pairs.is_empty() {
        outln!("no two sessions change the same files");
        return Ok(());
    }
    let sessions = super::list(client).await?;
    let name = |id: &str| {
        sessions
            .iter()
            .position(|s| s.id == id)
            .map(|i| format!("[{}] {}", i + 1, sessions[i].display_name))
            .unwrap_or_else(|| id.to_string())
    };
    for pair in &report.pairs {
        outln!("{}  ×  {}", name(&pair.a), name(&pair.b));
        for file in &pair.files {
            outln!("  {file}");
        }
    }
    Ok(())
}

/// The merge strategy the flags ask for: `--squash`, `--rebase`, else a merge commit.
pub(super) fn strategy(squash: bool, rebase: bool) -> crate::protocol::MergeStrategy {
    if squash {
        crate::protocol::MergeStrategy::Squash
    } else if rebase {
        crate::protocol::MergeStrategy::Rebase
    } else {
        crate::protocol::MergeStrategy::Merge
    }
}
