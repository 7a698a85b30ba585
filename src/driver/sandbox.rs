//! The `sandbox` driver: bubblewrap (`bwrap`) with default deny. Only what is named
//! below exists inside: the system directories programs need (read-only), the parts of
//! `/etc` for names and certificates, the agent's program, the session's worktree and
//! the repository's git folder (its hooks and config read-only: they run on the host),
//! the user's `--mount`s, a private `$HOME` and `/tmp`, and the agent socket. Every
//! namespace is new; the network is the host's only when asked. The environment is the
//! one the driver gives the `bwrap` process (never an argument: other users can read a
//! process's arguments).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use std::ffi::OsStr;

use tokio::process::Command;

use super::error::DriverError;
use super::limits::Limits;
use super::path;
use super::place::{Place, Setup, Start};
use crate::protocol::Confinement;
use bwrap::system_folders;
pub use bwrap::{BIN_INSIDE, Layout, SOCKET_INSIDE, arguments};

mod bwrap;

/// The variables a sandboxed program keeps from the daemon's environment.
const KEPT: &[&str] = &["PATH", "TERM", "LANG", "LC_ALL", "TZ"];

/// What a program needs of its install to run: the top-most `node_modules` above its
/// real path (an npm package loads its own files and its dependencies from there), else
/// its own folder; and the same for the interpreter of a script (`#!/usr/bin/env node`
/// finds `node` on the PATH, which may be under `$HOME`, as nvm puts it).
/// `path` is where the interpreter is looked for (see [`super::path::search`]).
pub fn install_folders(program: &Path, path: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let folder = |real: &Path| -> Option<PathBuf> {
        real.ancestors()
            .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
            .last()
            .or_else(|| real.parent())
            .map(Path::to_path_buf)
    };
    let mut folders: Vec<PathBuf> = folder(program).into_iter().collect();
    if let Some(interpreter) = interpreter(program)
        && let Some(real) = super::path::resolve_in(&interpreter, path)
        && let Some(found) = folder(&real)
        && !folders.contains(&found)
    {
        folders.push(found);
    }
    folders
}

/// The interpreter a script names on its `#!` line (through `env`).
fn interpreter(program: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = std::str::from_utf8(head.get(..n)?).ok()?.lines().next()?;
    let mut words = line.strip_prefix("#!")?.split_whitespace();
    let first = words.next()?;
    if first.ends_with("/env") {
        words.find(|w| !w.starts_with('-')).map(str::to_string)
    } else {
        Some(first.to_string())
    }
}

/// Checks once per daemon that `bwrap` exists and can make a sandbox here; the error
/// names the package, or what the kernel refused.
pub fn check() -> Result<(), DriverError> {
    static RESULT: OnceLock<Result<(), DriverError>> = OnceLock::new();
    RESULT.get_or_init(probe).clone()
}

