//! Loading the settings: the person's file and the kiln's, each checked on its own, layered
//! over the built-in defaults and checked whole; and the error that names the file, the
//! line and the key when one is wrong.

use std::path::{Path, PathBuf};

use super::{Config, InvalidSettings};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid settings in {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl ConfigError {
    /// The error on one line, for a warning or a log: the file, where in it for a TOML
    /// error, and the reason, e.g. ``/k/.crucible.toml, line 3, column 1: unknown field
    /// `comand`, expected one of …``.
    pub fn summary(&self) -> String {
        self.described(None)
    }

    /// [`summary`](Self::summary) for a screen's one line: a file in `dir` named from
    /// there, and an unknown key without the list of the known ones, e.g.
    /// ``.crucible.toml, line 3, column 1: unknown field `comand` ``.
    pub fn brief(&self, dir: &Path) -> String {
        self.described(Some(dir))
    }

    fn described(&self, brief_in: Option<&Path>) -> String {
        let (path, at, mut reason) = match self {
            ConfigError::Read { path, source } => (path, None, format!("cannot read it: {source}")),
            ConfigError::Invalid { path, message } => {
                let lines: Vec<&str> = message
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                // TOML's: where, the line with a caret under the fault, then the reason.
                match lines.as_slice() {
                    [first, .., last] if first.starts_with("TOML parse error at ") => {
                        let at = &first["TOML parse error at ".len()..];
                        (path, Some(at), (*last).to_string())
                    }
                    _ => (path, None, lines.join(" ")),
                }
            }
        };
        let mut name = path.as_path();
        if let Some(dir) = brief_in {
            name = path.strip_prefix(dir).unwrap_or(path);
            if reason.starts_with("unknown field ")
                && let Some(list) = reason.find(", expected")
            {
                reason.truncate(list);
            }
        }
        match at {
            Some(at) => format!("{}, {at}: {reason}", name.display()),
            None => format!("{}: {reason}", name.display()),
        }
    }
}

impl Config {
    /// Loads the layered settings for a kiln: the kiln's file over the person's. The
    /// person's `[web]` and `[channels.matrix]` are their hub's, served once for every
    /// kiln, so a kiln leaves them out; while the person's hub serves the web view, a kiln
    /// serves its own only if its file asks (`[web]`).
    pub fn load(kiln_settings: &Path) -> Result<Self, ConfigError> {
        Self::load_kiln(user_settings_path().as_deref(), kiln_settings)
    }

    /// [`Config::load`] with the person's settings file given.
    fn load_kiln(person: Option<&Path>, kiln_settings: &Path) -> Result<Self, ConfigError> {
        let mut merged = toml::Table::new();
        let mut person_bot = false;
        if let Some(mut person) = person.map(Self::read_layer).transpose()?.flatten() {
            let hub_web = person.remove("web").is_some();
            if let Some(toml::Value::Table(channels)) = person.get_mut("channels") {
                person_bot = channels.remove("matrix").is_some();
            }
            if hub_web {
                merged.insert("web".into(), toml::Value::Table(off()));
            }
            merge(&mut merged, person);
        }
        if let Some(kiln) = Self::read_layer(kiln_settings)? {
            if let Some(toml::Value::Table(web)) = kiln.get("web")
                && !web.contains_key("enabled")
            {
                merged.remove("web");
            }
            merge(&mut merged, kiln);
        }
        Self::finish(merged, person_bot)
    }

    /// Loads the person's own settings alone, `[web]` and `[channels.matrix]` included:
    /// what their hub serves.
    pub fn load_person() -> Result<Self, ConfigError> {
        Self::load_layers(&[user_settings_path()])
    }

    /// Loads `layers` in order, later over earlier, over the defaults. Missing files are
    /// skipped; every present file must be valid on its own.
    pub fn load_layers(layers: &[Option<PathBuf>]) -> Result<Self, ConfigError> {
        let mut merged = toml::Table::new();
        for path in layers.iter().flatten() {
            if let Some(table) = Self::read_layer(path)? {
                merge(&mut merged, table);
            }
        }
        Self::finish(merged, false)
    }

    /// One settings file, checked on its own; `None` when there is none.
    fn read_layer(path: &Path) -> Result<Option<toml::Table>, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Self::parse_layer(&text)
            .map(Some)
            .map_err(|e| ConfigError::Invalid {
                path: path.to_path_buf(),
                message: e.to_string(),
            })
    }

    /// The settings of the merged files, over the defaults, checked whole;
    /// `bot_elsewhere`: the person's own bot (their hub's) posts this kiln's questions.
    fn finish(merged: toml::Table, bot_elsewhere: bool) -> Result<Self, ConfigError> {
        let config: Config =
            toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Invalid {
                    path: PathBuf::from("(merged settings)"),
                    message: e.message().to_string(),
                })?;
        config
            .validate()
            .and_then(|()| config.check_targets_have_a_bot(bot_elsewhere))
            .map_err(|e| ConfigError::Invalid {
                path: PathBuf::from("(merged settings)"),
                message: e.to_string(),
            })?;
        Ok(config)
    }

    /// Parses and checks one file on its own, so an error names the file it is in.
    pub fn parse_layer(text: &str) -> Result<toml::Table, InvalidSettings> {
        let table: toml::Table = toml::from_str(text)?;
        let alone: Config = toml::from_str(text)?;
        alone.validate()?;
        Ok(table)
    }
}

