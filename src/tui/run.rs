//! The workbench's runtime: owns the terminal, the daemon connection and the settings
//! watcher, and drives the pure core ([`Model`], [`render`]).
//!
//! Everything is event driven. The loop sleeps until a key, a daemon notification, the
//! result of an action, or a settings file change arrives; then it updates the model and
//! draws once for everything that was ready. Nothing ticks while nothing changes. When
//! the daemon goes away a banner says so and the loop reconnects (starting a new daemon,
//! as any client does), then reads the whole state again.

use std::collections::HashSet;
use std::io::Stdout;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use crossterm::event::{Event as TermEvent, EventStream};
use futures::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use tokio::sync::mpsc;

mod link;
mod perform;
mod reply;
mod settings;
mod sync;

use link::{Embedded, FromLink, Link, next_from, probe};
use settings::{Screen, Settings, watch_settings};

use super::{Connection, Flash, Model, ViewState, render};
use crate::client::{Client, ClientError, HubPlace};
use crate::config::Config;
use crate::kiln::Kiln;
use crate::protocol::methods::{Reply, Request};
use crate::protocol::{Event, Notification};
use crate::tui::palette::{ColorChoice, Colours};

/// The longest wait between two reconnection attempts.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(5);
/// How many queued notifications are applied before the screen is drawn.
const BATCH: usize = 256;

/// Runs a daemon for the kiln inside this process until it is asked to shut down. The
/// workbench is a client: the command line hands it the daemon to embed.
pub type EmbeddedDaemon =
    Box<dyn FnOnce(Kiln, Config) -> futures::future::BoxFuture<'static, anyhow::Result<()>> + Send>;

/// How `cru` runs the workbench.
#[derive(Default)]
pub struct Options {
    /// Run this daemon inside this process instead of connecting to (or starting) one.
    pub embedded: Option<EmbeddedDaemon>,
    /// `--color`: the theme is drawn with the colours this and the terminal give
    /// (`NO_COLOR`: the plain theme).
    pub color: ColorChoice,
}

/// What the workbench shows: one kiln, or every kiln the person has, through their hub.
#[derive(Debug, Clone)]
pub enum Place {
    Kiln(Kiln),
    Hub(HubPlace),
}

impl Place {
    /// Where its settings are read: the kiln's, over the person's; the person's alone
    /// for the hub (its folder has no settings file of its own).
    fn settings_kiln(&self) -> Kiln {
        match self {
            Place::Kiln(kiln) => kiln.clone(),
            Place::Hub(hub) => Kiln::new(hub.dir()),
        }
    }

    fn log_dir(&self) -> std::path::PathBuf {
        match self {
            Place::Kiln(kiln) => kiln.log_dir(),
            Place::Hub(hub) => hub.log_dir(),
        }
    }

    fn ensure_dir(&self) -> std::io::Result<()> {
        match self {
            Place::Kiln(kiln) => kiln.ensure_state_dir(),
            Place::Hub(hub) => hub.ensure_dir(),
        }
    }

    /// What the border and the terminal's title call it.
    fn name(&self, config: &Config) -> String {
        match self {
            Place::Kiln(kiln) => crate::kilns::name_of(kiln, config.kiln.name.as_deref()),
            Place::Hub(_) => "every kiln".into(),
        }
    }
}

