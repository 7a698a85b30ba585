//! A session's context stack (`context.*`).

use super::*;

pub(super) async fn get(call: &Call<'_>, p: SessionIdParams) -> Result<ContextResult, ErrorObject> {
    apply_to(call, p.session_id, ContextCall::Get).await
}

pub(super) async fn pop(
    call: &Call<'_>,
    p: ContextPopParams,
) -> Result<ContextResult, ErrorObject> {
    apply_to(call, p.session_id, apply(ContextOp::Pop(p.n))).await
}

pub(super) async fn checkpoint(
    call: &Call<'_>,
    p: ContextNameParams,
) -> Result<ContextResult, ErrorObject> {
    apply_to(call, p.session_id, apply(ContextOp::Checkpoint(p.name))).await
}

pub(super) async fn rollback(
    call: &Call<'_>,
    p: ContextNameParams,
) -> Result<ContextResult, ErrorObject> {
    apply_to(call, p.session_id, apply(ContextOp::Rollback(p.name))).await
}

pub(super) async fn replace_top(
    call: &Call<'_>,
    p: ContextReplaceParams,
) -> Result<ContextResult, ErrorObject> {
    apply_to(call, p.session_id, apply(ContextOp::ReplaceTop(p.summary))).await
}

pub(super) async fn reset(
    call: &Call<'_>,
    p: SessionIdParams,
) -> Result<ContextResult, ErrorObject> {
    apply_to(call, p.session_id, apply(ContextOp::Reset)).await
}

pub(super) async fn summarize(
    call: &Call<'_>,
    p: ContextSummarizeParams,
) -> Result<ContextResult, ErrorObject> {
    apply_to(call, p.session_id, apply(ContextOp::Summarize(p.summary))).await
}
