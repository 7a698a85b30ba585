//! How an agent on this machine finds programs. Its `PATH` is the one of the process
//! that asked for the session (the daemon may have been started by another shell), else
//! the daemon's; first on it comes a folder holding only a link to the daemon's own
//! binary (`<kiln>/.crucible/bin/cru`), so the `cru` an agent calls always speaks to
//! this daemon. Sandboxes and containers show that binary at their own place instead.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::kiln::Kiln;

/// The folders programs are looked for in: `given` (another process's `PATH`), else the
/// daemon's `PATH`.
pub fn search(given: Option<&str>) -> Option<OsString> {
    given
        .filter(|p| !p.is_empty())
        .map(OsString::from)
        .or_else(|| std::env::var_os("PATH"))
}

/// The program's real path: as given when it holds a `/`, else the first match in the
/// folders of `path` (see [`search`]).
pub fn resolve_in(program: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    let found = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        crate::sys::on_path_in(program, path?)
    };
    found.and_then(|p| std::fs::canonicalize(p).ok())
}

/// `folder` ahead of the folders of `path`, as a `PATH` value.
pub fn ahead(folder: &Path, path: Option<&OsStr>) -> OsString {
    let mut joined = OsString::from(folder);
    if let Some(path) = path.filter(|p| !p.is_empty()) {
        joined.push(":");
        joined.push(path);
    }
    joined
}

/// `<kiln>/.crucible/bin`, holding only `cru`: a link to the running daemon's binary,
/// made (or made again, when the daemon's binary moved) now. `None`, with a warning in
/// the log, when it cannot be made: the agent then finds whatever `cru` its `PATH` has.
pub fn cru_folder(kiln: &Kiln) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok().filter(|exe| exe.is_file())?;
    let folder = kiln.state_dir().join("bin");
    match link(&folder, &exe) {
        Ok(()) => Some(folder),
        Err(e) => {
            tracing::warn!(folder = %folder.display(), "cannot link cru for agents: {e}");
            None
        }
    }
}

fn link(folder: &Path, exe: &Path) -> std::io::Result<()> {
    crate::sys::private_dir(folder)?;
    let cru = folder.join("cru");
    if std::fs::read_link(&cru).is_ok_and(|target| target == exe) {
        return Ok(());
    }
    // Made beside it and renamed over it: an agent starting meanwhile finds one or the
    // other, never none.
    let next = folder.join(format!(".cru.{}", std::process::id()));
    let _ = std::fs::remove_file(&next);
    std::os::unix::fs::symlink(exe, &next)?;
    std::fs::rename(&next, &cru)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cru_folder_links_the_running_binary_and_follows_it() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        let folder = cru_folder(&kiln).unwrap();
        assert_eq!(folder, kiln.state_dir().join("bin"));
        let exe = std::env::current_exe().unwrap();
        assert_eq!(std::fs::read_link(folder.join("cru")).unwrap(), exe);
        // A link left by another binary is replaced.
        std::fs::remove_file(folder.join("cru")).unwrap();
        std::os::unix::fs::symlink("/bin/true", folder.join("cru")).unwrap();
        cru_folder(&kiln).unwrap();
        assert_eq!(std::fs::read_link(folder.join("cru")).unwrap(), exe);
        let names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["cru"], "nothing else is left there");
    }

    #[test]
    fn programs_are_found_in_the_given_folders() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("only-here");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let path = ahead(dir.path(), Some(OsStr::new("/usr/bin:/bin")));
        assert_eq!(
            resolve_in("only-here", Some(&path)),
            Some(program.canonicalize().unwrap())
        );
        assert_eq!(resolve_in("only-here", Some(OsStr::new("/usr/bin"))), None);
        assert_eq!(
            ahead(Path::new("/k/.crucible/bin"), None),
            OsString::from("/k/.crucible/bin")
        );
        assert_eq!(search(Some("/x")), Some(OsString::from("/x")));
    }
}