/// Opens the workbench for the kiln (or every kiln) and runs it until the user quits.
pub async fn run(place: Place, options: Options) -> anyhow::Result<ExitCode> {
    // Settings files that do not load lock no one out: the daemon keeps its last good
    // settings, and the workbench starts on its built-in keys and theme with the error in
    // a banner. Only a daemon to start needs them (in this process, or a new one), and
    // that is refused before the terminal is taken over.
    let (settings, broken) = match Settings::load(&place.settings_kiln()) {
        Ok(settings) => (settings, None),
        Err(why) => (Settings::defaults(), Some(why.to_string())),
    };
    let kiln = place.settings_kiln();
    let embedded = match (options.embedded, &place) {
        (Some(daemon), Place::Kiln(kiln)) => {
            let config = Config::load(&kiln.settings_path()).map_err(|e| {
                anyhow::anyhow!(
                    "no daemon can start inside the workbench on settings that do not load: {}",
                    e.summary()
                )
            })?;
            Some((daemon, config))
        }
        _ => None,
    };
    let ready = match (&embedded, &broken) {
        (None, Some(_)) => Some(Link::open(&place).await?),
        _ => None,
    };
    place.ensure_dir()?;
    let _log = crate::logging::to_file(&place.log_dir(), "tui.log")?;
    crate::logging::log_panics();
    if let Some(why) = &broken {
        tracing::warn!("settings: {why}; the workbench uses its defaults until they load");
    }

    let embedded = embedded.map(|(daemon, config)| Embedded::start(daemon, &kiln, config));

    // The screen is drawn before the daemon answers (starting it can take a while); the
    // state fills in once the connection is up.
    let name = place.name(&settings.config);
    let mut screen = Screen::enter()?;
    screen.set_title(&format!("cru · {name}"));
    let connect: futures::future::BoxFuture<'_, anyhow::Result<Link>> = match (&embedded, ready) {
        (Some(daemon), _) => Box::pin(daemon.connect(&kiln)),
        (None, Some(link)) => Box::pin(std::future::ready(Ok(link))),
        (None, None) => {
            let place = place.clone();
            Box::pin(async move { Link::open(&place).await })
        }
    };
    let across = matches!(place, Place::Hub(_));
    let colours = Colours::resolve(options.color, true);
    let mut runtime = Runtime::new(place, settings, embedded.is_some(), colours);
    runtime.model.set_place(name, across);
    runtime.model.set_settings_error(broken);
    let outcome = runtime.run(&mut screen.terminal, connect).await;
    drop(screen);
    if let Some(daemon) = embedded {
        daemon.stop(&kiln).await;
    }
    outcome.map(|()| ExitCode::SUCCESS)
}

/// What a finished call tells the loop.
enum Outcome {
    /// The daemon answered `request` with `reply`.
    Answered(Box<Request>, Box<Reply>),
    /// `request` failed, and why.
    Failed(Box<Request>, String),
}

/// The screen's event loop: keys, daemon events and finished actions in, frames out.
struct Runtime {
    place: Place,
    settings: Settings,
    model: Model,
    /// What drawing remembers between frames.
    view: ViewState,
    link: Option<Link>,
    embedded: bool,
    /// The colours the theme is drawn with.
    colours: Colours,
    outcomes: (
        mpsc::UnboundedSender<Outcome>,
        mpsc::UnboundedReceiver<Outcome>,
    ),
    /// Transcripts asked for and not yet loaded, so a burst asks once.
    loading: HashSet<String>,
}

impl Runtime {
    fn new(place: Place, mut settings: Settings, embedded: bool, colours: Colours) -> Self {
        settings.theme = settings.theme.fitted(colours);
        let mut model = Model::new(settings.keymap.clone());
        if settings.from_files {
            model.set_agents(settings.config.startable());
        }
        model.set_stall_after(Duration::from_secs(settings.config.tui.stall_secs));
        model.set_connection(Connection::Connecting);
        Self {
            place,
            settings,
            model,
            view: ViewState::default(),
            link: None,
            embedded,
            colours,
            outcomes: mpsc::unbounded_channel(),
            loading: HashSet::new(),
        }
    }

    /// Draws a frame, then tells the model how far the transcript can scroll in it.
    fn draw(&mut self, terminal: &mut Terminal<CrosstermBackend<Stdout>>) -> std::io::Result<()> {
        terminal.draw(|frame| render(frame, &self.model, &mut self.view, &self.settings.theme))?;
        self.model.set_scroll_extent(self.view.scroll_extent());
        Ok(())
    }

