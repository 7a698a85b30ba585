//! An answer names the question it answers: `inbox.respond` with the digest of another
//! question is refused (-32003) and answers nothing; with the question's own digest, or
//! none, it is answered. The workbench sends the digest of what it showed.

use crucible::protocol::methods as m;
use crucible::protocol::{InboxMessage, MsgType, RespondParams, code};

use crate::sessions::{agent_kiln, create, wait_message_where};

#[tokio::test]
async fn an_answer_naming_another_question_is_refused_and_answers_nothing() {
    let tk = agent_kiln("");
    let client = tk.client().await;
    let s = create(&client, "scripted", Some("permit p1 Deploy it\nsay done")).await;
    let asked: InboxMessage = wait_message_where(&client, &s.id, "the approval", |m| {
        m.msg_type == MsgType::ApprovalRequired && !m.responded
    })
    .await;
    let digest = asked.digest.clone().expect("a new question has its digest");
    assert_eq!(digest, asked.asked(), "the digest is what was asked");

    let refused = client
        .call::<m::InboxRespond>(&RespondParams {
            id: asked.id.clone(),
            response: "approve".into(),
            asked: Some("0123456789abcdef".into()),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.rpc_code(), Some(code::CONFLICT), "{refused}");
    assert!(refused.words().contains("Deploy it"), "{refused}");
    let still = client
        .call::<m::InboxGet>(&crucible::protocol::IdParams {
            id: asked.id.clone(),
        })
        .await
        .unwrap()
        .message;
    assert!(!still.responded, "nothing was answered");

    let answered = client
        .call::<m::InboxRespond>(&RespondParams {
            id: asked.id.clone(),
            response: "approve".into(),
            asked: Some(digest),
        })
        .await
        .unwrap()
        .message;
    assert!(answered.responded);
}
