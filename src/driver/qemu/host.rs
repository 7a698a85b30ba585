//! What this machine's QEMU can do, asked once per daemon: the accelerator (KVM when a
//! trial guest boots with it, else TCG, QEMU's own translator) and the machine type
//! (`microvm` with KVM when this QEMU has it, else `q35` or `pc`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::driver::error::DriverError;

pub const QEMU: &str = "qemu-system-x86_64";

/// How guests run on this machine.
#[derive(Debug, Clone)]
pub struct Host {
    /// `microvm`, `q35` or `pc`.
    pub machine: &'static str,
    /// `kvm` or `tcg`.
    pub accel: &'static str,
    /// Why KVM is not used, when it is not.
    pub no_kvm: Option<String>,
    /// QEMU's version line.
    pub version: String,
}

impl Host {
    /// Whether the machine's devices hang off virtio-mmio rather than PCI.
    pub fn mmio(&self) -> bool {
        self.machine == "microvm"
    }

    /// A virtio device of the machine's bus (`virtio-9p` gives `virtio-9p-device` on
    /// microvm, `virtio-9p-pci` elsewhere).
    pub fn device(&self, kind: &str) -> String {
        format!("{kind}-{}", if self.mmio() { "device" } else { "pci" })
    }

    /// One line for people: `QEMU emulator version 7.2.x, microvm, tcg (why)`.
    pub fn described(&self) -> String {
        let mut line = format!(
            "{}, machine {}, accel {}",
            self.version, self.machine, self.accel
        );
        if let Some(why) = &self.no_kvm {
            line.push_str(&format!(" (no kvm: {why})"));
        }
        line
    }
}

/// This machine's QEMU for guests of `kernel`, asked once per daemon and kernel; the
/// answer is kept in `cache` (a folder) for the next daemon, with what it depends on.
pub fn host(kernel: &Path, cache: Option<&Path>) -> Result<Host, DriverError> {
    static HOSTS: Mutex<Vec<(PathBuf, Host)>> = Mutex::new(Vec::new());
    let known = HOSTS.lock().ok().and_then(|hosts| {
        hosts
            .iter()
            .find(|(k, _)| k == kernel)
            .map(|(_, h)| h.clone())
    });
    if let Some(host) = known {
        return Ok(host);
    }
    let host = probe(kernel, cache)?;
    if let Ok(mut hosts) = HOSTS.lock() {
        hosts.push((kernel.to_path_buf(), host.clone()));
    }
    Ok(host)
}

fn probe(kernel: &Path, cache: Option<&Path>) -> Result<Host, DriverError> {
    let version = Command::new(QEMU)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|_| {
            DriverError::Unavailable(format!(
                "the qemu driver needs {QEMU}, which is not installed: install the `qemu-system-x86` package"
            ))
        })?;
    let version = String::from_utf8_lossy(&version.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let machines = Command::new(QEMU)
        .args(["-machine", "help"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| DriverError::program(QEMU, e))?;
    let machines = String::from_utf8_lossy(&machines.stdout).into_owned();
    let has = |name: &str| {
        machines
            .lines()
            .any(|l| l.split_whitespace().next() == Some(name))
    };
    let full = ["q35", "pc"].into_iter().find(|m| has(m)).unwrap_or("pc");
    let micro = if has("microvm") { "microvm" } else { full };
    let key = answer_key(&version, micro, kernel);
    let file = cache.map(|c| c.join("accel"));
    let kept = file
        .as_deref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|text| {
            let (k, answer) = text.split_once('\n')?;
            (k == key).then(|| answer.trim_end().to_string())
        });
    let no_kvm = match kept {
        Some(answer) => (!answer.is_empty()).then_some(answer),
        None => {
            let no_kvm = try_kvm(micro, kernel);
            if let Some(f) = &file {
                let text = format!("{key}\n{}\n", no_kvm.as_deref().unwrap_or(""));
                if let Err(e) = std::fs::write(f, text) {
                    tracing::warn!(file = %f.display(), error = %e, "cannot keep whether KVM works");
                }
            }
            no_kvm
        }
    };
    // Without KVM's clock a microvm guest calibrates its timer against nothing but the
    // PIT, which fails on a busy host and leaves the guest hung; a full machine has the
    // HPET and the ACPI timer to fall back on.
    Ok(Host {
        machine: if no_kvm.is_none() { micro } else { full },
        accel: if no_kvm.is_none() { "kvm" } else { "tcg" },
        no_kvm,
        version,
    })
}

/// What the KVM answer depends on: QEMU, the machine type, the guest's kernel and the
/// host's kernel (which provides KVM).
fn answer_key(version: &str, machine: &str, kernel: &Path) -> String {
    let modified = std::fs::metadata(kernel)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{version} | {machine} | {} {modified} | {}",
        kernel.display(),
        release.trim()
    )
}

/// How long a guest may take to reach its kernel's end with KVM; with KVM working it
/// takes well under a second, while TCG takes a few.
const KVM_TRIAL: Duration = Duration::from_secs(15);

/// Boots `kernel` with KVM and no root, so it stops at once (its panic ends QEMU):
/// `Some` says why guests do not run with KVM here, `None` that they do. Opening
/// `/dev/kvm` is not enough: in some nested machines a guest starts and never gets past
/// its first steps.
fn try_kvm(machine: &str, kernel: &Path) -> Option<String> {
    if !Path::new("/dev/kvm").exists() {
        return Some("no /dev/kvm".into());
    }
    let child = Command::new(QEMU)
        .args([
            "-machine", machine, "-accel", "kvm", "-cpu", "host", "-m", "128",
        ])
        .args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ])
        .arg("-kernel")
        .arg(kernel)
        .args(["-append", "panic=-1 root=/dev/crucible-none loglevel=0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return Some(e.to_string()),
    };
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return None,
            Ok(Some(_)) => {
                let mut said = String::new();
                if let Some(mut err) = child.stderr.take() {
                    let _ = err.read_to_string(&mut said);
                }
                return Some(
                    said.lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("kvm refused")
                        .trim()
                        .to_string(),
                );
            }
            Ok(None) if started.elapsed() < KVM_TRIAL => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Some(format!(
                    "a guest did not boot with KVM within {} s",
                    KVM_TRIAL.as_secs()
                ));
            }
        }
    }
}
