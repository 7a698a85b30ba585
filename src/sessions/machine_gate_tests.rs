//! The approval gate's rows of the session machine's table: every outcome of the rules'
//! judgement (free, allowed, approved before, denied, asked then approved or denied, a
//! context miss), the agent's own "always" option remembered, credentials, rules
//! switched off, what the agent ran by itself and the approvals it asks for itself.
//! Then whole sequences with the real rules ([`Gate`]) between the machine's
//! [`Effect::Judge`] and its [`SessionInput::Judged`]: a second identical operation
//! passes without asking, a credential is asked for once per session, a rule switched
//! off stops asking, and a reset session starts with nothing approved.

use std::sync::Arc;

use super::*;
use crate::kiln::Kiln;
use crate::protocol::SecurityState;
use crate::sessions::guard::gate::Gate;
use crate::sessions::guard::rule_files::{RuleBook, rules_path};

const RULE: &str = "ask-deploy";
const WHY: &str = "Rule ask-deploy: deploys need a person.";
const MISS: &str = "CONTEXT_MISS: /home/x/.ssh/id is outside the read manifest [src/**]";

fn deploy() -> Operation {
    Operation {
        kind: OperationKind::Execute,
        command: Some("make deploy".into()),
        ..Default::default()
    }
}

fn choice(id: &str, name: &str, kind: OptionKind) -> PermissionChoice {
    let (id, name) = (id.into(), name.into());
    PermissionChoice { id, name, kind }
}

/// The agent's options: always, once, reject.
fn agent_options() -> Vec<PermissionChoice> {
    vec![
        choice("always", "Always", OptionKind::AllowAlways),
        choice("once", "Once", OptionKind::AllowOnce),
        choice("no", "No", OptionKind::RejectOnce),
    ]
}

fn operation(key: Key) -> GateRequest {
    let operation = deploy();
    GateRequest::Operation { key, operation }
}

fn permission_request(key: Key) -> GateRequest {
    GateRequest::Permission {
        key,
        title: TITLE.into(),
        tool_call_id: "t1".into(),
        options: agent_options(),
        operation: deploy(),
    }
}

fn judged(request: GateRequest, judgement: Judgement) -> SessionInput {
    let changed = false;
    SessionInput::Judged {
        request,
        judgement,
        changed,
    }
}

fn allowed() -> Judgement {
    let rule = "allow-make".into();
    Judgement::Allowed { rule }
}

fn denied() -> Judgement {
    let (rule, reason) = ("deny-deploy".into(), "refused by rule deny-deploy".into());
    Judgement::Denied { rule, reason }
}

fn asked() -> Judgement {
    Judgement::Ask {
        rule: RULE.into(),
        title: format!("Approval required [rule: {RULE}]"),
        reason: WHY.into(),
    }
}

fn miss() -> Judgement {
    let (path, reason) = ("/home/x/.ssh/id".into(), MISS.into());
    Judgement::ContextMiss { path, reason }
}

fn credential(key: Key, approved: bool) -> SessionInput {
    let name = "GH_TOKEN".into();
    SessionInput::Credential {
        key,
        name,
        approved,
    }
}

fn gate_reply(key: Key, reply: GateReply) -> Effect {
    Effect::ReplyGate { key, reply }
}

fn by_rules(what: &str, status: &str) -> Vec<Effect> {
    let line = Line::new(EntryKind::Permission).text(what).status(status);
    let (answer, by) = (status.into(), "rules".into());
    vec![
        Effect::Append(line),
        Effect::Audit(AuditEvent::PermissionAnswered { answer, by }),
    ]
}

fn by_human(answer: &str) -> Effect {
    let (answer, by) = (answer.into(), "human (inbox)".into());
    Effect::Audit(AuditEvent::PermissionAnswered { answer, by })
}

fn remembered(operation: &Operation) -> Vec<Effect> {
    let fingerprint = operation.fingerprint();
    let description = operation.describe();
    vec![
        Effect::Record(RecordChange::OperationApproved {
            fingerprint,
            description,
        }),
        Effect::Save,
    ]
}

fn asked_line(title: &str) -> Effect {
    Effect::Append(Line::new(EntryKind::Permission).text(title).tool(""))
}

