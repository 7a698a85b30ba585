//! What the model puts over the screen: read-only pages (an audit log, a long failure,
//! the conflict radar), the diff overlay, search results, and one-line flashes.

use super::{Flash, Model, Overlay, SearchMsg, Searched};
use crate::protocol::{AuditLog, SearchHit};
use crate::tui::review::{ReviewMsg, Reviewed};

/// The longest failure shown as a flash alone; a longer one gets a page too.
const LONGEST_FLASH: usize = 100;

impl Model {
    /// Shows a session's audit log (read for `/audit`).
    pub fn show_audit(&mut self, log: AuditLog) {
        let name = self
            .sessions
            .iter()
            .find(|s| s.id == log.session_id)
            .map_or(log.session_id.clone(), |s| s.display_name.clone());
        let lines: Vec<String> = log.records.iter().map(|r| r.line()).collect();
        self.show_page(format!("audit of {name}"), lines);
    }

    /// Shows a read-only page over the screen.
    pub fn show_page(&mut self, title: String, mut lines: Vec<String>) {
        if lines.is_empty() {
            lines.push("nothing yet".into());
        }
        self.page = Some((title, lines));
        self.overlay = Some(Overlay::Page { scroll: 0 });
    }

    /// Shows a message until the next key (e.g. an action that failed).
    pub fn report(&mut self, flash: Flash) {
        self.flash = Some(flash);
    }

    /// Reports that `what` failed and why, whole: a short reason in one line, a longer
    /// one (a merge's conflicts, an agent's last words) on a page that scrolls.
    pub fn report_failure(&mut self, what: &str, why: &str) {
        let why = why.trim();
        let one_line = format!("{what} failed: {why}");
        if !why.contains('\n') && one_line.chars().count() <= LONGEST_FLASH {
            self.flash = Some(Flash::error(one_line));
            return;
        }
        let first = why.lines().next().unwrap_or_default();
        self.flash = Some(Flash::error(format!("{what} failed: {first}")));
        self.show_page(
            format!("{what} failed"),
            why.lines().map(str::to_string).collect(),
        );
    }

    /// Opens the diff overlay on a session's changes.
    pub fn show_diff(&mut self, reply: &crate::protocol::DiffReply) {
        match self.review.update(ReviewMsg::Show(reply)) {
            Reviewed::Open => self.overlay = Some(Overlay::Diff),
            Reviewed::Flash(text) => self.flash = Some(Flash::info(text)),
            _ => {}
        }
    }

    /// The answer to `/search`: the hits listed in an overlay, or a flash when none.
    pub fn show_search(&mut self, query: String, hits: Vec<SearchHit>, broad: bool) {
        match self
            .search
            .update(SearchMsg::Answered { query, hits, broad })
        {
            Searched::Choose(selected) => self.overlay = Some(Overlay::Search { selected }),
            Searched::Nothing(text) => self.report(Flash::info(text)),
            Searched::Open(_) | Searched::Stay => {}
        }
    }

    /// The radar as a page: each pair of sessions and the files (and lines) both change.
    pub fn show_conflicts(&mut self) {
        let name = |id: &str| match self.number_of(id) {
            Some(n) => format!("[{n}] {}", self.sessions[n - 1].display_name),
            None => id.to_string(),
        };
        let mut lines = Vec::new();
        for pair in &self.conflicts.pairs {
            lines.push(format!("{}  ×  {}", name(&pair.a), name(&pair.b)));
            for file in &pair.files {
                lines.push(format!("    {file}"));
            }
        }
        if lines.is_empty() {
            lines.push("no two sessions change the same files".into());
        }
        self.show_page("conflicts".into(), lines);
    }
}
