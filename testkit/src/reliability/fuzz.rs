//! The fuzzer of `reliability.rs`: malformed and hostile lines on several connections to
//! one daemon, every reply checked against PROTOCOL.md and JSON-RPC 2.0.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::cases::{
    CHEAP, Ctx, Expect, IdRule, KINDS, Outcome, Resp, Step, before_handshake, case, scope_probe,
};
use super::{Conn, Daemon, REPLY_TIMEOUT, Read, Rng, TempKiln, preview};

pub struct FuzzReport {
    pub duration: Duration,
    pub connections: usize,
    /// Lines sent that are checked (each followed by a ping that delimits its replies).
    pub cases: u64,
    /// Reply lines to those cases.
    pub replies: u64,
    pub violations: u64,
    /// Violations by kind: count and the first one described.
    pub kinds: BTreeMap<String, (u64, String)>,
}

impl FuzzReport {
    pub fn ok(&self) -> bool {
        self.violations == 0
    }
}

impl fmt::Display for FuzzReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fuzz: {:.1} s on {} connections: {} cases, {} replies, {} violations",
            self.duration.as_secs_f64(),
            self.connections,
            self.cases,
            self.replies,
            self.violations
        )?;
        for (kind, (count, example)) in &self.kinds {
            write!(f, "\n  {count:>6} x {kind}\n         e.g. {example}")?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct Tally {
    cases: u64,
    replies: u64,
    violations: u64,
    kinds: BTreeMap<String, (u64, String)>,
}

impl Tally {
    fn violation(&mut self, kind: &str, detail: String) {
        self.violations += 1;
        self.kinds.entry(kind.to_string()).or_insert((0, detail)).0 += 1;
    }
}

fn note(tally: &Mutex<Tally>, kind: &str, detail: String) {
    tally
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .violation(kind, detail);
}

/// Sends malformed and hostile lines on 4 connections to one daemon for `duration`, and
/// checks every reply against PROTOCOL.md and JSON-RPC 2.0. Afterwards the daemon must be
/// alive and a normal `inbox.send` must work. `Err` is a failure of the equipment.
pub async fn fuzz(cru: &Path, duration: Duration) -> Result<FuzzReport> {
    const CONNECTIONS: usize = 4;
    let started = Instant::now();
    let kiln = TempKiln::new().context("creating the temp kiln")?;
    let mut daemon = Daemon::spawn(cru, &kiln, "fuzz")?;
    let mut control = daemon.connect().await.context("starting the daemon")?;
    let reg = control
        .result(
            "session.register",
            json!({"agent_type": "acp", "agent_name": "rel"}),
        )
        .await?;
    let (Some(session), Some(handle)) = (reg["session_id"].as_str(), reg["handle"].as_str()) else {
        bail!("session.register: no session_id or handle in {reg}");
    };
    drop(control);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let deadline = Instant::now() + duration;
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|w| {
            let ctx = Ctx {
                session: session.to_string(),
                handle: handle.to_string(),
                next: 0,
            };
            tokio::spawn(fuzz_worker(
                kiln.socket(),
                w,
                ctx,
                deadline,
                Arc::clone(&tally),
            ))
        })
        .collect();
    let mut died = None;
    while !workers.iter().all(|w| w.is_finished()) {
        if let Some(status) = daemon.exited() {
            died = Some(status);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for worker in workers {
        worker.await.context("a fuzz worker panicked")?;
    }
    if let Some(status) = died.or_else(|| daemon.exited()) {
        note(
            &tally,
            "the daemon died",
            format!("{status}: {}", daemon.stderr_tail()),
        );
    } else if let Err(e) = normal_send(&kiln.socket(), session).await {
        note(
            &tally,
            "a normal inbox.send failed after the fuzz",
            format!("{e:#}"),
        );
    }
    daemon.stop().await;
    let tally = std::mem::take(&mut *tally.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(FuzzReport {
        duration: started.elapsed(),
        connections: CONNECTIONS,
        cases: tally.cases,
        replies: tally.replies,
        violations: tally.violations,
        kinds: tally.kinds,
    })
}

async fn normal_send(socket: &Path, session: &str) -> Result<()> {
    let mut conn = Conn::handshaken(socket).await?;
    let sent = conn
        .result(
            "inbox.send",
            json!({"session_id": session, "msg_type": "info", "title": "after the fuzz"}),
        )
        .await?;
    let id = sent["id"]
        .as_str()
        .ok_or_else(|| anyhow!("inbox.send: no id in {sent}"))?;
    let got = conn.result("inbox.get", json!({"id": id})).await?;
    if got["message"]["title"] != json!("after the fuzz") {
        bail!("inbox.get {id} gave {got}");
    }
    Ok(())
}

/// Connections one after another until the deadline: a few calls before the handshake, the
/// handshake, then cases; now and then a probe of a session-scoped connection.
async fn fuzz_worker(
    socket: PathBuf,
    w: usize,
    mut ctx: Ctx,
    deadline: Instant,
    tally: Arc<Mutex<Tally>>,
) {
    let mut rng = Rng::new(0x5EED + w as u64);
    let agent_socket = socket.with_file_name("agent.sock");
    let mut pings = 0u64;
    let mut covered = 0;
    let mut connection = 0u64;
    while Instant::now() < deadline {
        connection += 1;
        // Every 5th connection probes session scoping, every 10th on the agent socket.
        let probe = connection.is_multiple_of(5);
        let agent = connection.is_multiple_of(10) && agent_socket.exists();
        let mut conn = match Conn::connect(if agent { &agent_socket } else { &socket }).await {
            Ok(conn) => conn,
            Err(e) => {
                note(&tally, "could not connect", format!("{e:#}"));
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let mut steps = if probe {
            scope_probe(&mut ctx, agent)
        } else {
            before_handshake(&mut rng, &mut ctx)
        };
        let cases = if probe { 0 } else { 20 + rng.below(60) };
        for _ in 0..cases {
            // The first pass covers every kind in order, then they come at random, the
            // expensive ones (MiB lines, deep nesting, huge batches) less often.
            let kind = if covered < KINDS {
                covered += 1;
                covered - 1
            } else {
                let k = rng.below(KINDS as u64 + 40) as usize;
                if k < KINDS { k } else { CHEAP[k % CHEAP.len()] }
            };
            steps.extend(case(kind, &mut rng, &mut ctx));
        }
        for step in &steps {
            if Instant::now() >= deadline {
                break;
            }
            pings += 1;
            if let Err((kind, detail)) =
                run_step(&mut conn, step, &format!("sentinel-{w}-{pings}"), &tally).await
            {
                note(&tally, kind, detail);
                break; // a new connection
            }
        }
    }
}

/// Sends a step and a ping after it; the replies before the ping's are the step's.
async fn run_step(
    conn: &mut Conn,
    step: &Step,
    sentinel: &str,
    tally: &Mutex<Tally>,
) -> Result<(), (&'static str, String)> {
    let ping = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{sentinel}\",\"method\":\"ping\"}}\n");
    let dropped = |what: &str| {
        (
            "the connection dropped",
            format!("{what} after {}: sent {}", step.label, preview(&step.line)),
        )
    };
    if conn.write(&step.line).await.is_err() || conn.write(ping.as_bytes()).await.is_err() {
        return Err(dropped("write failed"));
    }
    let mut replies = Vec::new();
    loop {
        match conn.read(REPLY_TIMEOUT).await {
            Ok(Read::Line(line)) => {
                let value: Option<Value> = serde_json::from_slice(&line).ok();
                if let Some(v) = value.filter(|v| v["id"] == json!(sentinel)) {
                    if v["result"]["pong"] != json!(true) {
                        note(tally, "ping failed", format!("after {}: {v}", step.label));
                    }
                    break;
                }
                replies.push(line);
                if replies.len() > 3 {
                    return Err((
                        "extra replies",
                        format!(
                            "{} replies to {}: {}",
                            replies.len(),
                            step.label,
                            preview(&replies[0])
                        ),
                    ));
                }
            }
            Ok(Read::Eof) | Err(_) => return Err(dropped("end of stream")),
            Ok(Read::TimedOut) => {
                return Err((
                    "no reply",
                    format!(
                        "nothing within {REPLY_TIMEOUT:?} after {}: sent {}",
                        step.label,
                        preview(&step.line)
                    ),
                ));
            }
        }
    }
    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    t.cases += 1;
    t.replies += replies.len() as u64;
    if let Err((kind, detail)) = check(&step.expect, &replies) {
        let got: Vec<String> = replies.iter().map(|r| preview(r)).collect();
        t.violation(
            &format!("{kind} [{}]", step.label),
            format!("{detail}; sent {}; got {got:?}", preview(&step.line)),
        );
    }
    Ok(())
}

// ---- checking replies ----

type Fail = (&'static str, String);

fn check(expect: &Expect, replies: &[Vec<u8>]) -> Result<(), Fail> {
    let extra = || {
        Err((
            "more than one reply line",
            format!("{} lines", replies.len()),
        ))
    };
    match (expect, replies) {
        (Expect::Silent, []) | (Expect::Optional, []) => Ok(()),
        (Expect::Silent, _) => Err(("reply to a notification", String::new())),
        (Expect::One(_) | Expect::Batch(_), []) => Err(("no reply", String::new())),
        (Expect::Optional, [one]) => check_one(one, &Resp(IdRule::Null, Outcome::Err(&[]))),
        (Expect::One(resp), [one]) => check_one(one, resp),
        (Expect::Batch(resps), [one]) => check_batch(one, resps),
        (Expect::AnyOf(alternatives), _) => {
            let mut first = None;
            for alternative in alternatives {
                match check(alternative, replies) {
                    Ok(()) => return Ok(()),
                    Err(fail) => first = first.or(Some(fail)),
                }
            }
            first.map_or(Ok(()), Err)
        }
        _ => extra(),
    }
}

fn parse_reply(raw: &[u8]) -> Result<(&str, Value), Fail> {
    let text = std::str::from_utf8(raw).map_err(|_| ("non-JSON reply", "not UTF-8".to_string()))?;
    if !text.ends_with('\n') {
        return Err(("reply not terminated by a newline", String::new()));
    }
    let value = serde_json::from_str(text).map_err(|e| ("non-JSON reply", e.to_string()))?;
    Ok((text, value))
}

fn check_one(raw: &[u8], resp: &Resp) -> Result<(), Fail> {
    let (text, value) = parse_reply(raw)?;
    if value.is_array() {
        return Err(("an array reply to a single request", String::new()));
    }
    check_response(&value, raw_member(text, "id"), resp)
}

fn check_batch(raw: &[u8], resps: &[Resp]) -> Result<(), Fail> {
    let (text, value) = parse_reply(raw)?;
    let Some(items) = value.as_array() else {
        return Err(("a batch not answered with an array", String::new()));
    };
    if items.len() != resps.len() {
        return Err((
            "batch reply of the wrong length",
            format!("{} responses for {} requests", items.len(), resps.len()),
        ));
    }
    let raws = raw_elements(text);
    for (i, (item, resp)) in items.iter().zip(resps).enumerate() {
        let raw_id = raws.get(i).and_then(|r| raw_member(r, "id"));
        check_response(item, raw_id, resp)
            .map_err(|(kind, detail)| (kind, format!("batch element {i}: {detail} {item}")))?;
    }
    Ok(())
}

fn check_response(
    value: &Value,
    raw_id: Option<&str>,
    Resp(id_rule, outcome): &Resp,
) -> Result<(), Fail> {
    let malformed = |why: &str| Err(("malformed response", why.to_string()));
    let Some(obj) = value.as_object() else {
        return malformed("not an object");
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return malformed("\"jsonrpc\" is not \"2.0\"");
    }
    let (Some(echoed), Some(raw_id)) = (obj.get("id"), raw_id) else {
        return malformed("no \"id\"");
    };
    let error = match (obj.get("result"), obj.get("error")) {
        (Some(_), None) => None,
        (None, Some(e)) if e["code"].is_i64() && e["message"].is_string() => e["code"].as_i64(),
        (None, Some(_)) => return malformed("error without an integer code and a string message"),
        _ => return malformed("not exactly one of \"result\" and \"error\""),
    };
    let id_ok = match id_rule {
        IdRule::Echo(sent) => same_id(sent, raw_id, echoed),
        IdRule::Null => raw_id == "null",
        IdRule::NullOrEcho(sent) => raw_id == "null" || same_id(sent, raw_id, echoed),
        IdRule::Any => true,
    };
    if !id_ok {
        let wanted = match id_rule {
            IdRule::Echo(s) | IdRule::NullOrEcho(s) => s.as_str(),
            _ => "null",
        };
        return Err((
            "id not echoed exactly",
            format!("sent id {wanted}, reply id {raw_id}"),
        ));
    }
    match (outcome, error) {
        (Outcome::Ok, Some(code)) => Err((
            "an error for a valid request",
            format!("code {code}: {}", obj["error"]),
        )),
        (Outcome::Err(_), None) => Err((
            "success where an error is due",
            format!("result {}", obj["result"]),
        )),
        (Outcome::Err(codes), Some(code)) if !codes.is_empty() && !codes.contains(&code) => Err((
            "wrong error code",
            format!(
                "code {code}, expected one of {codes:?}: {}",
                obj["error"]["message"]
            ),
        )),
        _ => Ok(()),
    }
}

/// PROTOCOL.md: ids are echoed exactly as written. Numbers are compared as text (a big
/// integer must not come back rounded, `1e3` not as `1000.0`), the rest as JSON values.
fn same_id(sent: &str, raw: &str, echoed: &Value) -> bool {
    match serde_json::from_str::<Value>(sent) {
        Ok(v) if v.is_number() => raw == sent,
        Ok(v) => v == *echoed,
        Err(_) => raw == sent,
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The index just past the JSON value at `i` in text already known to be valid JSON.
fn skip_value(b: &[u8], i: usize) -> usize {
    let i = skip_ws(b, i);
    let mut j = i;
    match b.get(i) {
        Some(b'"') => {
            j += 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        }
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            while j < b.len() {
                match b[j] {
                    b'"' => j = skip_value(b, j) - 1,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            j
        }
        _ => {
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace()
            {
                j += 1;
            }
            j
        }
    }
}

/// The raw text of member `key` of the top-level object in `text`.
fn raw_member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        let start = skip_ws(b, i);
        let end = skip_value(b, start);
        let name: String = serde_json::from_str(text.get(start..end)?).ok()?;
        i = skip_ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let (v_start, v_end) = (skip_ws(b, i + 1), skip_value(b, i + 1));
        if name == key {
            return text.get(v_start..v_end);
        }
        i = skip_ws(b, v_end);
        if b.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

/// The raw text of each element of the top-level array in `text`.
fn raw_elements(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = skip_ws(b, 0) + 1;
    while skip_ws(b, i) < b.len() && b[skip_ws(b, i)] != b']' {
        let start = skip_ws(b, i);
        let end = skip_value(b, start);
        out.extend(text.get(start..end));
        i = skip_ws(b, end) + 1; // past the ','
    }
    out
}
