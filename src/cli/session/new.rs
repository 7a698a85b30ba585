//! `cru session new`: what the session is (agent, worktree, task) and where its agent
//! runs (`--driver` and its options), from flags or a session file (`-c FILE`, TOML with
//! the same names), flags winning; and many at once: `--count N` of the same, or one per
//! line of `--tasks FILE`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

use crate::client::Client;
use crate::protocol::methods as m;
use crate::protocol::{CreateSessionParams, DriverOptions, Session};

#[derive(Debug, Args)]
pub(super) struct NewArgs {
    /// The agent profile: `[agents.<name>]` in the settings, or a built-in one whose
    /// program is on PATH (claude, codex, gemini, opencode, copilot, goose). Without it,
    /// `[tui] default_agent`, else the only agent there is; `cru agents` lists them.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// A branch (existing, or new from HEAD) or the path of an existing worktree.
    #[arg(long, value_name = "BRANCH|PATH", conflicts_with = "in_place")]
    worktree: Option<String>,
    /// Work in the kiln itself, without a worktree.
    #[arg(long)]
    in_place: bool,
    /// The first prompt.
    #[arg(long)]
    task: Option<String>,
    #[command(flatten)]
    driver: DriverOptions,
    /// The read manifest: reads outside these globs (relative to the worktree) end the
    /// session with CONTEXT_MISS (repeatable).
    #[arg(long = "allow-read", value_name = "GLOB")]
    allow_read: Vec<String>,
    /// Read the session from a TOML file: agent, task, worktree, in_place, allow_read,
    /// driver and the driver options above (mounts as a list of "SRC[:DST][:ro]").
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Make this many sessions of the same (each on its own new branch; with
    /// `--worktree NAME`, NAME-1, NAME-2…).
    #[arg(long, value_name = "N", conflicts_with = "tasks")]
    count: Option<usize>,
    /// Make one session per line of FILE, the line its task (empty lines and `#`
    /// comments skipped; `-` reads standard input).
    #[arg(long, value_name = "FILE")]
    tasks: Option<PathBuf>,
    /// Print the new session as JSON (with --count or --tasks, a list).
    #[arg(long)]
    pub(super) json: bool,
}

/// A session file (`-c FILE`): the start of session templates. Its driver keys are
/// [`DriverOptions`]'s, as on the command line.
#[derive(Debug, Default)]
struct SessionFile {
    session: SessionKeys,
    driver: DriverOptions,
}

/// A session file's keys that are not driver options.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct SessionKeys {
    agent: Option<String>,
    task: Option<String>,
    worktree: Option<String>,
    in_place: bool,
    allow_read: Vec<String>,
}

impl SessionFile {
    const SESSION_KEYS: [&str; 5] = ["agent", "task", "worktree", "in_place", "allow_read"];

    fn parse(text: &str) -> Result<SessionFile, toml::de::Error> {
        let mut driver: toml::Table = toml::from_str(text)?;
        let mut session = toml::Table::new();
        for key in Self::SESSION_KEYS {
            if let Some(value) = driver.remove(key) {
                session.insert(key.to_string(), value);
            }
        }
        Ok(SessionFile {
            session: session.try_into()?,
            driver: driver.try_into()?,
        })
    }
}

/// `cru session new`: one session, or many with progress; what was made is shown even
/// when a later one fails.
pub(super) async fn make(
    kiln: &crate::kiln::Kiln,
    client: &Client,
    args: Box<NewArgs>,
) -> anyhow::Result<()> {
    let json = args.json;
    let mut batch = args.batch(|| chosen_agent(kiln))?;
    if let Some(first) = batch.first() {
        warn_if_dirty(kiln.root(), first).await;
    }
    if batch.len() == 1
        && let Some(one) = batch.pop()
    {
        let created = client.call::<m::SessionCreate>(&one).await?;
        return super::show::created(&created.session, json);
    }
    let mut made: Vec<Session> = Vec::with_capacity(batch.len());
    let mut progress = crate::cli::progress::Progress::new("making sessions", batch.len());
    for params in &batch {
        match client.call::<m::SessionCreate>(params).await {
            Ok(created) => made.push(created.session),
            Err(e) => {
                drop(progress);
                super::show::made(&made, json)?;
                anyhow::bail!(
                    "made {} of {} sessions; the next failed: {e}",
                    made.len(),
                    batch.len()
                );
            }
        }
        progress.step();
    }
    drop(progress);
    super::show::made(&made, json)
}

