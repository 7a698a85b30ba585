//! A SurrealDB server as the store (team mode): connecting and signing in, and what the
//! daemon does while the server is away.
//!
//! The SDK reconnects on its own, but a request sent while it does waits for the
//! connection, however long that takes. So every request has a time limit; the first
//! one that fails for the connection marks the server unreachable, and from then on
//! requests are refused at once (nothing is sent, so nothing can be stored behind the
//! caller's back) until a probe in the background gets an answer again. Whoever watches
//! [`Remote::health`] is told both ways.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use surrealdb::Surreal;
use surrealdb::engine::any::Any;
use tokio::sync::watch;

use super::error::{OpenFailure, StoreError};
use crate::config::{StoreAuth, StoreConfig};
use crate::protocol::StoreHealth;

/// The SurrealDB major version this build speaks (its SDK refuses any other).
const SERVER_MAJOR: u64 = 3;
/// Waits between probes of an unreachable server: doubling up to the last.
const PROBE_BACKOFF: [u64; 5] = [250, 500, 1000, 2000, 5000];

pub(super) struct Remote {
    pub(super) db: Surreal<Any>,
    url: String,
    timeout: Duration,
    state: Arc<State>,
}

struct State {
    health: watch::Sender<StoreHealth>,
    probing: AtomicBool,
}

impl Remote {
    /// Connects, signs in at the configured level and checks the server's version.
    pub(super) async fn connect(cfg: &StoreConfig) -> Result<Self, OpenFailure> {
        let url = cfg.url.clone();
        let mut options = surrealdb::opt::Config::new();
        if url.starts_with("wss://") {
            options = options.rustls(tls_config(cfg)?);
        }
        let timeout = Duration::from_secs(cfg.timeout_secs);
        let connect = surrealdb::engine::any::connect((url.as_str(), options));
        let db = match tokio::time::timeout(timeout, connect).await {
            Err(_) => {
                return Err(OpenFailure::Server(format!(
                    "no answer within {}s",
                    cfg.timeout_secs
                )));
            }
            Ok(Err(e)) => return Err(OpenFailure::Server(describe_connect_error(&e))),
            Ok(Ok(db)) => db,
        };
        let version = tokio::time::timeout(timeout, db.version())
            .await
            .map_err(|_| OpenFailure::Server(format!("no answer within {}s", cfg.timeout_secs)))?
            .map_err(|e| OpenFailure::Server(format!("cannot read the server's version: {e}")))?;
        if version.major != SERVER_MAJOR {
            return Err(OpenFailure::Server(format!(
                "the server runs SurrealDB {version}; this build of crucible speaks SurrealDB {SERVER_MAJOR}.x"
            )));
        }
        if let Some(username) = &cfg.username {
            let password = match cfg.password_env.as_deref() {
                Some(var) => std::env::var(var).map_err(|_| {
                    OpenFailure::Server(format!(
                        "the password variable {var} (store.password_env) is not set"
                    ))
                })?,
                None => String::new(),
            };
            let signin = sign_in(&db, cfg, username.clone(), password);
            tokio::time::timeout(timeout, signin)
                .await
                .map_err(|_| {
                    OpenFailure::Server(format!(
                        "no answer to the sign-in within {}s",
                        cfg.timeout_secs
                    ))
                })?
                .map_err(|e| {
                    OpenFailure::Server(format!(
                        "the server refused {} user {username:?}: {e}",
                        level_name(cfg.auth)
                    ))
                })?;
        }
        tracing::info!(%url, %version, "connected to the database server");
        Ok(Self {
            db,
            url,
            timeout,
            state: Arc::new(State {
                health: watch::channel(StoreHealth {
                    connected: true,
                    error: None,
                    damaged: Vec::new(),
                    rebuilt: Vec::new(),
                })
                .0,
                probing: AtomicBool::new(false),
            }),
        })
    }

    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Told whenever the server goes away or comes back.
    pub(super) fn health(&self) -> watch::Receiver<StoreHealth> {
        self.state.health.subscribe()
    }

