//! Which session a name given on the command line means: its id, a unique start or end
//! of its id, its number in `cru session list`, its display name or its branch.

use anyhow::bail;

use crate::client::Client;
use crate::protocol::Session;
use crate::protocol::methods as m;

pub(in crate::cli) async fn list(client: &Client) -> anyhow::Result<Vec<Session>> {
    listed(client, false).await
}

/// The sessions, with what each agent costs the machine when `resources` (the daemon
/// reads every process's figures for it).
pub(in crate::cli) async fn listed(
    client: &Client,
    resources: bool,
) -> anyhow::Result<Vec<Session>> {
    Ok(client
        .call::<m::SessionList>(&crate::protocol::SessionListParams {
            resources,
            ..crate::protocol::SessionListParams::default()
        })
        .await?
        .sessions)
}

/// Finds the session `name` refers to.
pub(in crate::cli) async fn resolve(client: &Client, name: &str) -> anyhow::Result<Session> {
    let sessions = list(client).await?;
    pick(&sessions, name).cloned()
}

pub(in crate::cli) fn pick<'a>(sessions: &'a [Session], name: &str) -> anyhow::Result<&'a Session> {
    let name = name.trim();
    let lower = name.to_lowercase();
    if let Some(s) = sessions.iter().find(|s| {
        s.id.eq_ignore_ascii_case(name)
            || s.display_name == name
            || s.branch.as_deref() == Some(name)
    }) {
        return Ok(s);
    }
    // `[n]` or `n`, as `cru session list` numbers them (a longer run of digits may
    // still be the start of an id).
    let bracketed = name.starts_with('[') && name.ends_with(']');
    if let Ok(n) = name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<usize>()
    {
        if let Some(s) = n.checked_sub(1).and_then(|i| sessions.get(i)) {
            return Ok(s);
        }
        if bracketed || name.len() < 4 {
            bail!(
                "no session [{n}]: `cru session list` numbers {} session(s)",
                sessions.len()
            );
        }
    }
    if name.len() < 4 {
        bail!("no session {name:?} (give at least 4 characters of its id)");
    }
    let matches: Vec<&Session> = sessions
        .iter()
        .filter(|s| {
            let id = s.id.to_lowercase();
            id.starts_with(&lower) || id.ends_with(&lower)
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => bail!("no session {name:?}; `cru session list` shows them"),
        many => bail!(
            "{name:?} matches {} sessions ({}); give more of the id",
            many.len(),
            many.iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn session(id: &str, name: &str, branch: Option<&str>) -> Session {
        serde_json::from_value(json!({
            "id": id, "agent_type": "acp", "agent_name": "a", "status": "active",
            "started_at": "2026-01-01T00:00:00Z", "last_heartbeat": "2026-01-01T00:00:00Z",
            "display_name": name, "branch": branch,
        }))
        .unwrap()
    }

    #[test]
    fn sessions_are_found_by_id_part_name_or_branch() {
        let list = vec![
            session(
                "01KAAAAAAAAAAAAAAAAAAAAAA1",
                "cru/aaaaa1 @ a",
                Some("cru/aaaaa1"),
            ),
            session("01KAAAAAAAAAAAAAAAAAAAAAB2", "feat @ a", Some("feat")),
        ];
        assert_eq!(pick(&list, "feat").unwrap().id, list[1].id);
        assert_eq!(pick(&list, "cru/aaaaa1 @ a").unwrap().id, list[0].id);
        assert_eq!(pick(&list, "aab2").unwrap().id, list[1].id);
        assert_eq!(
            pick(&list, "01kaaaaaaaaaaaaaaaaaaaaaa1").unwrap().id,
            list[0].id
        );
        let ambiguous = pick(&list, "01KAAAA").unwrap_err().to_string();
        assert!(ambiguous.contains("matches 2"), "{ambiguous}");
        assert!(pick(&list, "zzzz").is_err());
        assert!(pick(&list, "a1").is_err());
        // The numbers `cru session list` prints.
        assert_eq!(pick(&list, "1").unwrap().id, list[0].id);
        assert_eq!(pick(&list, "[2]").unwrap().id, list[1].id);
        let beyond = pick(&list, "3").unwrap_err().to_string();
        assert!(beyond.contains("numbers 2 session"), "{beyond}");
        assert!(pick(&list, "0").is_err());
    }
}
