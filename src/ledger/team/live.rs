//! Changes other daemons make, as this daemon's events: the live queries on the shared
//! database (started again when they break, with a catch-up read so no change is
//! missed), commands addressed to this daemon, and sessions other daemons changed.

use super::*;

impl Ledger {
    /// One change another daemon made, as this daemon's event.
    fn apply_remote(&self, change: LiveChange) {
        let Some(team) = self.team() else { return };
        let record = change.record;
        let origin = record.get("origin").and_then(Value::as_str);
        let mine = origin == Some(self.instance.id.as_str());
        match change.table {
            LiveTable::Sessions if !mine => self.apply_remote_session(record, change.deleted),
            LiveTable::Inbox if !mine => {
                if change.deleted {
                    if let Some(id) = record.get("id").and_then(Value::as_str) {
                        self.publish(Event::InboxDeleted {
                            ids: vec![id.to_string()],
                        });
                    }
                    return;
                }
                match serde_json::from_value::<InboxMessage>(record) {
                    Ok(m) if change.created => self.publish(Event::InboxCreated(m)),
                    Ok(m) => self.publish(Event::InboxUpdated(m)),
                    Err(e) => tracing::warn!("an inbox message from the server: {e}"),
                }
            }
            LiveTable::Transcript if !mine && change.created => {
                match serde_json::from_value::<TranscriptEntry>(record) {
                    Ok(entry) => self.publish(Event::Transcript(entry)),
                    Err(e) => tracing::warn!("a transcript entry from the server: {e}"),
                }
            }
            LiveTable::Commands if !change.deleted => {
                let Ok(command) = serde_json::from_value::<CommandRecord>(record) else {
                    return;
                };
                if command.done && command.origin == self.instance.id {
                    if let Some(waiter) = lock(&team.waiters).remove(&command.id) {
                        let _ = waiter.send(command);
                    }
                } else if !command.done && command.target == self.instance.id {
                    self.start_command(team, command);
                }
            }
            LiveTable::Daemons if !change.deleted => {
                match serde_json::from_value::<DaemonInfo>(record) {
                    Ok(info) if info.id == self.instance.id => {
                        if let Some(by) = &info.taken_by {
                            team.fenced.send_replace(Some(format!(
                                "daemon {by} took this daemon's sessions over"
                            )));
                        }
                    }
                    Ok(info) => team.saw(info),
                    Err(e) => tracing::debug!("a daemon record from the server: {e}"),
                }
            }
            _ => {}
        }
    }

    fn start_command(&self, team: &Team, command: CommandRecord) {
        if !lock(&team.started).insert(command.id.clone()) {
            return;
        }
        let _ = team.commands.send(command);
    }

    fn apply_remote_session(&self, record: Value, deleted: bool) {
        if deleted {
            let Some(id) = record.get("id").and_then(Value::as_str) else {
                return;
            };
            if self.registry.get(id).is_some() {
                self.registry.remove(id);
                self.publish(Event::SessionDeregistered {
                    session_id: id.to_string(),
                    reason: "deleted".into(),
                });
            }
            return;
        }
        let session = match serde_json::from_value::<Session>(record) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("a session from the server: {e}");
                return;
            }
        };
        if !session.is_managed() && session.ended_at.is_some() {
            let id = session.id.clone();
            let reason = session
                .state_reason
                .clone()
                .unwrap_or_else(|| "ended".into());
            if self.registry.get(&id).is_some() {
                self.registry.end(session);
                self.publish(Event::SessionDeregistered {
                    session_id: id,
                    reason,
                });
            }
            return;
        }
        let id = session.id.clone();
        let known = self.registry.update(session.clone());
        if !known {
            self.registry.insert(session);
        }
        if let Some(view) = self.registry.get(&id) {
            self.publish(if known {
                Event::SessionUpdated(view)
            } else {
                Event::SessionRegistered(view)
            });
        }
    }

    /// After the live queries were started again: read what may have been missed.
    async fn catch_up(&self, team: &Team, gap: bool) {
        if gap {
            match self.store.sessions().list().await {
                Ok(sessions) => self.registry.replace_foreign(sessions, &self.instance.id),
                Err(e) => tracing::warn!("cannot read the sessions again: {e}"),
            }
            self.publish(Event::Resync {
                missed: 0,
                reason: "the database's live queries were started again".into(),
            });
        }
        match self.store.commands().pending(&self.instance.id).await {
            Ok(commands) => {
                for command in commands {
                    self.start_command(team, command);
                }
            }
            Err(e) => tracing::warn!("cannot read the commands sent while away: {e}"),
        }
        let waiting: Vec<String> = lock(&team.waiters).keys().cloned().collect();
        for id in waiting {
            if let Ok(Some(command)) = self.store.commands().get(&id).await
                && command.done
                && let Some(waiter) = lock(&team.waiters).remove(&id)
            {
                let _ = waiter.send(command);
            }
        }
        match self.store.team().daemons().await {
            Ok(list) => {
                for d in list {
                    if d.id == self.instance.id {
                        continue;
                    }
                    let mut daemons = lock(&team.daemons);
                    match daemons.get_mut(&d.id) {
                        Some(k) => k.info = d,
                        None => {
                            let seen = Instant::now();
                            daemons.insert(d.id.clone(), Known { info: d, seen });
                        }
                    }
                }
                team.changed.notify_one();
            }
            Err(e) => tracing::warn!("cannot read the daemons: {e}"),
        }
    }
}

pub(super) async fn listen(ledger: Weak<Ledger>, team: Arc<Team>) {
    let mut gap = false;
    let mut attempt = 0usize;
    loop {
        let Some(strong) = ledger.upgrade() else {
            return;
        };
        let stream = strong.store.live().await;
        let mut stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!("cannot start the live queries: {e}");
                let health = strong.store.health();
                drop(strong);
                wait_for_server(health, attempt).await;
                attempt += 1;
                gap = true;
                continue;
            }
        };
        attempt = 0;
        strong.catch_up(&team, gap).await;
        drop(strong);
        let why = loop {
            match stream.next().await {
                Some(Ok(change)) => match ledger.upgrade() {
                    Some(ledger) => ledger.apply_remote(change),
                    None => return,
                },
                Some(Err(e)) => break e.to_string(),
                None => break "the live queries ended".to_string(),
            }
        };
        drop(stream);
        let Some(strong) = ledger.upgrade() else {
            return;
        };
        tracing::warn!("lost the database's live queries: {why}");
        strong.store.report_lost(why);
        gap = true;
        let health = strong.store.health();
        drop(strong);
        wait_for_server(health, 0).await;
    }
}

/// Waits for the server to answer again (and a moment between attempts).
async fn wait_for_server(
    health: Option<watch::Receiver<crate::protocol::StoreHealth>>,
    attempt: usize,
) {
    let wait = LIVE_BACKOFF[attempt.min(LIVE_BACKOFF.len() - 1)];
    tokio::time::sleep(Duration::from_millis(wait)).await;
    if let Some(mut health) = health {
        let _ = health.wait_for(|h| h.connected).await;
    }
}
