//! Landing a session's work: its diff, a commit, a merge, a pull request, and where sessions overlap.

use super::*;

impl Answer<m::SessionDiff> for Call<'_> {
    async fn answer(&self, p: DiffParams) -> Result<DiffReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions
            .diff(&p.session_id, p.context)
            .await
            .map_err(app_error)
    }
}

impl Answer<m::SessionCommit> for Call<'_> {
    async fn answer(&self, p: CommitParams) -> Result<CommitReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions
            .commit(&p.session_id, p.message)
            .await
            .map_err(app_error)
    }
}

impl Answer<m::SessionMerge> for Call<'_> {
    async fn answer(&self, p: MergeParams) -> Result<MergeReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions.merge(p).await.map_err(app_error)
    }
}

impl Answer<m::SessionPr> for Call<'_> {
    async fn answer(&self, p: PrParams) -> Result<PrReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions.pr(p).await.map_err(app_error)
    }
}

impl Answer<m::SessionConflicts> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<ConflictReport, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        Ok(sessions.conflicts())
    }
}
