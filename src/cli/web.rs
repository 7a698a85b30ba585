//! `cru web [--read-only]`: pairs a browser with the web view: prints the link (with a
//! one-time code) and shows it as a QR code for a phone, then waits until a browser uses
//! it. `cru web tokens` lists the paired browsers; `cru web tokens revoke ID` lets one go.
//! `--all-kilns` (and, in a kiln with no page of its own, while the person's settings
//! have `[web]`) pairs with the person's one page for every kiln, which their hub serves.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::cli::output::{self, outln};
use crate::kiln::Kiln;
use crate::protocol::methods::{self as m, NoParams};
use crate::protocol::{WebAccess, WebPairParams, WebRevokeParams};

#[derive(Debug, Args)]
pub struct WebArgs {
    #[command(subcommand)]
    action: Option<WebAction>,
    /// The browser may look but not change anything (no prompts, answers or merges).
    #[arg(long)]
    read_only: bool,
    /// Print the link without the QR code.
    #[arg(long)]
    no_qr: bool,
    /// Print the pairing and return at once, without waiting for a browser to use it.
    #[arg(long)]
    no_wait: bool,
    /// Print the pairing link (or the paired browsers) as JSON.
    #[arg(long, global = true)]
    json: bool,
    /// Pair with your one page for every kiln, served by your hub (`[web]` in your own
    /// settings), rather than this kiln's own page.
    #[arg(long, global = true)]
    all_kilns: bool,
}

#[derive(Debug, Subcommand)]
enum WebAction {
    /// The paired browsers; `revoke ID` lets one go.
    Tokens {
        #[command(subcommand)]
        action: Option<TokensAction>,
    },
}

#[derive(Debug, Subcommand)]
enum TokensAction {
    /// Lets a paired browser go: its next request is refused (401).
    Revoke {
        /// The browser's id, or enough of its start to name one.
        id: String,
    },
}

/// How often the wait for a browser looks at the paired ones.
const WAIT_STEP: Duration = Duration::from_millis(500);

pub async fn run(kiln: Kiln, args: WebArgs) -> anyhow::Result<ExitCode> {
    let reached = reach(&kiln, args.all_kilns).await?;
    match args.action {
        Some(WebAction::Tokens { action: None }) => list_devices(&reached.client, args.json).await,
        Some(WebAction::Tokens {
            action: Some(TokensAction::Revoke { id }),
        }) => revoke(&reached.client, id, args.json).await,
        None => pair(&reached, &args).await,
    }
}

/// The daemon (or the hub) that serves the page to pair with.
struct Reached {
    client: crate::client::Client,
    /// The person's page for every kiln, served by their hub.
    hub: bool,
    /// The page listens on loopback only (a hint for a phone).
    loopback_only: bool,
}

/// Connects to the page's server: the hub with `--all-kilns`, or for a kiln with no page
/// of its own while the person's hub serves one; else the kiln's daemon.
async fn reach(kiln: &Kiln, all_kilns: bool) -> anyhow::Result<Reached> {
    let kiln_config = super::load_config(kiln);
    // A kiln with no page of its own while the person's hub serves one: that page.
    let hub = all_kilns
        || (crate::config::person_asks_hub() && kiln_config.as_ref().is_ok_and(|c| !c.web.enabled));
    let (client, loopback_only) = if hub {
        let place = crate::client::HubPlace::for_user()?;
        let client =
            crate::client::connect_or_start_hub(&place, &crate::client::StartOptions::default())
                .await?;
        let loopback = crate::config::Config::load_person().is_ok_and(|c| c.web.listen.is_none());
        (client, loopback)
    } else {
        // For a hint only: settings that do not load leave it out (the daemon pairs on
        // its last good ones).
        let loopback = kiln_config.is_ok_and(|c| c.web.listen.is_none());
        (super::connect(kiln).await?, loopback)
    };
    Ok(Reached {
        client,
        hub,
        loopback_only,
    })
}

/// `cru web tokens`: the paired browsers, as a table or JSON.
async fn list_devices(client: &crate::client::Client, json: bool) -> anyhow::Result<ExitCode> {
    let reply = client.call::<m::WebDevicesOf>(&NoParams {}).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&reply)?);
        return Ok(ExitCode::SUCCESS);
    }
    match &reply.url {
        Some(url) => outln!("the web view: {url}"),
        None => outln!("the web view is not served (cru daemon status, the daemon's log)"),
    }
    if reply.devices.is_empty() {
        outln!("no browser is paired: `cru web` pairs one");
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = reply
        .devices
        .iter()
        .map(|d| {
            vec![
                d.id.clone(),
                d.label.clone(),
                d.access.as_str().replace('_', "-"),
                output::age(&d.paired_at),
                d.paired_from.clone().unwrap_or_default(),
                d.last_seen_at
                    .as_deref()
                    .map_or_else(|| "—".into(), output::age),
            ]
        })
        .collect();
    output::print_table(
        &["ID", "BROWSER", "ACCESS", "PAIRED", "FROM", "LAST SEEN"],
        &rows,
    );
    Ok(ExitCode::SUCCESS)
}