    /// Runs until the user quits. `connect` is the first connection: the screen is drawn
    /// (with "connecting…") while it is under way, and if it fails the error ends the run.
    async fn run(
        mut self,
        terminal: &mut Terminal<CrosstermBackend<Stdout>>,
        connect: futures::future::BoxFuture<'_, anyhow::Result<Link>>,
    ) -> anyhow::Result<()> {
        self.draw(terminal)?;
        let mut connect = connect;
        let mut connecting = true;
        let (settings_tx, mut settings_rx) = mpsc::unbounded_channel();
        // Kept alive for the whole run; without it settings are read only at start.
        let _watcher = watch_settings(&self.place.settings_kiln(), settings_tx)
            .inspect_err(|e| tracing::warn!("settings are not watched: {e}"))
            .ok();
        let mut keys = EventStream::new();
        let mut reconnect_delay = Duration::from_millis(250);
        let mut quit = false;

        while !quit {
            self.draw(terminal)?;
            // The first screen is drawn: now the rest of the sessions.
            if self.rest_due() {
                quit = self.read_rest().await;
                continue;
            }
            let connected = self.link.is_some();
            // A quiet working session is drawn again when its stall shows (or its minutes
            // change); nothing else wakes the loop on a timer.
            let stall = self.model.next_stall_change(std::time::Instant::now());
            tokio::select! {
                () = sleep_until_or_never(stall) => {}
                key = keys.next() => match key {
                    Some(Ok(event)) => {
                        let size = terminal.size()?;
                        quit = self.on_terminal(event, Rect::new(0, 0, size.width, size.height));
                    }
                    Some(Err(e)) => return Err(e).context("the terminal failed"),
                    None => return Ok(()),
                },
                from = next_from(&mut self.link), if connected => match from {
                    FromLink::Answering(seen) => self.model.set_daemon_silence(seen.words()),
                    FromLink::Note(Some(note)) => {
                        quit = self.on_note(note).await;
                        // Apply whatever else is already queued before drawing.
                        for _ in 0..BATCH {
                            let Some(link) = self.link.as_mut() else { break };
                            let Ok(note) = link.notes.try_recv() else { break };
                            quit |= self.on_note(note).await;
                        }
                    }
                    FromLink::Note(None) => self.lost("the daemon closed the connection"),
                },
                link = &mut connect, if connecting => {
                    connecting = false;
                    match link {
                        Ok(link) => {
                            self.link = Some(link);
                            self.model.set_connection(Connection::Connected);
                            quit = self.read_state(sync::Reading::FirstPage).await;
                        }
                        // Stopped by a signal, it is waited for as one that went away.
                        Err(e) if is_suspended(&e) => self.lost_to(&e),
                        Err(e) => return Err(e),
                    }
                }
                Some(outcome) = self.outcomes.1.recv() => self.on_outcome(outcome),
                Some(()) = settings_rx.recv() => {
                    while settings_rx.try_recv().is_ok() {}
                    self.reload_settings();
                }
                () = tokio::time::sleep(reconnect_delay), if !connected && !connecting => {
                    if self.reconnect().await {
                        reconnect_delay = Duration::from_millis(250);
                        quit = self.resync().await;
                    } else {
                        reconnect_delay = (reconnect_delay * 2).min(MAX_RECONNECT_DELAY);
                    }
                }
            }
        }
        Ok(())
    }

    fn lost(&mut self, reason: &str) {
        tracing::warn!("lost the daemon: {reason}");
        self.link = None;
        self.model.set_daemon_silence(None);
        self.loading.clear();
        self.model.set_connection(Connection::Lost {
            reason: reason.to_string(),
        });
    }

    /// Lost to `error`; a daemon stopped by a signal is named as such in the banner.
    fn lost_to(&mut self, error: &anyhow::Error) {
        self.lost(&format!("{error:#}"));
        self.model
            .set_daemon_silence(is_suspended(error).then(|| format!("{error:#}")));
    }

