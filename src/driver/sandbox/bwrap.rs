//! `bwrap`'s command line for one sandbox: the system folders and the parts of `/etc`
//! bound read-only, the session's worktree and git folder, a private `$HOME` and `/tmp`,
//! the user's mounts, `cru` and the agent socket; nothing else exists inside.

use std::path::{Path, PathBuf};

use crate::driver::error::DriverError;
use crate::protocol::{Confinement, Network};

/// Where the agent socket and the `cru` binary appear inside.
pub const SOCKET_INSIDE: &str = "/run/crucible/agent.sock";
pub const BIN_INSIDE: &str = "/run/crucible/bin";

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
    /// The folders of the agent's program install (see [`install_folders`](super::install_folders)), bound
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
            .map_err(|e| DriverError::file("cannot mount ", &mount.source, e))?;
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

/// The system folders, read-only, or the same symlinks where the host has links
/// (`/bin -> usr/bin`).
pub(super) fn system_folders() -> Vec<String> {
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

pub(super) fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn under_system(folder: &Path) -> bool {
    SYSTEM.iter().any(|s| folder.starts_with(s))
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
