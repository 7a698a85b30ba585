//! `cru session exec`, `cru session audit` and `cru session security`.

use std::process::ExitCode;

use crate::cli::output::{out, outln};
use crate::client::Client;
use crate::protocol::methods as m;
use crate::protocol::{ExecParams, Session, SessionIdParams};

/// Runs the command in the session's environment and passes on its output and exit
/// status.
pub(super) async fn exec(
    client: &Client,
    session: &Session,
    command: Vec<String>,
) -> anyhow::Result<ExitCode> {
    let result = client
        .call::<m::SessionExec>(&ExecParams {
            session_id: session.id.clone(),
            command,
            timeout_secs: None,
        })
        .await?;
    out!("{}", result.stdout);
    eprint!("{}", result.stderr);
    Ok(match result.exit_code {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::from(1),
    })
}

pub(super) async fn show(client: &Client, session_id: &str, json: bool) -> anyhow::Result<()> {
    let log = client
        .call::<m::SessionAudit>(&SessionIdParams {
            session_id: session_id.to_string(),
        })
        .await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&log.records)?);
        return Ok(());
    }
    if log.records.is_empty() {
        outln!("no audit records for {}", log.session_id);
    }
    for record in &log.records {
        outln!("{}", record.line());
    }
    Ok(())
}

pub(super) fn print_security(name: &str, security: &crate::protocol::SecurityState) {
    outln!("security of {name}");
    let list = |items: Vec<String>| {
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join("; ")
        }
    };
    outln!(
        "  activated rules:      {}",
        list(
            security
                .activated
                .iter()
                .map(|(r, by)| format!("{r} (by {by})"))
                .collect()
        )
    );
    outln!(
        "  disabled rules:       {}",
        list(security.disabled.clone())
    );
    outln!(
        "  approved operations:  {}",
        list(security.approved_operations.values().cloned().collect())
    );
    outln!(
        "  approved credentials: {}",
        list(security.approved_credentials.clone())
    );
}

/// `cru session security`: the rules' state for the session, in words or JSON.
pub(super) async fn security(client: &Client, s: &Session, json: bool) -> anyhow::Result<()> {
    let reply = client
        .call::<m::SessionSecurity>(&SessionIdParams {
            session_id: s.id.clone(),
        })
        .await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&reply)?);
    } else {
        print_security(&s.display_name, &reply.security);
    }
    Ok(())
}
