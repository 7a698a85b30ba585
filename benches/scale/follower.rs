//! The in-process workbench of the streaming phase: the TUI's own [`Model`] and [`render`]
//! fed by a subscribed connection, drawing into a ratatui `TestBackend` as the real loop
//! does, and recording when each `stamp` chunk was drawn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods as m;
use crucible::protocol::{Event, ListParams, Notification, TranscriptEntry, TranscriptParams};
use crucible::tui::{Action, Keymap, Model, Theme, ViewState, render};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tokio::sync::{mpsc, oneshot};

use super::procfs::unix_ns;

/// The in-process workbench's terminal.
pub const SCREEN: (u16, u16) = (120, 30);
/// Queued notifications applied before a frame is drawn (as `src/tui/run.rs`).
const BATCH: usize = 256;
/// How many messages the workbench reads when it (re)synchronises (as the TUI).
const INBOX_WINDOW: u32 = 500;

/// What the workbench saw, shared with the benchmark.
#[derive(Default)]
pub struct Record {
    pub stamps: Vec<Stamp>,
    pub draws: Vec<Draw>,
    /// Per session: the stamps seen.
    pub sessions: HashMap<String, Seen>,
    pub counts: Counts,
}

impl Record {
    pub fn stamps_within(&self, from: u64, to: u64) -> Vec<&Stamp> {
        self.stamps
            .iter()
            .filter(|s| (from..=to).contains(&s.stamp))
            .collect()
    }

    pub fn draws_within(&self, from: u64, to: u64) -> Vec<&Draw> {
        self.draws
            .iter()
            .filter(|d| (from..=to).contains(&d.at))
            .collect()
    }
}

#[derive(Default)]
pub struct Seen {
    /// When the agent sent each stamp (ns since the Unix epoch).
    times: Vec<u64>,
    pub last_stamp: u64,
}

impl Seen {
    pub fn in_window(&self, from: u64, to: u64) -> u64 {
        self.times
            .iter()
            .filter(|t| (from..=to).contains(t))
            .count() as u64
    }
}

#[derive(Default, Clone, Copy)]
pub struct Counts {
    pub notes: u64,
    pub lagged: u64,
}

impl Counts {
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            notes: self.notes - earlier.notes,
            lagged: self.lagged - earlier.lagged,
        }
    }
}

/// One `stamp` chunk: when the agent sent it, when it was applied, and when the frame
/// after it finished (ns since the Unix epoch).
pub struct Stamp {
    pub stamp: u64,
    pub applied: u64,
    frame: u64,
    /// Of the focused session when it was applied.
    pub focused: bool,
}

impl Stamp {
    pub fn to_frame(&self) -> Duration {
        Duration::from_nanos(self.frame.saturating_sub(self.stamp))
    }

    pub fn to_applied(&self) -> Duration {
        Duration::from_nanos(self.applied.saturating_sub(self.stamp))
    }
}

pub struct Draw {
    /// When it finished (ns since the Unix epoch).
    pub at: u64,
    pub took: Duration,
    /// Notifications applied since the frame before.
    pub notes: usize,
}

/// A stamp applied and not yet drawn.
struct Pending {
    session_id: String,
    stamp: u64,
    applied: u64,
    focused: bool,
}

/// A session's transcript page, loaded because the model asked for it.
type Loaded = (String, Vec<TranscriptEntry>);

/// The TUI's model and renderer on a subscribed connection, driven as `src/tui/run.rs`
/// drives them (without keys, settings and the terminal write).
pub struct Follower {
    client: Arc<Client>,
    notes: mpsc::UnboundedReceiver<Notification>,
    model: Model,
    view: ViewState,
    theme: Theme,
    terminal: Terminal<TestBackend>,
    record: Arc<Mutex<Record>>,
    loads: (
        mpsc::UnboundedSender<Loaded>,
        mpsc::UnboundedReceiver<Loaded>,
    ),
    pending: Vec<Pending>,
    applied: usize,
}

impl Follower {
    pub async fn connect(kiln: &Kiln, record: Arc<Mutex<Record>>) -> Result<Self> {
        let client = Client::connect(kiln)
            .await
            .context("connecting the workbench")?;
        let notes = client.subscribe(None).await.context("subscribe")?;
        let terminal =
            Terminal::new(TestBackend::new(SCREEN.0, SCREEN.1)).context("a test terminal")?;
        let mut follower = Self {
            client: Arc::new(client),
            notes,
            model: Model::new(Keymap::default()),
            view: ViewState::default(),
            theme: Theme::default(),
            terminal,
            record,
            loads: mpsc::unbounded_channel(),
            pending: Vec::new(),
            applied: 0,
        };
        follower.resync().await?;
        follower.draw()?;
        Ok(follower)
    }

