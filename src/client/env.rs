//! What a client sends of its own environment with `session.create`: its `PATH` and the
//! values of the variables the session will pass its agent (`--env` names, those of
//! `[drivers.<name>] env` in the kiln's settings, and an internal profile's
//! `api_key_env`). The daemon may have been started by
//! another shell long ago; this is how the shell that asks for a session decides what
//! its agent gets. Every caller of `session.create` through [`super::Client`] sends it.

use std::path::Path;

use serde_json::Value;

use crate::config::{AgentKind, AgentProfile, Config};
use crate::kiln::Kiln;
use crate::protocol::DriverOptions;
use crate::protocol::client_env::{self, ClientEnv};

/// Adds this process's [`ClientEnv`] to `session.create` params (an object) that carry
/// none, for a daemon of the kiln at `kiln`.
pub(super) fn attach(params: &mut Value, kiln: &str) {
    let Value::Object(fields) = params else {
        return;
    };
    if fields.contains_key(client_env::FIELD) {
        return;
    }
    // Through the hub, the kiln the session is asked of is named in the params.
    let named = fields
        .get("kiln")
        .and_then(Value::as_str)
        .and_then(|which| crate::kilns::Registry::for_user().ok()?.find(which).ok())
        .map(|entry| entry.path);
    let kiln = named.as_deref().unwrap_or(Path::new(kiln));
    let names = asked_names(fields, kiln);
    let env = from_process(&names);
    if let Ok(value) = serde_json::to_value(env) {
        fields.insert(client_env::FIELD.into(), value);
    }
}

/// The variables the session will pass: its own `driver.env`, over what the settings
/// add for its driver.
fn asked_names(fields: &serde_json::Map<String, Value>, kiln: &Path) -> Vec<String> {
    let asked: DriverOptions = fields
        .get("driver")
        .cloned()
        .and_then(|d| serde_json::from_value(d).ok())
        .unwrap_or_default();
    let agent = fields.get("agent").and_then(Value::as_str).unwrap_or("");
    let mut names = asked.env.clone();
    if let Ok(config) = Config::load(&Kiln::new(kiln).settings_path()) {
        let profile = config.agents.get(agent).cloned().unwrap_or_else(|| {
            // A built-in profile (or a name the daemon will refuse): no driver of its own.
            AgentProfile::acp("", &[])
        });
        let kind = asked.driver.or(profile.driver).unwrap_or_default();
        if kind.passes_env()
            && let Ok(spec) = config.driver_spec(&profile, &asked)
        {
            names = spec.env().to_vec();
        }
        // Crucible's own agent reads its API key in the daemon.
        if profile.kind == AgentKind::Internal
            && let Some(key) = profile.api_key_env
            && !names.contains(&key)
        {
            names.push(key);
        }
    }
    names.retain(|n| client_env::is_name(n));
    names
}

/// This process's `PATH` and the values of those of `names` it has.
fn from_process(names: &[String]) -> ClientEnv {
    ClientEnv {
        by: Some(requester(
            std::env::args_os().map(|a| a.to_string_lossy().into_owned()),
        )),
        path: std::env::var("PATH").ok(),
        vars: names
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
            .collect(),
    }
}

/// The command as people typed it, up to its subcommand: `cru session new`, or `cru`
/// for the workbench.
fn requester(mut args: impl Iterator<Item = String>) -> String {
    let program = args
        .next()
        .map(|a| {
            Path::new(&a)
                .file_name()
                .map_or(a.clone(), |n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "cru".into());
    let mut words = vec![program];
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if arg == "--kiln" {
            skip_value = true;
            continue;
        }
        if arg.starts_with('-') {
            // Options come after the subcommand: the words so far are all of it.
            if words.len() > 1 {
                break;
            }
            continue;
        }
        words.push(arg);
        if words.len() == 3 {
            break;
        }
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> impl Iterator<Item = String> {
        line.split(' ')
            .map(str::to_string)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn the_requester_is_the_command_up_to_its_subcommand() {
        assert_eq!(
            requester(args("/usr/local/bin/cru session new --agent codex")),
            "cru session new"
        );
        assert_eq!(
            requester(args("cru --kiln /tmp/k session new --env A")),
            "cru session new"
        );
        assert_eq!(requester(args("cru")), "cru");
        assert_eq!(requester(args("cru --embedded")), "cru");
        assert_eq!(requester(std::iter::empty()), "cru");
    }

    #[test]
    fn the_names_are_the_sessions_and_its_drivers_settings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".crucible.toml"),
            "[drivers.sandbox]\nenv = [\"FROM_SETTINGS\"]\n\
             [agents.boxed]\ntype = \"command\"\ncommand = \"sh\"\ndriver = \"sandbox\"\n\
             [agents.own]\ntype = \"internal\"\napi_key_env = \"OWN_KEY\"\n\
             base_url = \"http://localhost:1/v1\"\nmodel = \"m\"\n",
        )
        .unwrap();
        let params = |json: Value| json.as_object().cloned().unwrap();
        let names = asked_names(
            &params(serde_json::json!({"agent": "boxed", "driver": {"env": ["ASKED"]}})),
            dir.path(),
        );
        assert_eq!(names, ["FROM_SETTINGS", "ASKED"]);
        let names = asked_names(
            &params(
                serde_json::json!({"agent": "other", "driver": {"driver": "ssh", "env": ["X", "A=b"]}}),
            ),
            dir.path(),
        );
        assert_eq!(names, ["X"], "names only, and not the sandbox's");
        let own = asked_names(&params(serde_json::json!({"agent": "own"})), dir.path());
        assert_eq!(own, ["OWN_KEY"]);
        let local = asked_names(&params(serde_json::json!({"agent": "x"})), dir.path());
        assert!(local.is_empty(), "{local:?}");
    }

    #[test]
    fn attach_adds_path_and_the_values_it_has_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut params = serde_json::json!({"agent": "a", "driver": {"driver": "sandbox", "env": ["PATH", "CRU_NO_SUCH_VARIABLE_ANYWHERE"]}});
        attach(&mut params, &dir.path().display().to_string());
        let sent: ClientEnv = serde_json::from_value(params[client_env::FIELD].clone()).unwrap();
        assert_eq!(sent.path, std::env::var("PATH").ok());
        assert_eq!(
            sent.vars.keys().collect::<Vec<_>>(),
            ["PATH"],
            "a missing name is left out"
        );
        let mut given = serde_json::json!({"agent": "a", "client_env": {"by": "me"}});
        attach(&mut given, &dir.path().display().to_string());
        assert_eq!(given["client_env"], serde_json::json!({"by": "me"}));
    }
}
