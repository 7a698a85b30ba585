//! A session's rules and the credentials it may be given.

use super::*;

pub(super) async fn security(
    call: &Call<'_>,
    p: SessionIdParams,
) -> Result<SecurityReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.security(&p.session_id).map_err(app_error)
}

pub(super) async fn rule(
    call: &Call<'_>,
    p: SessionRuleParams,
) -> Result<SecurityReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions
        .set_rule(&p.session_id, &p.rule, p.enabled)
        .await
        .map_err(app_error)
}

pub(super) async fn rules_list(call: &Call<'_>, p: RulesParams) -> Result<RulesReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.rules(p.session_id.as_deref()).map_err(app_error)
}

pub(super) async fn secret_get(
    call: &Call<'_>,
    p: SecretParams,
) -> Result<SecretReply, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let value = sessions
        .secret(&p.session_id, &p.name)
        .await
        .map_err(app_error)?;
    Ok(SecretReply {
        name: p.name,
        value,
    })
}
