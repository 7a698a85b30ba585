//! The hub as the components it runs see it (the person's web view and Matrix bot): a
//! call is answered as a client's call through the hub is (sent to the kiln it belongs
//! to, or to every kiln and merged), for the caller the component names, so each kiln's
//! inbox and audit say who answered and that it came through the hub; the events are
//! every kiln's, each named with its kiln.

use std::sync::{Arc, Weak};

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::Hub;
use super::route::{Way, way};
use crate::daemon::{Above, Answering, Caller, Held, KilnReach, Lines};
use crate::protocol::methods::{self as m, Request};
use crate::protocol::{ErrorObject, Event, Notification, named_params};

/// How many events a slow reader may fall behind before it is told it missed some.
const BACKLOG: usize = 1024;

/// The hub, for its components. It does not keep the hub up: once the hub is gone, a
/// call is refused.
pub(super) struct Through {
    hub: Weak<Hub>,
    /// Every kiln's events, as events (the Matrix bot reads them so).
    events: broadcast::Sender<Arc<Event>>,
}

impl Through {
    /// The hub's door for its components, and the task that turns every kiln's
    /// notifications into events for them.
    pub(super) fn new(hub: &Arc<Hub>) -> Arc<Self> {
        let (events, _) = broadcast::channel(BACKLOG);
        let mut notes = hub.members.subscribe();
        let sender = events.clone();
        tokio::spawn(async move {
            loop {
                let event = match notes.recv().await {
                    Ok(tagged) => {
                        let note = &tagged.note;
                        match Event::from_notification(&note.method, note.params.clone()) {
                            Some(event) => event,
                            None => continue,
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => Event::Resync {
                        missed,
                        reason: "the hub's components read too slowly".into(),
                    },
                    Err(broadcast::error::RecvError::Closed) => break,
                };
                let _ = sender.send(Arc::new(event));
            }
        });
        Arc::new(Self {
            hub: Arc::downgrade(hub),
            events,
        })
    }

    fn hub(&self) -> Result<Arc<Hub>, ErrorObject> {
        self.hub.upgrade().ok_or_else(|| {
            ErrorObject::new(
                crate::protocol::code::SHUTTING_DOWN,
                "the hub is shutting down",
            )
        })
    }
}

impl Above for Through {
    fn call<'a>(&'a self, caller: &'a Caller, name: &'a str, params: Value) -> Answering<'a> {
        Box::pin(async move {
            let hub = self.hub()?;
            let params = named_params(name, params)?;
            let request = Request::read(name, params.clone())?;
            match way(&request, &params) {
                Way::Own => match request {
                    Request::Ping(_) => Ok(json!(m::Pong { pong: true })),
                    Request::DaemonStatusOf(_) => Ok(json!(hub.status())),
                    other => Err(ErrorObject::invalid_request(format!(
                        "{} is made on a connection of the hub, not by its components",
                        other.method()
                    ))),
                },
                way => {
                    super::answer::answer(&hub.members, &caller.describe(), way, name, params).await
                }
            }
        })
    }

    fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    fn lines(&self) -> Lines {
        let (tx, lines) = mpsc::channel(256);
        let Ok(hub) = self.hub() else {
            return Lines::new(lines, Box::new(()));
        };
        let mut notes = hub.members.subscribe();
        let task = tokio::spawn(async move {
            loop {
                let note = match notes.recv().await {
                    Ok(tagged) => tagged.note,
                    Err(broadcast::error::RecvError::Lagged(missed)) => Arc::new(
                        Notification::new("events.lagged", json!({ "missed": missed })),
                    ),
                    Err(broadcast::error::RecvError::Closed) => break,
                };
                let Ok(line) = serde_json::to_string(&*note) else {
                    continue;
                };
                if tx.send(line).await.is_err() {
                    break;
                }
            }
        });
        Lines::new(lines, Box::new(Aborted(task)))
    }

    fn kiln_states(&self) -> Vec<KilnReach> {
        let Ok(hub) = self.hub() else {
            return Vec::new();
        };
        hub.members
            .all()
            .iter()
            .map(|member| {
                let reach = member.reach();
                KilnReach {
                    kiln: member.name(),
                    state: reach.word(),
                    host: member.host().map(str::to_string),
                    error: match reach {
                        super::members::Reach::Lost(why) => Some(why),
                        _ => None,
                    },
                }
            })
            .collect()
    }

    fn client(&self) -> Held {
        match self.hub() {
            Ok(hub) => Box::new(super::Counted::new(&hub)),
            Err(_) => Box::new(()),
        }
    }

    #[cfg(feature = "matrix")]
    fn tell_verification(&self, verification: crate::protocol::MatrixVerification) {
        let event = Event::MatrixVerification(verification);
        if let Ok(hub) = self.hub() {
            hub.members
                .tell(Notification::new(event.method(), event.params()));
        }
    }
}

/// A task stopped when dropped.
struct Aborted(tokio::task::JoinHandle<()>);

impl Drop for Aborted {
    fn drop(&mut self) {
        self.0.abort();
    }
}
