//! The command line across kilns, with the real binary and three kilns in a temp registry
//! (`XDG_STATE_HOME`): `cru session list`, `cru usage` and `cru search` with
//! `--all-kilns` list every kiln's rows named with their kiln, from a folder that is no
//! kiln; a kiln whose daemon stopped is started to be listed, and one that cannot start is
//! named in a warning while the rest are listed; the `[notify] command` is told which
//! kiln asked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::{MsgType, SessionState};
use serde_json::Value;

use crate::common::*;
use crate::kilns::{cru_in, json_of};
use crate::sessions::{agent_kiln, create, wait_message_where, wait_state};

/// Three kilns, each with a session that finished (it said `zanzibar` and reported
/// tokens) and one waiting for an approval; their daemons record them in `state`.
struct Three {
    _home: tempfile::TempDir,
    state: PathBuf,
    outside: PathBuf,
    notified: PathBuf,
    kilns: Vec<TestKiln>,
    names: Vec<String>,
    daemons: Vec<DaemonProcess>,
    /// Each kiln's session ids, by kiln name.
    sessions: BTreeMap<String, BTreeSet<String>>,
    /// Each kiln's waiting approval: (kiln name, message id).
    asked: BTreeSet<(String, String)>,
    _guards: Vec<KillOnDrop>,
}

/// Tokens the finished session of kiln `i` reports: input and output.
fn tokens_of(i: usize) -> (u64, u64) {
    (100 * (i as u64 + 1), 10)
}

async fn three_kilns() -> Three {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let outside = home.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let notified = home.path().join("notified.log");
    let notify = format!(
        "[notify]\ncommand = 'printf \"%s|%s|%s\\n\" \"$CRUCIBLE_KILN\" \"$CRUCIBLE_KILN_PATH\" \
         \"$CRUCIBLE_MESSAGE_ID\" >> {}'\n",
        notified.display()
    );
    let mut three = Three {
        _home: home,
        state,
        outside,
        notified,
        kilns: Vec::new(),
        names: Vec::new(),
        daemons: Vec::new(),
        sessions: BTreeMap::new(),
        asked: BTreeSet::new(),
        _guards: Vec::new(),
    };
    // The third is named by its folder: it has no `[kiln] name`.
    for (i, named) in [Some("alpha"), Some("beta"), None].into_iter().enumerate() {
        let kiln_section = named.map_or(String::new(), |n| format!("[kiln]\nname = \"{n}\"\n\n"));
        let tk = agent_kiln(&format!("{kiln_section}{notify}"));
        three._guards.push(KillOnDrop(tk.kiln.clone()));
        let name = match named {
            Some(n) => n.to_string(),
            None => tk
                .root()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        };
        let mut daemon = Command::new(CRU);
        daemon
            .env("XDG_STATE_HOME", &three.state)
            .stderr(Stdio::piped());
        three.daemons.push(tk.run_daemon(daemon).await);
        let client = tk.client().await;
        let (input, output) = tokens_of(i);
        let done = create(
            &client,
            "scripted",
            Some(&format!(
                "tokens {input} {output}\nsay zanzibar report from {name}"
            )),
        )
        .await;
        wait_state(&client, &done.id, SessionState::Complete).await;
        let waiting = create(
            &client,
            "scripted",
            Some(&format!("permit p1 Deploy {name}")),
        )
        .await;
        let m = wait_message_where(&client, &waiting.id, "the approval", |m| {
            m.msg_type == MsgType::ApprovalRequired && !m.responded
        })
        .await;
        three.asked.insert((name.clone(), m.id));
        three
            .sessions
            .insert(name.clone(), [done.id, waiting.id].into_iter().collect());
        three.names.push(name);
        three.kilns.push(tk);
    }
    three
}

impl Three {
    fn cru(&self, args: &[&str]) -> std::process::Output {
        cru_in(&self.outside, &self.state, args)
    }

    fn json(&self, args: &[&str]) -> Value {
        json_of(&self.cru(args))
    }

    fn path_of(&self, name: &str) -> String {
        let i = self.names.iter().position(|n| n == name).unwrap();
        self.kilns[i].root().display().to_string()
    }

    /// `cru session list --all-kilns --json`: each kiln's session ids, every row's
    /// `kiln_path` checked against its kiln.
    fn sessions_listed(&self) -> BTreeMap<String, BTreeSet<String>> {
        let rows = self.json(&["session", "list", "--all-kilns", "--json"]);
        let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for row in rows.as_array().expect("rows") {
            let kiln = row["kiln"].as_str().expect("a kiln").to_string();
            assert_eq!(row["kiln_path"], self.path_of(&kiln).as_str(), "{row}");
            let id = row["id"].as_str().expect("an id").to_string();
            listed.entry(kiln).or_default().insert(id);
        }
        listed
    }
}

