//! The browsers the web view lets in, kept in `.crucible/web/devices.json` (owner-only).
//! `cru web` makes a pairing code, usable once and for a few minutes; a browser that
//! presents it is given its own device token, which it keeps in a cookie. Only hashes
//! (SHA-256) of codes and tokens are stored; a token is shown once, to its browser. A
//! change is acknowledged only once the file is durably replaced.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::protocol::{WebAccess, WebDevice};

/// The letters of a pairing code: Crockford's base 32 (no I, L, O or U), so it can be
/// read aloud and typed; an O typed is taken as 0, an I or L as 1.
const CODE_LETTERS: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Why a browser was not let in or a change not made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeviceError {
    #[error("this pairing code is wrong, used or expired: run `cru web` for a new one")]
    BadCode,
    #[error("no paired browser has an id starting with {0:?} (cru web tokens lists them)")]
    NoDevice(String),
    #[error("{0:?} names more than one paired browser; give more of its id")]
    Ambiguous(String),
    #[error("cannot save the paired browsers in {path}: {source}")]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Stored {
    #[serde(default)]
    devices: Vec<StoredDevice>,
    #[serde(default)]
    pairings: Vec<StoredPairing>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredDevice {
    id: String,
    label: String,
    access: WebAccess,
    /// SHA-256 of the device token, hex.
    token_hash: String,
    paired_at: String,
    #[serde(default)]
    paired_from: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredPairing {
    /// SHA-256 of the code (as typed: upper case, no separators), hex.
    code_hash: String,
    access: WebAccess,
    /// Unix seconds.
    expires_at: i64,
}

/// A browser the token of a request belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Device {
    pub id: String,
    pub label: String,
    pub access: WebAccess,
    /// SHA-256 of its token: what its cross-site request token is made from.
    pub token_hash: String,
}

/// The paired browsers and the pairing codes not yet used.
pub(crate) struct Devices {
    path: PathBuf,
    stored: Mutex<Stored>,
    /// Each device's last request since the daemon started (not written: it changes at
    /// every request).
    seen: Mutex<HashMap<String, String>>,
    /// Bumped at every revocation: open event streams check that their device is still
    /// paired.
    revocations: tokio::sync::watch::Sender<u64>,
}

fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// 32 random bytes (two version-4 UUIDs: the system's secure random source).
fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes
}

/// A new pairing code: 16 letters (80 random bits), shown in groups of four.
fn new_code() -> String {
    let uuid = uuid::Uuid::new_v4();
    let bytes = uuid.as_bytes();
    // Bytes 6 and 8 carry the UUID's version and variant; the others are random.
    let bits = bytes[..6]
        .iter()
        .chain(&bytes[9..13])
        .fold(0u128, |acc, b| (acc << 8) | u128::from(*b));
    let letters: Vec<u8> = (0..16)
        .rev()
        .map(|i| CODE_LETTERS[usize::try_from((bits >> (5 * i)) & 0x1f).unwrap_or(0)])
        .collect();
    letters
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("-")
}

