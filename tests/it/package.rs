//! The Debian package, made by `cargo deb` from the settings in `Cargo.toml` around the
//! binary under test (a release build is what ships; the package's shape is the same):
//! it names git 2.38 (merging needs it) and the C library it was linked against, carries
//! the documentation, and unpacked, its `cru` runs. `.ci/run` installs `cargo-deb`; on a
//! machine without it this test says so and does nothing, unless `CI` is set, where a
//! missing tool is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// `cargo-deb`, on `PATH` or where `cargo install` puts it.
fn cargo_deb() -> Option<PathBuf> {
    if let Some(found) = crucible::sys::on_path("cargo-deb") {
        return Some(found);
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let tool = home.join("bin/cargo-deb");
    tool.is_file().then_some(tool)
}

#[test]
fn the_debian_package_carries_cru_and_its_documentation_and_runs_unpacked() {
    let Some(tool) = cargo_deb() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "cargo-deb is missing: .ci/run installs it (cargo install cargo-deb --locked)"
        );
        eprintln!("cargo-deb is not installed: the package is not checked here");
        return;
    };
    // The binary under test is `<target>/debug/cru`.
    let binary = Path::new(CRU);
    let target = binary.parent().and_then(Path::parent).unwrap();
    let out = tempfile::tempdir().unwrap();
    let deb = out.path().join("crucible.deb");
    let mut make = Command::new(&tool);
    make.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "deb",
            "--no-build",
            "--no-strip",
            "--fast",
            "--profile",
            "dev",
            "--output",
        ])
        .arg(&deb)
        .env("CARGO_TARGET_DIR", target);
    let made = run_bounded(make, "cargo deb");
    assert!(made.status.success(), "{}", stderr(&made));

    let field = |name: &str| {
        let out = Command::new("dpkg-deb")
            .arg("--field")
            .arg(&deb)
            .arg(name)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(field("Package"), "crucible");
    let depends = field("Depends");
    assert!(depends.contains("git (>= 1:2.38)"), "{depends}");
    assert!(depends.contains("libc6"), "{depends}");

    let root = out.path().join("root");
    let unpacked = Command::new("dpkg-deb")
        .arg("--extract")
        .arg(&deb)
        .arg(&root)
        .status()
        .unwrap();
    assert!(unpacked.success());
    for doc in ["README.md", "crucible.toml.example", "copyright"] {
        assert!(
            root.join("usr/share/doc/crucible").join(doc).is_file(),
            "{doc} is not in the package"
        );
    }
    let version = Command::new(root.join("usr/bin/cru"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success(), "{}", stderr(&version));
    assert!(
        stdout(&version).starts_with(&format!("cru {}", env!("CARGO_PKG_VERSION"))),
        "{}",
        stdout(&version)
    );
}
