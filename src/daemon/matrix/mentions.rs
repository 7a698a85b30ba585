//! Who a question is for: the allowed users who are in its room, mentioned so that a room
//! set to notify on mentions only still pushes it. The event's `m.mentions` lists them;
//! the text names them, as a client shows a mention (a link to `https://matrix.to/#/<id>`
//! in the HTML, the plain id in the text). Nobody else in the room is mentioned.

use matrix_sdk::Room;
use matrix_sdk::ruma::events::Mentions;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::events::room::message::{FormattedBody, RoomMessageEventContent};
use matrix_sdk::ruma::{OwnedUserId, UserId};

use super::Bot;

impl Bot {
    /// The allowed users who are in `room` (joined, or invited to it).
    pub(super) async fn people_in(&self, room: &Room) -> Vec<OwnedUserId> {
        let mut people = Vec::new();
        for user in &self.config.allowed_users {
            let Ok(user) = UserId::parse(user.as_str()) else {
                continue;
            };
            let member = room.get_member(&user).await;
            if let Ok(Some(member)) = member
                && matches!(
                    member.membership(),
                    MembershipState::Join | MembershipState::Invite
                )
            {
                people.push(user);
            }
        }
        people
    }
}

/// A message in Markdown that mentions `people` in a line of its own after the text.
pub(super) fn mentioning(markdown: &str, people: Vec<OwnedUserId>) -> RoomMessageEventContent {
    if people.is_empty() {
        return RoomMessageEventContent::text_markdown(markdown);
    }
    let plain = people
        .iter()
        .map(|u| u.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let links = people
        .iter()
        .map(|u| format!("[{u}](https://matrix.to/#/{u})"))
        .collect::<Vec<_>>()
        .join(" ");
    let body = format!("{markdown}\n\n{plain}");
    let content = match FormattedBody::markdown(format!("{markdown}\n\n{links}")) {
        Some(html) => RoomMessageEventContent::text_html(body, html.body),
        None => RoomMessageEventContent::text_plain(body),
    };
    content.add_mentions(Mentions::with_user_ids(people))
}

#[cfg(test)]
mod tests {
    use super::*;
    use matrix_sdk::ruma::events::room::message::MessageType;

    #[test]
    fn a_mention_names_the_person_as_a_link_and_in_the_event() {
        let alice: OwnedUserId = "@alice:example.org".try_into().unwrap();
        let content = mentioning("**Approval Required**", vec![alice.clone()]);
        let MessageType::Text(text) = &content.msgtype else {
            panic!("a text message: {content:?}");
        };
        assert!(
            text.body.ends_with("\n\n@alice:example.org"),
            "{}",
            text.body
        );
        let html = &text.formatted.as_ref().unwrap().body;
        assert!(
            html.contains(
                r#"<a href="https://matrix.to/#/@alice:example.org">@alice:example.org</a>"#
            ),
            "{html}"
        );
        assert!(
            html.contains("<strong>Approval Required</strong>"),
            "{html}"
        );
        let mentioned = content.mentions.unwrap().user_ids;
        assert_eq!(mentioned.into_iter().collect::<Vec<_>>(), vec![alice]);
        // Nobody to mention: the plain message, no `m.mentions` naming anyone.
        let content = mentioning("**Question**", Vec::new());
        assert!(content.mentions.is_none_or(|m| m.user_ids.is_empty()));
    }
}