/// Says on stderr when the kiln has tracked changes no commit holds while the session gets a
/// worktree of its own: its branch starts from a commit, so the agent will not see them.
async fn warn_if_dirty(root: &Path, params: &CreateSessionParams) {
    let own_worktree = params
        .worktree
        .as_deref()
        .is_some_and(|w| Path::new(w).is_dir());
    if params.in_place || own_worktree {
        return;
    }
    let Ok(changes) = crate::git::uncommitted(root).await else {
        return;
    };
    // Files git does not track are the person's own business (build output, notes).
    let changes: Vec<_> = changes.iter().filter(|l| !l.starts_with("??")).collect();
    if !changes.is_empty() {
        eprintln!(
            "warning: {} has {} uncommitted change(s) the session's worktree will not have \
             (it starts from a commit): commit them first, or use --in-place",
            root.display(),
            changes.len()
        );
    }
}

/// The most sessions one `cru session new` makes.
const MOST_AT_ONCE: usize = 500;

/// The tasks of a `--tasks` file: its lines, but empty ones and `#` comments.
fn task_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

impl NewArgs {
    /// The requests: one, or with `--count`/`--tasks` one per session, each on its own
    /// branch (`--worktree NAME` numbered).
    pub(super) fn batch(
        self: Box<Self>,
        pick: impl FnOnce() -> anyhow::Result<String>,
    ) -> anyhow::Result<Vec<CreateSessionParams>> {
        let tasks = match &self.tasks {
            Some(path) if path.as_os_str() == "-" => {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
                Some(task_lines(&text))
            }
            Some(path) => Some(task_lines(&std::fs::read_to_string(path).with_context(
                || format!("cannot read the tasks file {}", path.display()),
            )?)),
            None => None,
        };
        let count = match (&tasks, self.count) {
            (Some(tasks), _) => tasks.len(),
            (None, Some(n)) => n,
            (None, None) => return Ok(vec![self.params(pick)?]),
        };
        anyhow::ensure!(
            count > 0,
            "no session to make: the count is 0 or the file has no task"
        );
        anyhow::ensure!(
            count <= MOST_AT_ONCE,
            "{count} sessions at once is more than {MOST_AT_ONCE}: make them in parts"
        );
        anyhow::ensure!(
            !self.in_place,
            "several sessions cannot all work in the kiln itself: leave out --in-place"
        );
        let one = self.params(pick)?;
        anyhow::ensure!(
            !one.worktree
                .as_deref()
                .is_some_and(|w| Path::new(w).is_dir()),
            "several sessions cannot share one existing worktree: give a branch name, numbered for each"
        );
        Ok((0..count)
            .map(|i| {
                let mut params = one.clone();
                if let Some(branch) = &one.worktree {
                    params.worktree = Some(format!("{branch}-{}", i + 1));
                }
                if let Some(tasks) = &tasks {
                    params.task = Some(tasks[i].clone());
                }
                params
            })
            .collect())
    }

    /// The request, from the session file (if any) under the flags; `pick` chooses the
    /// agent when neither names one.
    pub(super) fn params(
        self: Box<Self>,
        pick: impl FnOnce() -> anyhow::Result<String>,
    ) -> anyhow::Result<CreateSessionParams> {
        let SessionFile {
            session: file,
            driver: file_driver,
        } = match &self.file {
            Some(path) => read_file(path)?,
            None => SessionFile::default(),
        };
        let mut driver = self.driver.over(&file_driver);
        // Host paths are sent absolute: the daemon runs elsewhere.
        for mount in &mut driver.mounts {
            mount.0.source = absolute(&mount.0.source);
        }
        let agent = match self.agent.or(file.agent) {
            Some(agent) => agent,
            None => pick()?,
        };
        Ok(CreateSessionParams {
            kiln: None,
            agent,
            worktree: self.worktree.or(file.worktree).map(|w| absolute_if_dir(&w)),
            in_place: self.in_place || file.in_place,
            task: self.task.or(file.task),
            driver,
            allow_read: if self.allow_read.is_empty() {
                file.allow_read
            } else {
                self.allow_read
            },
            channel: None,
        })
    }
}

/// The agent of a session none was named for: the settings' default, else the only one
/// there is; otherwise an error that lists the ones found.
fn chosen_agent(kiln: &crate::kiln::Kiln) -> anyhow::Result<String> {
    match crate::cli::load_config(kiln)?.chosen_agent() {
        Ok(agent) => Ok(agent),
        Err(crate::config::NoAgent::None) => anyhow::bail!(
            "no agent found: install a built-in one (cru agents says how) or add [agents.<name>] to {}",
            kiln.settings_path().display()
        ),
        Err(crate::config::NoAgent::Many(found)) => anyhow::bail!(
            "which agent? give --agent NAME, one of: {} (or set [tui] default_agent)",
            found.join(", ")
        ),
    }
}

fn read_file(path: &Path) -> anyhow::Result<SessionFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the session file {}", path.display()))?;
    SessionFile::parse(&text)
        .map_err(|e| anyhow::anyhow!("invalid session file {}: {e}", path.display()))
}

fn absolute(path: &str) -> String {
    match std::fs::canonicalize(path) {
        Ok(real) => real.display().to_string(),
        Err(_) => path.to_string(),
    }
}

