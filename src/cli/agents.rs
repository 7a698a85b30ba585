//! `cru agents [--check] [--json]`: every agent profile, where it comes from (built-in or
//! settings), whether its program is found and its version; with `--check`, whether it
//! answers ACP `initialize` and what it says about signing in. Needs no daemon.
//!
//! Listing runs no settings profile's program: such a program may be a script that does
//! its work whatever its arguments say. A version is read from files where it can be (the
//! npm package the program belongs to), taken from the agent's own `initialize` answer
//! with `--check`, and asked with `--version` only of a built-in profile's program, one of
//! the well-known agents. Otherwise it is not known.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, FileSystemCapabilities, Implementation, InitializeRequest,
    InitializeResponse,
};
use clap::Args;
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::agent::AgentError;
use crate::cli::output::{self, outln};
use crate::config::{AgentKind, AgentProfile, ProfileEntry, ProfileSource};
use crate::kiln::Kiln;

/// How long a built-in agent's `--version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest `--check` waits for `initialize`, whatever the profile allows.
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Args)]
pub struct AgentsArgs {
    /// Start each agent found and ask it `initialize` (its name, version and how it
    /// signs in).
    #[arg(long)]
    check: bool,
    /// Print the agents (and, with --check, their answers) as JSON.
    #[arg(long)]
    json: bool,
}

/// One profile as listed.
#[derive(Debug, Serialize)]
struct Listed {
    name: String,
    source: ProfileSource,
    #[serde(rename = "type")]
    kind: &'static str,
    command: String,
    /// Where the program is; absent when not found.
    program: Option<String>,
    version: Option<String>,
    /// `--check` only: what `initialize` said, or why it failed.
    check: Option<Checked>,
}

#[derive(Debug, Serialize)]
struct Checked {
    ok: bool,
    /// The agent's own name and version, or the failure.
    says: String,
    /// Ways to sign in the agent offers (ACP `authMethods`).
    auth_methods: Vec<String>,
    /// The version the agent gave for itself (ACP `agentInfo`).
    #[serde(skip)]
    version: Option<String>,
}

pub async fn run(kiln: Kiln, args: AgentsArgs) -> anyhow::Result<ExitCode> {
    let config = super::load_config(&kiln)?;
    let mut listed = Vec::new();
    for entry in config.profiles() {
        listed.push(list(&entry, args.check).await);
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&listed)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut headers = vec!["NAME", "SOURCE", "TYPE", "PROGRAM", "VERSION"];
    if args.check {
        headers.push("CHECK");
    }
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|l| {
            let mut row = vec![
                l.name.clone(),
                l.source.as_str().to_string(),
                l.kind.to_string(),
                match (&l.program, l.kind) {
                    (_, "internal") => "—".to_string(),
                    (Some(path), _) => path.clone(),
                    (None, _) => format!("{}: not found", l.command),
                },
                l.version.clone().unwrap_or_else(|| "—".into()),
            ];
            if let Some(check) = &l.check {
                let mut text = check.says.clone();
                if !check.auth_methods.is_empty() {
                    text.push_str(&format!("; sign in: {}", check.auth_methods.join(", ")));
                }
                row.push(text);
            } else if args.check {
                row.push("—".into());
            }
            row
        })
        .collect();
    output::print_table(&headers, &rows);
    let usable = config.startable();
    match usable.as_slice() {
        [] => outln!(
            "\nno agent to start: install one of the built-in ones, or add [agents.<name>] to {}",
            kiln.settings_path().display()
        ),
        [only] => outln!("\n/new <task> in the workbench starts {only}"),
        many => outln!(
            "\n/new --agent <name> <task> starts one of: {}",
            many.join(", ")
        ),
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(entry: &ProfileEntry, check: bool) -> Listed {
    let profile = &entry.profile;
    let check = match (&entry.program, profile.kind) {
        (Some(program), AgentKind::Acp) if check => Some(initialize(program, profile).await),
        _ => None,
    };
    let version = match &entry.program {
        Some(program) => version(entry.source, program, check.as_ref()).await,
        None => None,
    };
    Listed {
        name: entry.name.clone(),
        source: entry.source,
        kind: profile.kind.as_str(),
        command: profile.command.clone(),
        program: entry.program.as_ref().map(|p| p.display().to_string()),
        version,
        check,
    }
}

/// The program's version, read without running it where that can be done: what the agent
/// said of itself when checked, else its npm package's. Only a built-in profile's program
/// is run with `--version`.
async fn version(
    source: ProfileSource,
    program: &Path,
    checked: Option<&Checked>,
) -> Option<String> {
    if let Some(version) = checked.and_then(|c| c.version.clone()) {
        return Some(version);
    }
    if let Some(version) = npm_version(program) {
        return Some(version);
    }
    match source {
        ProfileSource::BuiltIn => asked_version(program).await,
        ProfileSource::Settings => None,
    }
}

/// The `version` in the `package.json` of the npm package `program` belongs to: the
/// program's links resolved, the package is the folder right inside a `node_modules`
/// (or inside a `node_modules/@scope`) that holds it. Reads files only.
fn npm_version(program: &Path) -> Option<String> {
    let real = std::fs::canonicalize(program).ok()?;
    let is_modules = |dir: &Path| dir.file_name().is_some_and(|n| n == "node_modules");
    let mut dir = real.parent()?;
    loop {
        let parent = dir.parent()?;
        let scoped = parent
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('@'))
            && parent.parent().is_some_and(is_modules);
        if is_modules(parent) || scoped {
            let text = std::fs::read(dir.join("package.json")).ok()?;
            let manifest: serde_json::Value = serde_json::from_slice(&text).ok()?;
            let version = manifest.get("version")?.as_str()?.trim();
            return (!version.is_empty()).then(|| output::clip(version, 60));
        }
        dir = parent;
    }
}