/// A code as typed, made comparable: upper case, without spaces or dashes.
pub(super) fn normal_code(code: &str) -> String {
    code.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| match c.to_ascii_uppercase() {
            'O' => '0',
            'I' | 'L' => '1',
            c => c,
        })
        .collect()
}

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Devices {
    /// Reads the paired browsers from `path`. A file that cannot be read is set aside
    /// (renamed, not deleted) and every browser must pair again: none is let in on a
    /// guess.
    pub fn open(path: &Path) -> Self {
        let stored = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                let aside = path.with_extension("json.unreadable");
                let moved = std::fs::rename(path, &aside);
                tracing::error!(
                    file = %path.display(),
                    set_aside = %aside.display(),
                    moved = moved.is_ok(),
                    "the paired browsers cannot be read ({e}); every browser must pair again"
                );
                Stored::default()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored::default(),
            Err(e) => {
                tracing::error!(file = %path.display(), "cannot read the paired browsers: {e}");
                Stored::default()
            }
        };
        Self {
            path: path.to_path_buf(),
            stored: Mutex::new(stored),
            seen: Mutex::default(),
            revocations: tokio::sync::watch::channel(0).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Stored> {
        self.stored.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `next` durably, then makes it the state: a change that cannot be saved is
    /// not made.
    fn commit(&self, now: &mut Stored, next: Stored) -> Result<(), DeviceError> {
        let save = |source| DeviceError::Save {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            crate::sys::private_dir(dir).map_err(save)?;
        }
        let bytes = serde_json::to_vec_pretty(&next).map_err(|e| save(std::io::Error::other(e)))?;
        crate::sys::write_private(&self.path, &bytes).map_err(save)?;
        *now = next;
        Ok(())
    }

    /// A new pairing code of `access`, usable once within `minutes`; the code and when it
    /// expires (Unix seconds).
    pub fn new_pairing(
        &self,
        access: WebAccess,
        minutes: u64,
    ) -> Result<(String, i64), DeviceError> {
        let code = new_code();
        let expires_at = now_secs() + i64::try_from(minutes.saturating_mul(60)).unwrap_or(0);
        let mut stored = self.lock();
        let mut next = stored.clone();
        let now = now_secs();
        next.pairings.retain(|p| p.expires_at > now);
        next.pairings.push(StoredPairing {
            code_hash: hash(&normal_code(&code)),
            access,
            expires_at,
        });
        self.commit(&mut stored, next)?;
        Ok((code, expires_at))
    }

    /// Lets a browser in with a pairing code (which is used up): the new device and its
    /// token, which only this browser is given.
    pub fn pair(
        &self,
        code: &str,
        label: &str,
        from: Option<String>,
    ) -> Result<(WebDevice, String), DeviceError> {
        let code_hash = hash(&normal_code(code));
        let now = now_secs();
        let mut stored = self.lock();
        let Some(pairing) = stored
            .pairings
            .iter()
            .find(|p| p.code_hash == code_hash && p.expires_at > now)
            .cloned()
        else {
            return Err(DeviceError::BadCode);
        };
        let token = hex::encode(random_bytes());
        let device = StoredDevice {
            id: ulid::Ulid::new().to_string().to_lowercase(),
            label: clean_label(label),
            access: pairing.access,
            token_hash: hash(&token),
            paired_at: crate::text::now_rfc3339(),
            paired_from: from,
        };
        let mut next = stored.clone();
        next.pairings
            .retain(|p| p.code_hash != code_hash && p.expires_at > now);
        next.devices.push(device.clone());
        self.commit(&mut stored, next)?;
        Ok((self.view(&device), token))
    }

    /// The device a token belongs to, if it is paired; notes the request.
    pub fn device(&self, token: &str) -> Option<Device> {
        let token_hash = hash(token);
        let device = self
            .lock()
            .devices
            .iter()
            .find(|d| d.token_hash == token_hash)
            .map(|d| Device {
                id: d.id.clone(),
                label: d.label.clone(),
                access: d.access,
                token_hash: d.token_hash.clone(),
            })?;
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(device.id.clone(), crate::text::now_rfc3339());
        Some(device)
    }

    fn view(&self, d: &StoredDevice) -> WebDevice {
        WebDevice {
            id: d.id.clone(),
            label: d.label.clone(),
            access: d.access,
            paired_at: d.paired_at.clone(),
            paired_from: d.paired_from.clone(),
            last_seen_at: self
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&d.id)
                .cloned(),
        }
    }

    /// The paired browsers, oldest first.
    pub fn list(&self) -> Vec<WebDevice> {
        let stored = self.lock().clone();
        stored.devices.iter().map(|d| self.view(d)).collect()
    }

    /// Lets go of the device whose id starts with `id`: its token is refused from now on.
    pub fn revoke(&self, id: &str) -> Result<WebDevice, DeviceError> {
        let mut stored = self.lock();
        let id = id.trim().to_lowercase();
        let matching: Vec<&StoredDevice> = stored
            .devices
            .iter()
            .filter(|d| !id.is_empty() && d.id.starts_with(&id))
            .collect();
        let device = match matching.as_slice() {
            [one] => (*one).clone(),
            [] => return Err(DeviceError::NoDevice(id)),
            _ => return Err(DeviceError::Ambiguous(id)),
        };
        let mut next = stored.clone();
        next.devices.retain(|d| d.id != device.id);
        self.commit(&mut stored, next)?;
        drop(stored);
        self.revocations.send_modify(|n| *n += 1);
        Ok(self.view(&device))
    }

    /// Changes at every revocation.
    pub fn revocations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.revocations.subscribe()
    }

    /// Whether the device `id` is still paired.
    pub fn is_paired(&self, id: &str) -> bool {
        self.lock().devices.iter().any(|d| d.id == id)
    }
}

