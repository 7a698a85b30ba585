//! Inbox messages: their kinds, the words an approval accepts, and the message itself.

use serde::{Deserialize, Serialize};

/// The kinds of inbox message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MsgType {
    DecisionNeeded,
    ApprovalRequired,
    TaskComplete,
    Error,
    Info,
}

impl MsgType {
    pub const ALL: [MsgType; 5] = [
        MsgType::DecisionNeeded,
        MsgType::ApprovalRequired,
        MsgType::TaskComplete,
        MsgType::Error,
        MsgType::Info,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MsgType::DecisionNeeded => "decision_needed",
            MsgType::ApprovalRequired => "approval_required",
            MsgType::TaskComplete => "task_complete",
            MsgType::Error => "error",
            MsgType::Info => "info",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether the sending agent waits for a human answer.
    pub fn blocks(self) -> bool {
        matches!(self, MsgType::DecisionNeeded | MsgType::ApprovalRequired)
    }
}

impl std::fmt::Display for MsgType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answers an approval accepts when the agent offers no options of its own.
/// Words that mean "approve" and "deny" for an approval whose options say it otherwise.
pub const APPROVING_WORDS: [&str; 5] = ["approve", "allow", "yes", "accept", "ok"];
pub const DENYING_WORDS: [&str; 5] = ["deny", "reject", "no", "decline", "cancel"];

pub const APPROVAL_ANSWERS: [&str; 2] = ["approve", "deny"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxMessage {
    pub id: String,
    /// Through the hub: the kiln the message comes from (its name); absent from a kiln's
    /// own daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kiln: Option<String>,
    pub session_id: String,
    pub session_name: String,
    /// RFC 3339.
    pub timestamp: String,
    pub msg_type: MsgType,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub options: Option<Vec<String>>,
    /// For an approval from an ACP agent: each option's kind (`allow_once`,
    /// `allow_always`, `reject_once`, `reject_always`), in the options' order; what
    /// `approve` and `deny` are mapped by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_kinds: Option<Vec<String>>,
    /// For an approval a rule asked for: the rule. Such an approval is approved only after
    /// a confirmation that names [`operation`](Self::operation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// For an approval a rule asked for: the operation it covers, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(default)]
    pub read: bool,
    #[serde(default)]
    pub responded: bool,
    #[serde(default)]
    pub response: Option<String>,
    /// Closed without a human answer (its turn was cancelled, its session stopped);
    /// `response` says why.
    #[serde(default)]
    pub withdrawn: bool,
    /// Who answered and through which channel (`@me:example.org via Matrix`, `web:
    /// phone`, `workbench`, `cru inbox respond`); for a withdrawn question, what withdrew
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// What was asked, as a digest of the question's kind, words and choices
    /// ([`InboxMessage::asked`]): an answer that names it (`inbox.respond`'s `asked`)
    /// answers only this question. Set by the daemon when the message is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// For a question crucible asks itself: what it is for, so that its answer is acted
    /// on by what it is, never by the words of its title or body (those are for people).
    /// Set by the daemon only, never taken from a client's `inbox.send`.
    #[serde(
        default,
        deserialize_with = "super::session::object_or_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub purpose: Option<Purpose>,
}

/// What a question crucible asks itself is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Purpose {
    /// A read outside the manifest stopped the session: widening the manifest by `path`
    /// restarts its agent.
    ContextMiss { path: String },
    /// The session reached a budget: raise it, or stop the session.
    BudgetRaise,
    /// The approval gate asks whether an operation of the agent may go ahead.
    Approval,
    /// The agent's plan waits for review: approved, rejected, or comments on its steps
    /// (`2: use the view`), of which it has `steps`.
    PlanReview { steps: usize },
}

/// Comments on the steps of a plan of `steps` steps: `N: comment` (also `N.` or `N)`),
/// one per line or separated by `;`. `None` unless every comment names a step of the
/// plan and says something.
pub fn plan_comments(text: &str, steps: usize) -> Option<Vec<(usize, String)>> {
    static MARK: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?:^|[;\n])\s*(\d{1,4})\s*[:.)]\s+").ok());
    let mark = MARK.as_ref()?;
    let text = text.trim();
    let marks: Vec<(usize, usize, &str)> = mark
        .captures_iter(text)
        .filter_map(|c| Some((c.get(0)?.start(), c.get(0)?.end(), c.get(1)?.as_str())))
        .collect();
    if marks.first().is_none_or(|(start, ..)| *start != 0) {
        return None;
    }
    let mut comments = Vec::new();
    for (i, (_, end, number)) in marks.iter().enumerate() {
        let next = marks.get(i + 1).map_or(text.len(), |(start, ..)| *start);
        let step: usize = number.parse().ok()?;
        let comment = text[*end..next].trim();
        if step == 0 || step > steps || comment.is_empty() {
            return None;
        }
        comments.push((step, comment.to_string()));
    }
    Some(comments)
}

