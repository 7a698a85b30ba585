//! Read-only pages drawn from a daemon reply: the rules (`/rules`) and a session's
//! security state (`/session`), as the lines the page overlay shows.

use crate::protocol::{RulesReply, SecurityState};

/// `/rules`: one line per rule.
pub fn rules_page(reply: &RulesReply) -> Vec<String> {
    let mut lines: Vec<String> = reply.problem.iter().map(|p| format!("! {p}")).collect();
    for r in &reply.rules {
        let state = if r.off {
            "off (settings)".to_string()
        } else if r.disabled {
            "off (this session)".to_string()
        } else if let Some(by) = &r.activated {
            format!("active: {by}")
        } else if r.needs_activation {
            "waits for activation".to_string()
        } else {
            "on".to_string()
        };
        lines.push(format!("{:<30} {:<5} {state}", r.id, r.action));
        lines.push(format!("    {}", r.description));
    }
    lines
}

/// `/session`: the security state.
pub fn security_page(security: &SecurityState) -> Vec<String> {
    let mut lines = Vec::new();
    let mut section = |title: &str, items: Vec<String>| {
        lines.push(format!("{title}:"));
        if items.is_empty() {
            lines.push("    none".into());
        }
        lines.extend(items.into_iter().map(|i| format!("    {i}")));
    };
    section(
        "activated rules",
        security
            .activated
            .iter()
            .map(|(rule, by)| format!("{rule} — by {by}"))
            .collect(),
    );
    section("disabled rules", security.disabled.clone());
    section(
        "approved operations",
        security.approved_operations.values().cloned().collect(),
    );
    section(
        "approved credentials",
        security.approved_credentials.clone(),
    );
    lines
}
