//! What the process that asked for a session gave of its environment ([`ClientEnv`]):
//! its `PATH` and the values of the variables the session passes. Held in the daemon's
//! memory, by session, for every start of its agent (the first, a restart, making a
//! parked environment again); never stored, logged or audited, and gone with the
//! daemon. From it come the values of the session's `env` names and where its program
//! is looked for; what it lacks comes from the daemon's environment, and what neither
//! has is said, naming both.

use std::ffi::OsStr;
use std::path::PathBuf;

use super::wording;
use crate::config::{AgentKind, AgentProfile, Config, ProfileError};
use crate::ledger::LedgerError;
use crate::protocol::{ClientEnv, DriverKind, DriverOptions, DriverSpec};

/// The values found for `names` (the asking process's, else the daemon's), and the
/// names found in neither.
pub(super) fn values(
    names: &[String],
    given: Option<&ClientEnv>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        let value = given
            .and_then(|g| g.var(name).map(str::to_string))
            .or_else(|| std::env::var(name).ok());
        match value {
            Some(value) => found.push((name.clone(), value)),
            None => missing.push(name.clone()),
        }
    }
    (found, missing)
}

/// Refuses a new session whose variables neither the asking process nor the daemon
/// has, naming each as it was asked for (`asked`: the session's own options).
pub(super) fn check_env(
    spec: &DriverSpec,
    asked: &DriverOptions,
    given: Option<&ClientEnv>,
) -> Result<(), LedgerError> {
    let (_, missing) = values(spec.env(), given);
    if missing.is_empty() {
        return Ok(());
    }
    let words: Vec<String> = missing
        .iter()
        .map(|name| wording::env_asked(name, asked.env.contains(name), spec.kind().as_str()))
        .collect();
    Err(LedgerError::Invalid(wording::env_missing(&words, given)))
}

/// The internal agent's API key (`api_key_env`), as the asking process gave it.
pub(super) fn api_key(profile: &AgentProfile, given: Option<&ClientEnv>) -> Option<String> {
    let name = profile.api_key_env.as_deref()?;
    given.and_then(|g| g.var(name)).map(str::to_string)
}

/// Refuses a new session of an internal profile whose `api_key_env` neither the asking
/// process nor the daemon has.
pub(super) fn check_api_key(
    profile_name: &str,
    profile: &AgentProfile,
    given: Option<&ClientEnv>,
) -> Result<(), LedgerError> {
    let internal = profile.kind == AgentKind::Internal;
    let Some(name) = profile.api_key_env.as_deref().filter(|_| internal) else {
        return Ok(());
    };
    let (_, missing) = values(&[name.to_string()], given);
    if missing.is_empty() {
        return Ok(());
    }
    Err(LedgerError::Invalid(wording::env_missing(
        &[format!("`{name}` (api_key_env of [agents.{profile_name}])")],
        given,
    )))
}

/// Where a program is: on the asking process's `PATH`, else on the daemon's.
fn find(program: &str, given: Option<&ClientEnv>) -> Option<PathBuf> {
    given
        .and_then(|g| g.path.as_deref())
        .filter(|path| !path.is_empty())
        .and_then(|path| crate::sys::on_path_in(program, OsStr::new(path)))
        .or_else(|| crate::sys::on_path(program))
}

/// Where programs were looked for, for messages.
fn looked(given: Option<&ClientEnv>) -> String {
    let daemon = std::env::var("PATH").unwrap_or_default();
    wording::looked(given, &daemon)
}

/// The profile called `name`, a built-in one's program looked for with [`find`].
pub(super) fn profile(
    config: &Config,
    name: &str,
    given: Option<&ClientEnv>,
) -> Result<AgentProfile, ProfileError> {
    config.profile_found(name, &|program| find(program, given), &looked(given))
}

