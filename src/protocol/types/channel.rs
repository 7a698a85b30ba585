//! The kinds of channel a message can come from outside through: a closed set, spelled on
//! the wire and in stored records as the words they always were (`webhook`, `matrix`,
//! `cron`); a name a client chose itself (`session.resolve` takes any) is kept as given.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a conversation's messages come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    /// A webhook delivery (GitHub's, or any signed JSON).
    Webhook,
    /// A Matrix room.
    Matrix,
    /// A scheduled job.
    Cron,
    /// A channel a client named itself through `session.resolve`.
    Other(String),
}

impl ChannelKind {
    pub fn as_str(&self) -> &str {
        match self {
            ChannelKind::Webhook => "webhook",
            ChannelKind::Matrix => "matrix",
            ChannelKind::Cron => "cron",
            ChannelKind::Other(name) => name,
        }
    }

    /// How the channel is named to people (`via Matrix`).
    pub fn title(&self) -> &str {
        match self {
            ChannelKind::Webhook => "a webhook",
            ChannelKind::Matrix => "Matrix",
            ChannelKind::Cron => "cron",
            ChannelKind::Other(name) => name,
        }
    }
}

impl From<&str> for ChannelKind {
    fn from(name: &str) -> Self {
        match name {
            "webhook" => ChannelKind::Webhook,
            "matrix" => ChannelKind::Matrix,
            "cron" => ChannelKind::Cron,
            other => ChannelKind::Other(other.to_string()),
        }
    }
}

impl From<String> for ChannelKind {
    fn from(name: String) -> Self {
        ChannelKind::from(name.as_str())
    }
}

impl std::fmt::Display for ChannelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ChannelKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ChannelKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for ChannelKind {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl Serialize for ChannelKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ChannelKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(ChannelKind::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_keep_their_words_on_the_wire() {
        for word in ["webhook", "matrix", "cron", "ci-bot"] {
            let kind: ChannelKind = serde_json::from_value(serde_json::json!(word)).unwrap();
            assert_eq!(
                serde_json::to_value(&kind).unwrap(),
                serde_json::json!(word)
            );
        }
        assert_eq!(ChannelKind::from("matrix"), ChannelKind::Matrix);
        assert_eq!(
            ChannelKind::from("ci-bot"),
            ChannelKind::Other("ci-bot".into())
        );
    }
}
