//! The bot's account on this machine: the folder that holds its device (`.crucible/
//! matrix/`, owner-only: the SDK's SQLite state and crypto store, and the stored login),
//! the first login with the password or token from the daemon's environment, and the
//! stored login after that. The password is only ever read from the environment; the
//! stored login holds the device's access token, in an owner-only file.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::ruma::api::client::uiaa;
use matrix_sdk::ruma::api::error::{ErrorKind, RetryAfter};
use matrix_sdk::ruma::{OwnedDeviceId, OwnedUserId};
use matrix_sdk::{Client, SessionMeta, SessionTokens};

use crate::config::MatrixConfig;

/// Why the bot could not log in.
#[derive(Debug, thiserror::Error)]
pub(super) enum AccountError {
    #[error("{0} is not set in the daemon's environment")]
    Unset(String),
    #[error("cannot keep the bot's device in {path}: {source}")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the homeserver refused the login: {0}")]
    Refused(String),
    #[error("cannot cross-sign the bot's device: {0}")]
    CrossSigning(String),
    #[error("{0}")]
    Client(String),
}

fn folder_error(path: &Path) -> impl FnOnce(std::io::Error) -> AccountError + '_ {
    move |source| AccountError::Folder {
        path: path.to_path_buf(),
        source,
    }
}

/// The bot's client, and whether its device is new (logged in now, not restored).
pub(super) struct Connected {
    pub client: Client,
    pub fresh: bool,
}

/// The client of the bot's device: restored from the stored login, else logged in now.
pub(super) async fn connect(
    config: &MatrixConfig,
    folder: &Path,
) -> Result<Connected, AccountError> {
    crate::sys::private_dir(folder).map_err(folder_error(folder))?;
    let stored = read_login(folder).filter(|s| s.meta.user_id.as_str() == config.user_id);
    if stored.is_none() {
        // A store without its login belongs to a device nobody can use again.
        let store = folder.join("store");
        if store.exists() {
            std::fs::remove_dir_all(&store).map_err(folder_error(&store))?;
        }
    }
    let client = Client::builder()
        .homeserver_url(&config.homeserver)
        .sqlite_store(folder.join("store"), None)
        .build()
        .await
        .map_err(|e| AccountError::Client(e.to_string()))?;
    if let Some(session) = stored {
        client
            .restore_session(session)
            .await
            .map_err(|e| AccountError::Client(e.to_string()))?;
        return Ok(Connected {
            client,
            fresh: false,
        });
    }
    let session = log_in(&client, config).await?;
    write_login(folder, &session)?;
    tracing::debug!(user = %session.meta.user_id, device = %session.meta.device_id, "matrix: a new device; its login is kept");
    Ok(Connected {
        client,
        fresh: true,
    })
}

async fn log_in(client: &Client, config: &MatrixConfig) -> Result<MatrixSession, AccountError> {
    if let Some(var) = &config.password_env {
        let password = std::env::var(var).map_err(|_| AccountError::Unset(var.clone()))?;
        client
            .matrix_auth()
            .login_username(&config.user_id, &password)
            .initial_device_display_name(&config.device_name)
            .send()
            .await
            .map_err(|e| AccountError::Refused(e.to_string()))?;
    } else if let Some(var) = &config.access_token_env {
        let token = std::env::var(var).map_err(|_| AccountError::Unset(var.clone()))?;
        let (user_id, device_id) = whoami(&config.homeserver, &token).await?;
        let session = MatrixSession {
            meta: SessionMeta { user_id, device_id },
            tokens: SessionTokens {
                access_token: token,
                refresh_token: None,
            },
        };
        client
            .restore_session(session)
            .await
            .map_err(|e| AccountError::Client(e.to_string()))?;
    }
    client
        .matrix_auth()
        .session()
        .ok_or_else(|| AccountError::Refused("no login was made".into()))
}