/// The approval crucible posts for a question of its own (a rule's, a credential's).
fn asks(title: &str, reason: &str, rule: &str, operation: &str) -> Vec<Effect> {
    let body = format!(
        "{reason}\n\nThe agent asks for permission and waits for your answer.\n\
         Options: Allow (allow once), Deny (reject once)"
    );
    vec![
        asked_line(title),
        Effect::Ask {
            key: 1,
            title: title.into(),
            body,
            options: Some(vec!["Allow".into(), "Deny".into()]),
            kinds: Some(vec!["allow_once".into(), "reject_once".into()]),
            flagged: Some(Flagged {
                rule: rule.into(),
                operation: operation.into(),
            }),
        },
    ]
}

/// A turn whose operation (request 1) a rule asked about, posted as `m1`.
fn rule_asking() -> Vec<SessionInput> {
    plus(
        working("go"),
        [judged(operation(1), asked()), posted(1, "m1")],
    )
}

pub(super) fn rule_outcomes() -> Vec<Case> {
    let run = "execute: make deploy";
    let rule_title = format!("Approval required [rule: {RULE}]");
    vec![
        case(
            "free: an operation no rule has a word on proceeds, unnoted",
            working("go"),
            judged(operation(1), Judgement::Free),
            vec![gate_reply(1, GateReply::Proceed)],
        )
        .ends("turn"),
        case(
            "allow: it proceeds, in the transcript and the audit log",
            working("go"),
            judged(operation(1), allowed()),
            cat([
                by_rules(run, "allowed by rule allow-make"),
                vec![gate_reply(1, GateReply::Proceed)],
            ]),
        )
        .ends("turn"),
        case(
            "deny: it is refused with the rule's reason",
            working("go"),
            judged(operation(1), denied()),
            cat([
                by_rules(run, "denied by rule deny-deploy"),
                vec![gate_reply(
                    1,
                    GateReply::Refuse("refused by rule deny-deploy".into()),
                )],
            ]),
        )
        .ends("turn"),
        case(
            "ask: an approval with the rule's reason, flagged with the rule",
            working("go"),
            judged(operation(1), asked()),
            asks(&rule_title, WHY, RULE, run),
        )
        .ends("turn"),
        case(
            "approved before: the same operation proceeds without asking",
            working("go"),
            judged(operation(1), Judgement::Approved),
            vec![gate_reply(1, GateReply::Proceed)],
        )
        .ends("turn"),
        case(
            "a rule activated by the operation is saved before the answer",
            working("go"),
            SessionInput::Judged {
                request: operation(1),
                judgement: Judgement::Free,
                changed: true,
            },
            vec![Effect::Save, gate_reply(1, GateReply::Proceed)],
        )
        .ends("turn"),
        case(
            "a context miss: refused, noted, and the session ends",
            working("go"),
            judged(operation(1), miss()),
            vec![
                gate_reply(1, GateReply::Refuse(MISS.into())),
                line(EntryKind::Error, MISS),
                Effect::Audit(AuditEvent::FileRead {
                    path: "/home/x/.ssh/id".into(),
                    allowed: false,
                    reason: Some(MISS.into()),
                }),
                Effect::StopAgent,
            ],
        )
        .ends("turn"),
        case(
            "after a context miss nothing more goes through the gate",
            plus(working("go"), [judged(operation(1), miss())]),
            SessionInput::Gate(operation(2)),
            vec![gate_reply(2, GateReply::Refuse(MISS.into()))],
        )
        .ends("turn"),
        case(
            "an operation for the gate is judged by the rules",
            working("go"),
            SessionInput::Gate(operation(1)),
            vec![Effect::Judge(operation(1))],
        )
        .ends("turn"),
    ]
}

