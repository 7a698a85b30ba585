//! A pseudo-terminal for the real workbench, and enough of a terminal to read its screen
//! (ratatui writes only the cells that change, with cursor moves between them, so the
//! screen is rebuilt from the output). The footprint and scale benchmarks start `cru` in
//! it.

use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use anyhow::{Context, Result};

/// The controlling side of a pseudo-terminal.
pub struct Pty {
    master: OwnedFd,
}

impl Pty {
    /// Makes `terminal` (the side [`Pty::open`] gave) the standard input, output and
    /// error of `command`, and its controlling terminal in a session of its own.
    pub fn give(command: &mut std::process::Command, terminal: &OwnedFd) -> Result<()> {
        use std::os::unix::process::CommandExt as _;
        let stdio = || -> Result<std::process::Stdio> { Ok(terminal.try_clone()?.into()) };
        command.stdin(stdio()?).stdout(stdio()?).stderr(stdio()?);
        // SAFETY: only async-signal-safe calls (setsid, ioctl) between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }

    /// A pseudo-terminal of this size, and its terminal side (for the child).
    pub fn open(cols: u16, rows: u16) -> Result<(Self, OwnedFd)> {
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes two descriptors into the integers given; the name,
        // termios and window size may be null.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("openpty");
        }
        // SAFETY: openpty succeeded, so both are open descriptors that we now own.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        for fd in [&master, &slave] {
            // SAFETY: a plain fcntl on a descriptor we own.
            unsafe {
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads a winsize from the pointer given.
        if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) } != 0 {
            return Err(std::io::Error::last_os_error()).context("setting the window size");
        }
        Ok((Self { master }, slave))
    }

    /// What the child wrote, waiting at most `limit`; `None` if nothing came.
    pub fn read(&self, limit: Duration) -> Result<Option<Vec<u8>>> {
        let mut poll = libc::pollfd {
            fd: self.master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout = i32::try_from(limit.as_millis().max(1)).unwrap_or(i32::MAX);
        // SAFETY: one pollfd, valid for the call.
        let ready = unsafe { libc::poll(&mut poll, 1, timeout) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(None);
            }
            return Err(e).context("poll on the pty");
        }
        if ready == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; 64 * 1024];
        // SAFETY: reads into a buffer of the length given.
        let n = unsafe { libc::read(self.master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            // EIO: the child closed its side (it exited).
            std::thread::sleep(limit.min(Duration::from_millis(20)));
            return Ok(None);
        }
        buf.truncate(n as usize);
        Ok(Some(buf))
    }

    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        let mut master = std::fs::File::from(self.master.try_clone()?);
        master.write_all(bytes).context("writing to the pty")
    }

    /// Quits the workbench `tui` running on this terminal with ctrl-q and waits for it to
    /// exit successfully (at most [`EXIT_TIMEOUT`]), reading what it still writes.
    pub fn quit(&self, tui: &mut std::process::Child) -> Result<()> {
        self.write(QUIT_KEY)?;
        let deadline = std::time::Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = tui.try_wait()? {
                anyhow::ensure!(status.success(), "the workbench exited with {status}");
                return Ok(());
            }
            anyhow::ensure!(
                std::time::Instant::now() <= deadline,
                "the workbench did not quit within {EXIT_TIMEOUT:?} of ctrl-q"
            );
            // Keep reading, so its last writes never wait on a full terminal.
            let _ = self.read(Duration::from_millis(20))?;
        }
    }
}

/// Ctrl-q, the workbench's quit key.
const QUIT_KEY: &[u8] = b"\x11";
/// How long the workbench may take to exit after ctrl-q.
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// The screen as the output draws it: text at cursor positions. What ratatui's crossterm
/// backend sends is cursor moves (`CSI row;col H`), clears and styles (skipped); every
/// character is taken to be one column wide.
pub struct Screen {
    cells: Vec<Vec<char>>,
    row: usize,
    col: usize,
    /// An escape sequence or character cut off at the end of the last read.
    pending: Vec<u8>,
}

