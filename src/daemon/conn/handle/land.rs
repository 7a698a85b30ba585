//! Landing a session's work: its diff, a commit, a merge, a pull request, and where sessions overlap.

use super::*;

impl Answer<m::SessionDiff> for Call<'_> {
    async fn answer(&self, p: DiffParams) -> Result<DiffReply, ErrorObject> {
        let landing = &self.conn.services.landing;
        Ok(landing.diff(&p.session_id, p.context).await?)
    }
}

impl Answer<m::SessionCommit> for Call<'_> {
    async fn answer(&self, p: CommitParams) -> Result<CommitReply, ErrorObject> {
        let landing = &self.conn.services.landing;
        Ok(landing.commit(&p.session_id, p.message).await?)
    }
}

impl Answer<m::SessionMerge> for Call<'_> {
    async fn answer(&self, p: MergeParams) -> Result<MergeReply, ErrorObject> {
        Ok(self.conn.services.landing.merge(p).await?)
    }
}

impl Answer<m::SessionPr> for Call<'_> {
    async fn answer(&self, p: PrParams) -> Result<PrReply, ErrorObject> {
        Ok(self.conn.services.landing.pr(p).await?)
    }
}

impl Answer<m::SessionConflicts> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<ConflictReport, ErrorObject> {
        Ok(self.conn.services.landing.conflicts())
    }
}