impl InboxMessage {
    /// What was asked, as a digest: its kind, title, body, choices and their kinds, and
    /// for a rule's approval the operation (16 hex digits of their SHA-256). The same
    /// question always has the same digest; any change of what it asks changes it.
    pub fn asked(&self) -> String {
        use sha2::Digest as _;
        let what = serde_json::json!([
            self.msg_type,
            self.title,
            self.body,
            self.options,
            self.option_kinds,
            self.operation,
        ]);
        let digest = sha2::Sha256::digest(what.to_string().as_bytes());
        hex::encode(&digest[..8])
    }

    /// The answers `inbox.respond` accepts for this message, if it takes one at all.
    /// The option an answer stands for: the option itself (any case), its number
    /// (1-based, as shown), or for an approval a word of intent (`approve`, `allow`,
    /// `yes`… / `deny`, `reject`, `no`…): the option of kind `allow_once` (else
    /// `allow_always`) or `reject_once` (else `reject_always`) when the kinds are known,
    /// otherwise the first option that starts with such a word.
    pub fn answer_for(&self, answer: &str) -> Option<String> {
        let options = self.accepted_answers()?;
        let answer = answer.trim();
        if let Some(exact) = options.iter().find(|o| o.eq_ignore_ascii_case(answer)) {
            return Some(exact.clone());
        }
        if let Ok(n) = answer.parse::<usize>() {
            return n.checked_sub(1).and_then(|i| options.get(i)).cloned();
        }
        if let Some(Purpose::PlanReview { steps }) = self.purpose
            && plan_comments(answer, steps).is_some()
        {
            return Some(answer.to_string());
        }
        if self.msg_type != MsgType::ApprovalRequired {
            return None;
        }
        let lower = answer.to_lowercase();
        let (words, kinds): (&[&str], [&str; 2]) = if APPROVING_WORDS.contains(&lower.as_str()) {
            (&APPROVING_WORDS, ["allow_once", "allow_always"])
        } else if DENYING_WORDS.contains(&lower.as_str()) {
            (&DENYING_WORDS, ["reject_once", "reject_always"])
        } else {
            return None;
        };
        // By the ACP kinds when the agent gave them: the once-option first.
        if let Some(given) = self
            .option_kinds
            .as_ref()
            .filter(|k| k.len() == options.len())
        {
            return kinds
                .iter()
                .find_map(|kind| given.iter().position(|g| g == kind))
                .map(|i| options[i].clone());
        }
        options
            .iter()
            .find(|o| {
                let o = o.to_lowercase();
                words.iter().any(|w| o.starts_with(w))
            })
            .cloned()
    }

    pub fn accepted_answers(&self) -> Option<Vec<String>> {
        match (self.msg_type, &self.options) {
            (t, _) if !t.blocks() => None,
            (_, Some(options)) if !options.is_empty() => Some(options.clone()),
            (MsgType::ApprovalRequired, _) => {
                Some(APPROVAL_ANSWERS.iter().map(|s| s.to_string()).collect())
            }
            // A decision without options takes free text.
            _ => Some(Vec::new()),
        }
    }
}
