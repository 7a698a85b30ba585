//! The machine's checks: git new enough to merge, bubblewrap able to make a user
//! namespace, podman and its container runtime, and the inotify watch limit against the
//! kiln's worktrees.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::Check;
use crate::kiln::Kiln;
use crate::sys::on_path;

/// How long `podman info` may take.
const PODMAN_TIMEOUT: Duration = Duration::from_secs(20);
/// The most folders counted under the kiln before the count stops.
const COUNT_LIMIT: usize = 2_000_000;
/// Sessions whose worktrees the watch limit should leave room for, beyond the ones there.
const ROOM_FOR: usize = 4;

/// git on `PATH`, and new enough for `git merge-tree --write-tree`.
pub(super) async fn git() -> Check {
    let (major, minor) = crate::git::MERGE_NEEDS;
    let install = format!(
        "install git {major}.{minor} or newer (your distribution's backports, or git-scm.com)"
    );
    let Some(path) = on_path("git") else {
        return Check::fail("git", "git is not on PATH", install);
    };
    let said = match crate::git::version_text().await {
        Ok(said) => said,
        Err(e) => return Check::fail("git", format!("{}: {e}", path.display()), install),
    };
    let found = format!("{} ({})", said.trim(), path.display());
    match crate::git::merges(&said) {
        Ok(()) => Check::pass("git", found),
        Err(why) => Check::fail("git", format!("{found}: {why}"), install),
    }
}

/// bubblewrap, tried the way the sandbox driver tries it (a trivial sandbox running
/// `true`). Only the sandbox driver needs it: its absence is a warning, unless profiles
/// (`users`) run in that driver.
pub(super) async fn bubblewrap(users: &[String]) -> Check {
    probe_bubblewrap().await.needed_by(users, "sandbox")
}

async fn probe_bubblewrap() -> Check {
    let Some(path) = on_path("bwrap") else {
        return Check::warn(
            "bubblewrap",
            "bwrap is not on PATH (only the sandbox driver needs it)",
            "install the `bubblewrap` package (apt install bubblewrap, dnf install bubblewrap)",
        );
    };
    match tokio::task::spawn_blocking(crate::driver::sandbox::check).await {
        Ok(Ok(())) => Check::pass(
            "bubblewrap",
            format!("{} makes a sandbox (user namespaces work)", path.display()),
        ),
        Ok(Err(e)) => Check::warn(
            "bubblewrap",
            e.to_string(),
            "allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 \
             and user.max_user_namespaces above 0 (on Ubuntu 24.04 also \
             kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap)",
        ),
        Err(e) => Check::warn(
            "bubblewrap",
            format!("the check did not finish: {e}"),
            "run cru doctor again",
        ),
    }
}

/// QEMU for the qemu driver: its version, the machine type and whether guests get KVM
/// or TCG here (with a kernel and busybox to boot them). A warning unless profiles
/// (`users`) run in that driver.
pub(super) async fn qemu(kiln: &Kiln, users: &[String]) -> Check {
    let cache = Some(kiln.state_dir().join("qemu")).filter(|c| c.is_dir());
    let probed = tokio::task::spawn_blocking(move || {
        crate::driver::qemu::check()
            .and_then(|kernel| crate::driver::qemu::host(&kernel, cache.as_deref()))
    })
    .await;
    let check = match probed {
        Ok(Ok(host)) => Check::pass("qemu", host.described()),
        Ok(Err(e)) => Check::warn("qemu", e.to_string(), "only the qemu driver needs it"),
        Err(e) => Check::warn(
            "qemu",
            format!("the check did not finish: {e}"),
            "run cru doctor again",
        ),
    };
    check.needed_by(users, "qemu")
}

/// podman and the container runtime it uses, as `podman info` reports them. Only the
/// podman driver needs them: their absence is a warning, unless profiles (`users`) run
/// in that driver.
pub(super) async fn podman(users: &[String]) -> Check {
    probe_podman().await.needed_by(users, "podman")
}