/// `[web] enabled = false`: a kiln's own web view, off while the person's hub serves one.
fn off() -> toml::Table {
    let mut web = toml::Table::new();
    web.insert("enabled".into(), toml::Value::Boolean(false));
    web
}

/// Whether the person's own settings ask their hub to serve something: a web view
/// (`[web]`) or a Matrix bot (`[channels.matrix]`). A kiln's daemon then starts the hub.
pub fn person_asks_hub() -> bool {
    asks_hub(user_settings_path().as_deref())
}

fn asks_hub(person: Option<&Path>) -> bool {
    let Some(Ok(Some(person))) = person.map(Config::read_layer) else {
        return false;
    };
    let web = person
        .get("web")
        .and_then(toml::Value::as_table)
        .is_some_and(|web| web.get("enabled").and_then(toml::Value::as_bool) != Some(false));
    let matrix = person
        .get("channels")
        .and_then(|c| c.get("matrix"))
        .is_some();
    web || matrix
}

/// The files a kiln's settings come from, in the order they are layered (the user's, then
/// the kiln's): what the loader reads and what watchers follow.
pub fn settings_files(kiln_settings: &Path) -> Vec<PathBuf> {
    user_settings_path()
        .into_iter()
        .chain(std::iter::once(kiln_settings.to_path_buf()))
        .collect()
}

