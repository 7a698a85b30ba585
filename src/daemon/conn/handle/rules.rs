//! A session's rules and the credentials it may be given.

use super::*;

impl Answer<m::SessionSecurity> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<SecurityReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions.security(&p.session_id).map_err(app_error)
    }
}

impl Answer<m::SessionRule> for Call<'_> {
    async fn answer(&self, p: SessionRuleParams) -> Result<SecurityReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions
            .set_rule(&p.session_id, &p.rule, p.enabled)
            .await
            .map_err(app_error)
    }
}

impl Answer<m::RulesList> for Call<'_> {
    async fn answer(&self, p: RulesParams) -> Result<RulesReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        sessions.rules(p.session_id.as_deref()).map_err(app_error)
    }
}

impl Answer<m::SecretGet> for Call<'_> {
    async fn answer(&self, p: SecretParams) -> Result<SecretReply, ErrorObject> {
        let sessions = &self.conn.services.sessions;
        let value = sessions
            .secret(&p.session_id, &p.name)
            .await
            .map_err(app_error)?;
        Ok(SecretReply {
            name: p.name,
            value,
        })
    }
}
