//! Asking every kiln at once, for `--all-kilns`: through the person's hub when it runs
//! or their settings name kilns on other machines (one call, every kiln it reaches
//! answering, each row named with its kiln), and each registered kiln's own daemon for
//! the kilns the hub does not reach (a resting one's daemon started, as acting on a kiln
//! does).

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Serialize;

use super::kilns::{Reached, reach_these};
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

/// What one call answers for several kilns at once (through the hub), split by the kiln
/// each row is named with.
pub(crate) trait ByKiln: Sized {
    /// Keeps the rows of kiln `name` only.
    fn only(self, name: &str) -> Self;
}

impl ByKiln for Vec<Session> {
    fn only(mut self, name: &str) -> Self {
        self.retain(|s| s.kiln.as_deref() == Some(name));
        self
    }
}

impl ByKiln for Vec<InboxMessage> {
    fn only(mut self, name: &str) -> Self {
        self.retain(|m| m.kiln.as_deref() == Some(name));
        self
    }
}

impl ByKiln for Vec<SearchHit> {
    fn only(mut self, name: &str) -> Self {
        self.retain(|h| h.kiln.as_deref() == Some(name));
        self
    }
}

/// Every kiln asked `call` (its answer cloned and split, through the hub): each kiln
/// with its answer, local kilns in the registry's order, then the other machines'. A
/// kiln that cannot be reached or asked is said on standard error and left out.
pub(crate) async fn ask_all<T: ByKiln + Clone>(
    call: impl AsyncFn(&Client) -> anyhow::Result<T>,
) -> anyhow::Result<Vec<(Place, T)>> {
    let hub = hub_to_ask().await;
    // Which kilns the hub reaches, and its answer for them, asked at once.
    let (through_hub, hub_answer) = match &hub {
        Some(hub) => {
            let (reached, answer) = tokio::join!(reached_by(hub), call(hub));
            (reached, Some(answer))
        }
        None => (HashSet::new(), None),
    };
    // The kilns the hub does not reach, each asked itself.
    let direct: Vec<Reached> =
        reach_these(true, |entry| !through_hub.contains(&entry.name)).await?;
    super::kilns::warn_unreached(&direct);
    let direct_answers = futures::future::join_all(direct.iter().map(|r| async {
        match &r.client {
            Ok(client) => Some(call(client).await),
            Err(_) => None,
        }
    }))
    .await;
    let mut answered = Vec::new();
    let hub_answer = match hub_answer {
        Some(Ok(value)) => Some(value),
        Some(Err(_)) if through_hub.is_empty() => None,
        Some(Err(e)) => {
            eprintln!("warning: the hub's kilns left out: {e:#}");
            None
        }
        None => None,
    };
    let mut direct = direct.into_iter().zip(direct_answers);
    for place in places() {
        if through_hub.contains(&place.name) {
            if let Some(all) = &hub_answer {
                let name = place.name.clone();
                answered.push((place, all.clone().only(&name)));
            }
            continue;
        }
        if place.host.is_some() {
            eprintln!(
                "warning: kiln {} on {} left out: the hub does not reach it now (cru kilns)",
                place.name,
                place.host.as_deref().unwrap_or_default()
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
    let place = HubPlace::for_user().ok()?;
    if let Ok(hub) = connect_hub(&place).await {
        return Some(hub);
    }
    let remotes = Config::load_person().is_ok_and(|c| !c.hub.remotes.is_empty());
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
    if let Ok(config) = Config::load_person() {
        for remote in &config.hub.remotes {
            for (name, path) in remote.named_kilns() {
                places.push(Place {
                    name,
                    path,
                    host: Some(remote.host().to_string()),
                });
            }
        }
    }
    places
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