/// `~/.config/crucible/config.toml` (XDG aware), if a home directory is known.
pub fn user_settings_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "crucible").map(|d| d.config_dir().join("config.toml"))
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_persons_page_and_bot_are_the_hubs_and_a_kilns_own_page_stays_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let person = write(
            dir.path(),
            "person.toml",
            "[web]\nlisten = \"127.0.0.1:7500\"\n\n[channels.matrix]\nhomeserver = \"https://m.example\"\n\
             user_id = \"@bot:m.example\"\npassword_env = \"BOT\"\nallowed_users = [\"@me:m.example\"]\nagent = \"claude\"\n\n\
             [tui]\ndefault_agent = \"claude\"\n",
        );
        assert!(asks_hub(Some(&person)));
        let whole = Config::load_layers(&[Some(person.clone())]).unwrap();
        assert!(whole.channels.matrix.is_some() && whole.web.listen.is_some());
        // A kiln with no [web] of its own: no page, no bot; the rest of the person's
        // settings still apply.
        let plain = write(dir.path(), "plain.toml", "[kiln]\nname = \"k\"\n");
        let kiln = Config::load_kiln(Some(&person), &plain).unwrap();
        assert!(!kiln.web.enabled, "the person's page is the hub's");
        assert!(kiln.web.listen.is_none());
        assert!(
            kiln.channels.matrix.is_none(),
            "the person's bot is the hub's"
        );
        assert_eq!(kiln.tui.default_agent, "claude");
        // A kiln that asks for its own page keeps it.
        let own = write(
            dir.path(),
            "own.toml",
            "[web]\nlisten = \"127.0.0.1:7501\"\n",
        );
        let kiln = Config::load_kiln(Some(&person), &own).unwrap();
        assert!(kiln.web.enabled);
        assert_eq!(kiln.web.listen.as_deref(), Some("127.0.0.1:7501"));
        // Without the person's [web], a kiln's page is on by default, as it always was.
        let quiet = write(
            dir.path(),
            "quiet.toml",
            "[tui]\ndefault_agent = \"claude\"\n",
        );
        assert!(!asks_hub(Some(&quiet)));
        assert!(Config::load_kiln(Some(&quiet), &plain).unwrap().web.enabled);
        let off = write(dir.path(), "off.toml", "[web]\nenabled = false\n");
        assert!(!asks_hub(Some(&off)));
    }

    #[test]
    fn a_jobs_approval_target_needs_a_bot_here_or_the_persons() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = write(
            dir.path(),
            "kiln.toml",
            "[[cron]]\nid = \"n\"\nschedule = \"0 0 3 * * *\"\nagent = \"a\"\n\
             instructions = \"x\"\napproval_target = \"#ops:example.org\"\n",
        );
        let plain = write(dir.path(), "plain.toml", "[tui]\ntheme = \"dark\"\n");
        let err = Config::load_kiln(Some(&plain), &kiln)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cron.n.approval_target needs [channels.matrix]"),
            "{err}"
        );
        let person = write(
            dir.path(),
            "person.toml",
            "[channels.matrix]\nhomeserver = \"https://example.org\"\nuser_id = \"@bot:example.org\"\n\
             password_env = \"BOT_PASSWORD\"\nallowed_users = [\"@me:example.org\"]\nagent = \"a\"\n",
        );
        let config = Config::load_kiln(Some(&person), &kiln).unwrap();
        assert!(config.channels.matrix.is_none(), "the bot is the hub's");
        assert_eq!(
            config.cron[0].approval_target.as_deref(),
            Some("#ops:example.org")
        );
    }

    #[test]
    fn kiln_layer_overrides_user_layer_key_by_key() {
        let tmp = tempfile::tempdir().unwrap();
        let user = write(
            tmp.path(),
            "user.toml",
            "[daemon]\ngrace_period_secs = 9\nsession_timeout_secs = 600\n",
        );
        let kiln = write(tmp.path(), "kiln.toml", "[daemon]\ngrace_period_secs = 1\n");
        let c = Config::load_layers(&[Some(user), Some(kiln)]).unwrap();
        assert_eq!(c.daemon.grace_period_secs, 1);
        assert_eq!(c.daemon.session_timeout_secs, 600);
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let tmp = tempfile::tempdir().unwrap();
        let kiln = write(tmp.path(), "kiln.toml", "[daemon]\ngrace_perod_secs = 1\n");
        let err = Config::load_layers(&[Some(kiln.clone())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("kiln.toml"), "{err}");
        assert!(err.contains("grace_perod_secs"), "{err}");
    }

    #[test]
    fn the_summary_is_one_line_with_the_file_the_key_and_the_line() {
        let tmp = tempfile::tempdir().unwrap();
        let kiln = write(
            tmp.path(),
            ".crucible.toml",
            "[agents.x]\ncommand = \"a\"\ncomand = \"sh\"\n",
        );
        let err = Config::load_layers(&[Some(kiln.clone())]).unwrap_err();
        let line = err.summary();
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.starts_with(&format!(
                "{}, line 3, column 1: unknown field `comand`",
                kiln.display()
            )),
            "{line}"
        );

        assert_eq!(
            err.brief(tmp.path()),
            ".crucible.toml, line 3, column 1: unknown field `comand`"
        );

        let kiln = write(tmp.path(), "k.toml", "[inbox]\ndefault_limit = 0\n");
        let line = Config::load_layers(&[Some(kiln)]).unwrap_err().summary();
        assert!(
            line.contains("k.toml: inbox.default_limit must be between"),
            "{line}"
        );
    }
}