    async fn reconnect(&mut self) -> bool {
        let opened = match &self.place {
            Place::Kiln(kiln) if self.embedded => match Client::connect(kiln).await {
                Ok(client) => Link::subscribed(client).await,
                Err(e) => Err(e.into()),
            },
            place => Link::open(place).await,
        };
        match opened {
            Ok(link) => {
                self.link = Some(link);
                self.model.set_connection(Connection::Connected);
                self.model.set_daemon_silence(None);
                true
            }
            Err(e) => {
                self.model.set_connection(Connection::Lost {
                    reason: format!("{e:#}"),
                });
                self.model
                    .set_daemon_silence(is_suspended(&e).then(|| format!("{e:#}")));
                false
            }
        }
    }

    async fn on_note(&mut self, note: Notification) -> bool {
        if note.method == "events.lagged" {
            tracing::info!("missed some events; reading the state again");
            return self.resync().await;
        }
        // Through the hub: a kiln lost, reached again, or resting.
        if note.method == "hub.kiln" {
            let field = |key: &str| note.params.get(key).and_then(|v| v.as_str()).unwrap_or("");
            let (kiln, state, error) = (field("kiln"), field("state"), field("error"));
            let flash = match state {
                "lost" => Flash::error(format!("kiln {kiln} lost: {error}; reaching it again")),
                other => Flash::info(format!("kiln {kiln}: {other}")),
            };
            self.model.report(flash);
            return false;
        }
        match Event::from_notification(&note.method, note.params) {
            Some(event) => {
                let actions = self.model.apply(event);
                self.perform(actions)
            }
            None => false,
        }
    }

    /// True if the user quit.
    fn on_terminal(&mut self, event: TermEvent, screen: Rect) -> bool {
        // A daemon stopped by a signal sends nothing to notice it by: a key is when the
        // person looks, and the probe's answer says when it answers again.
        if let Some(link) = &self.link
            && link.client.check_suspended()
        {
            probe(&link.client);
        }
        let actions = match event {
            TermEvent::Key(key) => self.model.handle_key(key),
            TermEvent::Mouse(mouse) => self.model.handle_mouse(mouse, screen),
            TermEvent::Paste(text) => {
                self.model.handle_paste(&text);
                Vec::new()
            }
            // Resizes and focus changes only need the redraw that follows every event.
            _ => Vec::new(),
        };
        self.perform(actions)
    }

    fn on_outcome(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Answered(request, reply) => self.answered(*request, *reply),
            Outcome::Failed(request, why) => {
                // A transcript that could not be read is no longer being read.
                if let Request::SessionTranscript(p) = &*request {
                    self.loading.remove(&p.session_id);
                }
                self.model.report_failure(request.doing(), &why);
            }
        }
    }

    /// Applies edited settings; a broken edit is reported, shown in the banner until the
    /// files load again, and the last good ones kept.
    fn reload_settings(&mut self) {
        match Settings::load(&self.place.settings_kiln()) {
            Ok(mut settings) => {
                settings.theme = settings.theme.fitted(self.colours);
                self.model.set_keymap(settings.keymap.clone());
                self.model.set_agents(settings.config.startable());
                self.model
                    .set_stall_after(Duration::from_secs(settings.config.tui.stall_secs));
                self.settings = settings;
                self.model.set_settings_error(None);
                self.model.report(Flash::info("settings reloaded"));
            }
            Err(why) => {
                self.model.report(Flash::error(format!(
                    "settings not applied, keeping the previous ones: {why}"
                )));
                self.model.set_settings_error(Some(why.to_string()));
            }
        }
    }
}

/// Whether the error says the daemon is stopped by a signal.
fn is_suspended(error: &anyhow::Error) -> bool {
    matches!(
        error.downcast_ref::<ClientError>(),
        Some(ClientError::Suspended { .. })
    )
}

/// Sleeps until `when`, or forever when there is nothing to wake for.
async fn sleep_until_or_never(when: Option<std::time::Instant>) {
    match when {
        Some(when) => tokio::time::sleep_until(tokio::time::Instant::from_std(when)).await,
        None => std::future::pending().await,
    }
}