    /// Runs a request within the time limit; refused at once while the server is away.
    pub(super) async fn run(
        &self,
        sql: &str,
        vars: surrealdb::types::Value,
    ) -> Result<surrealdb::IndexedResults, StoreError> {
        if let Some(why) = self.down() {
            return Err(self.unreachable(&why, false));
        }
        match tokio::time::timeout(self.timeout, self.db.query(sql).bind(vars)).await {
            Err(_) => {
                let why = format!("no answer within {}s", self.timeout.as_secs());
                self.lost(why.clone());
                Err(self.unreachable(&why, true))
            }
            Ok(Err(e)) => Err(self.check(e)),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// A result the server sent that says the connection broke.
    pub(super) fn check(&self, e: surrealdb::Error) -> StoreError {
        if e.is_connection() {
            let why = e.to_string();
            self.lost(why.clone());
            return self.unreachable(&why, true);
        }
        e.into()
    }

    fn down(&self) -> Option<String> {
        let health = self.state.health.borrow();
        (!health.connected).then(|| health.error.clone().unwrap_or_default())
    }

    fn unreachable(&self, why: &str, in_flight: bool) -> StoreError {
        StoreError::Unreachable {
            url: self.url.clone(),
            why: why.to_string(),
            in_flight,
        }
    }

    /// Marks the server unreachable (once) and starts probing for it.
    pub(super) fn lost(&self, why: String) {
        let changed = self.state.health.send_if_modified(|h| {
            if !h.connected {
                return false;
            }
            h.connected = false;
            h.error = Some(why.clone());
            true
        });
        if changed {
            tracing::warn!(url = %self.url, "the database server is unreachable: {why}");
        }
        if self.state.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let db = self.db.clone();
        let state = Arc::clone(&self.state);
        let timeout = self.timeout;
        let url = self.url.clone();
        tokio::spawn(async move {
            let mut attempt = 0;
            loop {
                let wait = PROBE_BACKOFF[attempt.min(PROBE_BACKOFF.len() - 1)];
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(wait)).await;
                match tokio::time::timeout(timeout, db.query("RETURN 1")).await {
                    Ok(Ok(_)) => break,
                    Ok(Err(e)) => tracing::debug!("the database server is still away: {e}"),
                    Err(_) => tracing::debug!("the database server is still away"),
                }
            }
            state.probing.store(false, Ordering::Release);
            state.health.send_replace(StoreHealth {
                connected: true,
                error: None,
                damaged: Vec::new(),
                rebuilt: Vec::new(),
            });
            tracing::info!(%url, "the database server answers again");
        });
    }
}

async fn sign_in(
    db: &Surreal<Any>,
    cfg: &StoreConfig,
    username: String,
    password: String,
) -> surrealdb::Result<()> {
    use surrealdb::opt::auth;
    match cfg.auth {
        StoreAuth::Root => db.signin(auth::Root { username, password }).await?,
        StoreAuth::Namespace => {
            db.signin(auth::Namespace {
                namespace: cfg.namespace.clone(),
                username,
                password,
            })
            .await?
        }
        StoreAuth::Database => {
            db.signin(auth::Database {
                namespace: cfg.namespace.clone(),
                database: cfg.database.clone(),
                username,
                password,
            })
            .await?
        }
    };
    Ok(())
}

fn level_name(auth: StoreAuth) -> &'static str {
    match auth {
        StoreAuth::Root => "root",
        StoreAuth::Namespace => "namespace",
        StoreAuth::Database => "database",
    }
}

fn describe_connect_error(e: &surrealdb::Error) -> String {
    let text = e.to_string();
    if text.contains("does not match the range supported") {
        format!("{text} (this build of crucible speaks SurrealDB {SERVER_MAJOR}.x)")
    } else {
        text
    }
}

/// The TLS settings for `wss://`: the public roots, and the team's CA if one is named.
fn tls_config(cfg: &StoreConfig) -> Result<rustls::ClientConfig, OpenFailure> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &cfg.ca_file {
        let certs = CertificateDer::pem_file_iter(path).map_err(|e| {
            OpenFailure::Server(format!("cannot read store.ca_file {}: {e}", path.display()))
        })?;
        let mut added = 0;
        for cert in certs {
            let cert = cert.map_err(|e| {
                OpenFailure::Server(format!("store.ca_file {}: {e}", path.display()))
            })?;
            roots.add(cert).map_err(|e| {
                OpenFailure::Server(format!("store.ca_file {}: {e}", path.display()))
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(OpenFailure::Server(format!(
                "store.ca_file {} holds no PEM certificate",
                path.display()
            )));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| OpenFailure::Server(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