async fn probe_podman() -> Check {
    let install = "install the `podman` package (it brings a runtime, crun or runc); only the podman driver needs it";
    let Some(path) = on_path("podman") else {
        return Check::warn("podman", "podman is not on PATH", install);
    };
    let mut command = tokio::process::Command::new(&path);
    command
        .args([
            "info",
            "--format",
            "{{.Version.Version}} {{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}",
        ])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(PODMAN_TIMEOUT, command.output()).await {
        Err(_) => {
            let found = format!(
                "podman info gave no answer in {}s",
                PODMAN_TIMEOUT.as_secs()
            );
            return Check::warn("podman", found, "see what `podman info` says");
        }
        Ok(Err(e)) => {
            return Check::warn(
                "podman",
                format!("cannot run {}: {e}", path.display()),
                install,
            );
        }
        Ok(Ok(output)) => output,
    };
    let said = String::from_utf8_lossy(&output.stdout);
    let words: Vec<&str> = said.split_whitespace().collect();
    match words.as_slice() {
        [version, runtime, at, ..] if output.status.success() => Check::pass(
            "podman",
            format!(
                "podman {version} ({}), runtime {runtime} ({at})",
                path.display()
            ),
        ),
        _ => Check::warn(
            "podman",
            format!(
                "podman info failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
            "install a container runtime (crun or runc) and see what `podman info` says",
        ),
    }
}

/// The per-user inotify watch limit against the folders the kiln's worktrees have (each
/// session's worktree is watched whole, a watch a folder) and room for a few more
/// sessions the size of the kiln.
pub(super) async fn inotify(kiln: &Kiln) -> Check {
    let file = "/proc/sys/fs/inotify/max_user_watches";
    let limit = match std::fs::read_to_string(file) {
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(limit) => limit,
            Err(_) => {
                return Check::warn(
                    "inotify",
                    format!("{file} says {:?}", text.trim()),
                    "none known",
                );
            }
        },
        Err(e) => {
            return Check::warn(
                "inotify",
                format!("cannot read {file}: {e}"),
                "on Linux, sessions' files are watched with inotify; elsewhere nothing to do",
            );
        }
    };
    let (worktrees, kiln_dirs) = {
        let (root, trees) = (kiln.root().to_path_buf(), kiln.worktrees_dir());
        tokio::task::spawn_blocking(move || (count_folders(&trees), count_folders(&root)))
            .await
            .unwrap_or((0, 0))
    };
    let needed = worktrees.saturating_add(kiln_dirs.saturating_mul(ROOM_FOR));
    let found = format!(
        "max_user_watches {limit}; the worktrees have {worktrees} folders, a new session adds about {kiln_dirs}"
    );
    if needed <= limit {
        return Check::pass("inotify", found);
    }
    let raise = needed.saturating_mul(2).max(524_288);
    Check::warn(
        "inotify",
        format!("{found}: too few watches for {ROOM_FOR} more sessions"),
        format!(
            "sudo sysctl fs.inotify.max_user_watches={raise}, and to keep it: \
             echo fs.inotify.max_user_watches={raise} | sudo tee /etc/sysctl.d/60-crucible.conf"
        ),
    )
}

/// The folders under `dir` (itself included, none when it is not there), not following links and not entering the
/// kiln's own `.git` and `.crucible` (the worktrees are counted on their own); stops at
/// [`COUNT_LIMIT`].
fn count_folders(dir: &Path) -> usize {
    let mut count = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        count += 1;
        if count >= COUNT_LIMIT {
            break;
        }
        for entry in entries.flatten() {
            let skipped =
                folder == dir && matches!(entry.file_name().to_str(), Some(".git" | ".crucible"));
            if !skipped && entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_counted_without_the_kilns_own_state() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["src/a", "src/b", ".git/objects", ".crucible/worktrees/x"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        std::fs::write(dir.path().join("src/file"), "x").unwrap();
        // itself, src, src/a, src/b
        assert_eq!(count_folders(dir.path()), 4);
        assert_eq!(count_folders(&dir.path().join("missing")), 0);
    }
}
