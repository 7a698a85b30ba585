//! `cru session exec` and `cru session audit`: a command run in a session's environment
//! (its driver's: the sandbox with the same mounts and limits), and the session's audit
//! log. Every command run this way is in the audit log with its exit code.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::{Landing, LandingError, Result};
use crate::audit::{Audit, AuditEvent};
use crate::driver::{self, Environment};
use crate::protocol::{AuditLog, ExecParams, ExecResult, env};
use crate::sessions::{context, given};

/// The most of each of stdout and stderr kept.
const MAX_OUTPUT: usize = 64 * 1024;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

impl Landing {
    /// The environment the session's agent runs in, or a new one made the same way when
    /// the agent is not running.
    async fn environment(&self, id: &str) -> Result<Arc<Environment>> {
        if let Some(environment) = self.runner.environment(id) {
            return Ok(environment);
        }
        let session = self.managed(id)?;
        let cwd = PathBuf::from(context::folder(&self.ledger, &session));
        let spec = session.driver.clone().unwrap_or_default();
        let given = self.runner.given(id);
        let (passed, _) = given::values(spec.env(), given.as_deref());
        let environment = Environment::provision(
            &spec,
            driver::Setup {
                kiln: self.ledger.kiln(),
                session_id: id,
                cwd: &cwd,
                program: None,
                passed,
                path: given.as_ref().and_then(|g| g.path.as_deref()),
            },
        )
        .await?;
        Ok(Arc::new(environment))
    }

    pub async fn exec(&self, params: ExecParams) -> Result<ExecResult> {
        let id = params.session_id.as_str();
        let session = self.managed(id)?;
        let Some((program, args)) = params.command.split_first() else {
            return Err(LandingError::NoCommand);
        };
        let environment = self.environment(id).await?;
        let cwd = PathBuf::from(context::folder(&self.ledger, &session));
        // The session's id, never its handle: a debugging command is not the agent.
        let vars = [(env::SESSION.to_string(), id.to_string())];
        let mut command = environment.command(std::path::Path::new(program), args, &vars, &cwd)?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = crate::sys::user_umask(&mut command)
            .spawn()
            .map_err(|source| LandingError::NotRun {
                program: program.clone(),
                source,
            })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let timeout = params
            .timeout_secs
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        let run = async {
            let (out, err) = tokio::join!(read_capped(stdout), read_capped(stderr));
            (out, err, child.wait().await)
        };
        let (stdout, stderr, status) = match tokio::time::timeout(timeout, run).await {
            Ok((out, err, status)) => (out, err, status.ok()),
            Err(_) => (
                String::new(),
                format!("killed after {}s", timeout.as_secs()),
                None,
            ),
        };
        let exit_code = status.and_then(|s| s.code());
        Audit::new(self.ledger.kiln()).record(
            id,
            AuditEvent::Command {
                command: params.command.clone(),
                exit_code,
            },
        );
        Ok(ExecResult {
            exit_code,
            stdout,
            stderr,
        })
    }

    /// The audit log of a session, running, ended or deleted.
    pub fn audit_log(&self, id: &str) -> Result<AuditLog> {
        let audit = Audit::new(self.ledger.kiln());
        let records = audit.read(id).map_err(LandingError::AuditUnread)?;
        if records.is_empty() && self.ledger.get_session(id).is_err() {
            return Err(LandingError::NoAuditLog { id: id.to_string() });
        }
        Ok(AuditLog {
            session_id: id.to_string(),
            records,
        })
    }
}

async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_OUTPUT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    crate::text::cap(String::from_utf8_lossy(&kept).into_owned(), MAX_OUTPUT)
}
