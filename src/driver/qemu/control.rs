//! The guest's control port: a second virtio serial port, QEMU's end a Unix socket in
//! the session's folder, where the guest answers `measure` with its agent's figures
//! (CPU time, resident memory and processes of the agent's tree) and the guest kernel's
//! OOM kills so far. The daemon connects once a start is made and keeps the connection:
//! the guest's reader blocks while someone is there, and asks are answered only when
//! made (a session list with resources, the memory watch while a turn runs), never by
//! polling.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::Mutex;

use crate::protocol::Resources;

/// How long the guest may take to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// The control port of a session's current start.
#[derive(Default)]
pub struct Control {
    /// The socket QEMU listens on for the current start.
    path: std::sync::Mutex<Option<PathBuf>>,
    /// The connection kept, with the socket it is to: one to an earlier start's is
    /// replaced at the next ask.
    stream: Mutex<Option<(PathBuf, BufReader<UnixStream>)>>,
    /// The guest kernel's OOM kills, as last read.
    oom_kills: AtomicU64,
}

type Kept = Option<(PathBuf, BufReader<UnixStream>)>;

impl Control {
    /// A new start listens at `path`: the next ask connects there.
    pub fn started(&self, path: &Path) {
        if let Ok(mut at) = self.path.lock() {
            *at = Some(path.to_path_buf());
        }
    }

    /// Connects to the current start's port (QEMU makes it as it starts) and keeps the
    /// connection, so the guest's reader waits rather than finds no one there.
    pub async fn connect(&self) {
        let mut kept = self.stream.lock().await;
        self.current(&mut kept).await;
    }

    /// The connection to the current start's port, made when none is kept to it.
    async fn current<'a>(&self, kept: &'a mut Kept) -> Option<&'a mut BufReader<UnixStream>> {
        let path = self.path.lock().ok()?.clone()?;
        if kept.as_ref().is_none_or(|(at, _)| *at != path) {
            *kept = None;
            for _ in 0..100 {
                if let Ok(s) = UnixStream::connect(&path).await {
                    *kept = Some((path, BufReader::new(s)));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        kept.as_mut().map(|(_, stream)| stream)
    }

    /// The guest's figures for its agent, asked now; `None` when the guest does not
    /// answer (not booted yet, or gone).
    pub async fn measure(&self) -> Option<Resources> {
        let mut kept = self.stream.lock().await;
        let stream = self.current(&mut kept).await?;
        let asked = async {
            stream.get_mut().write_all(b"measure\n").await.ok()?;
            let mut line = String::new();
            stream.read_line(&mut line).await.ok()?;
            Some(line)
        };
        let answer = tokio::time::timeout(ANSWER_WITHIN, asked)
            .await
            .ok()
            .flatten();
        let Some(line) = answer.filter(|l| l.ends_with('\n')) else {
            *kept = None;
            return None;
        };
        let (figures, kills) = parse(&line)?;
        self.oom_kills.fetch_max(kills, Ordering::Relaxed);
        figures
    }

    /// The guest kernel's OOM kills as last read.
    pub fn oom_kills(&self) -> u64 {
        self.oom_kills.load(Ordering::Relaxed)
    }
}

/// `cpu_secs rss_bytes processes oom_kills`, as the guest prints them; no figures when
/// no process of the agent's is left.
fn parse(line: &str) -> Option<(Option<Resources>, u64)> {
    let mut words = line.split_whitespace();
    let cpu_secs: f64 = words.next()?.parse().ok()?;
    let rss_bytes: u64 = words.next()?.parse().ok()?;
    let processes: u32 = words.next()?.parse().ok()?;
    let kills: u64 = words.next()?.parse().ok()?;
    let figures = (processes > 0).then_some(Resources {
        cpu_secs,
        rss_bytes,
        processes,
    });
    Some((figures, kills))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_answer_is_read_word_by_word() {
        let (figures, kills) = parse("1.50 4096000 3 2\n").unwrap();
        let figures = figures.unwrap();
        assert_eq!(
            (figures.rss_bytes, figures.processes, kills),
            (4_096_000, 3, 2)
        );
        assert!((figures.cpu_secs - 1.5).abs() < 1e-9);
        assert_eq!(parse("0.00 0 0 0\n").unwrap(), (None, 0));
        assert!(parse("garbage\n").is_none());
    }
}
