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

use super::{DriverError, Limits, Place, Setup, Start, path};
use crate::protocol::{Confinement, Network};

/// Where the agent socket and the `cru` binary appear inside.
pub const SOCKET_INSIDE: &str = "/run/crucible/agent.sock";
pub const BIN_INSIDE: &str = "/run/crucible/bin";

/// The variables a sandboxed program keeps from the daemon's environment.
const KEPT: &[&str] = &["PATH", "TERM", "LANG", "LC_ALL", "TZ"];

/// System folders bound read-only (or re-made as the same symlink) when present.
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The parts of `/etc` that name resolution, certificates, users and the dynamic
/// loader need; nothing with secrets (no `shadow`, no ssh keys).
const ETC: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/pki",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/gitconfig",
];

/// What one sandbox is made of, besides the spec.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The session's folder: bound read-write, the working directory.
    pub cwd: PathBuf,
    /// The repository's common git folder (bound read-write when it lies outside `cwd`;
    /// its hooks and config read-only either way).
    pub git_dir: Option<PathBuf>,
    /// Crucible's state folder, hidden if it lies inside a bound folder.
    pub state_dir: PathBuf,
    /// The private folder that is `$HOME` inside.
    pub home: PathBuf,
    /// `$HOME`'s path inside.
    pub home_inside: PathBuf,
    /// The folders of the agent's program install (see [`install_folders`]), bound
    /// read-only.
    pub programs: Vec<PathBuf>,
    /// The `cru` binary, bound at [`BIN_INSIDE`]`/cru`.
    pub cru: Option<PathBuf>,
    /// The agent socket on the host.
    pub socket: PathBuf,
}

/// `bwrap`'s arguments up to (not including) the program.
pub fn arguments(spec: &Confinement, layout: &Layout) -> Result<Vec<String>, DriverError> {
    let mut a: Vec<String> = ["--die-with-parent", "--new-session", "--unshare-all"]
        .map(String::from)
        .to_vec();
    if spec.network == Network::Host {
        a.push("--share-net".into());
    }
    a.extend(["--hostname".into(), "crucible-sandbox".into()]);
    a.extend(system_folders());
    let mut add = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    for file in ETC {
        add(&["--ro-bind-try", file, file]);
    }
    add(&[
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run",
    ]);
    let home = text(&layout.home);
    let home_inside = text(&layout.home_inside);
    add(&["--bind", &home, &home_inside]);
    for folder in &layout.programs {
        if !under_system(folder) {
            let folder = text(folder);
            add(&["--ro-bind", &folder, &folder]);
        }
    }
    let cwd = text(&layout.cwd);
    add(&["--bind", &cwd, &cwd]);
    if let Some(git_dir) = &layout.git_dir {
        let git = text(git_dir);
        if !git_dir.starts_with(&layout.cwd) {
            add(&["--bind", &git, &git]);
        }
        // Hooks and config run code on the host the next time the user runs git there.
        for part in ["hooks", "config"] {
            let path = text(&git_dir.join(part));
            add(&["--ro-bind-try", &path, &path]);
        }
    }
    if layout.state_dir.starts_with(&layout.cwd) {
        let state = text(&layout.state_dir);
        add(&["--tmpfs", &state]);
    }
    for mount in &spec.mounts {
        let source = std::fs::canonicalize(&mount.source)
            .map_err(|e| DriverError::Setup(format!("cannot mount {}: {e}", mount.source)))?;
        let flag = if mount.read_only {
            "--ro-bind"
        } else {
            "--bind"
        };
        let source = text(&source);
        let target = if mount.target.is_some() {
            mount.inside().to_string()
        } else {
            source.clone()
        };
        add(&[flag, &source, &target]);
    }
    if let Some(cru) = &layout.cru {
        let inside = format!("{BIN_INSIDE}/cru");
        add(&["--ro-bind", &text(cru), &inside]);
    }
    add(&["--ro-bind", &text(&layout.socket), SOCKET_INSIDE]);
    add(&["--chdir", &cwd]);
    Ok(a)
}

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