/// The first line `program --version` prints, if it prints one in time.
async fn asked_version(program: &Path) -> Option<String> {
    let mut command = Command::new(program);
    command
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let child = command.spawn().ok()?;
    let _group = child.id().map(Group);
    let run = child.wait_with_output();
    let output = tokio::time::timeout(VERSION_TIMEOUT, run)
        .await
        .ok()?
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    // An agent that ignores `--version` and speaks ACP prints JSON, not a version.
    (!line.starts_with('{')).then(|| output::clip(line, 60))
}

/// A checked program's process group, killed whole when the check is done: an npm agent
/// is a wrapper that starts the real program, which would outlive a kill of the wrapper.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        crate::sys::signal_group(self.0, libc::SIGKILL);
    }
}

/// Starts the agent, sends ACP `initialize` and reads its answer.
async fn initialize(program: &Path, profile: &AgentProfile) -> Checked {
    let failed = |says: String| Checked {
        ok: false,
        says,
        auth_methods: Vec::new(),
        version: None,
    };
    let limit = Duration::from_secs(profile.startup_timeout_secs).min(CHECK_TIMEOUT);
    match tokio::time::timeout(limit, ask_initialize(program, profile)).await {
        Err(_) => failed(format!("no answer to initialize in {}s", limit.as_secs())),
        Ok(Err(why)) => failed(why.to_string()),
        Ok(Ok(reply)) => {
            let says = match &reply.agent_info {
                Some(info) => format!("ok: {} {}", info.name, info.version),
                None => "ok".to_string(),
            };
            Checked {
                ok: true,
                says,
                auth_methods: reply
                    .auth_methods
                    .iter()
                    .map(|m| m.name().to_string())
                    .collect(),
                version: reply
                    .agent_info
                    .as_ref()
                    .map(|info| info.version.trim())
                    .filter(|v| !v.is_empty())
                    .map(|v| output::clip(v, 60)),
            }
        }
    }
}

async fn ask_initialize(
    program: &Path,
    profile: &AgentProfile,
) -> Result<InitializeResponse, AgentError> {
    let mut child = Command::new(program)
        .args(&profile.args)
        .envs(&profile.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| AgentError::Start(format!("cannot start: {e}")))?;
    let _group = child.id().map(Group);
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(AgentError::Start("cannot talk to it".into()));
    };
    let params = InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(
            ClientCapabilities::new()
                .fs(FileSystemCapabilities::new()
                    .read_text_file(true)
                    .write_text_file(true))
                .terminal(true),
        )
        .client_info(Implementation::new("crucible", env!("CARGO_PKG_VERSION")));
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params,
    });
    let mut line = serde_json::to_vec(&request).map_err(|e| AgentError::Protocol(e.to_string()))?;
    line.push(b'\n');
    stdin
        .write_all(&line)
        .await
        .map_err(|e| AgentError::Io(format!("cannot send initialize: {e}")))?;
    let mut lines = BufReader::new(stdout).lines();
    while let Some(line) = lines
        .next_line()
        .await
        .map_err(|e| AgentError::Io(e.to_string()))?
    {
        let Ok(reply) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if reply.get("id") != Some(&serde_json::json!(1)) {
            continue;
        }
        if let Some(error) = reply.get("error") {
            return Err(AgentError::Protocol(format!("initialize refused: {error}")));
        }
        let result = reply.get("result").cloned().unwrap_or_default();
        return serde_json::from_value(result)
            .map_err(|e| AgentError::Protocol(format!("an answer that is not ACP: {e}")));
    }
    let _ = child.kill().await;
    Err(AgentError::Protocol(
        "it ended without answering initialize".into(),
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn an_npm_agents_version_is_read_from_its_package_through_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("node_modules");
        for package in ["pkg", "@scope/tool"] {
            std::fs::create_dir_all(modules.join(package).join("bin")).unwrap();
        }
        std::fs::create_dir_all(modules.join(".bin")).unwrap();
        std::fs::write(modules.join("pkg/package.json"), r#"{"version":"1.2.3"}"#).unwrap();
        std::fs::write(
            modules.join("@scope/tool/package.json"),
            r#"{"name":"@scope/tool","version":"0.16.0"}"#,
        )
        .unwrap();
        std::fs::write(modules.join("pkg/bin/x.js"), "").unwrap();
        std::fs::write(modules.join("@scope/tool/bin/tool.js"), "").unwrap();
        symlink("../pkg/bin/x.js", modules.join(".bin/x")).unwrap();
        symlink("../@scope/tool/bin/tool.js", modules.join(".bin/tool")).unwrap();
        assert_eq!(
            npm_version(&modules.join(".bin/x")).as_deref(),
            Some("1.2.3")
        );
        assert_eq!(
            npm_version(&modules.join(".bin/tool")).as_deref(),
            Some("0.16.0")
        );

        // A script in a project with a package.json of its own belongs to no package.
        std::fs::write(dir.path().join("package.json"), r#"{"version":"9.9.9"}"#).unwrap();
        std::fs::write(dir.path().join("agent.sh"), "").unwrap();
        assert_eq!(npm_version(&dir.path().join("agent.sh")), None);
        assert_eq!(npm_version(&dir.path().join("missing")), None);
    }
}
