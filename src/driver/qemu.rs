//! The `qemu` driver: each start of a program is a microVM of its own
//! (`qemu-system-x86_64`: the `microvm` machine with KVM when guests boot with it here,
//! else a `q35` machine with TCG). The guest boots the host's kernel (or the configured one) with
//! an initramfs made here (see [`boot`]) and runs on the host's root folder shared
//! read-only over 9p, so the agent's program runs unchanged; the session's worktree (and
//! the repository's git folder, and the user's `--mount`s) are shared at the same paths,
//! `/tmp`, `/run` and `$HOME` are fresh tmpfs folders, and nothing else of the host is
//! writable. The program's stdio is QEMU's, carried over a virtio serial port; the
//! variables travel on that port ahead of the conversation (the daemon writes them as the
//! environment's preamble), never on a command line or a disk. The agent socket is reached
//! through QEMU's user network: its only route (`restrict=on` unless the session asks for
//! the network) is a forward, per connection, to `socat` on the host, with `socat` in the
//! guest listening at `/run/crucible/agent.sock`. The guest powers off when its program
//! ends; `close` ends a QEMU still running.

mod boot;
mod control;
mod ending;
mod host;

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU32, Ordering};

use futures::future::BoxFuture;
use tokio::process::Command;

use super::error::DriverError;
use super::exit::Exit;
use super::path;
use super::place::{Place, Setup, Start};
use crate::protocol::{Network, QemuOptions, Resources, env};
pub use host::{Host, QEMU, host};

/// Where the agent socket is inside.
pub const SOCKET_INSIDE: &str = "/run/crucible/agent.sock";
/// The guest's memory and vCPUs when the session does not say.
const DEFAULT_MEMORY_MB: u64 = 1024;
const DEFAULT_CPUS: u32 = 1;
/// The longest path a Unix socket's address holds.
const SOCKET_PATH_MAX: usize = 108;
/// Where the guest's forwarder connects (QEMU's user network hands it to the host).
const FORWARD: &str = "tcp:10.0.2.100:7000";

/// A host folder shown inside at the same path.
#[derive(Debug, Clone)]
struct Share {
    path: PathBuf,
    inside: String,
    read_only: bool,
}

/// A session's microVM, as each start makes it.
struct Vm {
    session_id: String,
    host: Host,
    kernel: PathBuf,
    /// The cached base archive (see [`boot::base_archive`]).
    base: PathBuf,
    /// The session's folder in the kiln's state: the starts' archives, QEMU's pid.
    dir: PathBuf,
    shares: Vec<Share>,
    /// Host folders under the tmpfs ones that stay visible (read-only): the program's
    /// install and `cru`'s folder.
    keeps: Vec<PathBuf>,
    home_inside: PathBuf,
    uid: u32,
    gid: u32,
    path_inside: String,
    network: Network,
    memory: u64,
    cpus: u32,
    /// The most processes the agent's tree may have (a pids cgroup in the guest).
    pids: Option<u64>,
    socket: PathBuf,
    socat: Option<PathBuf>,
    cru: Option<PathBuf>,
    starts: AtomicU32,
    control: std::sync::Arc<control::Control>,
}

/// Checks that QEMU, a kernel and busybox are here, and returns the kernel; the error
/// names the package.
pub fn check() -> Result<PathBuf, DriverError> {
    crate::sys::on_path(QEMU).ok_or_else(|| {
        DriverError::Unavailable(format!(
            "the qemu driver needs {QEMU}, which is not installed: install the `qemu-system-x86` package"
        ))
    })?;
    let kernel = boot::host_kernel().ok_or_else(no_kernel)?;
    boot::busybox().ok_or_else(|| {
        DriverError::Unavailable(
            "the qemu driver needs a static busybox: install the `busybox-static` package".into(),
        )
    })?;
    Ok(kernel)
}

fn no_kernel() -> DriverError {
    DriverError::Unavailable(
        "the qemu driver needs a kernel in /boot (install `linux-image-amd64`) or the `kernel` option".into(),
    )
}