pub(super) fn human_answers() -> Vec<Case> {
    use SessionState::*;
    let rule_title = format!("Approval required [rule: {RULE}]");
    vec![
        case(
            "ask, then approved: it proceeds, and is remembered for the session",
            rule_asking(),
            answered("m1", "Allow"),
            cat([
                remembered(&deploy()),
                vec![
                    by_human("allow"),
                    gate_reply(1, GateReply::Proceed),
                    Effect::Append(
                        Line::new(EntryKind::Permission)
                            .text(&rule_title)
                            .status("Allow"),
                    ),
                    settle(Working),
                ],
            ]),
        )
        .ends("turn"),
        case(
            "ask, then denied: refused, naming the rule",
            rule_asking(),
            answered("m1", "Deny"),
            vec![
                by_human("deny"),
                gate_reply(
                    1,
                    GateReply::Refuse(format!("denied by the human (rule {RULE})")),
                ),
                Effect::Append(
                    Line::new(EntryKind::Permission)
                        .text(&rule_title)
                        .status("Deny"),
                ),
                settle(Working),
            ],
        )
        .ends("turn"),
        case(
            "ask, then withdrawn with the turn: refused, naming the rule",
            rule_asking(),
            SessionInput::Cancel,
            vec![
                Effect::CancelTurn,
                Effect::Audit(AuditEvent::PermissionAnswered {
                    answer: "none".into(),
                    by: "nobody: withdrawn or cancelled".into(),
                }),
                gate_reply(
                    1,
                    GateReply::Refuse(format!("denied by the human (rule {RULE})")),
                ),
                Effect::Withdraw {
                    message_id: "m1".into(),
                    note: "withdrawn: the turn was cancelled".into(),
                },
                Effect::Append(
                    Line::new(EntryKind::Permission)
                        .text(&rule_title)
                        .status("withdrawn"),
                ),
                settle(Working),
                reply(Reply::Cancelled),
            ],
        )
        .ends("turn"),
    ]
}

/// The agent's option `option` chosen for its permission request 1.
fn pick(option: &str) -> Effect {
    gate_reply(1, GateReply::Choose(Some(option.into())))
}

/// The agent's permission requests as the rules judge them.
pub(super) fn permissions() -> Vec<Case> {
    let asked_audit = || {
        let (title, message_id) = (TITLE.into(), None);
        Effect::Audit(AuditEvent::PermissionAsked { title, message_id })
    };
    vec![
        case(
            "the agent's permission request is audited, then judged",
            working("go"),
            SessionInput::Gate(permission_request(1)),
            vec![asked_audit(), Effect::Judge(permission_request(1))],
        )
        .ends("turn"),
        case(
            "allow: the agent's first approving option is chosen for it",
            working("go"),
            judged(permission_request(1), allowed()),
            cat([
                by_rules(TITLE, "allowed by rule allow-make"),
                vec![pick("always")],
            ]),
        )
        .ends("turn"),
        case(
            "deny: the agent's first rejecting option is chosen for it",
            working("go"),
            judged(permission_request(1), denied()),
            cat([
                by_rules(TITLE, "denied by rule deny-deploy"),
                vec![pick("no")],
            ]),
        )
        .ends("turn"),
        case(
            "approved before: allowed without asking",
            working("go"),
            judged(permission_request(1), Judgement::Approved),
            cat([
                by_rules(TITLE, "allowed: approved before in this session"),
                vec![pick("always")],
            ]),
        )
        .ends("turn"),
        case(
            "a context miss: the agent is refused and the session ends",
            working("go"),
            judged(permission_request(1), miss()),
            vec![
                pick("no"),
                line(EntryKind::Error, MISS),
                Effect::Audit(AuditEvent::FileRead {
                    path: "/home/x/.ssh/id".into(),
                    allowed: false,
                    reason: Some(MISS.into()),
                }),
                Effect::StopAgent,
            ],
        )
        .ends("turn"),
        case(
            "after a context miss the agent's requests are refused, still audited",
            plus(working("go"), [judged(operation(1), miss())]),
            SessionInput::Gate(permission_request(2)),
            vec![asked_audit(), gate_reply(2, GateReply::Choose(None))],
        )
        .ends("turn"),
    ]
}

