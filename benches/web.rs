//! Web view benchmark, in a real browser (headless chromium through chromedriver) against
//! a real daemon on loopback. Three figures:
//!
//! - payload: every file of the page, raw and compressed (`gzip -9`), summed;
//! - first paint: the browser's own first-contentful-paint of the paired page, over fresh
//!   loads (median), each beside a one-line page's from a bare server on loopback (the
//!   browser's floor under the same load);
//! - event → DOM: the scripted agent says `stamp <ns>` (when it wrote the words); the
//!   page notes when the words appear in its DOM (a MutationObserver, the page's clock
//!   in nanoseconds since the epoch). The path measured is the agent's output to the
//!   daemon, the daemon's event, the event stream, and the page's rendering (median).
//!
//! ```text
//! bash .ci/run   # once: chromium and chromedriver
//! cargo bench --bench web
//! ```
//!
//! The daemon measured is the shipping build (`testkit/src/bench/ship.rs`: release, fat LTO), or the
//! binary `CRU_BENCH_BIN` names. Environment: `CRU_BENCH_ROUNDS` (default 20). Figures
//! are printed, never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::bench::figures;
use testkit::bench::kiln;
use testkit::bench::ship;
use testkit::browser;
use testkit::built;

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods as m;
use crucible::protocol::params::CreateSessionParams;
use crucible::protocol::{SessionState, WebPairParams};
use testkit::params;
use tokio::process::Command;

use browser::{Browser, Screen};
use figures::{Stats, env_number, load_average, ms};

const CRU: &str = env!("CARGO_BIN_EXE_cru");
const WAIT: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("web benchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Every file of the page: its name, raw and `gzip -9` sizes.
fn payload() -> Result<Vec<(String, usize, usize)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/web");
    let mut sizes = Vec::new();
    for entry in std::fs::read_dir(&dir).context("assets/web")? {
        let path = entry?.path();
        let raw = std::fs::metadata(&path)?.len() as usize;
        let gz = std::process::Command::new("gzip")
            .args(["-9", "-c"])
            .arg(&path)
            .output()
            .context("gzip")?
            .stdout
            .len();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        sizes.push((name, raw, gz));
    }
    sizes.sort();
    Ok(sizes)
}

