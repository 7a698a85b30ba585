//! Asking every kiln at once, for `--all-kilns`: through the person's hub when it runs
//! or their settings name kilns on other machines (one call, every kiln it reaches
//! answering, each row named with its kiln), and each registered kiln's own daemon for
//! the kilns the hub does not reach (a resting one's daemon started, as acting on a kiln
//! does).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;

use crate::client::{Client, HubPlace, StartOptions, connect_hub, connect_or_start_hub};
use crate::config::Config;
use crate::protocol::methods as m;
use crate::protocol::{ComponentState, InboxMessage, SearchHit, Session};

/// A kiln as `--all-kilns` names its rows: its name, its folder, and its machine when it
/// is on another one.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub name: String,
    pub path: PathBuf,
    pub host: Option<String>,
}

impl Place {
    /// A kiln of this machine's registry.
    pub fn of(entry: crate::kilns::KilnEntry) -> Self {
        Self {
            name: entry.name,
            path: entry.path,
            host: None,
        }
    }

    /// The person's kiln of that name (its folder unknown when it is not theirs).
    pub fn named(name: &str) -> Self {
        places()
            .into_iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| Self {
                name: name.to_string(),
                path: PathBuf::new(),
                host: None,
            })
    }
}

/// A row of an answer through the hub, named with its kiln.
pub(crate) trait Named {
    fn kiln(&self) -> Option<&str>;
}

impl Named for Session {
    fn kiln(&self) -> Option<&str> {
        self.kiln.as_deref()
    }
}

impl Named for InboxMessage {
    fn kiln(&self) -> Option<&str> {
        self.kiln.as_deref()
    }
}

impl Named for SearchHit {
    fn kiln(&self) -> Option<&str> {
        self.kiln.as_deref()
    }
}

/// What one call answers for several kilns at once (through the hub), split by the kiln
/// each row is named with.
pub(crate) trait ByKiln: Sized + Default {
    /// Each kiln's part, by its name, in one pass.
    fn by_kiln(self) -> HashMap<String, Self>;
}

impl<T: Named> ByKiln for Vec<T> {
    fn by_kiln(self) -> HashMap<String, Self> {
        let mut parts: HashMap<String, Self> = HashMap::new();
        for row in self {
            if let Some(kiln) = row.kiln() {
                parts.entry(kiln.to_string()).or_default().push(row);
            }
        }
        parts
    }
}

/// Every kiln asked `call` (through the hub once for all it reaches, its answer split):
/// each kiln with its answer, local kilns in the registry's order, then the other
/// machines'. A kiln that cannot be reached or asked is said on standard error and left
/// out.
pub(crate) async fn ask_all<T: ByKiln>(
    call: impl AsyncFn(&Client) -> anyhow::Result<T>,
) -> anyhow::Result<Vec<(Place, T)>> {
    let entries = crate::kilns::Registry::for_user()?.entries()?;
    let remotes = remote_places();
    let hub = hub_for(!remotes.is_empty()).await;
    // Which kilns the hub reaches, and its answer for them, asked at once.
    let (through_hub, hub_answer) = match &hub {
        Some(hub) => {
            let (reached, answer) = tokio::join!(reached_by(hub), call(hub));
            (reached, Some(answer))
        }
        None => (HashSet::new(), None),
    };
    let mut hub_parts = match hub_answer {
        Some(Ok(value)) => Some(value.by_kiln()),
        Some(Err(e)) if !through_hub.is_empty() => {
            eprintln!("warning: the hub's kilns left out: {e:#}");
            None
        }
        _ => None,
    };
    // The kilns the hub does not reach, each asked itself.
    let own: Vec<_> = entries
        .iter()
        .filter(|e| !through_hub.contains(&e.name))
        .cloned()
        .collect();
    let direct = super::kilns::reach(own, true).await;
    super::kilns::warn_unreached(&direct);
    let direct_answers = futures::future::join_all(direct.iter().map(|r| async {
        match &r.client {
            Ok(client) => Some(call(client).await),
            Err(_) => None,
        }
    }))
    .await;
    let mut direct = direct.into_iter().zip(direct_answers);
    let mut answered = Vec::new();
    for place in entries.into_iter().map(Place::of).chain(remotes) {
        if through_hub.contains(&place.name) {
            if let Some(parts) = &mut hub_parts {
                let part = parts.remove(&place.name).unwrap_or_default();
                answered.push((place, part));
            }
            continue;
        }
        if let Some(host) = &place.host {
            eprintln!(
                "warning: kiln {} on {host} left out: the hub does not reach it now (cru kilns)",
                place.name,
            );
            continue;
        }
        let Some((r, answer)) = direct.find(|(r, _)| r.entry.name == place.name) else {
            continue;
        };
        match answer {
            Some(Ok(value)) => answered.push((place, value)),
            Some(Err(e)) => eprintln!(
                "warning: kiln {} ({}) left out: {e:#}",
                r.entry.name,
                r.entry.path.display()
            ),
            None => {}
        }
    }
    Ok(answered)
}

/// The person's hub, when it runs, or started when their settings name kilns on other
/// machines (only the hub reaches those).
pub(crate) async fn hub_to_ask() -> Option<Client> {
    hub_for(!remote_places().is_empty()).await
}

/// The person's hub, when it runs, or started when `remotes` (kilns on other machines)
/// need it.
async fn hub_for(remotes: bool) -> Option<Client> {
    let place = HubPlace::for_user().ok()?;
    if let Ok(hub) = connect_hub(&place).await {
        return Some(hub);
    }
    if !remotes {
        return None;
    }
    match connect_or_start_hub(&place, &StartOptions::default()).await {
        Ok(hub) => Some(hub),
        Err(e) => {
            eprintln!(
                "warning: the hub could not be started, so kilns on other machines are left out: {e}"
            );
            None
        }
    }
}

/// The kilns the hub is connected to now, by name.
async fn reached_by(hub: &Client) -> HashSet<String> {
    let Ok(status) = hub.call::<m::DaemonStatusOf>(&m::NoParams {}).await else {
        return HashSet::new();
    };
    status
        .components
        .into_iter()
        .filter(|c| c.state == ComponentState::On)
        .filter_map(|c| c.name.strip_prefix("kiln ").map(str::to_string))
        .collect()
}

/// Every kiln the person has, as `cru kilns` orders them: the registry's, then those on
/// other machines their settings name.
fn places() -> Vec<Place> {
    let mut places: Vec<Place> = crate::kilns::Registry::for_user()
        .and_then(|r| r.entries())
        .unwrap_or_default()
        .into_iter()
        .map(Place::of)
        .collect();
    places.extend(remote_places());
    places
}

/// The kilns on other machines the person's settings name (`[[hub.remotes]]`).
fn remote_places() -> Vec<Place> {
    let Ok(config) = Config::load_person() else {
        return Vec::new();
    };
    config
        .hub
        .remotes
        .iter()
        .flat_map(|remote| {
            remote.named_kilns().into_iter().map(|(name, path)| Place {
                name,
                path,
                host: Some(remote.host().to_string()),
            })
        })
        .collect()
}

/// A JSON row with the kiln it came from: `kiln` (its name), `kiln_path`, and `host` for
/// a kiln on another machine.
pub(crate) fn with_kiln(value: impl Serialize, place: &Place) -> serde_json::Value {
    let mut value = serde_json::to_value(value).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("kiln".into(), place.name.clone().into());
        object.insert("kiln_path".into(), place.path.display().to_string().into());
        if let Some(host) = &place.host {
            object.insert("host".into(), host.clone().into());
        }
    }
    value
}
