//! A bot account is answered from one kiln: the first daemon's claim holds, others are
//! refused with it, a kiln takes its own claim again, a dead daemon's claim is taken over,
//! and claims are kept owner-only.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use super::{BotAccount, Claimed};
use crate::kiln::Kiln;
use crate::kilns::Registry;

fn kiln_in(dir: &std::path::Path, name: &str) -> Kiln {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    Kiln::new(root.canonicalize().unwrap())
}

/// Says that `pid` is `kiln`'s daemon, as a running daemon's pid file does.
fn runs(kiln: &Kiln, pid: u32) {
    std::fs::create_dir_all(kiln.state_dir()).unwrap();
    std::fs::write(kiln.pid_path(), pid.to_string()).unwrap();
}

/// The pid of a process that has ended.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn bot() -> BotAccount {
    BotAccount::new("https://matrix.example.org", "@bot:example.org")
}

#[test]
fn the_first_kiln_takes_the_bot_and_another_is_refused_with_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::at(tmp.path().join("state"));
    let (alpha, beta) = (kiln_in(tmp.path(), "alpha"), kiln_in(tmp.path(), "beta"));
    let me = std::process::id();
    runs(&alpha, me);
    runs(&beta, me);

    let taken = registry.claim_bot(&bot(), &alpha, "alpha", me).unwrap();
    assert_eq!(taken, Claimed::Taken);
    let mode = std::fs::metadata(registry.bots_path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // The same account, written with a trailing slash and capitals, is the same bot.
    let same = BotAccount::new("HTTPS://matrix.example.org/", "@bot:example.org");
    let Claimed::HeldBy(holder) = registry.claim_bot(&same, &beta, "beta", me).unwrap() else {
        panic!("the second kiln was not refused");
    };
    assert_eq!(
        (holder.kiln.as_str(), holder.path.as_path(), holder.pid),
        ("alpha", alpha.root(), me)
    );

    // Another account, or the same user on another homeserver, is another bot.
    let other = BotAccount::new("https://matrix.example.org", "@other:example.org");
    assert_eq!(
        registry.claim_bot(&other, &beta, "beta", me).unwrap(),
        Claimed::Taken
    );
    let elsewhere = BotAccount::new("http://127.0.0.1:8448", "@bot:example.org");
    assert_eq!(
        registry.claim_bot(&elsewhere, &beta, "beta", me).unwrap(),
        Claimed::Taken
    );

    // A kiln's own claim is its own: its daemon started again takes it.
    assert_eq!(
        registry.claim_bot(&bot(), &alpha, "alpha", me).unwrap(),
        Claimed::Taken
    );
    assert_eq!(registry.bot_claims().unwrap().len(), 3);
}

#[test]
fn a_claim_whose_daemon_no_longer_runs_its_kiln_is_taken_over() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::at(tmp.path().join("state"));
    let (alpha, beta) = (kiln_in(tmp.path(), "alpha"), kiln_in(tmp.path(), "beta"));
    let me = std::process::id();

    // Its daemon was killed: the pid is gone.
    let gone = dead_pid();
    runs(&alpha, gone);
    registry.claim_bot(&bot(), &alpha, "alpha", gone).unwrap();
    assert_eq!(
        registry.claim_bot(&bot(), &beta, "beta", me).unwrap(),
        Claimed::Taken
    );
    let claims = registry.bot_claims().unwrap();
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!((claims[0].kiln.as_str(), claims[0].pid), ("beta", me));

    // Its pid lives on as another process, not the kiln's daemon.
    runs(&beta, me + 1);
    assert_eq!(
        registry.claim_bot(&bot(), &alpha, "alpha", me).unwrap(),
        Claimed::Taken
    );
    assert_eq!(registry.bot_claims().unwrap()[0].kiln, "alpha");
}

#[test]
fn a_daemon_gives_back_only_the_claim_it_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::at(tmp.path().join("state"));
    let (alpha, beta) = (kiln_in(tmp.path(), "alpha"), kiln_in(tmp.path(), "beta"));
    let me = std::process::id();
    let gone = dead_pid();
    runs(&alpha, gone);
    runs(&beta, me);
    registry.claim_bot(&bot(), &alpha, "alpha", gone).unwrap();
    registry.claim_bot(&bot(), &beta, "beta", me).unwrap();

    // Alpha's daemon, stopping late, does not give back the claim beta took over.
    assert!(!registry.release_bot(&bot(), &alpha, gone).unwrap());
    assert_eq!(registry.bot_claims().unwrap()[0].kiln, "beta");
    assert!(registry.release_bot(&bot(), &beta, me).unwrap());
    assert!(registry.bot_claims().unwrap().is_empty());
    // Given back, the bot is anyone's.
    runs(&alpha, me);
    assert_eq!(
        registry.claim_bot(&bot(), &alpha, "alpha", me).unwrap(),
        Claimed::Taken
    );
}

#[test]
fn daemons_claiming_at_once_leave_one_winner() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::at(tmp.path().join("state"));
    let me = std::process::id();
    let kilns: Vec<Kiln> = (0..8)
        .map(|i| kiln_in(tmp.path(), &format!("k{i}")))
        .collect();
    for kiln in &kilns {
        runs(kiln, me);
    }
    let outcomes: Vec<Claimed> = std::thread::scope(|s| {
        let claiming: Vec<_> = kilns
            .iter()
            .enumerate()
            .map(|(i, kiln)| {
                let registry = registry.clone();
                s.spawn(move || registry.claim_bot(&bot(), kiln, &format!("k{i}"), me))
            })
            .collect();
        claiming
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect()
    });
    let winners = outcomes.iter().filter(|o| **o == Claimed::Taken).count();
    assert_eq!(winners, 1, "{outcomes:?}");
    let claims = registry.bot_claims().unwrap();
    assert_eq!(claims.len(), 1);
    for outcome in &outcomes {
        if let Claimed::HeldBy(holder) = outcome {
            assert_eq!(holder, &claims[0], "every refusal names the one winner");
        }
    }
}