async fn run() -> Result<()> {
    let rounds = env_number("CRU_BENCH_ROUNDS", 20)? as usize;
    println!("web view: a real daemon on loopback, headless chromium through chromedriver");
    println!("  load average before: {}", load_average());

    let files = payload()?;
    let (raw, gz): (usize, usize) = files
        .iter()
        .fold((0, 0), |(r, g), (_, raw, gz)| (r + raw, g + gz));
    println!();
    println!("| file | bytes | gzip -9 |");
    println!("|---|---|---|");
    for (name, raw, gz) in &files {
        println!("| {name} | {raw} | {gz} |");
    }
    println!("| **the whole page** | {raw} | {gz} |");

    let cru = Path::new(CRU);
    let agent = built::scripted_agent(cru);
    let settings =
        format!("[daemon]\ngrace_period_secs = 300\n\n[agents.scripted]\ncommand = {agent:?}\n");
    let temp = kiln::temp_kiln("cru-web-bench", &settings)?;
    let kiln = Kiln::new(temp.root.clone());
    // The shipping build (release, fat LTO) is what is measured; `CRU_BENCH_BIN` names
    // another, `CRU_BENCH_SHIP=0` measures this build's own.
    let measured = ship::cru_to_measure(CRU);
    println!("  measuring {}", measured.display());
    let _daemon = Command::new(&measured)
        .arg("--kiln")
        .arg(kiln.root())
        .args(["daemon", "run"])
        .env("XDG_CONFIG_HOME", &temp.xdg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the daemon")?;
    let client = kiln::connect(&kiln).await?;
    let url = client
        .call::<m::WebPair>(&WebPairParams { read_only: false })
        .await
        .context("web.pair")?
        .url;
    let base = url.split("/pair").next().unwrap_or(&url).to_string();

    let browser = Browser::start(Screen::Desktop {
        width: 1280,
        height: 900,
    })
    .await;
    browser.goto(&url).await;
    browser
        .wait_for(
            "the paired page",
            "return location.pathname === '/' && document.body.dataset.ready === '1'",
        )
        .await;

    // First paint of the paired page, fresh loads (the files revalidated each time), each
    // beside a one-line page from a bare server on loopback: the browser's own floor,
    // which no page can beat, under the same load.
    let floor_url = one_line_page().await?;
    let mut paints = Vec::new();
    let mut html = Vec::new();
    let mut floor = Vec::new();
    for _ in 0..rounds {
        let (paint, received) = first_paint(&browser, &format!("{base}/")).await;
        paints.push(paint);
        html.push(received);
        floor.push(first_paint(&browser, &floor_url).await.0);
    }
    let paints = Stats::new(paints);
    let html = Stats::new(html);
    let floor = Stats::new(floor);
    // Back on the paired page for the live figures.
    browser.goto(&format!("{base}/")).await;
    browser
        .wait_for(
            "the paired page again",
            "return document.body.dataset.ready === '1'",
        )
        .await;

    // A session to stamp; the page opens it and watches its transcript.
    let create = CreateSessionParams {
        agent: "scripted".into(),
        task: Some("say ready".into()),
        ..Default::default()
    };
    let id = client
        .call::<m::SessionCreate>(&create)
        .await
        .context("session.create")?
        .session_id;
    let row = format!("li.session[data-session-id='{id}'] button");
    browser
        .wait_for(
            "the new session",
            &format!("return document.querySelector(\"{row}\")"),
        )
        .await;
    browser.click(&row).await;
    browser
        .wait_for(
            "the session's first words",
            "return document.body.dataset.ready === '1' &&
                    document.getElementById('transcript').innerText.includes('ready')",
        )
        .await;
    let mut to_dom = Vec::new();
    for round in 0..rounds {
        // Armed before the prompt: notes when a new stamp appears in the transcript.
        browser
            .run(
                "window.cruStampSeen = null;
                 const seen = new Set([...document.querySelectorAll('#transcript *')]
                   .map(e => e.textContent).filter(t => /^stamp \\d+$/.test(t.trim())).map(t => t.trim()));
                 const watch = new MutationObserver(() => {
                   if (window.cruStampSeen) return;
                   const at = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
                   for (const e of document.querySelectorAll('#transcript *')) {
                     const t = e.textContent.trim();
                     if (/^stamp \\d+$/.test(t) && !seen.has(t)) {
                       window.cruStampSeen = [t, String(at)];
                       watch.disconnect();
                       return;
                     }
                   }
                 });
                 watch.observe(document.getElementById('transcript'),
                   {childList: true, subtree: true, characterData: true});
                 return true;",
                vec![],
            )
            .await;
        client
            .call::<m::SessionPrompt>(&params::prompt(&id, "stamp"))
            .await
            .with_context(|| format!("prompt {round}"))?;
        let seen = browser
            .wait_for("the stamp in the page", "return window.cruStampSeen")
            .await;
        let stamped: u128 = seen[0]
            .as_str()
            .and_then(|t| t.strip_prefix("stamp "))
            .and_then(|ns| ns.parse().ok())
            .context("the agent's stamp")?;
        let shown: u128 = seen[1]
            .as_str()
            .and_then(|t| t.parse().ok())
            .context("when shown")?;
        to_dom.push(Duration::from_nanos(
            u64::try_from(shown.saturating_sub(stamped)).unwrap_or(u64::MAX),
        ));
        wait_idle(&client, &id).await?;
    }
    let to_dom = Stats::new(to_dom);
    browser.close().await;

    println!();
    println!("| figure ({rounds} rounds) | median | p90 | max |");
    println!("|---|---|---|---|");
    for (name, stats) in [
        ("the page's HTML received (paired page)", &html),
        ("first contentful paint (paired page)", &paints),
        (
            "first contentful paint, a one-line page (the browser's floor)",
            &floor,
        ),
        ("agent output → page DOM", &to_dom),
    ] {
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.1} ms |",
            ms(stats.median()),
            ms(stats.percentile(0.9)),
            ms(stats.max())
        );
    }
    println!("  load average after: {}", load_average());
    Ok(())
}

/// Loads `url` afresh: the browser's first contentful paint and when the HTML had arrived,
/// both from the navigation's start.
async fn first_paint(browser: &Browser, url: &str) -> (Duration, Duration) {
    browser.goto(url).await;
    let fcp = browser
        .wait_for(
            "a first paint",
            "const p = performance.getEntriesByName('first-contentful-paint')[0];
             return p ? p.startTime : null;",
        )
        .await;
    let received = browser
        .run(
            "return performance.getEntriesByType('navigation')[0].responseEnd;",
            vec![],
        )
        .await;
    let at = |v: serde_json::Value| Duration::from_secs_f64(v.as_f64().unwrap_or(0.0) / 1000.0);
    (at(fcp), at(received))
}

/// Serves a one-line page on a loopback port, for as long as the benchmark runs: its URL.
async fn one_line_page() -> Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const PAGE: &str = "<!doctype html><meta charset=utf-8><title>floor</title><h1>crucible</h1>";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    Ok(url)
}

/// Waits until the session's turn has ended.
async fn wait_idle(client: &Client, id: &str) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = client
            .call::<m::SessionGet>(&params::session_id(id))
            .await?
            .session;
        if s.state == Some(SessionState::Complete) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("the turn did not end: {:?}", s.state);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
