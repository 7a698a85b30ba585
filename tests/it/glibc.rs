//! The oldest glibc the built `cru` starts on: the symbol versions its dynamic symbols
//! need, read from the binary with `objdump`, stay at or below the minimum the README
//! names, and it needs no packed relocations (`GLIBC_ABI_DT_RELR`, a glibc 2.36 loader
//! feature), so a build made on a current Debian still starts on Ubuntu 22.04 and RHEL 9.

use std::process::Command;

use crate::common::*;

/// The minimum glibc the README's "Requirements" names (RHEL 9's).
const GLIBC_MINIMUM: (u32, u32) = (2, 34);

/// `objdump flag CRU`'s output; objdump is binutils', which the linker comes with.
fn objdump(flag: &str) -> String {
    let out = Command::new("objdump")
        .args([flag, CRU])
        .output()
        .expect("run objdump (binutils)");
    assert!(out.status.success(), "objdump {flag} {CRU} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `(2, 34)` of `GLIBC_2.34`, `(2, 3)` of `GLIBC_2.3.4`; None for any other name.
fn glibc_version(name: &str) -> Option<(u32, u32)> {
    let mut parts = name.strip_prefix("GLIBC_")?.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[test]
fn the_binary_starts_on_the_documented_glibc() {
    // Every version the binary needs, by name: `objdump -p`'s "Version References".
    let headers = objdump("-p");
    let needed: Vec<&str> = headers
        .lines()
        .filter_map(|line| line.split_whitespace().last())
        .filter(|word| word.starts_with("GLIBC_"))
        .collect();
    assert!(
        needed.contains(&"GLIBC_2.2.5"),
        "objdump -p named no glibc version at all: {needed:?}"
    );
    assert!(
        !needed.contains(&"GLIBC_ABI_DT_RELR"),
        "cru is linked with packed relative relocations: it needs glibc 2.36's loader"
    );
    // The symbols behind each version over the minimum, to name them on failure.
    let symbols = objdump("-T");
    let over: Vec<String> = symbols
        .lines()
        .filter_map(|line| {
            let version = line.split_whitespace().find(|w| w.starts_with("(GLIBC_"))?;
            let version = version.trim_matches(|c| c == '(' || c == ')');
            let name = line.split_whitespace().last()?;
            (glibc_version(version)? > GLIBC_MINIMUM).then(|| format!("{name}@{version}"))
        })
        .collect();
    let highest = needed.iter().filter_map(|n| glibc_version(n)).max();
    assert!(
        highest.is_some_and(|v| v <= GLIBC_MINIMUM),
        "cru needs glibc {highest:?}, over the documented {GLIBC_MINIMUM:?}, for: {over:?}"
    );
    assert!(
        over.is_empty(),
        "symbols over glibc {GLIBC_MINIMUM:?}: {over:?}"
    );
}

#[test]
fn versions_read_as_numbers() {
    assert_eq!(glibc_version("GLIBC_2.34"), Some((2, 34)));
    assert_eq!(glibc_version("GLIBC_2.3.4"), Some((2, 3)));
    assert_eq!(glibc_version("GLIBC_ABI_DT_RELR"), None);
    assert!(glibc_version("GLIBC_2.35") > glibc_version("GLIBC_2.4"));
}