fn probe() -> Result<(), DriverError> {
    let unavailable = |why: String| Err(DriverError::Unavailable(why));
    let mut args: Vec<String> = vec!["--unshare-all".into(), "--die-with-parent".into()];
    args.extend(system_folders());
    args.extend(["--".into(), "true".into()]);
    let output = std::process::Command::new("bwrap")
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match output {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => unavailable(
            "the sandbox driver needs bubblewrap (`bwrap`), which is not installed: install the `bubblewrap` package (apt install bubblewrap, dnf install bubblewrap)".into(),
        ),
        Err(e) => Err(DriverError::program("bwrap", e)),
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => unavailable(format!(
            "bubblewrap cannot make a sandbox on this machine ({}): the kernel may refuse user namespaces (see sysctl user.max_user_namespaces and kernel.unprivileged_userns_clone)",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// A session's sandbox: what `bwrap` binds, and the limits in force.
struct Sandbox {
    layout: Layout,
    confinement: Confinement,
    limits: Limits,
    /// The agent's `PATH` inside, `cru`'s folder first.
    agent_path: std::ffi::OsString,
}

pub(super) async fn provision(
    confinement: &Confinement,
    setup: Setup<'_>,
    search: Option<&OsStr>,
) -> Result<Box<dyn Place>, DriverError> {
    super::place::checked(check).await?;
    let layout = layout(setup, search).await?;
    // Checked now, so a bad mount fails `session new`, not the first start.
    arguments(confinement, &layout)?;
    let limits = Limits::apply(confinement, &cgroup_name(&layout.cwd));
    let agent_path = path::ahead(
        Path::new(BIN_INSIDE),
        Some(search.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"))),
    );
    Ok(Box::new(Sandbox {
        layout,
        confinement: confinement.clone(),
        limits,
        agent_path,
    }))
}

/// One name per environment for its cgroups.
fn cgroup_name(cwd: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in cwd.as_os_str().as_encoded_bytes() {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("crucible-{}-{hash:016x}", std::process::id())
}

async fn layout(setup: Setup<'_>, search: Option<&OsStr>) -> Result<Layout, DriverError> {
    let state_dir = setup.kiln.state_dir();
    let home = state_dir
        .join("sandboxes")
        .join(setup.session_id)
        .join("home");
    super::place::private_folder(&home)?;
    let home_inside = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
        .unwrap_or_else(|| PathBuf::from("/home/agent"));
    let cwd = super::place::real_cwd(setup.cwd)?;
    let git_dir = crate::git::common_dir(&cwd).await;
    let programs = setup
        .program
        .and_then(|p| path::resolve_in(p, search))
        .map(|p| install_folders(&p, search))
        .unwrap_or_default();
    Ok(Layout {
        cwd,
        git_dir,
        state_dir: std::fs::canonicalize(&state_dir).unwrap_or(state_dir),
        home,
        home_inside,
        programs,
        cru: std::env::current_exe().ok(),
        socket: setup.kiln.agent_socket_path(),
    })
}

impl Place for Sandbox {
    fn oom_kills(&self) -> Option<u64> {
        self.limits.oom_kills()
    }

    fn command(&self, start: Start<'_>) -> Result<Command, DriverError> {
        // Inside, a bare name would be looked up on a PATH of other folders.
        let resolved = match start.program.to_str() {
            Some(name) if !name.contains('/') => path::resolve_in(name, start.search),
            _ => None,
        };
        let program = resolved.as_deref().unwrap_or(start.program);
        let mut bwrap_args = arguments(&self.confinement, &self.layout)?;
        if start.cwd != self.layout.cwd {
            let at = bwrap_args.len().saturating_sub(1);
            bwrap_args[at] = start.cwd.to_string_lossy().into_owned();
        }
        let mut command = Command::new("bwrap");
        command
            .args(bwrap_args)
            .arg("--")
            .arg(program)
            .args(start.args);
        command.env_clear();
        for name in KEPT {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.env("PATH", &self.agent_path);
        command.env("HOME", &self.layout.home_inside);
        command.envs(start.passed.iter().cloned());
        command.envs(start.vars);
        let pre_exec = self.limits.pre_exec();
        // SAFETY: the closure only makes async-signal-safe calls (write,
        // setrlimit, sched_*affinity) on values prepared before the fork.
        unsafe {
            command.pre_exec(pre_exec);
        }
        Ok(command)
    }

    fn cru_program(&self) -> Option<PathBuf> {
        Some(PathBuf::from(format!("{BIN_INSIDE}/cru")))
    }

    fn limits(&self) -> Vec<String> {
        self.limits.described().to_vec()
    }

    fn socket_inside(&self) -> Option<String> {
        Some(SOCKET_INSIDE.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npm_agent_gets_its_node_modules_and_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let package = root.join("lib/node_modules/@acme/agent/dist");
        std::fs::create_dir_all(&package).unwrap();
        let node_dir = root.join("nvm/bin");
        std::fs::create_dir_all(&node_dir).unwrap();
        let node = node_dir.join("fake-node-for-test");
        std::fs::write(&node, "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = package.join("index.js");
        std::fs::write(
            &script,
            format!("#!{} --flag\nconsole.log(1)\n", node.display()),
        )
        .unwrap();
        assert_eq!(
            install_folders(&script, None),
            vec![root.join("lib/node_modules"), node_dir.clone()]
        );
        let plain = root.join("nvm/bin/tool");
        std::fs::write(&plain, "\x7fELF").unwrap();
        assert_eq!(install_folders(&plain, None), vec![node_dir]);
        assert_eq!(
            interpreter_of_env(),
            Some("node".to_string()),
            "#!/usr/bin/env node names node"
        );
    }

    fn interpreter_of_env() -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/usr/bin/env -S node --x\n").unwrap();
        interpreter(&script)
    }
}
