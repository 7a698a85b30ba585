//! Who a call comes from, whichever way it came in: the owner's socket (by the client it
//! named at its handshake), a connection holding a session handle, someone in a channel
//! (a Matrix user, a webhook, a cron job), a paired browser, or another daemon of the
//! team. The door checks a call against its caller, the request span names it, and an
//! answer to the inbox records it.

use crate::protocol::ChannelKind;

/// Who asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// The owner's socket: the client that connected, as it named itself at its handshake
    /// (`workbench`, `cru inbox respond`), if it did.
    Owner { client: Option<String> },
    /// A connection that presented a session handle: it acts for that session only.
    Handle { session_id: String },
    /// Someone in a channel: a Matrix user, a webhook's hook, a cron job.
    Channel { kind: ChannelKind, who: String },
    /// A paired browser of the web view, by its device's label.
    Web { device: String },
    /// Another daemon of the team, forwarding a call for a session this one runs.
    Peer { daemon: String },
}

impl Caller {
    /// The owner's socket, before its client named itself.
    pub(crate) const OWNER: Caller = Caller::Owner { client: None };

    /// Someone in a channel.
    pub(crate) fn channel(kind: ChannelKind, who: impl Into<String>) -> Self {
        Caller::Channel {
            kind,
            who: who.into(),
        }
    }

    /// Who answered, for the inbox and the audit: `@me:example.org via Matrix`,
    /// `web: phone`, `workbench`, `cru inbox respond`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Caller::Owner { client: Some(name) } => name.clone(),
            Caller::Owner { client: None } => "the owner's socket".into(),
            Caller::Handle { session_id } => format!("session {session_id}"),
            Caller::Channel { kind, who } => format!("{who} via {}", kind.title()),
            Caller::Web { device } => format!("web: {device}"),
            Caller::Peer { daemon } => format!("daemon {daemon} (team)"),
        }
    }

    /// The short name of the way in, for the request span.
    pub(crate) fn way(&self) -> &str {
        match self {
            Caller::Owner { .. } => "socket",
            Caller::Handle { .. } => "handle",
            Caller::Channel { kind, .. } => kind.as_str(),
            Caller::Web { .. } => "web",
            Caller::Peer { .. } => "peer",
        }
    }
}

/// The name a client gave at its handshake, as people know it: `cru/0.1.0` is the
/// command line of an older client that did not say which command it ran.
pub(crate) fn client_name(given: Option<&str>) -> Option<String> {
    let given = given?.trim();
    (!given.is_empty()).then(|| given.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_caller_is_named_with_its_way_in() {
        let matrix = Caller::channel(ChannelKind::Matrix, "@me:example.org");
        assert_eq!(matrix.describe(), "@me:example.org via Matrix");
        assert_eq!(matrix.way(), "matrix");
        let web = Caller::Web {
            device: "phone".into(),
        };
        assert_eq!(web.describe(), "web: phone");
        let cli = Caller::Owner {
            client: client_name(Some("cru inbox respond")),
        };
        assert_eq!(cli.describe(), "cru inbox respond");
        assert_eq!(client_name(Some("  ")), None);
    }
}