/// The system folders, read-only, or the same symlinks where the host has links
/// (`/bin -> usr/bin`).
fn system_folders() -> Vec<String> {
    let mut args = Vec::new();
    for dir in SYSTEM {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    args.extend(["--symlink".into(), text(&target), dir.to_string()]);
                }
            }
            Ok(m) if m.is_dir() => {
                args.extend(["--ro-bind".into(), dir.to_string(), dir.to_string()]);
            }
            _ => {}
        }
    }
    args
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn under_system(folder: &Path) -> bool {
    SYSTEM.iter().any(|s| folder.starts_with(s))
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
        Err(e) => unavailable(format!("cannot run bwrap: {e}")),
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
    super::checked(check).await?;
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
    super::private_folder(&home)?;
    let home_inside = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
        .unwrap_or_else(|| PathBuf::from("/home/agent"));
    let cwd = super::real_cwd(setup.cwd)?;
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
    use crate::protocol::Mount;

    fn layout() -> Layout {
        Layout {
            cwd: "/k/.crucible/worktrees/s1".into(),
            git_dir: Some("/k/.git".into()),
            state_dir: "/k/.crucible".into(),
            home: "/k/.crucible/sandboxes/s1/home".into(),
            home_inside: "/home/me".into(),
            programs: vec!["/opt/agent/bin".into()],
            cru: Some("/usr/local/bin/cru".into()),
            socket: "/k/.crucible/agent.sock".into(),
        }
    }

    fn pairs(args: &[String], flag: &str) -> Vec<(String, String)> {
        args.windows(3)
            .filter(|w| w[0] == flag)
            .map(|w| (w[1].clone(), w[2].clone()))
            .collect()
    }

    #[test]
    fn binds_only_what_the_session_needs() {
        let spec = Confinement::default();
        let args = arguments(&spec, &layout()).unwrap();
        let rw = pairs(&args, "--bind");
        assert!(rw.contains(&(
            "/k/.crucible/worktrees/s1".into(),
            "/k/.crucible/worktrees/s1".into()
        )));
        assert!(rw.contains(&("/k/.git".into(), "/k/.git".into())));
        assert!(rw.contains(&("/k/.crucible/sandboxes/s1/home".into(), "/home/me".into())));
        assert_eq!(rw.len(), 3, "nothing else is writable: {rw:?}");
        let ro = pairs(&args, "--ro-bind");
        assert!(ro.contains(&("/opt/agent/bin".into(), "/opt/agent/bin".into())));
        assert!(ro.contains(&("/k/.crucible/agent.sock".into(), SOCKET_INSIDE.into())));
        assert!(
            !ro.iter().any(|(s, _)| s.ends_with("daemon.sock")),
            "the owner socket never"
        );
        let ro_try = pairs(&args, "--ro-bind-try");
        assert!(ro_try.contains(&("/k/.git/hooks".into(), "/k/.git/hooks".into())));
        assert!(
            !args.iter().any(|a| a == "--share-net"),
            "no network unless asked"
        );
        assert!(!args.iter().any(|a| a == "/etc/shadow"));
    }

    #[test]
    fn network_host_and_mounts_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let spec = Confinement {
            network: Network::Host,
            mounts: vec![Mount {
                source: dir.path().display().to_string(),
                target: Some("/data".into()),
                read_only: true,
            }],
            ..Default::default()
        };
        let args = arguments(&spec, &layout()).unwrap();
        assert!(args.iter().any(|a| a == "--share-net"));
        let source = std::fs::canonicalize(dir.path())
            .unwrap()
            .display()
            .to_string();
        assert!(pairs(&args, "--ro-bind").contains(&(source, "/data".into())));
        let missing = Confinement {
            mounts: vec![Mount::parse("/no/such/folder").unwrap()],
            ..spec
        };
        assert!(arguments(&missing, &layout()).is_err());
    }

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

    #[test]
    fn an_in_place_session_does_not_see_the_state_folder() {
        let spec = Confinement::default();
        let mut l = layout();
        l.cwd = "/k".into();
        let args = arguments(&spec, &l).unwrap();
        let ro_try = pairs(&args, "--ro-bind-try");
        assert!(
            ro_try.contains(&("/k/.git/hooks".into(), "/k/.git/hooks".into())),
            "hooks stay read-only in place too: {args:?}"
        );
        assert!(!pairs(&args, "--bind").contains(&("/k/.git".into(), "/k/.git".into())));
        let tmpfs_at = args
            .windows(2)
            .position(|w| w[0] == "--tmpfs" && w[1] == "/k/.crucible");
        let bind_at = args
            .windows(2)
            .position(|w| w[0] == "--bind" && w[1] == "/k");
        assert!(tmpfs_at.is_some() && bind_at < tmpfs_at, "{args:?}");
    }
}
