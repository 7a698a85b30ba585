//! Names the build for `cru --version`: `CRU_COMMIT`, the commit checked out
//! (`git rev-parse --short HEAD`; "unknown" outside a git checkout, as in a source
//! tarball), and `CRU_BUILD_DATE`, the day it was built (`SOURCE_DATE_EPOCH` when set,
//! for reproducible builds). It runs again when HEAD moves.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    name_the_build();
}

/// Sets `CRU_COMMIT` and `CRU_BUILD_DATE`, and asks to run again when HEAD moves. Never
/// fails: what cannot be known is "unknown".
fn name_the_build() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo::rustc-env=CRU_COMMIT={commit}");
    println!("cargo::rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .or_else(|| Some(SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs()));
    let date = secs.map_or_else(|| "unknown".into(), civil_date);
    println!("cargo::rustc-env=CRU_BUILD_DATE={date}");
    // HEAD, the branch it points at (a loose ref, or the folder a new one appears in),
    // and the packed refs: a commit or a checkout changes one of them. Only paths that
    // exist are named (cargo runs the script on every build for a missing one).
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        let loose = git(&["rev-parse", "--git-path", &branch]);
        let exists = loose
            .as_deref()
            .is_some_and(|p| std::path::Path::new(p).exists());
        watched.push(if exists {
            loose
        } else {
            loose.and_then(|p| {
                let parent = std::path::Path::new(&p).parent()?;
                Some(parent.to_string_lossy().into_owned())
            })
        });
    }
    watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watched.into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            println!("cargo::rerun-if-changed={path}");
        }
    }
}

/// What `git args` prints, trimmed, when it runs and succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// `YYYY-MM-DD` of a Unix time (UTC), by the proleptic Gregorian calendar.
fn civil_date(secs: u64) -> String {
    // Days since 1970-01-01, counted from 0000-03-01 so that leap days end a year.
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
