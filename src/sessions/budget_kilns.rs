//! The person's day budget across their kilns (`[budget] person_day_*`): what every
//! other running kiln of the person's registry spent today, asked of each kiln's daemon
//! (`session.list`, its sessions' spending on the day). A daemon that does not answer
//! within [`ASK_TIMEOUT`] counts as unknown, never as nothing, and is named wherever the
//! sum is said. The answers are kept for [`KEEP`], so a burst of turns asks each daemon
//! once; the budget keeper adds this kiln's own spending to them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::time::Instant;

use crate::kilns::{KilnState, Registry};
use crate::protocol::jsonrpc::request_line;
use crate::protocol::methods::ListedSessions;
use crate::protocol::{HandshakeParams, PROTOCOL_VERSION, Session};

/// How long another kiln's daemon has to answer before its spending is unknown.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the other kilns' answers are used before they are asked again.
pub const KEEP: Duration = Duration::from_secs(15);

/// Spending on one day (`None`: nothing known).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DayTotal {
    pub tokens: Option<u64>,
    pub cost: Option<f64>,
}

impl DayTotal {
    /// Adds what is known; nothing known stays unknown.
    pub fn add(&mut self, tokens: Option<u64>, cost: Option<f64>) {
        if let Some(t) = tokens {
            self.tokens = Some(self.tokens.unwrap_or(0).saturating_add(t));
        }
        if let Some(c) = cost {
            self.cost = Some(self.cost.unwrap_or(0.0) + c);
        }
    }
}

/// What another kiln spent today, by its registered name; `None`: its daemon could not
/// be asked, so it is unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct KilnSpent {
    pub name: String,
    pub spent: Option<DayTotal>,
}

/// The person's spending today: this kiln's and the other kilns' that answered, and the
/// names of those that did not (their spending is not in the sum, and is not zero).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersonDay {
    pub known: DayTotal,
    pub unknown: Vec<String>,
}

/// Adds this kiln's spending today to the other kilns'.
pub fn person_day(own: DayTotal, others: &[KilnSpent]) -> PersonDay {
    let mut day = PersonDay {
        known: own,
        unknown: Vec::new(),
    };
    for kiln in others {
        match kiln.spent {
            Some(spent) => day.known.add(spent.tokens, spent.cost),
            None => day.unknown.push(kiln.name.clone()),
        }
    }
    day
}

/// Each kiln's spending in words, in dollars when `by_cost`, else in tokens:
/// `this kiln 0.00 USD, alpha 1.20 USD, beta unknown (its daemon did not answer)`.
pub fn per_kiln(own: DayTotal, others: &[KilnSpent], by_cost: bool) -> String {
    let said = |spent: &DayTotal| match (by_cost, spent.cost, spent.tokens) {
        (true, Some(cost), _) => format!("{cost:.2} USD"),
        (true, None, _) => "no reported cost".to_string(),
        (false, _, Some(tokens)) => format!("{tokens} tokens"),
        (false, _, None) => "no reported tokens".to_string(),
    };
    let own = DayTotal {
        cost: own.cost.or(Some(0.0)),
        tokens: own.tokens.or(Some(0)),
    };
    let mut parts = vec![format!("this kiln {}", said(&own))];
    for kiln in others {
        parts.push(match &kiln.spent {
            Some(spent) => format!("{} {}", kiln.name, said(spent)),
            None => format!("{} unknown (its daemon did not answer)", kiln.name),
        });
    }
    parts.join(", ")
}

/// What the sessions of a kiln spent on `day`.
pub fn spent_on(sessions: &[Session], day: &str) -> DayTotal {
    let mut total = DayTotal::default();
    for spent in sessions
        .iter()
        .filter_map(|s| s.spent.as_ref().and_then(|s| s.days.get(day)))
    {
        total.add(spent.tokens, spent.cost);
    }
    total
}

/// The other kilns of the person's registry, and when they were last asked.
pub struct OtherKilns {
    /// This kiln's folder (left out) and the registry; `None`: no other kiln is asked.
    reach: Option<(PathBuf, Registry)>,
    /// When the others were last asked; one ask at a time, the rest wait for it.
    asked: tokio::sync::Mutex<Option<Instant>>,
}

impl OtherKilns {
    /// No other kiln is asked (no registry).
    pub fn none() -> Self {
        Self {
            reach: None,
            asked: tokio::sync::Mutex::new(None),
        }
    }

    /// The other kilns of `registry`, this one (`own`, its folder) left out.
    pub fn of(own: PathBuf, registry: Registry) -> Self {
        Self {
            reach: Some((own, registry)),
            asked: tokio::sync::Mutex::new(None),
        }
    }

    /// What the other running kilns spent on `day`, unless they were asked within
    /// [`KEEP`] (`None`: the last answers still hold).
    pub async fn ask_if_stale(&self, day: &str) -> Option<Vec<KilnSpent>> {
        let (own, registry) = self.reach.as_ref()?;
        let mut asked = self.asked.lock().await;
        if asked.is_some_and(|at| at.elapsed() < KEEP) {
            return None;
        }
        let found = ask_others(registry, own, day).await;
        *asked = Some(Instant::now());
        Some(found)
    }
}

