//! A session's context stack (`context.apply`, and the `context.<op>` names it is also
//! called by).

use super::*;

impl Answer<m::ContextApply> for Call<'_> {
    async fn answer(&self, p: ContextApplyParams) -> Result<ContextResult, ErrorObject> {
        self.conn
            .services
            .sessions
            .context_call(&p.session_id, p.op)
            .await
            .map_err(ErrorObject::from)
    }
}

impl Answer<m::ContextGet> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<ContextResult, ErrorObject> {
        Answer::<m::ContextApply>::answer(self, ContextApplyParams::get(p)).await
    }
}

impl Answer<m::ContextPop> for Call<'_> {
    async fn answer(&self, p: ContextPopParams) -> Result<ContextResult, ErrorObject> {
        Answer::<m::ContextApply>::answer(self, p.into()).await
    }
}

impl Answer<m::ContextCheckpoint> for Call<'_> {
    async fn answer(&self, p: ContextNameParams) -> Result<ContextResult, ErrorObject> {
        Answer::<m::ContextApply>::answer(self, ContextApplyParams::checkpoint(p)).await
    }
}

impl Answer<m::ContextRollback> for Call<'_> {
    async fn answer(&self, p: ContextNameParams) -> Result<ContextResult, ErrorObject> {
        Answer::<m::ContextApply>::answer(self, ContextApplyParams::rollback(p)).await
    }
}

impl Answer<m::ContextReplaceTop> for Call<'_> {
    async fn answer(&self, p: ContextReplaceParams) -> Result<ContextResult, ErrorObject> {
        Answer::<m::ContextApply>::answer(self, p.into()).await
    }
}

impl Answer<m::ContextReset> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<ContextResult, ErrorObject> {
        Answer::<m::ContextApply>::answer(self, ContextApplyParams::reset(p)).await
    }
}

impl Answer<m::ContextSummarize> for Call<'_> {
    async fn answer(&self, p: ContextSummarizeParams) -> Result<ContextResult, ErrorObject> {
        Answer::<m::ContextApply>::answer(self, p.into()).await
    }
}