/// `cru web tokens revoke ID`.
async fn revoke(
    client: &crate::client::Client,
    id: String,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let reply = client.call::<m::WebRevoke>(&WebRevokeParams { id }).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&reply)?);
    } else {
        outln!(
            "revoked {} ({}): its next request is refused",
            reply.device.id,
            reply.device.label
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `cru web`: a one-time pairing, printed (with its QR code), then the wait for a browser
/// to use it unless `--no-wait`.
async fn pair(reached: &Reached, args: &WebArgs) -> anyhow::Result<ExitCode> {
    let pairing = reached
        .client
        .call::<m::WebPair>(&WebPairParams {
            read_only: args.read_only,
        })
        .await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&pairing)?);
    } else {
        print_pairing(&pairing, reached, args.no_qr);
    }
    if args.no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    wait_for_browser(&reached.client, &pairing.expires_at, args.json).await
}

/// The pairing in words: the link, its QR code, the code, and what the browser may do.
fn print_pairing(pairing: &crate::protocol::WebPairing, reached: &Reached, no_qr: bool) {
    outln!(
        "Open this link in the browser to pair (once, until {}):",
        pairing.expires_at
    );
    outln!();
    outln!("  {}", pairing.url);
    outln!();
    if !no_qr {
        match qr(&pairing.url) {
            Some(code) => outln!("{code}"),
            None => outln!("(the link is too long for a QR code)"),
        }
    }
    let page = pairing.url.split('#').next().unwrap_or(&pairing.url);
    outln!("Or open {page} and type the code {}.", pairing.code);
    if pairing.access == WebAccess::ReadOnly {
        outln!("The browser will be read-only: it can look, not change anything.");
    }
    if reached.hub {
        outln!("This is your page for every kiln, served by your hub.");
    }
    if reached.loopback_only {
        outln!(
            "The web view listens on loopback only; for a phone, set [web] listen (and public_url behind a proxy) in {}.",
            if reached.hub {
                "your own settings"
            } else {
                ".crucible.toml"
            }
        );
    }
}

/// Waits until a new browser is paired or the code expires; while it waits, this
/// command is a client that keeps the daemon up.
async fn wait_for_browser(
    client: &crate::client::Client,
    expires_at: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let before = client.call::<m::WebDevicesOf>(&NoParams {}).await?.devices;
    if !json {
        outln!("Waiting for the browser (Ctrl-C to stop waiting)…");
    }
    let deadline = chrono::DateTime::parse_from_rfc3339(expires_at)
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_else(|_| chrono::Utc::now());
    while chrono::Utc::now() < deadline {
        tokio::time::sleep(WAIT_STEP).await;
        let now = client.call::<m::WebDevicesOf>(&NoParams {}).await?.devices;
        if let Some(new) = now.iter().find(|d| !before.iter().any(|b| b.id == d.id)) {
            if !json {
                outln!(
                    "Paired: {} ({}, id {}).",
                    new.label,
                    new.access.as_str().replace('_', "-"),
                    new.id
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
    }
    if !json {
        outln!("The code expired unused: run `cru web` again.");
    }
    Ok(ExitCode::FAILURE)
}

/// The link as a QR code in text, two rows of modules per line. Drawn light on dark (the
/// modules as the terminal's background), as on most terminals; phone cameras read it.
fn qr(url: &str) -> Option<String> {
    use qrcode::render::unicode::Dense1x2;
    let code = qrcode::QrCode::new(url.as_bytes()).ok()?;
    Some(
        code.render::<Dense1x2>()
            .dark_color(Dense1x2::Light)
            .light_color(Dense1x2::Dark)
            .quiet_zone(true)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_link_becomes_a_qr_code_of_text() {
        let code = super::qr("http://127.0.0.1:7433/pair#code=ABCD-EFGH-JKMN-PQRS").unwrap();
        let lines: Vec<&str> = code.lines().collect();
        // A version-3 code or so with its quiet zone: square, in half-height rows.
        assert!(lines.len() > 10, "{code}");
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width));
        assert!((lines.len() * 2).abs_diff(width) <= 1, "{code}");
    }
}