/// Asks every other running kiln of `registry` what it spent on `day`, all at once.
pub async fn ask_others(registry: &Registry, own: &Path, day: &str) -> Vec<KilnSpent> {
    let entries = match registry.entries() {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!("the person's budget cannot read the kiln registry: {e}");
            return Vec::new();
        }
    };
    let own = own.canonicalize().unwrap_or_else(|_| own.to_path_buf());
    let others = entries.into_iter().filter(|entry| {
        let path = entry
            .path
            .canonicalize()
            .unwrap_or_else(|_| entry.path.clone());
        path != own && matches!(entry.state(), KilnState::Running { .. })
    });
    let asked = others.map(|entry| async move {
        let spent = tokio::time::timeout(ASK_TIMEOUT, ask_one(&entry.socket, day))
            .await
            .ok()
            .and_then(|answer| {
                answer
                    .map_err(|e| tracing::warn!(kiln = %entry.name, "not asked its spending: {e}"))
                    .ok()
            });
        KilnSpent {
            name: entry.name,
            spent,
        }
    });
    futures::future::join_all(asked).await
}

/// Asks the daemon at `socket` for its sessions; what they spent on `day`.
async fn ask_one(socket: &Path, day: &str) -> std::io::Result<DayTotal> {
    let stream = UnixStream::connect(socket).await?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let hello = HandshakeParams {
        protocol_version: PROTOCOL_VERSION,
        client: Some("the person's day budget".into()),
        handle: None,
    };
    let hello = serde_json::to_value(hello).map_err(std::io::Error::other)?;
    for (id, method, params) in [(1, "handshake", hello), (2, "session.list", json!({}))] {
        write
            .write_all(request_line(id, method, &params).as_bytes())
            .await?;
        let answer = loop {
            let line = lines.next_line().await?.ok_or_else(closed)?;
            let value: Value = serde_json::from_str(&line).map_err(std::io::Error::other)?;
            if value.get("id") == Some(&json!(id)) {
                break value;
            }
        };
        if let Some(error) = answer.get("error") {
            return Err(std::io::Error::other(format!("{method}: {error}")));
        }
        if id == 2 {
            let listed: ListedSessions =
                serde_json::from_value(answer.get("result").cloned().unwrap_or_default())
                    .map_err(std::io::Error::other)?;
            return Ok(spent_on(&listed.sessions, day));
        }
    }
    Err(closed())
}

fn closed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the daemon closed the connection",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kiln(name: &str, cost: Option<f64>) -> KilnSpent {
        KilnSpent {
            name: name.into(),
            spent: cost.map(|c| DayTotal {
                tokens: None,
                cost: Some(c),
            }),
        }
    }

    #[test]
    fn the_sum_adds_the_kilns_that_answered_and_names_the_others_never_as_zero() {
        let own = DayTotal {
            tokens: Some(100),
            cost: Some(0.5),
        };
        let others = [kiln("alpha", Some(1.25)), kiln("beta", None)];
        let day = person_day(own, &others);
        assert_eq!(day.known.cost, Some(1.75));
        assert_eq!(day.known.tokens, Some(100));
        assert_eq!(day.unknown, ["beta"]);
        // Only unknown others: nothing is added for them, and they are named.
        let alone = person_day(DayTotal::default(), &[kiln("beta", None)]);
        assert_eq!(alone.known, DayTotal::default());
        assert_eq!(alone.unknown, ["beta"]);
    }

    #[test]
    fn each_kiln_is_named_with_its_spending_and_an_unknown_one_as_unknown() {
        let others = [kiln("alpha", Some(1.2)), kiln("beta", None)];
        assert_eq!(
            per_kiln(DayTotal::default(), &others, true),
            "this kiln 0.00 USD, alpha 1.20 USD, beta unknown (its daemon did not answer)"
        );
        let own = DayTotal {
            tokens: Some(40),
            cost: None,
        };
        assert_eq!(
            per_kiln(own, &[kiln("alpha", Some(1.0))], false),
            "this kiln 40 tokens, alpha no reported tokens"
        );
    }

    #[tokio::test]
    async fn a_running_kiln_whose_daemon_does_not_answer_is_unknown_and_this_kiln_left_out() {
        let state = tempfile::tempdir().unwrap();
        let registry = Registry::at(state.path());
        let me = std::process::id();
        let mut kilns = Vec::new();
        for name in ["own", "silent"] {
            let dir = tempfile::tempdir().unwrap();
            let kiln = crate::kiln::Kiln::new(dir.path());
            std::fs::create_dir_all(kiln.state_dir()).unwrap();
            std::fs::write(kiln.pid_path(), me.to_string()).unwrap();
            registry.record(&kiln, name, me).unwrap();
            kilns.push((dir, kiln));
        }
        // The silent kiln's socket takes connections and never answers the handshake.
        let _listener = tokio::net::UnixListener::bind(kilns[1].1.socket_path()).unwrap();
        let _own = tokio::net::UnixListener::bind(kilns[0].1.socket_path()).unwrap();
        let asked = ask_others(&registry, kilns[0].0.path(), "2026-01-01").await;
        assert_eq!(
            asked,
            [KilnSpent {
                name: "silent".into(),
                spent: None,
            }]
        );
    }

    #[tokio::test]
    async fn a_kiln_whose_daemon_cannot_be_reached_is_unknown() {
        let state = tempfile::tempdir().unwrap();
        let registry = Registry::at(state.path());
        let own = tempfile::tempdir().unwrap();
        // No daemon at all: the registry is empty, nothing is asked.
        assert!(
            ask_others(&registry, own.path(), "2026-01-01")
                .await
                .is_empty()
        );
        let gone = state.path().join("no-socket");
        let error = ask_one(&gone, "2026-01-01").await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    }
}
