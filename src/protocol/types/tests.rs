//! The wire types' round trips and the inbox's answers.

mod wire {
    use super::super::*;

    fn message(msg_type: MsgType, options: Option<Vec<&str>>) -> InboxMessage {
        InboxMessage {
            kiln: None,
            digest: None,
            id: "m".into(),
            session_id: "s".into(),
            session_name: "main @ a".into(),
            timestamp: "2026-01-01T00:00:00Z".into(),
            msg_type,
            title: "t".into(),
            body: None,
            options: options.map(|o| o.into_iter().map(String::from).collect()),
            option_kinds: None,
            rule: None,
            operation: None,
            read: false,
            responded: false,
            response: None,
            withdrawn: false,
            answered_by: None,
            purpose: None,
        }
    }

    #[test]
    fn a_plan_review_takes_its_options_or_comments_on_its_own_steps() {
        let mut review = message(
            MsgType::ApprovalRequired,
            Some(vec!["Approve the plan", "Reject the plan"]),
        );
        review.option_kinds = Some(vec!["allow_once".into(), "reject_once".into()]);
        review.purpose = Some(Purpose::PlanReview { steps: 3 });
        assert_eq!(
            review.answer_for("approve").as_deref(),
            Some("Approve the plan")
        );
        assert_eq!(review.answer_for("2").as_deref(), Some("Reject the plan"));
        let two = "2: use the view\n3. not this table; keep the index";
        assert_eq!(review.answer_for(two).as_deref(), Some(two));
        assert_eq!(
            plan_comments(two, 3),
            Some(vec![
                (2, "use the view".to_string()),
                (3, "not this table; keep the index".to_string())
            ])
        );
        assert_eq!(
            plan_comments("1: a; 3) b", 3),
            Some(vec![(1, "a".to_string()), (3, "b".to_string())])
        );
        // A step the plan does not have, an empty comment, words without a step: refused.
        for wrong in ["4: no such step", "0: none", "2:", "use the view", "maybe"] {
            assert_eq!(review.answer_for(wrong), None, "{wrong}");
        }
        // Comments answer only a plan's review.
        review.purpose = Some(Purpose::Approval);
        assert_eq!(review.answer_for(two), None);
    }

    #[test]
    fn what_was_asked_has_one_digest_and_any_change_of_it_another() {
        let a = message(MsgType::DecisionNeeded, Some(vec!["JWT", "Session"]));
        let mut same = a.clone();
        same.id = "other".into();
        same.read = true;
        assert_eq!(
            a.asked(),
            same.asked(),
            "the id and state are not what was asked"
        );
        let mut other = a.clone();
        other.options = Some(vec!["JWT".into(), "Cookie".into()]);
        assert_ne!(a.asked(), other.asked());
        let mut reworded = a.clone();
        reworded.title = "t2".into();
        assert_ne!(a.asked(), reworded.asked());
        assert_eq!(a.asked().len(), 16);
    }

    #[test]
    fn a_purpose_is_an_object_on_the_wire_and_read_from_the_store_s_text_or_absent() {
        let mut asked = message(MsgType::DecisionNeeded, Some(vec!["a", "b"]));
        asked.purpose = Some(Purpose::ContextMiss {
            path: "/k/README.md".into(),
        });
        let wire = serde_json::to_value(&asked).unwrap();
        assert_eq!(
            wire["purpose"],
            serde_json::json!({"kind": "context_miss", "path": "/k/README.md"})
        );
        assert_eq!(
            serde_json::from_value::<InboxMessage>(wire.clone()).unwrap(),
            asked
        );
        let mut stored = wire;
        stored["purpose"] = serde_json::Value::String(stored["purpose"].to_string());
        assert_eq!(
            serde_json::from_value::<InboxMessage>(stored).unwrap(),
            asked
        );
        // A message without one (every message before purposes, and people's) says nothing.
        let plain = serde_json::to_value(message(MsgType::Info, None)).unwrap();
        assert!(plain.get("purpose").is_none(), "{plain}");
        let old: InboxMessage = serde_json::from_value(plain).unwrap();
        assert_eq!(old.purpose, None);
        for (purpose, kind) in [
            (Purpose::BudgetRaise, "budget_raise"),
            (Purpose::Approval, "approval"),
        ] {
            assert_eq!(serde_json::to_value(&purpose).unwrap()["kind"], kind);
        }
    }

