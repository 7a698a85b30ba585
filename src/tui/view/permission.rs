//! How a permission the agent asked for ended, read from its transcript line: allowed,
//! refused (drawn with a cross, never a check mark) or withdrawn.

/// How a permission ended, as its transcript line says it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Allowed,
    Refused,
    Withdrawn,
}

/// Reads a permission line's status: the answer chosen (an option's words: `Yes,
/// proceed`, `Reject`, `No, and tell the agent…`), or a rule's (`denied by rule r3`).
pub(super) fn permission_outcome(status: &str) -> Outcome {
    let said = status.trim().to_lowercase();
    if said == "withdrawn" {
        return Outcome::Withdrawn;
    }
    let first = said
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .next()
        .unwrap_or("");
    let refusing = [
        "no",
        "reject",
        "rejected",
        "deny",
        "denied",
        "refuse",
        "refused",
        "decline",
        "declined",
        "cancel",
        "cancelled",
        "abort",
        "don't",
        "never",
        "block",
        "blocked",
    ];
    if refusing.contains(&first) || said.starts_with("reject") || said.starts_with("do not") {
        Outcome::Refused
    } else {
        Outcome::Allowed
    }
}

#[cfg(test)]
mod tests {
    use super::{Outcome, permission_outcome};

    #[test]
    fn a_refused_permission_is_not_drawn_as_allowed() {
        for refused in [
            "Reject",
            "reject_once",
            "No, and tell Codex what to do differently",
            "denied by rule r3",
            "denied by the human (rule ask-shell)",
            "Don't allow",
        ] {
            assert_eq!(permission_outcome(refused), Outcome::Refused, "{refused}");
        }
        for allowed in [
            "Yes, proceed",
            "allow_always",
            "allowed by rule r1",
            "allowed: approved before in this session",
            "Always allow",
        ] {
            assert_eq!(permission_outcome(allowed), Outcome::Allowed, "{allowed}");
        }
        assert_eq!(permission_outcome("withdrawn"), Outcome::Withdrawn);
    }
}
