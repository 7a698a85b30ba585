//! Test equipment built on first use: an example of crucible's package (`cargo build
//! --example NAME`), in the profile of the `cru` under test and into its target folder.
//! Equipment is an example rather than a binary so that `cargo install --path .` installs
//! `cru` alone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

/// The example `name` in the profile of `cru`, the crucible binary of this build
/// (`<target>/<profile folder>/cru`); `cargo bench` builds in the bench profile, whose
/// folder is `release`.
pub fn example(cru: &Path, name: &str) -> PathBuf {
    let profile_dir = cru.parent().expect("the profile folder");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("release") => "bench",
        _ => "dev",
    };
    build(target_of(cru), profile, name)
}

/// The scripted ACP agent (`cru-scripted-agent`) in the profile of `cru`, built on first use.
pub fn scripted_agent(cru: &Path) -> &'static str {
    static AGENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    AGENT.get_or_init(|| {
        example(cru, "cru-scripted-agent")
            .to_string_lossy()
            .into_owned()
    })
}

/// The example `name` in the dev profile, whatever the profile of `cru`: equipment that
/// would take long to build optimised.
pub fn debug_example(cru: &Path, name: &str) -> PathBuf {
    build(target_of(cru), "dev", name)
}

fn target_of(cru: &Path) -> &Path {
    cru.parent()
        .and_then(Path::parent)
        .expect("the target folder")
}

/// Builds once per process (whoever asks first waits for the build).
fn build(target: &Path, profile: &str, name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<((String, String), PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    let key = (profile.to_string(), name.to_string());
    if let Some((_, path)) = built.iter().find(|(k, _)| *k == key) {
        return path.clone();
    }
    // This package's folder is in crucible's.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    crate::cargo_env::as_from_a_shell(&mut command, target);
    command
        .args([
            "build",
            "--locked",
            "--quiet",
            "--profile",
            profile,
            "--example",
            name,
        ])
        .arg("--manifest-path")
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target);
    let status = command
        .status()
        .expect("run cargo build for test equipment");
    assert!(status.success(), "building the {name} example failed");
    let folder = if profile == "dev" { "debug" } else { "release" };
    let path = target.join(folder).join("examples").join(name);
    built.push((key, path.clone()));
    path
}
