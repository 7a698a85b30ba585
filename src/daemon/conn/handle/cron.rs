//! The `[[cron]]` jobs: what runs, and running one now.

use super::*;

pub(super) async fn list(call: &Call<'_>, _: NoParams) -> Result<CronJobs, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    let shared = &call.conn.shared;
    Ok(CronJobs {
        jobs: sessions.cron_jobs(),
        settings_error: shared.settings.error(),
    })
}

pub(super) async fn run(call: &Call<'_>, p: CronRunParams) -> Result<CronRun, ErrorObject> {
    let sessions = &call.conn.shared.sessions;
    sessions.run_cron_now(&p.id).await.map_err(app_error)
}
