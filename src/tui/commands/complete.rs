//! Finding commands from what was typed: Tab completion of a name or a first argument,
//! and the closest name to a mistyped one.

use super::table::{COMMANDS, lookup};

/// The closest command name or alias to a mistyped one, if any is close enough.
pub fn suggest(name: &str) -> Option<&'static str> {
    let limit = if name.chars().count() <= 3 { 1 } else { 2 };
    COMMANDS
        .iter()
        .flat_map(|c| {
            std::iter::once(c.name)
                .chain(c.aliases.iter().copied())
                .map(move |w| (w, c.name))
        })
        .filter(|(word, _)| word.len() > 1)
        .map(|(word, command)| (edit_distance(name, word), command))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, command)| command)
}

/// Edit distance over chars, where swapping two neighbours is one edit (`/nwe` is one
/// from `/new`): the optimal string alignment distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: two back (for a swap), the last one, and this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j - 1] + cost).min(row[j - 1] + 1).min(last[j] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

/// What Tab does to the input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The new input line, when completion could extend it.
    pub line: Option<String>,
    /// Every candidate, when more than one fits.
    pub candidates: Vec<String>,
}

/// Completes a command name, or the first argument of a command with subcommands.
pub fn complete(line: &str) -> Completion {
    let body = line.trim_start_matches('/');
    match body.split_once(' ') {
        None => {
            let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
            extend("/", body, &names, " ")
        }
        Some((name, arg)) if !arg.contains(' ') => match lookup(name) {
            Some(spec) if !spec.subcommands.is_empty() => {
                extend(&format!("/{name} "), arg, spec.subcommands, " ")
            }
            _ => Completion {
                line: None,
                candidates: Vec::new(),
            },
        },
        Some(_) => Completion {
            line: None,
            candidates: Vec::new(),
        },
    }
}

pub(super) fn extend(head: &str, typed: &str, words: &[&str], tail: &str) -> Completion {
    let fits: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| w.starts_with(typed))
        .collect();
    match fits.as_slice() {
        [] => Completion {
            line: None,
            candidates: Vec::new(),
        },
        [only] => Completion {
            line: Some(format!("{head}{only}{tail}")),
            candidates: Vec::new(),
        },
        many => {
            let common = common_prefix(many);
            Completion {
                line: (common.len() > typed.len()).then(|| format!("{head}{common}")),
                candidates: many
                    .iter()
                    .map(|w| format!("{head}{w}").trim().to_string())
                    .collect(),
            }
        }
    }
}

fn common_prefix<'a>(words: &[&'a str]) -> &'a str {
    let first = words[0];
    let len = words[1..].iter().fold(first.len(), |len, w| {
        first[..len]
            .char_indices()
            .zip(w.chars())
            .find(|((_, a), b)| a != b)
            .map_or(len.min(w.len()), |((i, _), _)| i)
    });
    &first[..len]
}
