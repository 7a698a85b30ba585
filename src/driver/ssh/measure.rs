//! What an ssh session's agent costs the machine it runs on, read from that machine's
//! `/proc` over the session's connection when asked (`session list` with resources),
//! never by polling. The agent is every process there whose working folder is the
//! session's worktree, with all their descendants: the agent starts there (its
//! command `cd`s into the worktree and `exec`s), and what it runs is its children.
//! One round trip: `find` names the processes in the worktree, and one `awk` over
//! every process's `stat` sums the trees (CPU time and resident memory).

use super::remote::{Remote, quote};
use crate::protocol::Resources;

impl Remote {
    /// The agent's CPU time, resident memory and processes there; `None` when nothing
    /// runs in the session's worktree there, or the machine could not be asked.
    pub async fn resources(&self) -> Option<Resources> {
        let script = script(&self.worktree);
        match self.run(&script, None).await {
            Ok(out) => parse(&out),
            Err(e) => {
                tracing::debug!(host = %self.host, "cannot read the agent's figures there: {e}");
                None
            }
        }
    }
}

/// The shell script that prints `cpu_secs rss_bytes processes` for the processes in
/// `worktree` and their descendants (nothing when none is there).
fn script(worktree: &str) -> String {
    format!(
        r#"w=$(cd {worktree} 2>/dev/null && pwd -P) || exit 0
roots=$(find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$w" 2>/dev/null | cut -d/ -f3 | tr '\n' ' ')
[ -n "$roots" ] || exit 0
cat /proc/[0-9]*/stat 2>/dev/null | awk -v roots="$roots" -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" -v page="$(getconf PAGESIZE 2>/dev/null || echo 4096)" '
{{ pid = $1; sub(/^.*\) /, ""); ppid[pid] = $2; cpu[pid] = $12 + $13; rss[pid] = $22 }}
END {{
  n = split(roots, r, " "); for (i = 1; i <= n; i++) if (r[i] in ppid) mine[r[i]] = 1
  more = 1
  while (more) {{ more = 0; for (p in ppid) if (!(p in mine) && (ppid[p] in mine)) {{ mine[p] = 1; more = 1 }} }}
  for (p in mine) {{ t += cpu[p]; k += rss[p]; c++ }}
  if (c > 0) printf "%.2f %d %d\n", t / hz, k * page, c
}}'"#,
        worktree = quote(worktree)
    )
}

/// `cpu_secs rss_bytes processes`, as the script prints them.
fn parse(out: &str) -> Option<Resources> {
    let mut words = out.split_whitespace();
    let cpu_secs = words.next()?.parse().ok()?;
    let rss_bytes = words.next()?.parse().ok()?;
    let processes = words.next()?.parse().ok()?;
    Some(Resources {
        cpu_secs,
        rss_bytes,
        processes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The script, run here by `sh` on a worktree of its own: a process started in it
    /// (and its child) are counted, with their memory; an empty worktree prints nothing.
    #[test]
    fn the_script_counts_the_processes_in_the_worktree_and_their_children() {
        let dir = tempfile::tempdir().unwrap();
        let worktree = dir.path().join("wt");
        std::fs::create_dir(&worktree).unwrap();
        let run = || {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(script(worktree.to_str().unwrap()))
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(run(), "", "nothing runs there");
        let mut agent = std::process::Command::new("sh")
            .arg("-c")
            .arg("sleep 30 & wait")
            .current_dir(&worktree)
            .spawn()
            .unwrap();
        // The child has started once the shell shows it.
        let mut seen = None;
        for _ in 0..50 {
            seen = parse(&run()).filter(|r| r.processes >= 2);
            if seen.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = agent.kill();
        let _ = agent.wait();
        let seen = seen.expect("the shell and its sleep are counted");
        assert_eq!(seen.processes, 2, "{seen:?}");
        assert!(seen.rss_bytes > 100 * 1024, "{seen:?}");
    }

    #[test]
    fn figures_are_read_as_printed_and_nothing_is_none() {
        let r = parse("1.50 1048576 3\n").unwrap();
        assert_eq!((r.cpu_secs, r.rss_bytes, r.processes), (1.5, 1048576, 3));
        assert!(parse("").is_none());
    }
}
