//! Driver options: layering, resolving, and `/new`'s words read with the flags' own
//! definition.

use super::*;

#[test]
fn options_layer_and_resolve() {
    let base = DriverOptions {
        driver: Some(DriverKind::Sandbox),
        env: vec!["A".into()],
        memory: Some(512),
        ..Default::default()
    };
    let asked = DriverOptions {
        env: vec!["B".into(), "A".into()],
        memory: Some(128),
        ..Default::default()
    };
    let spec = asked.over(&base).resolve().unwrap();
    assert_eq!(spec.kind(), DriverKind::Sandbox);
    assert_eq!(spec.env(), ["A", "B"]);
    assert_eq!(spec.memory(), Some(128));
    assert_eq!(
        spec.network(),
        Network::None,
        "isolated drivers default to no network"
    );
}

#[test]
fn resolve_refuses_what_would_be_ignored_or_leak() {
    let local_with_limits = DriverOptions {
        memory: Some(100),
        ..Default::default()
    };
    assert!(local_with_limits.resolve().is_err());
    let value_not_name = DriverOptions {
        driver: Some(DriverKind::Sandbox),
        env: vec!["TOKEN=abc".into()],
        ..Default::default()
    };
    let err = value_not_name.resolve().unwrap_err().to_string();
    assert!(!err.contains("abc"), "a value is never echoed: {err}");
    let ssh = DriverOptions {
        driver: Some(DriverKind::Ssh),
        ..Default::default()
    };
    assert!(ssh.resolve().unwrap_err().to_string().contains("--host"));
    let podman = DriverOptions {
        driver: Some(DriverKind::Podman),
        ..Default::default()
    };
    assert!(
        podman
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("--image")
    );
}

fn words(line: &str) -> Result<NewWords, clap::Error> {
    parse_new_words(&line.split_whitespace().collect::<Vec<_>>())
}

#[test]
fn new_takes_flags_in_any_order_and_a_task() {
    assert_eq!(
        words("--agent codex --worktree fix/flaky make the test pass").unwrap(),
        NewWords {
            worktree: Some("fix/flaky".into()),
            agent: Some("codex".into()),
            task: Some("make the test pass".into()),
            driver: DriverOptions::default(),
        }
    );
    assert_eq!(
        words("--worktree=feat/auth").unwrap(),
        NewWords {
            worktree: Some("feat/auth".into()),
            ..Default::default()
        }
    );
    // After the task begins, dashes are part of it.
    assert_eq!(
        words("fix --verbose flag").unwrap(),
        NewWords {
            task: Some("fix --verbose flag".into()),
            ..Default::default()
        }
    );
    assert_eq!(words("").unwrap(), NewWords::default());
    assert_eq!(
        words("-w a -a b --agent c task").unwrap(),
        NewWords {
            worktree: Some("a".into()),
            agent: Some("c".into()),
            task: Some("task".into()),
            driver: DriverOptions::default(),
        },
        "short names, and a later flag wins"
    );
}

#[test]
fn new_takes_the_driver_options_of_cru_session_new() {
    let new = words(
        "--driver sandbox --network host --env API_KEY --env=OTHER --memory 512 \
         --mount /data:ro --pids 64 fix it",
    )
    .unwrap();
    assert_eq!(new.task.as_deref(), Some("fix it"));
    let spec = new.driver.resolve().unwrap();
    assert_eq!(spec.kind(), DriverKind::Sandbox);
    assert_eq!(spec.network(), Network::Host);
    assert_eq!(spec.env(), ["API_KEY", "OTHER"]);
    assert_eq!((spec.memory(), spec.pids()), (Some(512), Some(64)));
    assert!(spec.mounts()[0].read_only);
    let ssh = words("--driver ssh --host me@box --remote-path /srv/r --image x --cpus 2").unwrap();
    assert_eq!(ssh.driver.host.as_deref(), Some("me@box"));
    assert_eq!(ssh.driver.remote_path.as_deref(), Some("/srv/r"));
    assert_eq!(
        (ssh.driver.image.as_deref(), ssh.driver.cpus),
        (Some("x"), Some(2))
    );
    let err = words("--driver vm").unwrap_err().to_string();
    assert!(err.contains("unknown driver"), "{err}");
    assert!(
        err.contains("use local, sandbox, ssh, podman or qemu"),
        "{err}"
    );
    let err = words("--memory lots").unwrap_err().to_string();
    assert!(err.contains("whole number"), "{err}");
}

#[test]
fn new_rejects_a_flag_without_value_or_an_unknown_flag() {
    for line in ["--agent", "--agent=", "--worktree="] {
        let err = words(line).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue, "{line}");
        assert!(
            err.to_string().contains(line.trim_end_matches('=')),
            "{err}"
        );
    }
    let err = words("--model x").unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
    assert!(err.to_string().contains("--model"), "{err}");
}

#[test]
fn new_lists_its_flags() {
    let flags = new_flags();
    for flag in [
        "--worktree",
        "-w",
        "--agent",
        "-a",
        "--driver",
        "--mount",
        "--remote-path",
    ] {
        assert!(flags.iter().any(|f| f == flag), "{flag} in {flags:?}");
    }
}
