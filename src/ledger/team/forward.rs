//! Calls one daemon of the team leaves for another in the `commands` table: forwarded
//! for a session the other runs, or made of a named daemon (a move), and their answers.

use super::*;

impl Ledger {
    /// Runs a call on the daemon that runs `session`, and returns its answer: the
    /// result, or the JSON-RPC error code and message.
    pub async fn forward(
        &self,
        session: &Session,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, (i64, String)> {
        let conflict = |m: String| (crate::protocol::code::CONFLICT, m);
        let (Some(_), Some(owner)) = (self.team(), session.owner.clone()) else {
            return Err(conflict("this daemon runs the session itself".into()));
        };
        let what = format!("session {} runs on", session.id);
        self.forward_to(&owner, &what, method, params).await
    }

    /// Runs a call on the daemon `target` of the team (`what` leads its errors' words:
    /// `session 01J… runs on`),
    /// and returns its answer: the result, or the JSON-RPC error code and message.
    pub async fn forward_to(
        &self,
        target: &str,
        what: &str,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, (i64, String)> {
        let conflict = |m: String| (crate::protocol::code::CONFLICT, m);
        let Some(team) = self.team() else {
            return Err(conflict("this daemon is not in team mode".into()));
        };
        let owner = target.to_string();
        let known = lock(&team.daemons)
            .get(&owner)
            .map(|k| (k.info.clone(), k.seen.elapsed()));
        if let Some((d, quiet)) = &known
            && (d.taken_by.is_some() || *quiet > team.lease)
        {
            return Err(conflict(format!(
                "{what} the daemon on {} ({}), which has not renewed its lease \
                 for {}s; another daemon takes its sessions over",
                d.host,
                d.kiln,
                quiet.as_secs()
            )));
        }
        let known = known.map(|(d, _)| d);
        let id = self.next_id();
        let command = CommandRecord {
            id: id.clone(),
            target: owner.clone(),
            origin: self.instance.id.clone(),
            method: method.to_string(),
            params: params.to_string(),
            done: false,
            result: None,
            error_code: None,
            error: None,
        };
        let (tx, rx) = oneshot::channel();
        lock(&team.waiters).insert(id.clone(), tx);
        let store_error = |e: StoreError| (crate::protocol::code::STORE_ERROR, e.to_string());
        if let Err(e) = self.store.commands().insert(&command).await {
            lock(&team.waiters).remove(&id);
            return Err(store_error(e));
        }
        let answer = tokio::time::timeout(FORWARD_TIMEOUT, answer_or_lapse(team, &owner, rx)).await;
        lock(&team.waiters).remove(&id);
        let done = match answer {
            Ok(Ok(done)) => done,
            Ok(Err(Some(quiet))) => {
                let place = known.map_or_else(
                    || "its daemon".to_string(),
                    |d| format!("the daemon on {} ({})", d.host, d.kiln),
                );
                return Err(conflict(format!(
                    "{what} {place}, which stopped renewing its lease {}s ago without \
                     answering {method}",
                    quiet.as_secs()
                )));
            }
            _ => {
                let place = known.map_or_else(
                    || "its daemon".to_string(),
                    |d| format!("its daemon on {} ({})", d.host, d.kiln),
                );
                return Err((
                    crate::protocol::code::TIMED_OUT,
                    format!(
                        "{what} {place}, which did not answer {method} within {}s",
                        FORWARD_TIMEOUT.as_secs()
                    ),
                ));
            }
        };
        if let Err(e) = self.store.commands().delete(&id).await {
            tracing::debug!(command = %id, "cannot drop an answered command: {e}");
        }
        match (done.error_code, done.error, done.result) {
            (Some(code), Some(message), _) => Err((code, message)),
            (_, _, Some(text)) => serde_json::from_str(&text)
                .map_err(|e| (crate::protocol::code::STORE_ERROR, e.to_string())),
            _ => Ok(Value::Null),
        }
    }

    /// Records the answer to a command another daemon sent this one.
    pub async fn finish_command(
        &self,
        id: &str,
        outcome: std::result::Result<Value, (i64, String)>,
    ) -> Result<()> {
        self.store.commands().finish(id, outcome).await?;
        // Answered: no later notice can bring it back, so it need not be remembered.
        if let Some(team) = self.team() {
            lock(&team.started).remove(id);
        }
        Ok(())
    }
}

/// The answer to a forwarded command, or how long `target` has been quiet once it stopped
/// renewing its lease while it was awaited (`None`: the answer's channel closed).
async fn answer_or_lapse(
    team: &Team,
    target: &str,
    mut rx: oneshot::Receiver<CommandRecord>,
) -> std::result::Result<CommandRecord, Option<Duration>> {
    let every = (team.lease / 3).max(Duration::from_millis(100));
    loop {
        tokio::select! {
            answer = &mut rx => return answer.map_err(|_| None),
            () = tokio::time::sleep(every) => {
                let quiet = lock(&team.daemons).get(target).map(|k| k.seen.elapsed());
                if let Some(quiet) = quiet.filter(|q| *q > team.lease + CLAIM_SLACK) {
                    return Err(Some(quiet));
                }
            }
        }
    }
}
