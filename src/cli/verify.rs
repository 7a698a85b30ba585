//! `cru daemon verify`: the Matrix bot's emoji verification, and the person's word on it.
//! Without a flag it shows the emoji the bot sees (compare them with your Matrix client);
//! `--confirm` says they match, `--cancel` that they do not. Also the lines `cru daemon
//! status` shows of the bot's device: its fingerprint and the verification under way.

use std::process::ExitCode;

use clap::Args;

use super::output::outln;
use crate::client::Client;
use crate::kiln::Kiln;
use crate::protocol::methods;
use crate::protocol::{MatrixStatus, MatrixVerification, MatrixVerifyParams, VerificationState};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The emoji match the ones your Matrix client shows: confirm.
    #[arg(long, conflicts_with = "cancel")]
    confirm: bool,
    /// They do not match (or you did not start it): cancel.
    #[arg(long)]
    cancel: bool,
    /// Print the verification (or the bot's Matrix state) as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(kiln: &Kiln, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr();
    let client = Client::connect(kiln).await?;
    verify(&client, args, "this kiln's daemon").await
}

/// `cru hub verify`: the same, for the bot of the person's settings, which their hub runs.
pub async fn run_hub(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr();
    let place = crate::client::HubPlace::for_user()?;
    let client =
        crate::client::connect_or_start_hub(&place, &crate::client::StartOptions::default())
            .await?;
    verify(&client, args, "your hub").await
}

async fn verify(client: &Client, args: VerifyArgs, whose: &str) -> anyhow::Result<ExitCode> {
    if args.confirm || args.cancel {
        let verification = client
            .call::<methods::MatrixVerify>(&MatrixVerifyParams {
                confirm: args.confirm,
            })
            .await?;
        if args.json {
            outln!("{}", serde_json::to_value(&verification)?);
        } else {
            outln!("{}", said(&verification));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let status = client
        .call::<methods::DaemonStatusOf>(&methods::NoParams {})
        .await?;
    let Some(matrix) = status.matrix else {
        anyhow::bail!("{whose} runs no Matrix bot ([channels.matrix])");
    };
    if args.json {
        outln!("{}", serde_json::to_value(&matrix)?);
        return Ok(ExitCode::SUCCESS);
    }
    for line in device_lines(&matrix) {
        outln!("{line}");
    }
    if matrix.verification.is_none() {
        outln!(
            "no emoji verification under way: start one from your Matrix client (the bot's profile → verify)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// How the verification stands after the person's word.
fn said(v: &MatrixVerification) -> String {
    match v.state {
        VerificationState::Done => format!("verified: {} and the bot trust each other", v.user_id),
        VerificationState::Confirmed => format!(
            "confirmed: the verification ends when {} confirms too",
            v.user_id
        ),
        VerificationState::Cancelled => format!(
            "cancelled ({})",
            v.reason.as_deref().unwrap_or("no reason given")
        ),
        VerificationState::Requested | VerificationState::Emoji => format!(
            "not answered: {}",
            v.reason.as_deref().unwrap_or("the bot could not answer")
        ),
    }
}

/// The bot's device as `cru daemon status` shows it: whether it is cross-signed, its
/// fingerprint, and the verification under way or last ended.
pub(super) fn device_lines(m: &MatrixStatus) -> Vec<String> {
    let mut lines = Vec::new();
    if m.logged_in {
        lines.push(format!(
            "matrix device: {}, {}",
            m.device_id.as_deref().unwrap_or("?"),
            match m.cross_signed {
                true => "cross-signed by the bot's identity",
                false => "NOT cross-signed: Element will not talk to it (see daemon.log)",
            }
        ));
    }
    if let Some(key) = &m.fingerprint {
        lines.push(format!(
            "matrix fingerprint (session key): {}",
            grouped(key)
        ));
    }
    if let Some(v) = &m.verification {
        let mut line = format!(
            "matrix verification: {} ({}) is {}",
            v.user_id,
            if v.device_id.is_empty() {
                "?"
            } else {
                &v.device_id
            },
            v.state.as_str()
        );
        if !v.emoji.is_empty() && !v.state.is_over() {
            line.push_str(&format!("; emoji: {}", v.emoji_line()));
        }
        if let Some(reason) = &v.reason {
            line.push_str(&format!(" ({reason})"));
        }
        lines.push(line);
        if v.state == VerificationState::Emoji {
            lines.push(
                "  if your client shows the same emoji: `cru daemon verify --confirm`; else `cru daemon verify --cancel`".into(),
            );
        }
    }
    lines
}

/// A key in groups of four, as Matrix clients show a session key.
fn grouped(key: &str) -> String {
    key.chars()
        .collect::<Vec<_>>()
        .chunks(4)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::VerificationEmoji;

    #[test]
    fn a_key_is_shown_in_groups_of_four() {
        assert_eq!(grouped("abcdefghij"), "abcd efgh ij");
    }

    #[test]
    fn emoji_waiting_for_a_word_say_what_to_run() {
        let status = MatrixStatus {
            logged_in: true,
            device_id: Some("BOTDEV".into()),
            cross_signed: true,
            fingerprint: Some("AAAABBBB".into()),
            verification: Some(MatrixVerification {
                user_id: "@alice:hs".into(),
                device_id: "PHONE".into(),
                flow_id: "f".into(),
                state: VerificationState::Emoji,
                emoji: vec![VerificationEmoji {
                    symbol: "🐶".into(),
                    description: "Dog".into(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let lines = device_lines(&status).join("\n");
        assert!(lines.contains("BOTDEV, cross-signed"), "{lines}");
        assert!(lines.contains("AAAA BBBB"), "{lines}");
        assert!(
            lines.contains("@alice:hs (PHONE) is emoji; emoji: 🐶 Dog"),
            "{lines}"
        );
        assert!(lines.contains("cru daemon verify --confirm"), "{lines}");
    }
}