/// Finds the kernel and makes (or finds cached) the base archive and the session's
/// folder.
pub(super) async fn provision(
    options: &QemuOptions,
    setup: Setup<'_>,
    search: Option<&OsStr>,
) -> Result<Box<dyn Place>, DriverError> {
    let kernel = match &options.kernel {
        Some(k) => PathBuf::from(k),
        None => boot::host_kernel().ok_or_else(no_kernel)?,
    };
    let version = boot::kernel_version(&kernel).ok_or_else(|| {
        DriverError::Setup(format!(
            "cannot read {} as a kernel image (is it readable by you?)",
            kernel.display()
        ))
    })?;
    let cache = setup.kiln.state_dir().join("qemu");
    let dir = cache.join(setup.session_id);
    super::place::private_folder(&dir)?;
    let (probed, at) = (kernel.clone(), cache.clone());
    let host = tokio::task::spawn_blocking(move || host(&probed, Some(&at)))
        .await
        .map_err(|e| DriverError::Check(std::sync::Arc::new(e)))??;
    let base = boot::base_path(&cache, &version);
    let made = cache.clone();
    tokio::task::spawn_blocking(move || boot::base_archive(&made, &version).map(|_| ()))
        .await
        .map_err(|e| DriverError::Check(std::sync::Arc::new(e)))??;
    let cwd = super::place::real_cwd(setup.cwd)?;
    let git_dir = crate::git::common_dir(&cwd)
        .await
        .filter(|g| !g.starts_with(&cwd));
    let mut shares = vec![Share {
        inside: cwd.display().to_string(),
        path: cwd.clone(),
        read_only: false,
    }];
    shares.extend(git_dir.map(|g| Share {
        inside: g.display().to_string(),
        path: g,
        read_only: false,
    }));
    for mount in &options.confinement.mounts {
        let path = std::fs::canonicalize(&mount.source)
            .map_err(|e| DriverError::file("cannot mount ", &mount.source, e))?;
        shares.push(Share {
            inside: mount.inside().to_string(),
            path,
            read_only: mount.read_only,
        });
    }
    let home_inside = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
        .unwrap_or_else(|| PathBuf::from("/root"));
    let cru = std::env::current_exe().ok();
    let mut keeps: Vec<PathBuf> = setup
        .program
        .and_then(|p| path::resolve_in(p, search))
        .map(|p| super::sandbox::install_folders(&p, search))
        .unwrap_or_default();
    keeps.extend(cru.as_deref().and_then(Path::parent).map(Path::to_path_buf));
    let hidden = [Path::new("/tmp"), Path::new("/run"), home_inside.as_path()];
    keeps.retain(|k| hidden.iter().any(|h| k.starts_with(h)));
    let owner =
        std::fs::metadata(&cwd).map_err(|e| DriverError::file("cannot use ", cwd.display(), e))?;
    let bin = cru
        .as_deref()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/usr/bin"));
    let path_inside = path::ahead(
        bin,
        Some(search.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"))),
    );
    let spec = &options.confinement;
    Ok(Box::new(Vm {
        session_id: setup.session_id.to_string(),
        host,
        kernel,
        base,
        dir,
        shares,
        keeps,
        home_inside,
        uid: crate::sys::current_uid(),
        gid: owner.gid(),
        path_inside: path_inside.to_string_lossy().into_owned(),
        network: spec.network,
        memory: spec.memory.unwrap_or(DEFAULT_MEMORY_MB),
        cpus: spec.cpus.unwrap_or(DEFAULT_CPUS),
        pids: spec.pids,
        socket: setup.kiln.agent_socket_path(),
        socat: crate::sys::on_path("socat"),
        cru,
        starts: AtomicU32::new(0),
        control: Default::default(),
    }))
}

/// `text` as a value inside one of QEMU's `a=b,c=d` options.
fn opt(text: &str) -> String {
    text.replace(',', ",,")
}

impl Vm {
    /// The settings both stages of the guest's init read, for starting `program args`
    /// in `cwd`.
    fn conf(&self, program: &Path, args: &[String], cwd: &Path) -> String {
        let q = |s: &str| boot::quote(s);
        let mut c = String::new();
        c.push_str(&format!(
            "HOME_IN={}\n",
            q(&self.home_inside.to_string_lossy())
        ));
        c.push_str(&format!("UID_IN={}\nGID_IN={}\n", self.uid, self.gid));
        c.push_str(&format!("PATH_IN={}\n", q(&self.path_inside)));
        c.push_str(&format!("NET={}\n", self.network.as_str()));
        let pids = self.pids.map(|n| n.to_string()).unwrap_or_default();
        c.push_str(&format!("PIDS={pids}\n"));
        let socat = self
            .socat
            .as_deref()
            .map(|s| s.to_string_lossy().into_owned());
        c.push_str(&format!("SOCAT={}\n", q(&socat.unwrap_or_default())));
        c.push_str(&format!("CWD={}\n", q(&cwd.to_string_lossy())));
        c.push_str("keeps() {\n:\n");
        for keep in &self.keeps {
            c.push_str(&format!("keep {}\n", q(&keep.to_string_lossy())));
        }
        c.push_str("}\nshares() {\n:\n");
        for (i, share) in self.shares.iter().enumerate() {
            let mode = if share.read_only { "ro" } else { "rw" };
            c.push_str(&format!("share s{i} {} {mode}\n", q(&share.inside)));
        }
        c.push_str("}\nset --");
        for word in std::iter::once(program.to_string_lossy()).chain(args.iter().map(|a| a.into()))
        {
            c.push(' ');
            c.push_str(&q(&word));
        }
        c.push('\n');
        c
    }

    /// Writes the start's initramfs (the base, then the start's settings) and
    /// returns its path; archives of earlier starts QEMU has read are removed.
    fn initramfs(&self, conf: &str, n: u32) -> Result<PathBuf, DriverError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|e| DriverError::file("cannot read ", p.display(), e))
        };
        let mut bytes = read(&self.base)?;
        bytes.extend(boot::start_archive(conf));
        boot::forget_old_starts(&self.dir);
        let path = self
            .dir
            .join(format!("start-{}-{n}.img", std::process::id()));
        crate::sys::write_private(&path, &bytes)
            .map_err(|e| DriverError::file("cannot write ", path.display(), e))?;
        Ok(path)
    }

    /// QEMU's arguments for one start.
    fn arguments(&self, initramfs: &Path, n: u32) -> Vec<String> {
        let h = &self.host;
        let mut a: Vec<String> = Vec::new();
        let mut add = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
        add(&["-name", &format!("crucible-{}", self.session_id)]);
        add(&["-machine", h.machine, "-accel", h.accel]);
        add(&["-cpu", if h.accel == "kvm" { "host" } else { "max" }]);
        add(&[
            "-m",
            &self.memory.to_string(),
            "-smp",
            &self.cpus.to_string(),
        ]);
        add(&[
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ]);
        add(&["-kernel", &self.kernel.to_string_lossy()]);
        add(&["-initrd", &initramfs.to_string_lossy()]);
        add(&["-append", "console=ttyS0 quiet loglevel=3 panic=-1"]);
        // The console (the kernel's and the program's stderr) is QEMU's stderr.
        add(&[
            "-chardev",
            "file,id=con,path=/proc/self/fd/2,append=on",
            "-serial",
            "chardev:con",
        ]);
        add(&[
            "-chardev",
            "stdio,id=io,signal=off",
            "-device",
            &h.device("virtio-serial"),
        ]);
        add(&["-device", "virtserialport,chardev=io,name=crucible.io"]);
        if let Some(control) = self.control_socket(n) {
            let path = opt(&control.to_string_lossy());
            add(&[
                "-chardev",
                &format!("socket,id=ctl,path={path},server=on,wait=off"),
            ]);
            add(&["-device", "virtserialport,chardev=ctl,name=crucible.ctl"]);
        }
        // How the guest says how its program ended: QEMU exits with what it writes.
        add(&["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
        let pidfile = self
            .dir
            .join(format!("qemu-{}-{n}.pid", std::process::id()));
        add(&["-pidfile", &pidfile.to_string_lossy()]);
        let roots = std::iter::once(("root".to_string(), "/".to_string(), true));
        let shares = self.shares.iter().enumerate().map(|(i, s)| {
            (
                format!("s{i}"),
                s.path.to_string_lossy().into_owned(),
                s.read_only,
            )
        });
        for (tag, path, read_only) in roots.chain(shares) {
            let ro = if read_only { ",readonly=on" } else { "" };
            add(&[
                "-fsdev",
                &format!(
                    "local,id={tag},path={},security_model=none,multidevs=remap{ro}",
                    opt(&path)
                ),
            ]);
            add(&[
                "-device",
                &format!("{},fsdev={tag},mount_tag={tag}", h.device("virtio-9p")),
            ]);
        }
        let restrict = if self.network == Network::Host {
            "off"
        } else {
            "on"
        };
        let mut netdev = format!("user,id=net,restrict={restrict}");
        if let Some(socat) = &self.socat {
            let cmd = format!(
                "{} STDIO UNIX-CONNECT:{}",
                boot::quote(&socat.to_string_lossy()),
                boot::quote(&self.socket.to_string_lossy())
            );
            netdev.push_str(&format!(",guestfwd={FORWARD}-cmd:{}", opt(&cmd)));
        }
        add(&[
            "-netdev",
            &netdev,
            "-device",
            &format!("{},netdev=net", h.device("virtio-net")),
        ]);
        a
    }

    /// The control port's socket for start `n`, where its path fits a socket's.
    fn control_socket(&self, n: u32) -> Option<PathBuf> {
        let path = self.dir.join(format!("c{n}.sock"));
        (path.as_os_str().len() < SOCKET_PATH_MAX).then_some(path)
    }

    /// Ends the session's QEMUs that still run (a restarted daemon's too).
    async fn end(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let pidfiles = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pid"));
        for pidfile in pidfiles.collect::<Vec<_>>() {
            let pid = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok());
            if let Some(pid) = pid {
                self.end_one(pid).await;
            }
            let _ = std::fs::remove_file(pidfile);
        }
    }

    async fn end_one(&self, pid: u32) {
        if crate::sys::process_has_env(pid, env::SESSION, &self.session_id) {
            let _ = crate::sys::terminate(pid);
            for _ in 0..50 {
                if !crate::sys::pid_alive(pid) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            crate::sys::signal_group(pid, libc::SIGKILL);
        }
    }
}

impl Place for Vm {
    fn command(&self, start: Start<'_>) -> Result<Command, DriverError> {
        // Inside, a bare name would be looked up on another PATH.
        let resolved = match start.program.to_str() {
            Some(name) if !name.contains('/') => path::resolve_in(name, start.search),
            _ => None,
        };
        let program = resolved.as_deref().unwrap_or(start.program);
        let conf = self.conf(program, start.args, start.cwd);
        let n = self.starts.fetch_add(1, Ordering::Relaxed);
        let initramfs = self.initramfs(&conf, n)?;
        if let Some(path) = self.control_socket(n) {
            let _ = std::fs::remove_file(&path);
            self.control.started(&path);
            let control = std::sync::Arc::clone(&self.control);
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { control.connect().await });
            }
        }
        let mut command = Command::new(QEMU);
        command
            .args(self.arguments(&initramfs, n))
            .current_dir(&self.dir)
            .env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command.envs(super::place::session_marker(start.vars));
        Ok(command)
    }

    fn cru_program(&self) -> Option<PathBuf> {
        self.cru.clone()
    }

    fn limits(&self) -> Vec<String> {
        let mut out = vec![
            format!("memory {} MiB (the guest's RAM, qemu -m)", self.memory),
            format!("cpus {} (vCPUs, qemu -smp)", self.cpus),
            format!("machine {}, accel {}", self.host.machine, self.host.accel),
        ];
        if let Some(n) = self.pids {
            out.push(format!("pids {n} (a pids cgroup in the guest)"));
        }
        if self.socat.is_none() {
            out.push("no agent socket inside (socat is not installed)".into());
        }
        out
    }

    fn socket_inside(&self) -> Option<String> {
        Some(SOCKET_INSIDE.to_string())
    }

    fn preamble(&self, all: &[(String, String)]) -> Option<Vec<u8>> {
        Some(super::ssh::Remote::preamble(all))
    }

    fn measure(&self) -> Option<BoxFuture<'_, Option<Resources>>> {
        Some(Box::pin(self.control.measure()))
    }

    fn oom_kills(&self) -> Option<u64> {
        Some(self.control.oom_kills())
    }

    fn look_for_oom(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {
            let _ = self.control.measure().await;
        })
    }

    fn exit(&self, status: ExitStatus) -> Option<Exit> {
        Some(ending::guest_exit(status, self.memory))
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.end())
    }
}
