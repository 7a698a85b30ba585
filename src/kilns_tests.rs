//! The registry keeps every kiln recorded at once, owner-only, and names one kiln only.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use super::{KilnState, Registry, RegistryError, name_of};
use crate::kiln::Kiln;

fn kiln_in(dir: &std::path::Path, name: &str) -> Kiln {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    Kiln::new(root.canonicalize().unwrap())
}

#[test]
fn daemons_recording_at_once_are_all_kept_and_the_file_is_owner_only() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::at(tmp.path().join("state"));
    let kilns: Vec<Kiln> = (0..8)
        .map(|i| kiln_in(tmp.path(), &format!("k{i}")))
        .collect();
    std::thread::scope(|s| {
        for (i, kiln) in kilns.iter().enumerate() {
            let registry = registry.clone();
            s.spawn(move || {
                registry
                    .record(kiln, &format!("k{i}"), 100 + i as u32)
                    .unwrap()
            });
        }
    });
    let entries = registry.entries().unwrap();
    assert_eq!(entries.len(), 8, "{entries:?}");
    let mode = std::fs::metadata(registry.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let dir_mode = std::fs::metadata(tmp.path().join("state"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);

    // A daemon starting again in a kiln replaces its entry rather than adding one.
    registry.record(&kilns[3], "renamed", 999).unwrap();
    let entries = registry.entries().unwrap();
    assert_eq!(entries.len(), 8);
    let third = entries.iter().find(|e| e.path == kilns[3].root()).unwrap();
    assert_eq!((third.name.as_str(), third.pid), ("renamed", 999));
}

#[test]
fn a_kiln_is_named_by_name_or_path_and_a_shared_name_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::at(tmp.path().join("state"));
    let a = kiln_in(tmp.path(), "one/app");
    let b = kiln_in(tmp.path(), "two/app");
    let c = kiln_in(tmp.path(), "web");
    registry.record(&a, "app", 1).unwrap();
    registry.record(&b, "app", 2).unwrap();
    registry.record(&c, "web", 3).unwrap();

    match registry.forget("app") {
        Err(RegistryError::Ambiguous { count, paths, .. }) => {
            assert_eq!(count, 2);
            assert!(
                paths.contains("one/app") && paths.contains("two/app"),
                "{paths}"
            );
        }
        other => panic!("a shared name must be refused, got {other:?}"),
    }
    assert_eq!(
        registry.entries().unwrap().len(),
        3,
        "nothing was forgotten"
    );
    assert!(matches!(
        registry.forget("nothing"),
        Err(RegistryError::Unknown(_))
    ));

    let gone = registry.forget(&b.root().display().to_string()).unwrap();
    assert_eq!(gone.pid, 2);
    assert_eq!(registry.find("app").unwrap().path, a.root());
    assert_eq!(registry.forget("web").unwrap().pid, 3);
    assert_eq!(registry.entries().unwrap().len(), 1);
}

#[test]
fn a_kiln_without_a_daemon_rests_and_one_whose_folder_is_gone_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::at(tmp.path().join("state"));
    let kiln = kiln_in(tmp.path(), "project");
    // A pid that cannot be alive.
    registry.record(&kiln, "project", u32::MAX - 1).unwrap();
    let entry = registry.find("project").unwrap();
    assert_eq!(entry.state(), KilnState::Resting);
    std::fs::remove_dir_all(kiln.root()).unwrap();
    assert_eq!(entry.state(), KilnState::Missing);
}

#[test]
fn a_damaged_registry_is_reported_not_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::at(tmp.path());
    std::fs::write(registry.path(), "{not json").unwrap();
    let kiln = kiln_in(tmp.path(), "project");
    assert!(matches!(
        registry.record(&kiln, "project", 1),
        Err(RegistryError::Damaged { .. })
    ));
    assert_eq!(
        std::fs::read_to_string(registry.path()).unwrap(),
        "{not json"
    );
}

#[test]
fn a_kiln_is_named_by_its_settings_else_its_folder() {
    let kiln = Kiln::new("/work/projects/shop");
    assert_eq!(name_of(&kiln, None), "shop");
    assert_eq!(name_of(&kiln, Some("the shop")), "the shop");
}
