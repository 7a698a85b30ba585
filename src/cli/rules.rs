//! `cru rules [--session S] [--json]`, `cru rules disable|enable RULE --session S`: the
//! rules that judge what agents do, and switching one off or on for a session.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::output::{self, outln};
use crate::kiln::Kiln;
use crate::protocol::methods as m;
use crate::protocol::{RulesParams, SessionRuleParams};

#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(subcommand)]
    action: Option<RulesAction>,
    /// How each rule stands in this session (activated, switched off).
    #[arg(long, global = true)]
    session: Option<String>,
    /// Print the rules (or the rule changed) as JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum RulesAction {
    /// List the rules (the default).
    List,
    /// Switch a rule off for the session (it no longer asks or refuses there).
    Disable {
        /// The rule's id, as `cru rules` lists it.
        rule: String,
    },
    /// Switch it on again.
    Enable {
        /// The rule's id, as `cru rules` lists it.
        rule: String,
    },
}

pub async fn run(kiln: Kiln, args: RulesArgs) -> anyhow::Result<ExitCode> {
    let client = super::connect(&kiln).await?;
    let session = match &args.session {
        Some(name) => Some(super::session::resolve(&client, name).await?),
        None => None,
    };
    match args.action.unwrap_or(RulesAction::List) {
        RulesAction::List => {
            let reply = client
                .call::<m::RulesList>(&RulesParams {
                    session_id: session.as_ref().map(|s| s.id.clone()),
                })
                .await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&reply)?);
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(error) = &reply.error {
                eprintln!(
                    "cru: the rules in {} are not in force: {}",
                    error.file, error.reason
                );
                if error.last_good {
                    eprintln!("cru: the last good rules apply (listed below)");
                } else {
                    eprintln!(
                        "cru: no good rules were read since the daemon started: every \
                         operation the rules judge is refused until the file is fixed"
                    );
                }
            }
            let rows: Vec<Vec<String>> = reply
                .rules
                .iter()
                .map(|r| {
                    let state = if r.off {
                        "off (settings)".to_string()
                    } else if r.disabled {
                        "off (session)".to_string()
                    } else if r.needs_activation {
                        match &r.activated {
                            Some(by) => format!("active: {by}"),
                            None => "waits for activation".into(),
                        }
                    } else {
                        "on".into()
                    };
                    vec![
                        r.id.clone(),
                        r.action.clone(),
                        if r.builtin { "built-in" } else { "yours" }.into(),
                        state,
                        output::clip(&r.description, 60),
                    ]
                })
                .collect();
            output::print_table(&["RULE", "ACTION", "FROM", "STATE", "WHAT"], &rows);
        }
        RulesAction::Disable { rule } => {
            switch(&client, session.as_ref(), rule, false, args.json).await?
        }
        RulesAction::Enable { rule } => {
            switch(&client, session.as_ref(), rule, true, args.json).await?
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn switch(
    client: &crate::client::Client,
    session: Option<&crate::protocol::Session>,
    rule: String,
    enabled: bool,
    json: bool,
) -> anyhow::Result<()> {
    let Some(session) = session else {
        anyhow::bail!(
            "which session? give --session S (rules are switched off per session; \
             `enabled = false` in [[rules]] switches one off everywhere)"
        );
    };
    let reply = client
        .call::<m::SessionRule>(&SessionRuleParams {
            session_id: session.id.clone(),
            rule: rule.clone(),
            enabled,
        })
        .await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&reply)?);
    } else if enabled {
        outln!("rule {rule} is on again for {}", session.display_name);
    } else {
        outln!(
            "rule {rule} is off for {}: what it guarded now goes unasked \
             (cru rules enable {rule} --session … undoes it)",
            session.display_name
        );
    }
    Ok(())
}