/// The agent's permission requests no rule has a word on, as a person answers them.
pub(super) fn permissions_answered() -> Vec<Case> {
    use SessionState::*;
    let agent_asking = || {
        plus(
            working("go"),
            [
                judged(permission_request(1), Judgement::Free),
                posted(1, "m1"),
            ],
        )
    };
    let answered_line =
        |status: &str| Effect::Append(Line::new(EntryKind::Permission).text(TITLE).status(status));
    vec![
        case(
            "allow-always: the agent's \"always\" option is remembered",
            agent_asking(),
            answered("m1", "Always"),
            cat([
                remembered(&deploy()),
                vec![
                    by_human("always"),
                    pick("always"),
                    answered_line("Always"),
                    settle(Working),
                ],
            ]),
        )
        .ends("turn"),
        case(
            "allow once: not remembered when no rule asked",
            agent_asking(),
            answered("m1", "Once"),
            vec![
                by_human("once"),
                pick("once"),
                answered_line("Once"),
                settle(Working),
            ],
        )
        .ends("turn"),
    ]
}

pub(super) fn credentials_and_rules() -> Vec<Case> {
    use SessionState::*;
    let title = "Credential requested: GH_TOKEN";
    let grant = || {
        let name = "GH_TOKEN".into();
        Effect::Grant { key: 1, name }
    };
    let asking = || plus(working("go"), [credential(1, false), posted(1, "m1")]);
    let answered_line =
        |status: &str| Effect::Append(Line::new(EntryKind::Permission).text(title).status(status));
    let secret = Operation {
        kind: OperationKind::Other,
        tool: Some("secret GH_TOKEN".into()),
        ..Default::default()
    };
    vec![
        case(
            "a credential asked for the first time in the session is asked of the human",
            working("go"),
            credential(1, false),
            asks(
                title,
                &wording::credential_reason("GH_TOKEN"),
                "credential",
                "other: secret GH_TOKEN",
            ),
        )
        .ends("turn"),
        case(
            "an allowed credential is granted, and approved for the session",
            asking(),
            answered("m1", "Allow"),
            cat([
                vec![
                    Effect::Record(RecordChange::CredentialApproved("GH_TOKEN".into())),
                    Effect::Save,
                    grant(),
                ],
                remembered(&secret),
                vec![by_human("allow"), answered_line("Allow"), settle(Working)],
            ]),
        )
        .ends("turn"),
        case(
            "a credential denied is withheld",
            asking(),
            answered("m1", "Deny"),
            vec![
                by_human("deny"),
                gate_reply(1, GateReply::Withheld),
                answered_line("Deny"),
                settle(Working),
            ],
        )
        .ends("turn"),
        case(
            "a credential approved before in the session is granted without asking",
            working("go"),
            credential(1, true),
            vec![grant()],
        )
        .ends("turn"),
        case(
            "/disable: a rule switched off for the session is recorded and answered",
            working("go"),
            SessionInput::SetRule {
                rule: RULE.into(),
                enabled: false,
            },
            vec![
                Effect::Record(RecordChange::Rule {
                    rule: RULE.into(),
                    enabled: false,
                }),
                Effect::Save,
                reply(Reply::Security),
            ],
        )
        .ends("turn"),
    ]
}

/// What the agent ran by itself, as the rules judge it afterwards.
pub(super) fn the_agents_own_doings() -> Vec<Case> {
    let ran = |judgement| judged(GateRequest::Ran(deploy()), judgement);
    let flagged = |msg_type, rule: &str| {
        notice(
            msg_type,
            &format!("The agent ran, by itself, what rule {rule} covers"),
            "execute: make deploy\nThe agent runs this tool itself, so crucible could not stop it.",
            false,
        )
    };
    vec![
        case(
            "the agent ran by itself what a rule asks about: flagged in the inbox",
            working("go"),
            ran(asked()),
            vec![flagged(MsgType::Info, RULE)],
        )
        .ends("turn"),
        case(
            "the agent ran by itself what a rule denies: flagged as an error",
            working("go"),
            ran(denied()),
            vec![flagged(MsgType::Error, "deny-deploy")],
        )
        .ends("turn"),
        case(
            "the agent ran by itself what a rule allows: nothing to flag",
            working("go"),
            ran(allowed()),
            vec![],
        )
        .ends("turn"),
        case(
            "the agent read outside the manifest by itself: the session ends",
            working("go"),
            ran(miss()),
            vec![Effect::StopAgent],
        )
        .ends("turn"),
    ]
}

