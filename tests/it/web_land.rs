//! Landing from the web page, in a real browser, the work of an agent that does not
//! commit (as codex and command agents leave theirs): Merge says which changes no commit
//! holds and, on a yes, commits them and lands the branch; `/commit` typed in the message
//! box commits rather than reaching the agent as a prompt; and messages only to be read
//! are marked read in one click.

use crucible::protocol::SessionState;
use crucible::protocol::methods as m;
use crucible::protocol::params::ListParams;
use testkit::daemon::call;

use crate::common::*;
use crate::sessions::{agent_kiln, session, wait_state};

#[tokio::test]
async fn merge_on_the_page_commits_an_agents_uncommitted_work_on_a_yes_and_lands_it() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let id = crate::web::session_new(&tk, "write notes.txt from the agent\nsay wrote it");
    let worktree = wait_state(&client, &id, SessionState::Complete)
        .await
        .worktree
        .expect("a worktree");

    let browser = crate::web::desktop_paired(&tk, &[]).await;
    let row = format!("li.session[data-session-id='{id}'] button");
    browser
        .wait_for(
            "the session",
            &format!("return document.querySelector(\"{row}\")"),
        )
        .await;
    browser.click(&row).await;
    // Every question the page asks is answered yes, and kept to be read.
    browser
        .run(
            "window.asked = []; window.confirm = (q) => { window.asked.push(q); return true; };",
            vec![],
        )
        .await;
    browser.click("#show-diff").await;
    browser
        .wait_for(
            "the diff",
            "return document.getElementById('diff-files').innerText.includes('notes.txt')",
        )
        .await;
    browser.click("#merge").await;
    browser
        .wait_for(
            "the merge done",
            "return document.getElementById('status').textContent.startsWith('Merged into')",
        )
        .await;
    let asked = browser.run("return window.asked", vec![]).await;
    let asked = asked.as_array().unwrap();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[1].as_str().unwrap().contains("notes.txt")
            && asked[1].as_str().unwrap().contains("Commit them"),
        "what is committed is named before it is: {asked:?}"
    );
    // Landed on the kiln's branch.
    let shown = std::process::Command::new("git")
        .arg("-C")
        .arg(tk.root())
        .args(["show", "HEAD:notes.txt"])
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "notes.txt is not on the kiln's branch"
    );
    assert_eq!(String::from_utf8_lossy(&shown.stdout), "from the agent");

    // `/commit` in the message box commits; the agent gets no prompt.
    browser.click("#close-diff").await;
    std::fs::write(std::path::Path::new(&worktree).join("more.txt"), "more").unwrap();
    let turns_before = session(&client, &id).await.turn_count;
    browser
        .run(
            "const p = document.getElementById('prompt'); p.value = '/commit more notes'; \
             document.getElementById('prompt-form').requestSubmit();",
            vec![],
        )
        .await;
    browser
        .wait_for(
            "the commit",
            "return document.getElementById('status').textContent.startsWith('Committed')",
        )
        .await;
    let log = std::process::Command::new("git")
        .arg("-C")
        .arg(&worktree)
        .args(["log", "-1", "--format=%s"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "more notes");
    let turns_after = session(&client, &id).await.turn_count;
    assert_eq!(turns_before, turns_after, "the agent got a prompt");

    // The done message, only to be read, is marked read from the inbox in one click.
    browser
        .wait_for(
            "the mark-read button",
            "const b = document.getElementById('mark-read'); return b && !b.hidden",
        )
        .await;
    browser.click("#mark-read").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let unread = ListParams {
            unread_only: true,
            ..Default::default()
        };
        let list = call::<m::InboxList>(&client, unread).await.messages;
        if list.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still unread: {list:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    browser.close().await;
}
