//! What the microVM boots: the kernel (a configured one, or the host's newest
//! `/boot/vmlinuz-*`), its version (read from the image's header), and the initramfs
//! made here in the `newc` cpio format: a base archive of busybox, the kernel's virtio
//! and 9p modules and the two stages of init, cached per kernel version in the kiln's
//! state folder, followed by a small archive per start with that start's settings.

use std::path::{Path, PathBuf};

use crate::driver::error::DriverError;

/// The first stage of init, and the second, run in the host's root.
const INIT: &str = include_str!("init.sh");
const STAGE2: &str = include_str!("stage2.sh");

/// Where a static busybox is looked for (Debian's `busybox-static` puts it first).
const BUSYBOX: &[&str] = &[
    "/usr/bin/busybox",
    "/bin/busybox",
    "/usr/lib/initramfs-tools/bin/busybox",
];

/// The modules the guest needs, in load order after their dependencies: the virtio
/// transport, the serial ports, 9p over virtio, and the network card.
const MODULES: &[&str] = &[
    "virtio_mmio",
    "virtio_pci",
    "virtio_console",
    "9pnet_virtio",
    "9p",
    "virtio_net",
];

/// The newest `/boot/vmlinuz-*`, or `None`.
pub fn host_kernel() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .collect();
    found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.pop()
}

/// The release a bzImage names in its header (`6.1.0-56-amd64`), as `uname -r` says it.
pub fn kernel_version(kernel: &Path) -> Option<String> {
    let image = std::fs::read(kernel).ok()?;
    let at = u16::from_le_bytes([*image.get(0x20e)?, *image.get(0x20f)?]) as usize + 0x200;
    let text = image.get(at..at.checked_add(256)?.min(image.len()))?;
    let end = text.iter().position(|&b| b == 0 || b == b' ')?;
    String::from_utf8(text.get(..end)?.to_vec()).ok()
}

/// A static busybox on this machine.
pub fn busybox() -> Option<PathBuf> {
    BUSYBOX.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// `newc` cpio entries, written as they are added.
#[derive(Default)]
pub struct Archive {
    bytes: Vec<u8>,
    next_inode: u32,
}

impl Archive {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.next_inode += 1;
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.next_inode,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        self.bytes.extend_from_slice(header.as_bytes());
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040_755, &[]);
    }

    pub fn file(&mut self, name: &str, executable: bool, data: &[u8]) {
        self.entry(name, if executable { 0o100_755 } else { 0o100_644 }, data);
    }

    /// The archive, closed with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        while !self.bytes.len().is_multiple_of(512) {
            self.bytes.push(0);
        }
        self.bytes
    }
}

/// The modules of `version` the guest needs, dependencies first, as paths under its
/// `/lib/modules` folder; none when the folder is missing (a kernel with them built in).
fn modules(version: &str) -> Vec<PathBuf> {
    let base = Path::new("/lib/modules").join(version);
    let Ok(dep) = std::fs::read_to_string(base.join("modules.dep")) else {
        return Vec::new();
    };
    let deps: Vec<(&str, Vec<&str>)> = dep
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(m, d)| (m, d.split_whitespace().collect()))
        .collect();
    let find = |name: &str| {
        deps.iter().find(|(m, _)| {
            Path::new(m)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.split('.').next() == Some(name))
        })
    };
    let mut order: Vec<&str> = Vec::new();
    for wanted in MODULES {
        let Some((module, needs)) = find(wanted) else {
            continue;
        };
        // modules.dep lists what a module needs, the deepest last.
        for m in needs.iter().rev().chain(std::iter::once(module)) {
            if !order.contains(m) {
                order.push(m);
            }
        }
    }
    order.into_iter().map(|m| base.join(m)).collect()
}

/// Where the base archive for kernel `version` is kept in `cache`: named by the kernel
/// and by what this crucible puts in it, so a newer crucible makes its own.
pub fn base_path(cache: &Path, version: &str) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut made_of = std::hash::DefaultHasher::new();
    (INIT, STAGE2, MODULES).hash(&mut made_of);
    cache.join(format!("base-{version}-{:016x}.cpio", made_of.finish()))
}

/// The base archive for `version`, made once into `cache` (see [`base_path`]).
pub fn base_archive(cache: &Path, version: &str) -> Result<Vec<u8>, DriverError> {
    let path = base_path(cache, version);
    if let Ok(bytes) = std::fs::read(&path) {
        return Ok(bytes);
    }
    let busybox = busybox().ok_or_else(|| {
        DriverError::Unavailable(
            "the qemu driver needs a static busybox: install the `busybox-static` package".into(),
        )
    })?;
    let read =
        |p: &Path| std::fs::read(p).map_err(|e| DriverError::file("cannot read ", p.display(), e));
    let mut archive = Archive::default();
    for dir in [
        "bin", "modules", "crucible", "dev", "proc", "sys", "newroot",
    ] {
        archive.dir(dir);
    }
    archive.file("bin/busybox", true, &read(&busybox)?);
    archive.file("init", true, INIT.as_bytes());
    archive.file("crucible/stage2", false, STAGE2.as_bytes());
    let mut order = String::new();
    for module in modules(version) {
        let Some(name) = module.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.ends_with(".ko") {
            archive.file(&format!("modules/{name}"), false, &read(&module)?);
            order.push_str(name);
            order.push('\n');
        } else {
            tracing::warn!(module = %module.display(), "a compressed module is left out of the microVM");
        }
    }
    archive.file("modules/order", false, order.as_bytes());
    let bytes = archive.finish();
    let partial = path.with_extension(format!("cpio.{}", std::process::id()));
    std::fs::write(&partial, &bytes)
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|e| DriverError::file("cannot write ", path.display(), e))?;
    Ok(bytes)
}

/// `text` as one shell word.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The archive of one start: `crucible/conf`, the settings both stages read.
pub fn start_archive(conf: &str) -> Vec<u8> {
    let mut archive = Archive::default();
    archive.dir("crucible");
    archive.file("crucible/conf", false, conf.as_bytes());
    archive.finish()
}

/// Removes the start archives in `dir` older than a minute: QEMU reads its own when it
/// starts.
pub fn forget_old_starts(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 60);
        let name = entry.file_name();
        if old && name.to_string_lossy().starts_with("start-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_is_newc_with_its_trailer() {
        let mut a = Archive::default();
        a.file("init", true, b"#!/bin/sh\n");
        let bytes = a.finish();
        assert!(bytes.starts_with(b"070701"));
        assert_eq!(bytes.len() % 512, 0);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("init\0") && text.contains("TRAILER!!!"));
        // The mode of an executable file, in the header's second field.
        assert_eq!(&bytes[14..22], b"000081ed");
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(quote("it's"), "'it'\\''s'");
    }
}
