//! A `cargo` started from a test or a benchmark, with the environment it would have from
//! a shell. Cargo gives a test or bench run variables of its own (`CARGO_PKG_*`,
//! `CARGO_MANIFEST_DIR`, `OUT_DIR` for a package with a build script, the target folder's
//! native library folders in front of `LD_LIBRARY_PATH`); build scripts watch some of them
//! (ring's watches `OUT_DIR`), so a nested build that inherits them rebuilds ring and the
//! engine above it, and the next build from a shell rebuilds them back.

use std::path::Path;
use std::process::Command;

/// Removes from `command` what cargo set for this test or bench run; `target` is the
/// target folder whose library folders cargo put in front of the library path.
pub fn as_from_a_shell(command: &mut Command, target: &Path) {
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if (text.starts_with("CARGO") || text.starts_with("__CARGO")) && text != "CARGO_HOME"
            || text == "OUT_DIR"
        {
            command.env_remove(&name);
        }
    }
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        let own: Vec<_> = std::env::split_paths(&paths)
            .filter(|p| !p.starts_with(target))
            .collect();
        match std::env::join_paths(&own) {
            Ok(joined) if !own.is_empty() => command.env("LD_LIBRARY_PATH", joined),
            _ => command.env_remove("LD_LIBRARY_PATH"),
        };
    }
}
