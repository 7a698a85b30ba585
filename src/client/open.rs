//! Connecting whatever state the settings files are in. A daemon that runs keeps its last
//! good settings when the files break, so a client connects to it as usual and is told
//! why the files are not in use; only starting a new daemon, which would have to run on
//! the broken files, is refused, saying so.

use super::{Client, ClientError, Result, StartOptions, connect_or_start};
use crate::config::{Config, ConfigError};
use crate::kiln::Kiln;

/// A connection to the kiln's daemon, and why the settings files are not in use, if they
/// are not.
pub struct Opened {
    pub client: Client,
    /// The files do not load: the daemon serves on its last good settings.
    pub settings_error: Option<ConfigError>,
}

/// Connects to the kiln's daemon, starting one if none answers and the settings files
/// load. When they do not, connects to the daemon that runs (it keeps its last good
/// settings) and gives the error back to be shown; with no daemon running, that none can
/// start on them is the error.
pub async fn open(kiln: &Kiln, opts: &StartOptions) -> Result<Opened> {
    let broken = match Config::load(&kiln.settings_path()) {
        Ok(_) => {
            return Ok(Opened {
                client: connect_or_start(kiln, opts).await?,
                settings_error: None,
            });
        }
        Err(broken) => broken,
    };
    match Client::connect(kiln).await {
        Ok(client) => Ok(Opened {
            client,
            settings_error: Some(broken),
        }),
        Err(e @ ClientError::Suspended { .. }) => Err(e),
        Err(ClientError::Connect { .. }) => Err(ClientError::Start(format!(
            "no daemon runs for this kiln, and none can start on settings that do not load \
             (fix the file, then try again): {}",
            broken.summary()
        ))),
        Err(e) => Err(ClientError::Start(format!(
            "{e}; and no new daemon can start on settings that do not load: {}",
            broken.summary()
        ))),
    }
}