/// Approvals the agent asks for itself, as the rules judge them.
pub(super) fn the_agents_own_approvals() -> Vec<Case> {
    let approval = || {
        let title = "Deploy".into();
        GateRequest::Approval { key: 1, title }
    };
    let verdict = |v| gate_reply(1, GateReply::Verdict(v));
    vec![
        case(
            "an approval the agent asks for itself: a rule allows it",
            working("go"),
            judged(approval(), allowed()),
            vec![
                Effect::Audit(AuditEvent::PermissionAnswered {
                    answer: "Deploy: allowed by rule allow-make".into(),
                    by: "rules".into(),
                }),
                verdict(Some(true)),
            ],
        )
        .ends("turn"),
        case(
            "an approval the agent asks for itself: a rule denies it",
            working("go"),
            judged(approval(), denied()),
            vec![
                Effect::Audit(AuditEvent::PermissionAnswered {
                    answer: "Deploy: denied by rule deny-deploy".into(),
                    by: "rules".into(),
                }),
                verdict(Some(false)),
            ],
        )
        .ends("turn"),
        case(
            "an approval the agent asks for itself that a rule asks about: the human's",
            working("go"),
            judged(approval(), asked()),
            vec![verdict(None)],
        )
        .ends("turn"),
    ]
}

/// The skills the agent tells, kept on the session record.
pub(super) fn skills_told() -> Vec<Case> {
    let skills = |names: &[&str]| {
        agent(AgentEvent::Skills(
            names.iter().map(|n| n.to_string()).collect(),
        ))
    };
    vec![
        case(
            "new skills are recorded and saved",
            working("go"),
            skills(&["review"]),
            vec![
                Effect::Record(RecordChange::Skills(vec!["review".into()])),
                Effect::Save,
            ],
        )
        .ends("turn"),
        case(
            "the same skills again are not saved again",
            plus(working("go"), [skills(&["review"])]),
            skills(&["review"]),
            vec![],
        )
        .ends("turn"),
    ]
}

/// A session's machine with the real rules between its judging and its judgements,
/// and the security state its record would keep.
struct Judged {
    machine: Machine,
    gate: Gate,
    security: SecurityState,
    _dir: tempfile::TempDir,
}

impl Judged {
    /// A session in a turn, under the rules `rules` (a rules file's text).
    fn new(rules: &str, security: SecurityState) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        std::fs::create_dir_all(kiln.state_dir()).unwrap();
        std::fs::write(rules_path(&kiln), rules).unwrap();
        let book = Arc::new(RuleBook::new(kiln.clone()));
        let gate = Gate::new(book, vec![dir.path().join("wt")]);
        let mut machine = acp();
        for input in working("go") {
            machine.step(input);
        }
        Self {
            machine,
            gate,
            security,
            _dir: dir,
        }
    }

    /// Every effect of `input`, the rules judging what the machine asks them to, and
    /// the security state keeping what it records.
    fn step(&mut self, input: SessionInput) -> Vec<Effect> {
        let mut all = Vec::new();
        let mut next = vec![input];
        while let Some(input) = next.pop() {
            for effect in self.machine.step(input) {
                match &effect {
                    Effect::Judge(request) => {
                        let operation = request.operation();
                        let (judgement, changed) = self.gate.judge(&operation, &mut self.security);
                        next.push(SessionInput::Judged {
                            request: request.clone(),
                            judgement,
                            changed,
                        });
                    }
                    Effect::Record(change) => {
                        change.clone().apply_security(&mut self.security);
                    }
                    _ => {}
                }
                all.push(effect);
            }
        }
        all
    }

    fn credential(&mut self, key: Key) -> Vec<Effect> {
        let approved = self
            .security
            .approved_credentials
            .iter()
            .any(|n| n == "GH_TOKEN");
        self.step(credential(key, approved))
    }
}

const ASK_DEPLOY: &str = "[[rules]]\nid = \"ask-deploy\"\naction = \"ask\"\n\
                          when = { command = \"^make deploy\" }\n";

fn asked_in_inbox(effects: &[Effect]) -> bool {
    effects.iter().any(|e| matches!(e, Effect::Ask { .. }))
}

fn replied(effects: &[Effect], key: Key) -> Option<&GateReply> {
    effects.iter().find_map(|e| match e {
        Effect::ReplyGate { key: k, reply } if *k == key => Some(reply),
        _ => None,
    })
}