/// A browser's label as it is shown: one line, at most 60 characters.
fn clean_label(label: &str) -> String {
    let one_line: String = label
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(60)
        .collect();
    match one_line.trim() {
        "" => "a browser".into(),
        text => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices() -> (tempfile::TempDir, Devices) {
        let dir = tempfile::tempdir().unwrap();
        let devices = Devices::open(&dir.path().join("web").join("devices.json"));
        (dir, devices)
    }

    #[test]
    fn a_code_pairs_once_and_its_token_is_the_device() {
        let (dir, devices) = devices();
        let (code, _) = devices.new_pairing(WebAccess::ReadOnly, 10).unwrap();
        assert_eq!(code.len(), 19, "{code}");
        // Typed in lower case, with spaces for dashes: the same code.
        let typed = code.to_lowercase().replace('-', " ");
        let (device, token) = devices
            .pair(&typed, "Firefox on Linux", Some("127.0.0.1".into()))
            .unwrap();
        assert_eq!(device.access, WebAccess::ReadOnly);
        assert_eq!(
            devices.device(&token).map(|d| d.id),
            Some(device.id.clone())
        );
        assert!(matches!(
            devices.pair(&code, "again", None),
            Err(DeviceError::BadCode)
        ));
        assert!(devices.device("not a token").is_none());
        // Neither the code nor the token is in the file: only their hashes.
        let file = std::fs::read_to_string(dir.path().join("web/devices.json")).unwrap();
        assert!(!file.contains(&token) && !file.contains(&normal_code(&code)));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("web/devices.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn an_expired_code_is_refused_and_a_revoked_token_too() {
        let (dir, devices) = devices();
        let (code, _) = devices.new_pairing(WebAccess::Full, 10).unwrap();
        devices.lock().pairings[0].expires_at = now_secs() - 1;
        assert!(matches!(
            devices.pair(&code, "late", None),
            Err(DeviceError::BadCode)
        ));
        let (code, _) = devices.new_pairing(WebAccess::Full, 10).unwrap();
        let (device, token) = devices.pair(&code, "phone", None).unwrap();
        // A restarted daemon reads the same devices.
        let again = Devices::open(&dir.path().join("web/devices.json"));
        assert!(again.device(&token).is_some());
        assert!(matches!(again.revoke(""), Err(DeviceError::NoDevice(_))));
        let gone = again.revoke(&device.id[..8]).unwrap();
        assert_eq!(gone.id, device.id);
        assert!(again.device(&token).is_none());
        assert!(
            Devices::open(&dir.path().join("web/devices.json"))
                .device(&token)
                .is_none()
        );
    }

    #[test]
    fn an_unreadable_file_lets_no_one_in_and_is_kept() {
        let (dir, _) = devices();
        let path = dir.path().join("devices.json");
        std::fs::write(&path, b"{ not json").unwrap();
        let devices = Devices::open(&path);
        assert!(devices.list().is_empty());
        assert!(dir.path().join("devices.json.unreadable").exists());
    }

    #[test]
    fn codes_use_only_unambiguous_letters() {
        for _ in 0..50 {
            let code = new_code();
            assert!(
                normal_code(&code)
                    .chars()
                    .all(|c| CODE_LETTERS.contains(&(c as u8)))
            );
        }
    }
}