impl Screen {
    pub fn new(cols: u16, rows: u16) -> Self {
        Self {
            cells: vec![vec![' '; usize::from(cols)]; usize::from(rows)],
            row: 0,
            col: 0,
            pending: Vec::new(),
        }
    }

    pub fn shows(&self, text: &str) -> bool {
        self.cells
            .iter()
            .any(|row| row.iter().collect::<String>().contains(text))
    }

    pub fn text(&self) -> String {
        self.cells
            .iter()
            .map(|row| row.iter().collect::<String>().trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        let mut input = std::mem::take(&mut self.pending);
        input.extend_from_slice(bytes);
        let mut at = 0;
        while at < input.len() {
            match self.step(&input[at..]) {
                Some(used) => at += used,
                None => {
                    self.pending = input[at..].to_vec();
                    return;
                }
            }
        }
    }

    /// Applies the sequence or character at the start of `input`; how many bytes it
    /// used, or `None` if it is cut off.
    fn step(&mut self, input: &[u8]) -> Option<usize> {
        let (rows, cols) = (self.cells.len(), self.cells[0].len());
        match input[0] {
            0x1b => match *input.get(1)? {
                b'[' => {
                    let end = 2 + input[2..].iter().position(|b| (0x40..=0x7e).contains(b))?;
                    let text = std::str::from_utf8(&input[2..end]).unwrap_or("");
                    if !text.starts_with('?') {
                        let mut args = text.split(';').map(|p| p.parse().unwrap_or(0usize));
                        let (a, b) = (args.next().unwrap_or(0), args.next().unwrap_or(0));
                        self.csi(input[end], a, b);
                    }
                    Some(end + 1)
                }
                // Operating system command: up to BEL or ST.
                b']' => {
                    let rest = &input[2..];
                    let bel = rest.iter().position(|&b| b == 0x07).map(|i| i + 1);
                    let st = rest.windows(2).position(|w| w == b"\x1b\\").map(|i| i + 2);
                    Some(2 + bel.into_iter().chain(st).min()?)
                }
                // Intermediates then a final byte (e.g. ESC ( B).
                _ => Some(2 + input[1..].iter().position(|b| (0x30..=0x7e).contains(b))?),
            },
            b'\r' => {
                self.col = 0;
                Some(1)
            }
            b'\n' => {
                self.row = (self.row + 1).min(rows - 1);
                Some(1)
            }
            b if b < 0x20 || b == 0x7f => Some(1),
            b => {
                let len = match b {
                    0xf0.. => 4,
                    0xe0.. => 3,
                    0xc0.. => 2,
                    _ => 1,
                };
                let c = std::str::from_utf8(input.get(..len)?)
                    .ok()
                    .and_then(|s| s.chars().next())
                    .unwrap_or('\u{fffd}');
                if self.col < cols {
                    self.cells[self.row][self.col] = c;
                }
                self.col += 1;
                Some(len)
            }
        }
    }

    /// Cursor moves and clears; everything else (styles) changes no cell.
    fn csi(&mut self, command: u8, a: usize, b: usize) {
        let (rows, cols) = (self.cells.len(), self.cells[0].len());
        let one = |n: usize| n.max(1);
        match command {
            b'H' | b'f' => {
                self.row = (one(a) - 1).min(rows - 1);
                self.col = (one(b) - 1).min(cols - 1);
            }
            b'G' => self.col = (one(a) - 1).min(cols - 1),
            b'J' => {
                let at = (self.row, self.col);
                for (r, line) in self.cells.iter_mut().enumerate() {
                    for (c, cell) in line.iter_mut().enumerate() {
                        if a >= 2 || ((r, c) >= at) == (a == 0) {
                            *cell = ' ';
                        }
                    }
                }
            }
            b'K' => {
                let col = self.col.min(cols);
                let range = match a {
                    0 => col..cols,
                    1 => 0..(col + 1).min(cols),
                    _ => 0..cols,
                };
                self.cells[self.row][range].fill(' ');
            }
            _ => {}
        }
    }
}