#[test]
fn allow_always_is_remembered_and_the_same_operation_then_passes_without_asking() {
    let mut s = Judged::new("", SecurityState::default());
    assert!(asked_in_inbox(
        &s.step(SessionInput::Gate(permission_request(1)))
    ));
    s.step(posted(1, "m1"));
    let answer = s.step(answered("m1", "Always"));
    assert_eq!(
        replied(&answer, 1),
        Some(&GateReply::Choose(Some("always".into())))
    );
    let again = s.step(SessionInput::Gate(permission_request(2)));
    assert!(!asked_in_inbox(&again), "{again:#?}");
    assert_eq!(
        replied(&again, 2),
        Some(&GateReply::Choose(Some("always".into())))
    );
}

#[test]
fn a_rule_s_approval_holds_for_the_session_and_a_reset_session_asks_again() {
    let mut s = Judged::new(ASK_DEPLOY, SecurityState::default());
    assert!(asked_in_inbox(&s.step(SessionInput::Gate(operation(1)))));
    s.step(posted(1, "m1"));
    assert_eq!(
        replied(&s.step(answered("m1", "Allow")), 1),
        Some(&GateReply::Proceed)
    );
    let again = s.step(SessionInput::Gate(operation(2)));
    assert_eq!(replied(&again, 2), Some(&GateReply::Proceed));
    assert!(!asked_in_inbox(&again));

    // `/reset`: a new session, its security state empty; the rule asks again.
    let mut reset = Judged::new(ASK_DEPLOY, SecurityState::default());
    assert!(asked_in_inbox(
        &reset.step(SessionInput::Gate(operation(1)))
    ));
    // Keeping the disabled rules keeps them off.
    let kept = SecurityState {
        disabled: vec![RULE.into()],
        ..Default::default()
    };
    let mut reset = Judged::new(ASK_DEPLOY, kept);
    let free = reset.step(SessionInput::Gate(operation(1)));
    assert_eq!(replied(&free, 1), Some(&GateReply::Proceed));
}

#[test]
fn a_rule_switched_off_stops_asking_at_the_next_operation_and_on_again_asks() {
    let mut s = Judged::new(ASK_DEPLOY, SecurityState::default());
    assert!(asked_in_inbox(&s.step(SessionInput::Gate(operation(1)))));
    let (rule, enabled) = (RULE.to_string(), false);
    s.step(SessionInput::SetRule { rule, enabled });
    let free = s.step(SessionInput::Gate(operation(2)));
    assert_eq!(replied(&free, 2), Some(&GateReply::Proceed));
    let (rule, enabled) = (RULE.to_string(), true);
    s.step(SessionInput::SetRule { rule, enabled });
    assert!(asked_in_inbox(&s.step(SessionInput::Gate(operation(3)))));
}

#[test]
fn a_credential_is_asked_for_once_per_session() {
    let mut s = Judged::new("", SecurityState::default());
    assert!(asked_in_inbox(&s.credential(1)));
    s.step(posted(1, "m1"));
    let granted = s.step(answered("m1", "Allow"));
    assert!(granted.contains(&Effect::Grant {
        key: 1,
        name: "GH_TOKEN".into()
    }));
    let again = s.credential(2);
    assert_eq!(
        again,
        vec![Effect::Grant {
            key: 2,
            name: "GH_TOKEN".into()
        }]
    );
    // A new session (a reset) asks again.
    let mut reset = Judged::new("", SecurityState::default());
    assert!(asked_in_inbox(&reset.credential(1)));
}

#[test]
fn the_audit_names_who_answered_and_through_which_channel() {
    let mut s = Judged::new("", SecurityState::default());
    s.step(SessionInput::Gate(permission_request(1)));
    s.step(posted(1, "m1"));
    let effects = s.step(SessionInput::Answered {
        id: "m1".into(),
        response: Some("Once".into()),
        by: Some("@me:example.org via Matrix".into()),
    });
    let by: Vec<&str> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Audit(AuditEvent::PermissionAnswered { by, .. }) => Some(by.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(by, ["@me:example.org via Matrix"], "{effects:#?}");
}
