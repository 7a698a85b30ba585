//! Search results: the overlay lists the last `/search`'s hits, the arrows choose, Enter
//! gives the chosen hit to the workbench, which goes to what it found (a transcript
//! entry, an inbox message or a session).

use crate::protocol::SearchHit;

/// The last search's results.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub query: String,
    pub hits: Vec<SearchHit>,
    /// Not every match was ranked (the words are in too many entries).
    pub broad: bool,
}

/// What the search results are told.
#[derive(Debug)]
pub(in crate::tui) enum SearchMsg {
    /// The answer to `/search`.
    Answered {
        query: String,
        hits: Vec<SearchHit>,
        broad: bool,
    },
    /// Move the choice (now `selected`) by `delta` within the hits.
    Move { selected: usize, delta: isize },
    /// Go to the chosen hit.
    Open { selected: usize },
}

/// What the workbench does after the search took a message.
#[derive(Debug, PartialEq)]
pub(in crate::tui) enum Searched {
    /// Show the results with this hit chosen.
    Choose(usize),
    /// Nothing was found: say so.
    Nothing(String),
    /// Go to this hit.
    Open(SearchHit),
    /// No hit there.
    Stay,
}

/// The last search's results, while any.
#[derive(Debug, Default)]
pub struct Search {
    found: Option<Found>,
}

impl Search {
    pub(in crate::tui) fn update(&mut self, msg: SearchMsg) -> Searched {
        match msg {
            SearchMsg::Answered { query, hits, .. } if hits.is_empty() => {
                Searched::Nothing(format!("nothing found for “{query}”"))
            }
            SearchMsg::Answered { query, hits, broad } => {
                self.found = Some(Found { query, hits, broad });
                Searched::Choose(0)
            }
            SearchMsg::Move { selected, delta } => {
                let count = self.found.as_ref().map_or(0, |f| f.hits.len());
                Searched::Choose(
                    selected
                        .saturating_add_signed(delta)
                        .min(count.saturating_sub(1)),
                )
            }
            SearchMsg::Open { selected } => self
                .found
                .as_ref()
                .and_then(|f| f.hits.get(selected))
                .cloned()
                .map_or(Searched::Stay, Searched::Open),
        }
    }

    /// The last search's results.
    pub fn found(&self) -> Option<&Found> {
        self.found.as_ref()
    }
}
