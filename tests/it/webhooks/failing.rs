//! A webhook whose every delivery fails counts them in its answers, says it once in the
//! inbox and once in the log, and says in the log when it delivers again.

use std::time::{Duration, Instant};

use serde_json::json;

use super::cron_kept::inbox_errors;
use super::{SECRET, hook_kiln, listening, sign};
use crate::common::*;

#[tokio::test]
async fn a_webhook_whose_deliveries_fail_counts_them_and_says_it_once() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    // The hook names an agent profile there is not: no delivery can make its session.
    let broken = "[[webhooks]]\nname = \"broken\"\nsecret_env = \"HOOK_SECRET\"\n\
                  agent = \"gone\"\nprompt = \"{{/comment/body}}\"\nref = \"/issue/number\"\n";
    let tk = hook_kiln(dir.path(), port, broken);
    let (_daemon, hook) = listening(&tk, port).await;
    let client = tk.client().await;

    let mut answers = Vec::new();
    for issue in [1, 2, 3] {
        let body = serde_json::to_vec(&json!({
            "action": "created",
            "issue": {"number": issue},
            "comment": {"body": "please look"},
        }))
        .unwrap();
        let (status, reply) = hook.post("broken", &body, Some(sign(SECRET, &body))).await;
        assert!(status >= 400, "{status} {reply}");
        answers.push(reply["error"]["message"].as_str().unwrap_or("").to_string());
    }
    assert!(answers[0].contains("gone"), "{answers:?}");
    assert!(
        answers[2].contains("3 deliveries of this hook in a row failed"),
        "{answers:?}"
    );

    // Said once in the inbox, naming the hook and the error.
    let deadline = Instant::now() + Duration::from_secs(30);
    let errors = loop {
        let errors = inbox_errors(&client).await;
        if !errors.is_empty() || Instant::now() >= deadline {
            break errors;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].title.contains("broken"), "{:?}", errors[0]);
    assert!(
        errors[0]
            .body
            .as_deref()
            .is_some_and(|b| b.contains("gone")),
        "{:?}",
        errors[0]
    );

    // `cron list` shows the hook's row, with its last error.
    let out = tk.cru(&["cron", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed["hooks"][0]["name"], "broken", "{listed}");
    assert_eq!(listed["hooks"][0]["failures"], 3, "{listed}");
    let out = tk.cru(&["cron", "list"]);
    assert!(
        stdout(&out).contains("webhook broken: 3 deliveries in a row failed"),
        "{}",
        stdout(&out)
    );

    // Mended, it delivers again, and the log says so; it warned once for the row.
    let settings = std::fs::read_to_string(tk.kiln.settings_path()).unwrap();
    std::fs::write(
        tk.kiln.settings_path(),
        settings.replace("agent = \"gone\"", "agent = \"hook\""),
    )
    .unwrap();
    let body = serde_json::to_vec(&json!({
        "action": "created",
        "issue": {"number": 4},
        "comment": {"body": "again"},
    }))
    .unwrap();
    // The listener reads the settings as the watcher sees them: a moment after saving.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, reply) = hook.post("broken", &body, Some(sign(SECRET, &body))).await;
        if status == 202 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never delivered: {status} {reply}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log_path = tk.kiln.log_dir().join("daemon.log");
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_until(
        "the log to say it delivers again",
        Duration::from_secs(30),
        || read_log().contains("webhook delivers again"),
    )
    .await;
    let log = read_log();
    let warned = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("webhook delivery failed"))
        .count();
    assert_eq!(warned, 1, "{log}");
    assert_eq!(inbox_errors(&client).await.len(), 1);
}
