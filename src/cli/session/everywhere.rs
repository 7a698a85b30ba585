//! `cru session list --all-kilns`: every kiln's sessions in one list, each named with its
//! kiln, from any folder.

use super::show::{LIST_HEADERS, list_row};
use crate::cli::across::{ask_all, with_kiln};
use crate::cli::output::{self, outln};
use crate::client::Client;

/// Every registered kiln's sessions (a resting kiln's daemon started), in the order
/// `cru kilns` lists the kilns; each row numbered as in its own kiln's list.
pub(super) async fn list(json: bool) -> anyhow::Result<()> {
    let kilns = ask_all(async |client: &Client| super::list(client).await).await?;
    if json {
        let rows: Vec<serde_json::Value> = kilns
            .iter()
            .flat_map(|(kiln, sessions)| sessions.iter().map(move |s| with_kiln(s, kiln)))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else if kilns.iter().all(|(_, sessions)| sessions.is_empty()) {
        outln!("no sessions in any kiln");
    } else {
        let rows: Vec<Vec<String>> = kilns
            .iter()
            .flat_map(|(kiln, sessions)| {
                sessions.iter().enumerate().map(|(i, s)| {
                    let mut row = list_row(i, s);
                    row.insert(0, kiln.name.clone());
                    row
                })
            })
            .collect();
        let mut headers = LIST_HEADERS.to_vec();
        headers.insert(0, "KILN");
        output::print_table(&headers, &rows);
    }
    Ok(())
}
