//! The `[[cron]]` jobs: what runs, and running one now.

use super::*;

impl Answer<m::CronList> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<CronJobs, ErrorObject> {
        let conversations = &self.conn.services.conversations;
        let services = &self.conn.services;
        Ok(CronJobs {
            jobs: conversations.cron_jobs(),
            hooks: crate::daemon::hooks_failing::listed(services.ledger.kiln()),
            settings_error: services.settings.error(),
        })
    }
}

impl Answer<m::CronRunNow> for Call<'_> {
    async fn answer(&self, p: CronRunParams) -> Result<CronRun, ErrorObject> {
        let conversations = &self.conn.services.conversations;
        conversations
            .run_cron_now(&p.id)
            .await
            .map_err(ErrorObject::from)
    }
}