    /// Follows until `stop` fires; what it saw.
    pub async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Result<Record> {
        loop {
            tokio::select! {
                _ = &mut stop => break,
                note = self.notes.recv() => {
                    let Some(note) = note else {
                        bail!("the daemon closed the connection");
                    };
                    self.on_note(note).await?;
                    // Apply whatever else is already queued before drawing.
                    for _ in 0..BATCH {
                        let Ok(note) = self.notes.try_recv() else { break };
                        self.on_note(note).await?;
                    }
                    self.draw()?;
                }
                Some((session_id, entries)) = self.loads.1.recv() => {
                    self.model.load_transcript(&session_id, entries);
                    self.draw()?;
                }
            }
        }
        let record = std::mem::take(&mut *self.record.lock().unwrap());
        Ok(record)
    }

    /// Reads the whole state, as the TUI does on connect and after `events.lagged`.
    async fn resync(&mut self) -> Result<()> {
        let sessions = self
            .client
            .call::<m::SessionList>(&Default::default())
            .await
            .context("session.list")?;
        let window = ListParams {
            limit: Some(INBOX_WINDOW),
            ..ListParams::default()
        };
        let messages = self
            .client
            .call::<m::InboxList>(&window)
            .await
            .context("inbox.list")?;
        let actions = self.model.sync(sessions.sessions, messages.messages);
        self.perform(actions);
        Ok(())
    }

    async fn on_note(&mut self, note: Notification) -> Result<()> {
        self.applied += 1;
        self.record.lock().unwrap().counts.notes += 1;
        if note.method == "events.lagged" {
            self.record.lock().unwrap().counts.lagged += 1;
            return self.resync().await;
        }
        let Some(event) = Event::from_notification(&note.method, note.params) else {
            return Ok(());
        };
        if let Event::Output(chunk) = &event
            && let Some(stamp) = chunk
                .text
                .strip_prefix("stamp ")
                .and_then(|t| t.trim().parse::<u64>().ok())
        {
            let focused = self
                .model
                .focused_session()
                .is_some_and(|s| s.id == chunk.session_id);
            self.pending.push(Pending {
                session_id: chunk.session_id.clone(),
                stamp,
                applied: unix_ns(),
                focused,
            });
        }
        let actions = self.model.apply(event);
        self.perform(actions);
        Ok(())
    }

    /// Loads transcripts the model asks for (in the background, as the TUI does); other
    /// actions are the user's and do not come up here.
    fn perform(&mut self, actions: Vec<Action>) {
        for action in actions {
            if let Action::Call(m::Request::SessionTranscript(TranscriptParams {
                session_id,
                after: Some(after),
                ..
            })) = action
            {
                let client = Arc::clone(&self.client);
                let loaded = self.loads.0.clone();
                tokio::spawn(async move {
                    let params = TranscriptParams {
                        session_id: session_id.clone(),
                        after: Some(after),
                        limit: None,
                    };
                    if let Ok(page) = client.call::<m::SessionTranscript>(&params).await {
                        let _ = loaded.send((session_id, page.entries));
                    }
                });
            }
        }
    }

    fn draw(&mut self) -> Result<()> {
        let start = Instant::now();
        let (model, view, theme) = (&self.model, &mut self.view, &self.theme);
        self.terminal
            .draw(|frame| render(frame, model, view, theme))
            .context("drawing into a TestBackend")?;
        self.model.set_scroll_extent(self.view.scroll_extent());
        let took = start.elapsed();
        let at = unix_ns();
        let mut record = self.record.lock().unwrap();
        record.draws.push(Draw {
            at,
            took,
            notes: std::mem::take(&mut self.applied),
        });
        for p in self.pending.drain(..) {
            let seen = record.sessions.entry(p.session_id).or_default();
            seen.times.push(p.stamp);
            seen.last_stamp = seen.last_stamp.max(p.stamp);
            record.stamps.push(Stamp {
                stamp: p.stamp,
                applied: p.applied,
                frame: at,
                focused: p.focused,
            });
        }
        Ok(())
    }
}
