//! `cru daemon logs [-f] [-n N]` and `cru hub logs`: the last lines of the kiln daemon's
//! (or the hub's) log file and, with `--follow`, every line written after them, through
//! the file being set aside at its size cap, until interrupted.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::output::out;

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Keep printing lines as they are written (Ctrl-C stops).
    #[arg(short, long)]
    follow: bool,
    /// How many of the last lines to print first.
    #[arg(short = 'n', long, default_value_t = 50, value_name = "N")]
    lines: usize,
}

/// How often a followed log is looked at.
const FOLLOW_STEP: Duration = Duration::from_millis(200);

/// The last `n` lines of `text`, each with its newline.
fn last_lines(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.rmatch_indices('\n').nth(n - 1) {
        Some((at, _)) => &text[at + 1..],
        None => text,
    }
}

/// Prints the log at `path` as `args` ask; `whose` names its writer in a message when there
/// is no log yet.
pub async fn run(path: &Path, whose: &str, args: LogsArgs) -> anyhow::Result<ExitCode> {
    let mut shown = 0;
    let mut inode = None;
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            out!("{}", last_lines(&text, args.lines));
            shown = bytes.len() as u64;
            inode = std::fs::metadata(path).ok().map(|m| m.ino());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !args.follow {
                eprintln!(
                    "no log yet at {}: {whose} writes it once it has run",
                    path.display()
                );
                return Ok(ExitCode::from(1));
            }
        }
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    }
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        tokio::time::sleep(FOLLOW_STEP).await;
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        // Set aside at its cap (a new file), or cut: read the new one from its start.
        if inode != Some(meta.ino()) || meta.len() < shown {
            inode = Some(meta.ino());
            shown = 0;
        }
        if meta.len() == shown {
            continue;
        }
        let mut file = std::fs::File::open(path)?;
        file.seek(SeekFrom::Start(shown))?;
        let mut fresh = Vec::new();
        file.read_to_end(&mut fresh)?;
        // Whole lines only: a line being written is printed once it ends.
        let whole = fresh
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        out!("{}", String::from_utf8_lossy(&fresh[..whole]));
        shown += whole as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn the_last_lines_are_whole_lines_from_the_end() {
        let log = "one\ntwo\nthree\n";
        assert_eq!(last_lines(log, 2), "two\nthree\n");
        assert_eq!(last_lines(log, 3), log);
        assert_eq!(last_lines(log, 10), log);
        assert_eq!(last_lines(log, 0), "");
        assert_eq!(last_lines("a\nb", 1), "b");
    }
}
