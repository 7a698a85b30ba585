//! A session's rules and the credentials it may be given.

use super::*;

impl Answer<m::SessionSecurity> for Call<'_> {
    async fn answer(&self, p: SessionIdParams) -> Result<SecurityReply, ErrorObject> {
        Ok(self.conn.services.guard.security(&p.session_id)?)
    }
}

impl Answer<m::SessionRule> for Call<'_> {
    async fn answer(&self, p: SessionRuleParams) -> Result<SecurityReply, ErrorObject> {
        let guard = &self.conn.services.guard;
        Ok(guard.set_rule(&p.session_id, &p.rule, p.enabled).await?)
    }
}

impl Answer<m::RulesList> for Call<'_> {
    async fn answer(&self, p: RulesParams) -> Result<RulesReply, ErrorObject> {
        Ok(self.conn.services.guard.rules(p.session_id.as_deref())?)
    }
}

impl Answer<m::SecretGet> for Call<'_> {
    async fn answer(&self, p: SecretParams) -> Result<SecretReply, ErrorObject> {
        let guard = &self.conn.services.guard;
        let value = guard.secret(&p.session_id, &p.name).await?;
        Ok(SecretReply {
            name: p.name,
            value,
        })
    }
}
