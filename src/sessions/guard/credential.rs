//! The credentials an agent asks for (`secret.get`): their values come from a configured
//! command, a configured variable or the daemon's variable of that name, and are never
//! stored or logged.

use std::path::Path;
use std::time::Duration;

use crate::config::{Config, SecretSource};

const SECRET_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an agent does not get a credential.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("the credential {0} was not given")]
    NotGiven(String),
    #[error("the command for {0} did not finish in time")]
    TimedOut(String),
    #[error("cannot run the command for {name}: {source}")]
    CannotRun {
        name: String,
        source: std::io::Error,
    },
    #[error("the command for {name} failed ({status})")]
    Failed {
        name: String,
        status: std::process::ExitStatus,
    },
    #[error("the command for {0} printed no text")]
    NotText(String),
    #[error("{0} is not set in crucible's environment")]
    NotSet(String),
}

/// The value of a credential: its configured command's output, its configured variable,
/// or the daemon's variable of that name.
pub(crate) async fn resolve(settings: &Path, name: &str) -> Result<String, CredentialError> {
    let source = Config::load(settings)
        .ok()
        .and_then(|c| c.secrets.get(name).cloned());
    resolve_with(name, source.as_ref()).await
}

async fn resolve_with(
    name: &str,
    source: Option<&SecretSource>,
) -> Result<String, CredentialError> {
    if let Some(command) = source.and_then(|s| s.command.as_deref()) {
        let run = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(SECRET_TIMEOUT, run)
            .await
            .map_err(|_| CredentialError::TimedOut(name.into()))?
            .map_err(|source| CredentialError::CannotRun {
                name: name.into(),
                source,
            })?;
        if !out.status.success() {
            return Err(CredentialError::Failed {
                name: name.into(),
                status: out.status,
            });
        }
        let text =
            String::from_utf8(out.stdout).map_err(|_| CredentialError::NotText(name.into()))?;
        return Ok(text.trim_end_matches(['\n', '\r']).to_string());
    }
    let var = source.and_then(|s| s.env.as_deref()).unwrap_or(name);
    std::env::var(var).map_err(|_| CredentialError::NotSet(var.into()))
}
