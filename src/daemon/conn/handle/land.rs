//! Landing a session's work: its diff, a commit, a merge, a pull request, and where sessions overlap.

use super::*;

pub(super) async fn diff(call: &Call<'_>, p: DiffParams) -> Result<DiffReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions
        .diff(&p.session_id, p.context)
        .await
        .map_err(app_error)
}

pub(super) async fn commit(call: &Call<'_>, p: CommitParams) -> Result<CommitReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions
        .commit(&p.session_id, p.message)
        .await
        .map_err(app_error)
}

pub(super) async fn merge(call: &Call<'_>, p: MergeParams) -> Result<MergeReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.merge(p).await.map_err(app_error)
}

pub(super) async fn pr(call: &Call<'_>, p: PrParams) -> Result<PrReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.pr(p).await.map_err(app_error)
}

pub(super) async fn conflicts(call: &Call<'_>, _: NoParams) -> Result<ConflictReport, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    Ok(sessions.conflicts())
}
