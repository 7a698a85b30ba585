//! The person's day budget across their kilns: `[budget] person_day_cost` in the user's
//! own settings (a temp `XDG_CONFIG_HOME` here) counts what every running kiln of their
//! registry (a temp `XDG_STATE_HOME`) spent today, so a kiln that spent nothing refuses
//! a turn once another kiln spent the person's day.

use std::process::{Command, Stdio};

use crucible::protocol::MsgType;

use crate::common::*;
use crate::sessions::{agent_kiln, create, said, wait_message_where, wait_session};

#[tokio::test]
async fn a_turn_in_a_kiln_that_spent_nothing_is_refused_past_the_persons_limit() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let config = home.path().join("config");
    std::fs::create_dir_all(config.join("crucible")).unwrap();
    std::fs::write(
        config.join("crucible/config.toml"),
        "[budget]\nperson_day_cost = 1.0\n",
    )
    .unwrap();
    let spender = agent_kiln("[kiln]\nname = \"spender\"\n");
    let quiet = agent_kiln("[kiln]\nname = \"quiet\"\n");
    let mut daemons = Vec::new();
    for tk in [&spender, &quiet] {
        let mut daemon = Command::new(CRU);
        daemon
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CONFIG_HOME", &config)
            .stderr(Stdio::piped());
        daemons.push(tk.run_daemon(daemon).await);
    }

    // The first kiln spends 1.50 USD of the person's 1.00.
    let client = spender.client().await;
    let s = create(&client, "scripted", Some("usage 10 100 1.5 USD\nsay spent")).await;
    wait_session(&client, &s.id, "the reported cost", |s| {
        s.spent.as_ref().and_then(|s| s.cost) == Some(1.5)
    })
    .await;

    // The second kiln spent nothing, yet its first turn waits, and its inbox asks.
    let client = quiet.client().await;
    let s = create(&client, "scripted", Some("say should wait")).await;
    let question = wait_message_where(&client, &s.id, "the person's budget question", |m| {
        m.msg_type == MsgType::DecisionNeeded
    })
    .await;
    assert_eq!(
        question.title,
        "Budget reached: your day budget across all your kilns: 1.50 of 1.00 USD \
         (this kiln 0.00 USD, spender 1.50 USD)"
    );
    assert_eq!(
        question.options.as_deref(),
        Some(&["Raise by 1.00 USD".to_string(), "Stop the session".into()][..])
    );
    assert!(!said(&client, &s.id).await.contains("should wait"));
    drop(daemons);
}