/// A path that exists is sent absolute (the daemon runs elsewhere); anything else is
/// a branch name.
fn absolute_if_dir(spec: &str) -> String {
    let path = Path::new(spec);
    if path.is_dir()
        && let Ok(real) = path.canonicalize()
    {
        return real.display().to_string();
    }
    spec.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{DriverKind, Network};
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        new: NewArgs,
    }

    /// No agent to fall back on.
    fn none() -> anyhow::Result<String> {
        anyhow::bail!("no agent named")
    }

    #[test]
    fn the_agent_falls_back_only_when_none_is_named() {
        let cli = Cli::try_parse_from(["x", "--task", "t"]).unwrap();
        let params = Box::new(cli.new).params(|| Ok("codex".into())).unwrap();
        assert_eq!(params.agent, "codex");
        let cli = Cli::try_parse_from(["x", "--agent", "claude"]).unwrap();
        let params = Box::new(cli.new)
            .params(|| panic!("asked for a default"))
            .unwrap();
        assert_eq!(params.agent, "claude");
        let cli = Cli::try_parse_from(["x"]).unwrap();
        let err = Box::new(cli.new).params(none).unwrap_err().to_string();
        assert_eq!(err, "no agent named");
    }

    #[test]
    fn the_agent_help_names_every_built_in_profile() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        for known in crate::config::KNOWN {
            assert!(
                help.contains(known.name),
                "{} missing from: {help}",
                known.name
            );
        }
    }

    #[test]
    fn flags_win_over_the_session_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(
            &file,
            "agent = \"claude\"\ntask = \"fix it\"\ndriver = \"sandbox\"\nmemory = 512\nenv = [\"A\"]\nmounts = [\"/tmp:/data:ro\"]\n",
        )
        .unwrap();
        let cli = Cli::try_parse_from([
            "x",
            "-c",
            file.to_str().unwrap(),
            "--memory",
            "128",
            "--env",
            "B",
            "--network",
            "host",
        ])
        .unwrap();
        let params = Box::new(cli.new).params(none).unwrap();
        assert_eq!(params.agent, "claude");
        assert_eq!(params.task.as_deref(), Some("fix it"));
        let spec = params.driver.resolve().unwrap();
        assert_eq!(spec.kind(), DriverKind::Sandbox);
        assert_eq!(spec.memory(), Some(128));
        assert_eq!(spec.env(), ["A", "B"]);
        assert_eq!(spec.network(), Network::Host);
        assert_eq!(spec.mounts()[0].inside(), "/data");
        assert!(spec.mounts()[0].read_only);
    }

    #[test]
    fn many_at_once_each_on_its_own_branch_with_its_own_task() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tasks.txt");
        std::fs::write(&file, "# the fixes\nfix the login\n\n  add a test  \n").unwrap();
        let cli = Cli::try_parse_from([
            "x",
            "--agent",
            "a",
            "--worktree",
            "fix",
            "--tasks",
            file.to_str().unwrap(),
        ])
        .unwrap();
        let made = Box::new(cli.new).batch(none).unwrap();
        let shown: Vec<_> = made
            .iter()
            .map(|p| (p.worktree.as_deref().unwrap(), p.task.as_deref().unwrap()))
            .collect();
        assert_eq!(shown, [("fix-1", "fix the login"), ("fix-2", "add a test")]);
        let cli =
            Cli::try_parse_from(["x", "--agent", "a", "--task", "t", "--count", "3"]).unwrap();
        let made = Box::new(cli.new).batch(none).unwrap();
        assert_eq!(made.len(), 3);
        assert!(
            made.iter()
                .all(|p| p.worktree.is_none() && p.task.as_deref() == Some("t"))
        );
        let cli = Cli::try_parse_from(["x", "--agent", "a", "--in-place", "--count", "2"]).unwrap();
        assert!(Box::new(cli.new).batch(none).is_err());
        let cli = Cli::try_parse_from(["x", "--agent", "a", "--count", "0"]).unwrap();
        assert!(Box::new(cli.new).batch(none).is_err());
        let one = Cli::try_parse_from(["x", "--agent", "a"]).unwrap();
        assert_eq!(Box::new(one.new).batch(none).unwrap().len(), 1);
    }

    #[test]
    fn a_bad_session_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(&file, "agent = \"a\"\nmemroy = 5\n").unwrap();
        let cli = Cli::try_parse_from(["x", "-c", file.to_str().unwrap()]).unwrap();
        let err = Box::new(cli.new).params(none).unwrap_err().to_string();
        assert!(err.contains("memroy"), "{err}");
        assert!(Cli::try_parse_from(["x", "--agent", "a", "--driver", "vm"]).is_err());
        assert!(Cli::try_parse_from(["x", "--agent", "a", "--mount", "/a:rel"]).is_err());
    }
}