/// `profile` with its program where it was found, when it runs on this machine (the
/// local and sandbox drivers) and is named without a `/`: the asking process's `PATH`
/// first, else the daemon's. On another machine its own `PATH` decides.
pub(super) fn locate(
    name: &str,
    mut profile: AgentProfile,
    kind: DriverKind,
    given: Option<&ClientEnv>,
) -> Result<AgentProfile, LedgerError> {
    let here = !kind.runs_apart();
    let bare = !profile.command.is_empty() && !profile.command.contains('/');
    if profile.kind == AgentKind::Internal || !here || !bare {
        return Ok(profile);
    }
    match find(&profile.command, given) {
        Some(found) => {
            profile.command = found.display().to_string();
            Ok(profile)
        }
        None => Err(LedgerError::Invalid(wording::program_missing(
            &profile.command,
            name,
            &looked(given),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(path: &str, vars: &[(&str, &str)]) -> ClientEnv {
        ClientEnv {
            by: Some("cru session new".into()),
            path: Some(path.into()),
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn sandbox(env: &[&str]) -> DriverSpec {
        DriverSpec::Sandbox(crate::protocol::Confinement {
            env: env.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        })
    }

    #[test]
    fn values_come_from_the_asker_then_the_daemon() {
        // PATH is in the daemon's environment; the other name is nowhere.
        let shell = given("/bin", &[("ONLY_IN_SHELL", "s"), ("PATH", "/shell")]);
        let names = ["ONLY_IN_SHELL", "PATH", "CRU_TEST_NOWHERE_AT_ALL"].map(String::from);
        let (found, missing) = values(&names, Some(&shell));
        assert_eq!(
            found,
            [
                ("ONLY_IN_SHELL".to_string(), "s".to_string()),
                ("PATH".into(), "/shell".into())
            ]
        );
        assert_eq!(missing, ["CRU_TEST_NOWHERE_AT_ALL"]);
        let (found, missing) = values(&names[..2], None);
        assert_eq!(found.len(), 1, "after a restart only the daemon's are left");
        assert_eq!(missing, ["ONLY_IN_SHELL"]);
    }

    #[test]
    fn a_missing_variable_is_named_as_asked_and_where_it_was_looked_for() {
        let asked = DriverOptions {
            env: vec!["CRU_TEST_NOWHERE_A".into()],
            ..Default::default()
        };
        let spec = sandbox(&["CRU_TEST_NOWHERE_B", "CRU_TEST_NOWHERE_A"]);
        let err = check_env(&spec, &asked, Some(&given("/bin", &[])))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "`CRU_TEST_NOWHERE_B` (env of [drivers.sandbox]), `--env CRU_TEST_NOWHERE_A`: \
             not set in this shell (the one running `cru session new`), nor in the daemon's \
             environment: export them and try again"
        );
        let err = check_env(&sandbox(&["CRU_TEST_NOWHERE_A"]), &asked, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sent no environment"), "{err}");
        let shell = given("/bin", &[("CRU_TEST_NOWHERE_A", "v")]);
        assert!(check_env(&sandbox(&["CRU_TEST_NOWHERE_A"]), &asked, Some(&shell)).is_ok());
    }

    #[test]
    fn an_internal_agents_key_comes_from_the_asker_then_the_daemon() {
        let mut profile = AgentProfile::acp("", &[]);
        profile.kind = AgentKind::Internal;
        profile.api_key_env = Some("CRU_TEST_NOWHERE_KEY".into());
        let shell = given("/bin", &[("CRU_TEST_NOWHERE_KEY", "k")]);
        assert_eq!(api_key(&profile, Some(&shell)).as_deref(), Some("k"));
        assert!(check_api_key("local", &profile, Some(&shell)).is_ok());
        let err = check_api_key("local", &profile, Some(&given("/bin", &[])))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "`CRU_TEST_NOWHERE_KEY` (api_key_env of [agents.local]): not set in this shell"
            ),
            "{err}"
        );
        assert_eq!(api_key(&profile, None), None);
    }

    #[test]
    fn programs_are_found_on_the_askers_path_first() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("cru-test-agent-only-here");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let shell = given(&dir.path().display().to_string(), &[]);
        let profile = AgentProfile::acp("cru-test-agent-only-here", &[]);
        let found = locate("mine", profile.clone(), DriverKind::Local, Some(&shell)).unwrap();
        assert_eq!(found.command, program.display().to_string());
        let ssh = locate("mine", profile.clone(), DriverKind::Ssh, None).unwrap();
        assert_eq!(
            ssh.command, "cru-test-agent-only-here",
            "the remote's PATH decides"
        );
        let err = locate("mine", profile, DriverKind::Local, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cru-test-agent-only-here is not on PATH of the daemon (PATH="),
            "{err}"
        );
        assert!(
            err.ends_with("install it or set `command` in [agents.mine]"),
            "{err}"
        );
        let elsewhere = given("/nowhere", &[]);
        assert_eq!(
            wording::looked(Some(&elsewhere), "/usr/bin"),
            " in this shell (the one running `cru session new`, PATH=/nowhere) nor the daemon's (PATH=/usr/bin)"
        );
        assert_eq!(
            wording::looked(Some(&given("/usr/bin", &[])), "/usr/bin"),
            " in this shell (the one running `cru session new`) nor the daemon's (PATH=/usr/bin)"
        );
    }
}