    #[test]
    fn event_round_trips_through_a_notification() {
        let event = Event::InboxCreated(message(MsgType::Info, None));
        let back = Event::from_notification(event.method(), event.params()).unwrap();
        assert_eq!(back, event);
        let gone = Event::InboxDeleted {
            ids: vec!["a".into()],
        };
        assert_eq!(
            Event::from_notification(gone.method(), gone.params()).unwrap(),
            gone
        );
    }

    #[test]
    fn accepted_answers_follow_the_type() {
        assert_eq!(message(MsgType::Info, None).accepted_answers(), None);
        assert_eq!(
            message(MsgType::ApprovalRequired, None)
                .accepted_answers()
                .unwrap(),
            vec!["approve", "deny"]
        );
        assert_eq!(
            message(MsgType::DecisionNeeded, Some(vec!["JWT", "Session"]))
                .accepted_answers()
                .unwrap(),
            vec!["JWT", "Session"]
        );
        assert!(
            message(MsgType::DecisionNeeded, None)
                .accepted_answers()
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn msg_type_names_match_the_seed() {
        for t in MsgType::ALL {
            assert_eq!(MsgType::parse(t.as_str()), Some(t));
            assert_eq!(
                serde_json::to_value(t).unwrap(),
                serde_json::json!(t.as_str())
            );
        }
    }
}

mod answers {
    use super::super::*;

    fn approval(options: &[&str]) -> InboxMessage {
        serde_json::from_value(serde_json::json!({
            "id": "m1", "session_id": "s1", "session_name": "s", "timestamp": "2026-01-01T00:00:00Z",
            "msg_type": "approval_required", "title": "Run it?",
            "options": options, "read": false, "responded": false,
        }))
        .unwrap()
    }

    #[test]
    fn answers_by_text_number_or_intent() {
        let codex = approval(&[
            "Yes, proceed",
            "Yes, and don't ask again for this command",
            "No, and tell Codex what to do differently",
        ]);
        assert_eq!(
            codex.answer_for("yes, PROCEED").as_deref(),
            Some("Yes, proceed")
        );
        assert_eq!(
            codex.answer_for("2").as_deref(),
            Some("Yes, and don't ask again for this command")
        );
        assert_eq!(
            codex.answer_for("approve").as_deref(),
            Some("Yes, proceed"),
            "the once option"
        );
        assert_eq!(
            codex.answer_for("deny").as_deref(),
            Some("No, and tell Codex what to do differently")
        );
        assert_eq!(codex.answer_for("4"), None);
        assert_eq!(codex.answer_for("0"), None);
        assert_eq!(codex.answer_for("maybe"), None);
        let plain = approval(&[]);
        assert_eq!(plain.answer_for("APPROVE").as_deref(), Some("approve"));
    }

    #[test]
    fn intent_words_follow_the_acp_kinds_when_the_agent_gave_them() {
        // Names that start with no word of intent, as some agents write them.
        let mut asked = approval(&["Always", "Just this once", "Never", "Not now"]);
        assert_eq!(
            asked.answer_for("approve"),
            None,
            "no kinds, no matching word"
        );
        asked.option_kinds = Some(
            ["allow_always", "allow_once", "reject_always", "reject_once"]
                .map(String::from)
                .to_vec(),
        );
        assert_eq!(
            asked.answer_for("approve").as_deref(),
            Some("Just this once")
        );
        assert_eq!(asked.answer_for("yes").as_deref(), Some("Just this once"));
        assert_eq!(asked.answer_for("deny").as_deref(), Some("Not now"));
        assert_eq!(asked.answer_for("2").as_deref(), Some("Just this once"));
        asked.option_kinds = Some(["allow_always", "reject_always"].map(String::from).to_vec());
        asked.options = Some(vec!["Always".into(), "Never".into()]);
        assert_eq!(
            asked.answer_for("approve").as_deref(),
            Some("Always"),
            "the always-option when there is no once-option"
        );
    }
}