/// The account and device an access token belongs to.
async fn whoami(
    homeserver: &str,
    token: &str,
) -> Result<(OwnedUserId, OwnedDeviceId), AccountError> {
    #[derive(serde::Deserialize)]
    struct Whoami {
        user_id: OwnedUserId,
        device_id: Option<OwnedDeviceId>,
    }
    let url = format!(
        "{}/_matrix/client/v3/account/whoami",
        homeserver.trim_end_matches('/')
    );
    let refused = |e: reqwest::Error| AccountError::Refused(e.without_url().to_string());
    let body = reqwest::Client::new()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(refused)?
        .bytes()
        .await
        .map_err(refused)?;
    let me: Whoami =
        serde_json::from_slice(&body).map_err(|e| AccountError::Refused(format!("whoami: {e}")))?;
    let device = me.device_id.ok_or_else(|| {
        AccountError::Refused("the access token has no device: log in with password_env".into())
    })?;
    Ok((me.user_id, device))
}

/// Makes the bot's device one its own identity has signed (cross-signing), which
/// clients that exclude insecure devices (Element since 2026) need before they send to it
/// or trust what it sends. An identity whose private keys this device holds is kept; else
/// a new one is made and uploaded, with the password when the homeserver asks for it (the
/// first upload needs none on homeservers that follow the current spec). Whether the
/// device is cross-signed now.
pub(super) async fn cross_sign(client: &Client, config: &MatrixConfig) -> Result<(), AccountError> {
    let encryption = client.encryption();
    let held = encryption
        .cross_signing_status()
        .await
        .is_some_and(|status| status.is_complete());
    if held && own_device_signed(client).await {
        return Ok(());
    }
    let failed = |e: matrix_sdk::Error| AccountError::CrossSigning(e.to_string());
    let first = match encryption.bootstrap_cross_signing(None).await {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let Some(asked) = first.as_uiaa_response() else {
        return Err(failed(first));
    };
    let Some(var) = &config.password_env else {
        return Err(AccountError::CrossSigning(
            "the homeserver asks for the bot's password to set up its cross-signing identity: set password_env for one start (the stored login is kept after)".into(),
        ));
    };
    let password = std::env::var(var).map_err(|_| AccountError::Unset(var.clone()))?;
    let mut auth = uiaa::Password::new(
        uiaa::UserIdentifier::Matrix(uiaa::MatrixUserIdentifier::new(config.user_id.clone())),
        password,
    );
    auth.session = asked.session.clone();
    encryption
        .bootstrap_cross_signing(Some(uiaa::AuthData::Password(auth)))
        .await
        .map_err(failed)?;
    if held {
        tracing::debug!("matrix: the device was not signed by its identity: signed now");
    } else {
        tracing::warn!(
            "matrix: the bot has a new cross-signing identity: people who verified the bot before verify it again"
        );
    }
    Ok(())
}

/// Whether the bot's own identity has signed this device.
pub(super) async fn own_device_signed(client: &Client) -> bool {
    match client.encryption().get_own_device().await {
        Ok(Some(device)) => device.is_cross_signed_by_owner(),
        _ => false,
    }
}

fn login_path(folder: &Path) -> PathBuf {
    folder.join("login.json")
}

fn read_login(folder: &Path) -> Option<MatrixSession> {
    let text = std::fs::read_to_string(login_path(folder)).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_login(folder: &Path, session: &MatrixSession) -> Result<(), AccountError> {
    let path = login_path(folder);
    let text = serde_json::to_vec(session).map_err(|e| AccountError::Client(e.to_string()))?;
    crate::sys::write_private(&path, &text).map_err(folder_error(&path))
}

/// Forgets the stored login (the homeserver ended it): the next start logs in again.
pub(super) fn forget(folder: &Path) {
    let _ = std::fs::remove_file(login_path(folder));
}

/// Whether the homeserver no longer knows the login.
pub(super) fn is_logged_out(error: &matrix_sdk::Error) -> bool {
    matches!(
        error.client_api_error_kind(),
        Some(ErrorKind::UnknownToken(_))
    )
}

/// How long the homeserver asks to wait (429), if it says.
pub(super) fn retry_after(error: &matrix_sdk::Error) -> Option<Duration> {
    match error.client_api_error_kind()? {
        ErrorKind::LimitExceeded(data) => match data.retry_after.as_ref()? {
            RetryAfter::Delay(delay) => Some(*delay),
            RetryAfter::DateTime(at) => at.duration_since(SystemTime::now()).ok(),
        },
        _ => None,
    }
}
