//! Links the shipping `cru` with packed relative relocations (`DT_RELR`) where the
//! system can load them: the table the dynamic loader applies at start shrinks from
//! about 1.6 MB to a few kilobytes, which is that much less binary to store and page in.
//!
//! A `DT_RELR` binary needs glibc 2.36 or later to run (the linker records that), so
//! this is done only for a native build on a GNU/Linux system whose glibc is that new.
//! Anywhere else the build is as before.

use std::process::Command;

/// The first glibc whose loader applies `DT_RELR`.
const RELR_GLIBC: (u32, u32) = (2, 36);

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    // `release` for the release profile and the profiles that inherit it.
    let release = var("PROFILE") == "release";
    if native && gnu_linux && release && glibc().is_some_and(|v| v >= RELR_GLIBC) {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The system's glibc version, as `getconf GNU_LIBC_VERSION` gives it ("glibc 2.36").
fn glibc() -> Option<(u32, u32)> {
    let out = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit());
    Some((major, minor.parse().ok()?))
}