#[tokio::test]
async fn sessions_usage_and_search_span_every_kiln_and_notify_names_the_kiln() {
    let mut three = three_kilns().await;

    // Every kiln's sessions, each named with its kiln, from a folder that is no kiln.
    assert_eq!(three.sessions_listed(), three.sessions);
    let table = stdout(&three.cru(&["session", "list", "--all-kilns"]));
    assert!(table.starts_with("KILN"), "{table}");
    for name in &three.names {
        assert_eq!(
            table
                .lines()
                .filter(|l| l.starts_with(name.as_str()))
                .count(),
            2,
            "{table}"
        );
    }
    assert!(!three.outside.join(".crucible").exists());

    // The notify command was told which kiln asked, by the name the registry gives it.
    let told = || {
        std::fs::read_to_string(&three.notified)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect::<BTreeSet<String>>()
    };
    wait_until("three notifications", Duration::from_secs(30), || {
        told().len() >= 3
    })
    .await;
    let expected: BTreeSet<String> = three
        .asked
        .iter()
        .map(|(name, id)| format!("{name}|{}|{id}", three.path_of(name)))
        .collect();
    assert_eq!(told(), expected);

    usage_adds_up_across_kilns(&three);
    search_merges_every_kiln(&three).await;

    // A kiln whose daemon stopped is started to be listed.
    let before = three.kilns[2].daemon_pid();
    drop(three.daemons.remove(2)); // killed and reaped
    let third = &three.kilns[2];
    assert_eq!(three.sessions_listed(), three.sessions);
    let pid = third.daemon_pid().expect("its daemon started again");
    assert_ne!(Some(pid), before);
    assert!(Client::connect(&third.kiln).await.is_ok());
    // One that cannot start is named in a warning; the others are listed.
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    for _ in 0..1500 {
        if Client::connect(&third.kiln).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let settings = third.kiln.settings_path();
    let broken = format!(
        "{}\n[[[ not toml\n",
        std::fs::read_to_string(&settings).unwrap()
    );
    std::fs::write(&settings, broken).unwrap();
    let out = three.cru(&["session", "list", "--all-kilns", "--json"]);
    let warning = format!("warning: kiln {}", three.names[2]);
    assert!(stderr(&out).contains(&warning), "{}", stderr(&out));
    let mut expected = three.sessions.clone();
    expected.remove(&three.names[2]);
    let rows = json_of(&out);
    let kilns: BTreeSet<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kiln"].as_str().unwrap())
        .collect();
    assert_eq!(kilns, expected.keys().map(String::as_str).collect());
}

/// `cru usage --all-kilns`: each kiln's tokens under its name, then the total across
/// kilns; a cost no kiln knew stays unknown (null), never summed as 0.
fn usage_adds_up_across_kilns(three: &Three) {
    let rows = three.json(&["usage", "--all-kilns", "--by", "agent", "--json"]);
    let rows = rows.as_array().expect("rows");
    let mut sessions = 0;
    let mut unknown = 0;
    for (i, name) in three.names.iter().enumerate() {
        let row = rows
            .iter()
            .find(|r| r["kiln"] == name.as_str() && r["key"] == "scripted")
            .unwrap_or_else(|| panic!("no row of kiln {name}: {rows:?}"));
        let (input, output) = tokens_of(i);
        assert_eq!(row["tokens"], input + output, "{row}");
        assert_eq!(row["cost_usd"], Value::Null, "{row}");
        assert_eq!(row["kiln_path"], three.path_of(name).as_str(), "{row}");
        sessions += row["sessions"].as_u64().unwrap();
        unknown += row["cost_unknown"].as_u64().unwrap();
    }
    let totals: Vec<&Value> = rows.iter().filter(|r| r["total"] == true).collect();
    assert_eq!(totals.len(), 1, "{rows:?}");
    let total = totals[0];
    assert_eq!(total["kiln"], Value::Null, "{total}");
    assert_eq!(total["key"], "scripted");
    assert_eq!(total["tokens"], 110 + 210 + 310, "{total}");
    assert_eq!(
        total["cost_usd"],
        Value::Null,
        "a cost no kiln knew is not 0: {total}"
    );
    assert_eq!(
        (total["sessions"].as_u64(), total["cost_unknown"].as_u64()),
        (Some(sessions), Some(unknown))
    );
    let table = stdout(&three.cru(&["usage", "--all-kilns", "--by", "agent"]));
    let all = table
        .lines()
        .find(|l| l.starts_with("all kilns"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(all.contains("630") && all.contains("unknown"), "{table}");
    for name in &three.names {
        assert!(
            table.lines().any(|l| l.starts_with(name.as_str())),
            "{table}"
        );
    }
}

/// `cru search --all-kilns`: every kiln's hits, best first, each with the kiln whose
/// session it is in.
async fn search_merges_every_kiln(three: &Three) {
    let search = || {
        three.json(&[
            "search",
            "--all-kilns",
            "zanzibar",
            "--type",
            "transcript",
            "--json",
        ])
    };
    let kilns_of = |hits: &Value| -> BTreeSet<String> {
        hits.as_array()
            .unwrap()
            .iter()
            .map(|h| h["kiln"].as_str().unwrap().to_string())
            .collect()
    };
    let every: BTreeSet<String> = three.names.iter().cloned().collect();
    wait_until(
        "every kiln's transcript hit",
        Duration::from_secs(30),
        || kilns_of(&search()) == every,
    )
    .await;
    let hits = search();
    let hits = hits.as_array().unwrap();
    for hit in hits {
        let kiln = hit["kiln"].as_str().unwrap();
        let session = hit["session_id"].as_str().unwrap();
        assert!(three.sessions[kiln].contains(session), "{hit}");
        assert_eq!(hit["kiln_path"], three.path_of(kiln).as_str());
    }
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "best first: {scores:?}"
    );
    let table = stdout(&three.cru(&["search", "--all-kilns", "zanzibar"]));
    assert!(table.starts_with("KILN"), "{table}");
    for name in &three.names {
        assert!(
            table.lines().any(|l| l.starts_with(name.as_str())),
            "{table}"
        );
    }
    let limited = three.json(&[
        "search",
        "--all-kilns",
        "zanzibar",
        "--limit",
        "1",
        "--json",
    ]);
    assert_eq!(limited.as_array().unwrap().len(), 1, "{limited}");
}
