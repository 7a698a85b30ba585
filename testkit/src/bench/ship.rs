//! The shipping binary for the benchmarks: `cargo build --release --bin cru` (opt-level s,
//! z off the hot path, fat LTO, one codegen unit) into `<target dir>/ship`, a target
//! directory of its own, since `cargo bench` builds the bench profile (no LTO) into the
//! same `target/release`. It is linked with its symbols (`ship/release/cru`, read by
//! [`super::parts`] to say what the binary is made of) and stripped with `strip(1)` into
//! `ship/cru`, what ships and what is measured. Up to date, the build is a no-op; from
//! nothing, its wall time is the cold-build figure and is kept in `ship/cold-build-secs`.
//! `CRU_BENCH_SHIP=0` skips it: the benchmarks then measure their own `cru`.
//! `CRU_BENCH_BIN=PATH` measures that binary as it is. [`build_without_matrix`] builds the
//! same without the `matrix` feature, into `<target dir>/ship-no-matrix`.
//!
//! The build runs with a shell's environment (`cargo_env`), and without this bench
//! build's `RUSTC*` and `RUSTFLAGS`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

pub struct ShipBuild {
    /// The stripped binary: what ships.
    pub exe: PathBuf,
    /// The same binary with its symbol table.
    pub unstripped: PathBuf,
    pub dir: PathBuf,
    /// Seconds of the cold build, when this run or an earlier one timed it.
    pub cold_secs: Option<f64>,
    /// Whether this run was the cold build.
    pub cold_now: bool,
    /// Seconds this run's build took.
    pub took: f64,
}

/// The binary `CRU_BENCH_BIN` names, measured as it is.
pub fn given() -> Option<PathBuf> {
    std::env::var_os("CRU_BENCH_BIN")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// Whether `CRU_BENCH_SHIP=0` asked to skip the shipping build.
pub fn skipped() -> bool {
    std::env::var("CRU_BENCH_SHIP").is_ok_and(|v| v.trim() == "0")
}

/// The `cru` the benchmarks measure: the shipping binary, brought up to date, or (when
/// skipped or failing) `fallback`, the bench build's own.
pub fn cru_to_measure(fallback: &str) -> PathBuf {
    if let Some(exe) = given() {
        return exe;
    }
    if skipped() {
        return PathBuf::from(fallback);
    }
    match build() {
        Ok(ship) => ship.exe,
        Err(e) => {
            println!("  the shipping build failed ({e:#}); measuring {fallback}");
            PathBuf::from(fallback)
        }
    }
}

/// The shipping binary, with every default feature.
pub fn build() -> Result<ShipBuild> {
    build_in("ship", &[])
}

/// The shipping binary without the `matrix` feature, for what Matrix adds.
pub fn build_without_matrix() -> Result<ShipBuild> {
    build_in("ship-no-matrix", &["--no-default-features"])
}

/// `cargo build --release` into `<target dir>/<name>` with `features` (its flags), linked
/// with symbols, then stripped into `<name>/cru`.
fn build_in(name: &str, features: &[&str]) -> Result<ShipBuild> {
    // crucible's folder: this package's is in it.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crucible's folder");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        manifest.join(target)
    };
    let dir = target.join(name);
    let unstripped = dir.join("release").join("cru");
    let exe = dir.join("cru");
    let record = dir.join("cold-build-secs");
    // A cold build starts from nothing; a directory left by an interrupted build is not.
    let cold_now = !unstripped.exists() && !dir.join("release").exists();
    if let Some(exe) = given() {
        let cold_secs = std::fs::read_to_string(&record)
            .ok()
            .and_then(|t| t.trim().parse::<f64>().ok());
        return Ok(ShipBuild {
            unstripped: exe.clone(),
            exe,
            dir,
            cold_secs,
            cold_now: false,
            took: 0.0,
        });
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    if cold_now {
        println!(
            "  building the shipping binary from nothing into {}: this takes about 12 minutes \
             on two cores (the time is the cold-build figure)",
            dir.display()
        );
    }
    let started = Instant::now();
    let mut command = Command::new(&cargo);
    command
        .args(["build", "--release", "--bin", "cru"])
        .args(features)
        // Linked with symbols, stripped below: the same code as `strip = true` links.
        .args(["--config", "profile.release.strip=false", "--target-dir"])
        .arg(&dir);
    crate::cargo_env::as_from_a_shell(&mut command, &target);
    // The shipping build's own flags, not this bench build's.
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("RUSTC") || text == "RUSTFLAGS" {
            command.env_remove(&name);
        }
    }
    let status = command
        .current_dir(manifest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("running {}", Path::new(&cargo).display()))?;
    let took = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("cargo build --release failed ({status}) after {took:.0} s");
    }
    let stripped = Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&exe)
        .arg(&unstripped)
        .status()
        .context("running strip (binutils)")?;
    if !stripped.success() {
        bail!("strip {} failed ({stripped})", unstripped.display());
    }
    let cold_secs = if cold_now {
        std::fs::write(&record, format!("{took:.1}\n"))
            .with_context(|| format!("writing {}", record.display()))?;
        Some(took)
    } else {
        std::fs::read_to_string(&record)
            .ok()
            .and_then(|t| t.trim().parse::<f64>().ok())
    };
    Ok(ShipBuild {
        exe,
        unstripped,
        dir,
        cold_secs,
        cold_now,
        took,
    })
}
