//! Why a typed line is not a slash command, as the user is told.

/// Why a line is not a valid slash command; `Display` is the message the user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("unknown command /{name}{}", suggestion_text(.suggestion))]
    Unknown {
        name: String,
        suggestion: Option<&'static str>,
    },
    #[error("/{command}{}: {problem}", usage_text(.synopsis))]
    BadArgs {
        command: &'static str,
        synopsis: &'static str,
        problem: ArgsError,
    },
}

/// What is wrong with a command's arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// A fixed complaint: what the command takes or needs.
    #[error("{0}")]
    Usage(&'static str),
    #[error("unknown option {0}")]
    UnknownOption(String),
    #[error("{0} needs a value")]
    NeedsValue(String),
    /// A flag's value refused, in the words of the type that refused it.
    #[error("{0}")]
    BadValue(String),
    #[error("{0} needs one checkpoint name")]
    NeedsCheckpoint(&'static str),
    #[error("pop takes a count ≥ 1, not {0}")]
    BadCount(String),
    #[error("{0} takes no arguments")]
    NoArguments(String),
    #[error("unknown operation {0}")]
    UnknownOperation(String),
}

fn usage_text(synopsis: &str) -> String {
    if synopsis.is_empty() {
        String::new()
    } else {
        format!(" {synopsis}")
    }
}

fn suggestion_text(suggestion: &Option<&'static str>) -> String {
    suggestion.map_or_else(
        || " — /help lists the commands".to_string(),
        |s| format!(" — did you mean /{s}?"),
    )
}
