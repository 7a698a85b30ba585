//! A session's context stack (`context.apply`, and the `context.<op>` names it is also
//! called by).

use super::*;

pub(super) async fn apply(
    call: &Call<'_>,
    p: ContextApplyParams,
) -> Result<ContextResult, ErrorObject> {
    call.conn
        .shared
        .sessions
        .context_call(&p.session_id, p.op)
        .await
        .map_err(app_error)
}
