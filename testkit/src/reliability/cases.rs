//! The fuzzer's cases (part of `reliability.rs`): the lines to send, and the replies
//! PROTOCOL.md says each is owed.

use serde_json::Value;

use super::{
    BAD_PARAMS, FORBIDDEN, INVALID_REQUEST, MAX_LINE, NO_METHOD, NOT_FOUND, PARSE, Rng,
    VERSION_MISMATCH,
};

/// What the id of a response must be. The `String`s are the id's JSON text as sent.
pub(super) enum IdRule {
    Echo(String),
    Null,
    NullOrEcho(String),
    Any,
}

pub(super) enum Outcome {
    Ok,
    /// An error with one of these codes (any code when empty).
    Err(&'static [i64]),
    Any,
}

pub(super) struct Resp(pub(super) IdRule, pub(super) Outcome);

pub(super) enum Expect {
    /// No reply (notifications).
    Silent,
    /// No reply, or one error (blank lines).
    Optional,
    One(Resp),
    Batch(Vec<Resp>),
    AnyOf(Vec<Expect>),
}

pub(super) struct Step {
    pub(super) label: &'static str,
    pub(super) line: Vec<u8>,
    pub(super) expect: Expect,
}

pub(super) struct Ctx {
    pub(super) session: String,
    pub(super) handle: String,
    pub(super) next: u64,
}

impl Ctx {
    /// A fresh id, mostly numbers and strings, now and then one from the catalogue.
    fn id(&mut self, rng: &mut Rng) -> String {
        self.next += 1;
        match rng.below(8) {
            0 => rng.pick(VALID_IDS).to_string(),
            1..=3 => format!("\"c-{}\"", self.next),
            _ => self.next.to_string(),
        }
    }
}

/// Ids of every valid JSON type, as JSON text, big integers among them.
const VALID_IDS: &[&str] = &[
    "0",
    "1",
    "-1",
    "9007199254740993",
    "18446744073709551615",
    "-9223372036854775808",
    "18446744073709551616",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "1.5",
    "-0.25",
    "1e3",
    "null",
    "\"\"",
    "\"x\"",
    "\"\\u00e9\\n\\\"\"",
    "\"\\ud83d\\ude00\"",
    "\"007\"",
];
const INVALID_IDS: &[&str] = &["true", "false", "{}", "[]", "{\"a\":1}", "[1,2]"];

/// JSON text of a string.
fn q(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// A request line's JSON text; `id`, `method` and `params` are JSON text too.
fn request(id: Option<&str>, method: &str, params: Option<&str>) -> String {
    let mut s = String::from("{\"jsonrpc\":\"2.0\"");
    for (name, value) in [("id", id), ("method", Some(method)), ("params", params)] {
        if let Some(value) = value {
            s.push_str(&format!(",\"{name}\":{value}"));
        }
    }
    s + "}"
}

fn step(label: &'static str, line: impl Into<Vec<u8>>, expect: Expect) -> Step {
    let mut line = line.into();
    line.push(b'\n');
    Step {
        label,
        line,
        expect,
    }
}

fn err(id: IdRule, codes: &'static [i64]) -> Expect {
    Expect::One(Resp(id, Outcome::Err(codes)))
}

fn ok(id: String) -> Expect {
    Expect::One(Resp(IdRule::Echo(id), Outcome::Ok))
}

/// Calls with wrong or missing params, each refused with -32602 (PROTOCOL.md lists the
/// fields and the refusals: an empty title, options on an `info`, a limit out of range).
fn bad_params(session: &str) -> Vec<(&'static str, String)> {
    let s = q(session);
    let send = |rest: &str| format!("{{\"session_id\":{s},\"msg_type\":\"info\"{rest}}}");
    vec![
        (
            "session.register",
            r#"{"agent_type":1,"agent_name":"x"}"#.into(),
        ),
        ("session.get", r#"{"session_id":42}"#.into()),
        ("session.get", "[[]]".into()),
        ("session.get", "[null]".into()),
        ("inbox.get", "[\"01ARZ3NDEKTSV4RRFFQ69G5FAV\",1]".into()),
        ("session.heartbeat", r#"{"session_id":[]}"#.into()),
        ("session.deregister", r#"{"session_id":7}"#.into()),
        (
            "inbox.send",
            r#"{"session_id":5,"msg_type":"info","title":"x"}"#.into(),
        ),
        ("inbox.send", send("")),
        ("inbox.send", send(",\"title\":\"\"")),
        ("inbox.send", send(",\"title\":\"t\",\"options\":[\"a\"]")),
        (
            "inbox.send",
            format!("{{\"session_id\":{s},\"msg_type\":\"shout\",\"title\":\"t\"}}"),
        ),
        ("inbox.list", r#"{"limit":0}"#.into()),
        ("inbox.list", r#"{"limit":10001}"#.into()),
        ("inbox.list", r#"{"limit":"ten"}"#.into()),
        ("inbox.get", r#"{"id":5}"#.into()),
        ("inbox.get", "[5]".into()),
        ("inbox.mark_read", r#"{"ids":"x"}"#.into()),
        ("inbox.respond", r#"{"id":"x"}"#.into()),
        ("db.query", r#"{"sql":5}"#.into()),
        ("subscribe", r#"{"topics":5}"#.into()),
        ("context.get", "{}".into()),
    ]
}

/// A batch element: its text and the response it is owed (none for a notification).
fn batch_item(rng: &mut Rng, ctx: &mut Ctx) -> (String, Option<Resp>) {
    let id = ctx.id(rng);
    match rng.below(7) {
        0 => (
            request(Some(&id), "\"ping\"", None),
            Some(Resp(IdRule::Echo(id), Outcome::Ok)),
        ),
        1 => (
            request(None, rng.pick::<&str>(&["\"ping\"", "\"no.such\""]), None),
            None,
        ),
        2 => (
            rng.pick(&["5", "\"x\"", "null", "true", "[]", "[1]"])
                .to_string(),
            Some(Resp(IdRule::Null, Outcome::Err(&[INVALID_REQUEST]))),
        ),
        3 => (
            request(Some(&id), "\"no.such\"", Some("{}")),
            Some(Resp(IdRule::Echo(id), Outcome::Err(&[NO_METHOD]))),
        ),
        4 => {
            let (method, params) = rng.pick(&bad_params(&ctx.session)).clone();
            (
                request(Some(&id), &q(method), Some(&params)),
                Some(Resp(IdRule::Echo(id), Outcome::Err(&[BAD_PARAMS]))),
            )
        }
        5 => (
            format!("{{\"jsonrpc\":\"1.0\",\"id\":{id},\"method\":\"ping\"}}"),
            Some(Resp(
                IdRule::NullOrEcho(id),
                Outcome::Err(&[INVALID_REQUEST]),
            )),
        ),
        _ => {
            let id = rng.pick(VALID_IDS).to_string();
            (
                request(Some(&id), "\"ping\"", None),
                Some(Resp(IdRule::Echo(id), Outcome::Ok)),
            )
        }
    }
}

pub(super) const KINDS: usize = 24;
/// Kinds cheap enough to come often.
pub(super) const CHEAP: [usize; 19] = [
    0, 1, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
];

/// One case (a step or two) of a kind, on a handshaken connection.
#[allow(clippy::too_many_lines)] // one match of every case, a table
pub(super) fn case(kind: usize, rng: &mut Rng, ctx: &mut Ctx) -> Vec<Step> {
    let id = ctx.id(rng);
    let echo = || IdRule::Echo(id.clone());
    let either = || IdRule::NullOrEcho(id.clone());
    let ping = request(Some(&id), "\"ping\"", None);
    let padded = |len: usize| {
        let head = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\",\"params\":{{\"pad\":\""
        );
        format!("{head}{}\"}}}}", "x".repeat(len - head.len() - 3))
    };
    let one = match kind {
        0 => {
            let junk: String = (0..rng.below(200))
                .map(|_| (b' ' + rng.below(95) as u8) as char)
                .collect();
            step(
                "invalid JSON",
                format!("@{junk}"),
                err(IdRule::Null, &[PARSE]),
            )
        }
        1 => {
            let (method, params) = rng.pick(&bad_params(&ctx.session)).clone();
            let full = request(Some(&id), &q(method), Some(&params));
            let cut = 1 + rng.below(full.len() as u64 - 1) as usize;
            step(
                "truncated JSON",
                &full.as_bytes()[..cut],
                err(IdRule::Null, &[PARSE]),
            )
        }
        2 => step(
            "100k unclosed [",
            "[".repeat(100_000),
            err(IdRule::Null, &[PARSE]),
        ),
        3 => step(
            "100k nested []",
            "[".repeat(100_000) + "]".repeat(100_000).as_str(),
            Expect::AnyOf(vec![
                err(IdRule::Null, &[PARSE, INVALID_REQUEST]),
                Expect::Batch(vec![Resp(IdRule::Null, Outcome::Err(&[INVALID_REQUEST]))]),
            ]),
        ),
        4 => step(
            "a line just under 1 MiB",
            padded(MAX_LINE - 1),
            ok(id.clone()),
        ),
        5 => step(
            "a line just over 1 MiB",
            padded(MAX_LINE + 1 + rng.below(4096) as usize),
            err(IdRule::Null, &[INVALID_REQUEST]),
        ),
        6 => {
            let n = 1000 + rng.below(19_000);
            let items: Vec<String> = (0..n)
                .map(|i| request(Some(&i.to_string()), "\"ping\"", None))
                .collect();
            let resps = (0..n)
                .map(|i| Resp(IdRule::Echo(i.to_string()), Outcome::Ok))
                .collect();
            step(
                "huge batch of pings",
                format!("[{}]", items.join(",")),
                Expect::Batch(resps),
            )
        }
        7 => step(
            "empty batch",
            *rng.pick(&["[]", " [ ] "]),
            err(IdRule::Null, &[INVALID_REQUEST]),
        ),
        8 => {
            let version = *rng.pick(&["\"1.0\"", "2.0", "null", "\"2.0 \"", "\"\"", "[\"2.0\"]"]);
            let line = match rng.below(4) {
                0 => format!("{{\"id\":{id},\"method\":\"ping\"}}"),
                _ => format!("{{\"jsonrpc\":{version},\"id\":{id},\"method\":\"ping\"}}"),
            };
            step(
                "wrong jsonrpc version",
                line,
                err(either(), &[INVALID_REQUEST]),
            )
        }
        9 => {
            let method = *rng.pick(&["5", "null", "[]", "{}", "true"]);
            let line = match rng.below(4) {
                0 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id}}}"),
                _ => request(Some(&id), method, None),
            };
            step("non-string method", line, err(either(), &[INVALID_REQUEST]))
        }
        10 => {
            let long = "m".repeat(10_000);
            let method = q(rng.pick::<&str>(&[
                "session.teleport",
                "",
                "rpc.discover",
                "PING",
                "ping ",
                "inbox.send.x",
                long.as_str(),
            ]));
            step(
                "unknown method",
                request(Some(&id), &method, Some("{}")),
                err(echo(), &[NO_METHOD]),
            )
        }
        11 => {
            let (method, params) = rng.pick(&bad_params(&ctx.session)).clone();
            step(
                "bad params",
                request(Some(&id), &q(method), Some(&params)),
                err(echo(), &[BAD_PARAMS]),
            )
        }
        12 => {
            let params = *rng.pick(&["3", "\"x\"", "true"]);
            step(
                "params not an object or array",
                request(Some(&id), "\"ping\"", Some(params)),
                err(either(), &[INVALID_REQUEST]),
            )
        }
        13 => {
            let id = rng.pick(VALID_IDS).to_string();
            step(
                "id of a valid type",
                request(Some(&id), "\"ping\"", None),
                ok(id),
            )
        }
        14 => {
            let id = rng.pick(INVALID_IDS).to_string();
            step(
                "id of an invalid type",
                request(Some(&id), "\"ping\"", None),
                err(IdRule::NullOrEcho(id), &[INVALID_REQUEST]),
            )
        }
        15 => {
            let (method, params) = rng.pick(&bad_params(&ctx.session)).clone();
            let line = match rng.below(3) {
                0 => request(None, "\"ping\"", None),
                1 => request(None, "\"no.such\"", Some("[]")),
                _ => request(None, &q(method), Some(&params)),
            };
            step("notification", line, Expect::Silent)
        }
        16 => {
            let items: Vec<String> = (0..1 + rng.below(20))
                .map(|_| request(None, "\"ping\"", None))
                .collect();
            step(
                "batch of notifications",
                format!("[{}]", items.join(",")),
                Expect::Silent,
            )
        }
        17 => {
            let (items, resps): (Vec<String>, Vec<Option<Resp>>) =
                (0..2 + rng.below(30)).map(|_| batch_item(rng, ctx)).unzip();
            let resps: Vec<Resp> = resps.into_iter().flatten().collect();
            let expect = if resps.is_empty() {
                Expect::Silent
            } else {
                Expect::Batch(resps)
            };
            step("mixed batch", format!("[{}]", items.join(",")), expect)
        }
        18 => {
            let mut line = match rng.below(2) {
                0 => vec![0xFF, 0xFE],
                _ => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"pi").into_bytes(),
            };
            // 0xC0 never occurs in UTF-8, so the line is never valid whatever follows.
            line.push(0xC0);
            line.extend((0..rng.below(64)).map(|_| 0x80 + rng.below(128) as u8));
            if line[0] == b'{' {
                line.extend_from_slice(b"ng\"}");
            }
            step(
                "non-UTF-8 bytes",
                line,
                err(either(), &[PARSE, INVALID_REQUEST]),
            )
        }
        19 => {
            let (method, params) = *rng.pick(&[
                (
                    "\"session.get\"",
                    "{\"session_id\":\"01ARZ3NDEKTSV4RRFFQ69G5FAV\"}",
                ),
                ("\"inbox.get\"", "{\"id\":\"01ARZ3NDEKTSV4RRFFQ69G5FAV\"}"),
            ]);
            step(
                "no such session or message",
                request(Some(&id), method, Some(params)),
                err(echo(), &[NOT_FOUND]),
            )
        }
        20 => {
            // PROTOCOL.md: a second handshake is -32600 and changes nothing.
            let (params, codes): (_, &'static [i64]) = *rng.pick(&[
                ("{\"protocol_version\":1}", &[INVALID_REQUEST][..]),
                (
                    "{\"protocol_version\":999}",
                    &[INVALID_REQUEST, VERSION_MISMATCH][..],
                ),
                (
                    "{\"protocol_version\":\"one\"}",
                    &[INVALID_REQUEST, BAD_PARAMS][..],
                ),
            ]);
            step(
                "second handshake",
                request(Some(&id), "\"handshake\"", Some(params)),
                err(echo(), codes),
            )
        }
        21 => match rng.below(3) {
            0 => step("CR LF line ending", ping + "\r", ok(id.clone())),
            1 => step(
                "trailing NUL",
                ping + "\0",
                err(IdRule::Any, &[PARSE, INVALID_REQUEST]),
            ),
            _ => step(
                "two values on one line",
                ping.clone() + ping.as_str(),
                err(IdRule::Any, &[PARSE, INVALID_REQUEST]),
            ),
        },
        22 => match rng.below(3) {
            0 => step(
                "blank line",
                *rng.pick(&["", "   ", "\t", "\r"]),
                Expect::Optional,
            ),
            1 => step(
                "lone surrogate in method",
                request(Some(&id), "\"\\ud800\"", None),
                Expect::AnyOf(vec![err(IdRule::Null, &[PARSE]), err(echo(), &[NO_METHOD])]),
            ),
            _ => step(
                "number id out of range",
                request(Some("1e400"), "\"ping\"", None),
                err(IdRule::Any, &[]),
            ),
        },
        _ => {
            let depth = 10 + rng.below(300) as usize;
            let params = "{\"a\":".repeat(depth) + "1" + "}".repeat(depth).as_str();
            step(
                "deeply nested params",
                request(Some(&id), "\"inbox.send\"", Some(&params)),
                err(either(), &[PARSE, INVALID_REQUEST, BAD_PARAMS]),
            )
        }
    };
    vec![one]
}

/// A fresh connection: garbage, pings, notifications and calls before the handshake
/// (optional on the owner's socket: calls are served as protocol 1), then the handshake.
pub(super) fn before_handshake(rng: &mut Rng, ctx: &mut Ctx) -> Vec<Step> {
    let mut steps = Vec::new();
    for _ in 0..rng.below(4) {
        let id = ctx.id(rng);
        steps.push(match rng.below(6) {
            0 => step(
                "ping before the handshake",
                request(Some(&id), "\"ping\"", None),
                ok(id),
            ),
            1 => step(
                "notification before the handshake",
                request(None, "\"session.list\"", None),
                Expect::Silent,
            ),
            2 => step(
                "invalid JSON before the handshake",
                "{\"jsonrpc\":",
                err(IdRule::Null, &[PARSE]),
            ),
            3 => step(
                "unknown method before the handshake",
                request(Some(&id), "\"no.such\"", None),
                err(IdRule::Echo(id), &[NO_METHOD]),
            ),
            4 => step(
                "bad handshake params",
                request(
                    Some(&id),
                    "\"handshake\"",
                    Some("{\"protocol_version\":\"1\"}"),
                ),
                err(IdRule::Echo(id), &[BAD_PARAMS]),
            ),
            _ => {
                let method = q(rng.pick::<&str>(&[
                    "session.list",
                    "inbox.list",
                    "db.query",
                    "daemon.status",
                    "inbox.send",
                ]));
                // Served without a handshake; `db.query` and `inbox.send` lack params.
                step(
                    "call before the handshake",
                    request(Some(&id), &method, Some("{}")),
                    Expect::AnyOf(vec![ok(id.clone()), err(IdRule::Echo(id), &[BAD_PARAMS])]),
                )
            }
        });
    }
    let id = ctx.id(rng);
    steps.push(step(
        "handshake",
        request(Some(&id), "\"handshake\"", Some("{\"protocol_version\":1}")),
        ok(id),
    ));
    steps
}

/// A connection scoped by a session handle may only call what PROTOCOL.md lists (-32005
/// otherwise); a second handshake is refused and the scope stays. On the agent socket
/// every connection must present a handle before anything but `ping`.
pub(super) fn scope_probe(ctx: &mut Ctx, agent_socket: bool) -> Vec<Step> {
    let handle = format!("{{\"protocol_version\":1,\"handle\":{}}}", q(&ctx.handle));
    let plain = "{\"protocol_version\":1}";
    let mut ids = (0..6).map(|_| {
        ctx.next += 1;
        ctx.next.to_string()
    });
    let mut call = |label, method, params: Option<&str>, codes: &'static [i64]| {
        let id = ids.next().unwrap_or_default();
        let expect = if codes.is_empty() {
            ok(id.clone())
        } else {
            err(IdRule::Echo(id.clone()), codes)
        };
        step(label, request(Some(&id), method, params), expect)
    };
    let mut steps = Vec::new();
    if agent_socket {
        steps.push(call(
            "agent socket: session.list before a handshake",
            "\"session.list\"",
            None,
            &[FORBIDDEN],
        ));
        steps.push(call(
            "agent socket: handshake without a handle",
            "\"handshake\"",
            Some(plain),
            &[FORBIDDEN],
        ));
    }
    steps.push(call(
        "handshake with a session handle",
        "\"handshake\"",
        Some(&handle),
        &[],
    ));
    steps.push(call(
        "session.list on a scoped connection",
        "\"session.list\"",
        None,
        &[FORBIDDEN],
    ));
    steps.push(call(
        "second handshake (no handle) on a scoped connection",
        "\"handshake\"",
        Some(plain),
        &[INVALID_REQUEST, FORBIDDEN],
    ));
    steps.push(call(
        "session.list after a second handshake on a scoped connection",
        "\"session.list\"",
        None,
        &[FORBIDDEN],
    ));
    steps
}
