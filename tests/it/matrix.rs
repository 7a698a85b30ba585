//! The Matrix test equipment itself, on real parts: a Synapse homeserver
//! (testkit/src/synapse.rs) and two people on real Matrix clients
//! (testkit/src/matrix_human.rs) talking end-to-end encrypted, through a homeserver
//! that is killed and comes back.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::CRU;
use crate::matrix_human::{Human, Relation};
use crate::synapse::Homeserver;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_equipment_speaks_real_matrix_end_to_end_encrypted() {
    let started = Instant::now();
    let mut homeserver = Homeserver::start(Path::new(CRU)).await;
    eprintln!("Synapse answered after {:?}", started.elapsed());
    let alice_id = homeserver.register("alice", "alice-password", false).await;
    let bob_id = homeserver.register("bob", "bob-password", true).await;
    assert_eq!(alice_id, "@alice:localhost");
    assert_eq!(bob_id, "@bob:localhost");

    let alice = Human::login(&homeserver.url(), "alice", "alice-password").await;
    let bob = Human::login(&homeserver.url(), "bob", "bob-password").await;
    assert_eq!(alice.user_id(), alice_id.as_str());

    let room = alice.create_encrypted_room(&[&bob_id], true).await;
    bob.join(&room).await;
    alice.wait_until_joined(&room, &bob_id, WAIT).await;

    let hello = alice.send_text(&room, "hello").await;
    let got = bob
        .wait_for_message(&room, |m| m.event_id == hello, WAIT)
        .await;
    assert_eq!(got.sender, alice_id.as_str());
    assert_eq!(got.body, "hello");
    assert_eq!(got.msgtype, "m.text");
    assert_eq!(got.relation, Relation::None);
    assert!(got.encrypted, "bob got it decrypted: {got:?}");
    // What the homeserver holds is ciphertext: the words never reached it.
    let stored = bob.server_copy(&room, &hello).await;
    assert_eq!(stored["type"], "m.room.encrypted", "{stored}");
    assert_eq!(stored["content"]["algorithm"], "m.megolm.v1.aes-sha2");
    assert!(!stored.to_string().contains("hello"), "{stored}");

    let tick = bob.react(&room, &hello, "✅").await;
    let reaction = alice
        .wait_for_message(&room, |m| m.event_id == tick, WAIT)
        .await;
    assert_eq!(reaction.sender, bob_id.as_str());
    assert_eq!(
        reaction.relation,
        Relation::Reaction {
            key: "✅".into(),
            target: hello.clone()
        }
    );

    // Killed without warning and back on the same port with the same data: both clients
    // sync again and the room's keys still work.
    homeserver.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let restarted = Instant::now();
    homeserver.start_again().await;
    eprintln!("Synapse answered again after {:?}", restarted.elapsed());
    let again = alice.send_text(&room, "still there?").await;
    let got = bob
        .wait_for_message(&room, |m| m.event_id == again, WAIT)
        .await;
    assert_eq!(got.body, "still there?");
    assert!(got.encrypted);
    let reply = bob.send_text(&room, "yes").await;
    let got = alice
        .wait_for_message(&room, |m| m.event_id == reply, WAIT)
        .await;
    assert_eq!((got.sender, got.body.as_str()), (bob.user_id(), "yes"));
    assert!(got.encrypted);

    // Each saw only what was said, once: no message twice after the reconnection.
    let bodies = |h: &Human| {
        h.all_received()
            .into_iter()
            .filter(|m| m.room == room)
            .map(|m| m.body)
            .collect::<Vec<_>>()
    };
    assert_eq!(bodies(&alice), ["hello", "✅", "still there?", "yes"]);
    assert_eq!(bodies(&bob), ["hello", "✅", "still there?", "yes"]);
}
