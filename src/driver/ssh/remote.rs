//! One session's place on a remote machine, reached with the system `ssh` over one
//! shared connection: scripts run there, files read and written there, and the
//! session's branch mirrored between the worktree here and its worktree there.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::driver::error::DriverError;

/// The ssh command line to use instead of `ssh`.
pub const SSH_ENV: &str = "CRU_SSH";

/// One session's place on a remote machine.
#[derive(Debug, Clone)]
pub struct Remote {
    pub host: String,
    /// The repository clone there.
    pub repo: String,
    /// The session's worktree there.
    pub worktree: String,
    /// Where the agent socket is forwarded to there.
    pub socket: String,
    /// The agent socket here.
    local_socket: PathBuf,
    /// The ssh program and its own arguments.
    ssh: Vec<String>,
    /// The connection-sharing socket here (one connection for every call).
    control: PathBuf,
}

/// Quotes `text` for a POSIX shell.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl Remote {
    pub fn new(
        host: &str,
        repo: &str,
        session_id: &str,
        state_dir: &Path,
        local_socket: &Path,
    ) -> Remote {
        let ssh = std::env::var(SSH_ENV)
            .ok()
            .map(|c| c.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| vec!["ssh".to_string()]);
        let repo = repo.trim_end_matches('/').to_string();
        Remote {
            host: host.to_string(),
            worktree: format!("{repo}/.crucible/worktrees/{session_id}"),
            socket: format!("/tmp/crucible-{}.sock", short(session_id)),
            repo,
            local_socket: local_socket.to_path_buf(),
            ssh,
            control: state_dir
                .join("ssh")
                .join(format!("{}.sock", short(session_id))),
        }
    }

    /// `ssh` with the shared connection and no prompts (a question nobody can answer
    /// would hang the daemon).
    fn ssh_args(&self) -> Vec<String> {
        let mut args = self.ssh[1..].to_vec();
        args.extend([
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "ControlMaster=auto".into(),
            "-o".into(),
            format!("ControlPath={}", self.control.display()),
            "-o".into(),
            "ControlPersist=60".into(),
        ]);
        args
    }

    fn base(&self) -> Command {
        let mut command = Command::new(&self.ssh[0]);
        command.args(self.ssh_args());
        command
    }

    /// Runs `script` with the remote user's shell; its stdout, or the error with stderr.
    pub async fn run(&self, script: &str, input: Option<&[u8]>) -> Result<String, DriverError> {
        let mut command = self.base();
        command
            .arg("-T")
            .arg(&self.host)
            .arg(script)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| DriverError::program(&self.ssh[0], e))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(input).await.map_err(|e| self.lost(e))?;
        }
        let out = child.wait_with_output().await.map_err(|e| self.lost(e))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(DriverError::Remote {
                host: self.host.clone(),
                ended: describe(out.status.code()),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// Makes the session's worktree there: the branch is pushed if the clone lacks it
    /// (never over work already there), then checked out in a worktree of its own.
    pub async fn provision(&self, local_worktree: &Path) -> Result<(), DriverError> {
        if let Some(parent) = self.control.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| DriverError::file("", parent.display(), e))?;
        }
        let branch = git_out(local_worktree, &["rev-parse", "--abbrev-ref", "HEAD"]).await?;
        if branch == "HEAD" {
            return Err(DriverError::Setup(
                "the ssh driver needs the session on a branch".into(),
            ));
        }
        let repo = quote(&self.repo);
        let check = format!(
            "git -C {repo} rev-parse --is-inside-work-tree >/dev/null && \
             (git -C {repo} rev-parse -q --verify {} >/dev/null && echo present || echo absent)",
            quote(&format!("refs/heads/{branch}"))
        );
        let found = self
            .run(&check, None)
            .await
            .map_err(|e| DriverError::NoRepository {
                repo: self.repo.clone(),
                host: self.host.clone(),
                source: Box::new(e),
            })?;
        if found.trim() == "absent" {
            let refspec = format!("HEAD:refs/heads/{branch}");
            self.git_with_remote(local_worktree, "push", &refspec)
                .await?;
        }
        let worktree = quote(&self.worktree);
        let make = format!(
            "mkdir -p {repo}/.crucible && printf '*\\n' > {repo}/.crucible/.gitignore && \
             if [ ! -d {worktree} ]; then git -C {repo} worktree add -q {worktree} {}; fi",
            quote(&branch)
        );
        self.run(&make, None).await?;
        Ok(())
    }

    /// `git -C local_worktree <verb> -q <host>:<repo> <refspec>` over this connection.
    async fn git_with_remote(
        &self,
        local_worktree: &Path,
        verb: &str,
        refspec: &str,
    ) -> Result<(), DriverError> {
        let ssh_command = std::iter::once(self.ssh[0].clone())
            .chain(self.ssh_args())
            .map(|a| quote(&a))
            .collect::<Vec<_>>()
            .join(" ");
        let url = format!("{}:{}", self.host, self.repo);
        let out = Command::new("git")
            .arg("-C")
            .arg(local_worktree)
            .args([verb, "-q", &url, refspec])
            .env("GIT_SSH_COMMAND", ssh_command)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| DriverError::program("git", e))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(DriverError::Git {
                command: format!("{verb} {url} {refspec}"),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// Commits everything in the session's worktree there (new files included), as the
    /// repository there is configured to sign commits; nothing to commit is not an error.
    /// Where git there has no identity, the commit is crucible's (as for local commits).
    pub async fn commit(&self, message: &str) -> Result<(), DriverError> {
        let script = format!(
            "cd {} && git add -A && \
             {{ git config user.name >/dev/null || export GIT_AUTHOR_NAME=crucible GIT_COMMITTER_NAME=crucible; }} && \
             {{ git config user.email >/dev/null || export GIT_AUTHOR_EMAIL=crucible@localhost GIT_COMMITTER_EMAIL=crucible@localhost; }} && \
             {{ git diff --cached --quiet || git commit -q -m {}; }}",
            quote(&self.worktree),
            quote(message)
        );
        self.run(&script, None).await.map(|_| ())
    }

    /// Brings the work there back here. The remote worktree is recorded, uncommitted
    /// changes and new files included, as a commit on `refs/crucible/ssh/<session>`
    /// (through a scratch index: the agent's own index is untouched); that ref is
    /// fetched, the local branch is moved to the remote branch's commit, and the local
    /// worktree, a mirror of the remote one, takes the recorded files as uncommitted
    /// changes. Refused when the local branch has commits the remote one lacks.
    pub async fn sync_back(
        &self,
        session_id: &str,
        local_worktree: &Path,
    ) -> Result<(), DriverError> {
        let snapshot = format!("refs/crucible/ssh/{session_id}");
        let script = format!(
            "cd {wt} && gd=$(git rev-parse --absolute-git-dir) && head=$(git rev-parse HEAD) && \
             GIT_INDEX_FILE=\"$gd/crucible-sync.index\" && export GIT_INDEX_FILE && \
             rm -f \"$GIT_INDEX_FILE\" && git read-tree HEAD && git add -A && \
             tree=$(git write-tree) && rm -f \"$GIT_INDEX_FILE\" && unset GIT_INDEX_FILE && \
             snap=$(GIT_AUTHOR_NAME=crucible GIT_AUTHOR_EMAIL=crucible@localhost \
               GIT_COMMITTER_NAME=crucible GIT_COMMITTER_EMAIL=crucible@localhost \
               git commit-tree \"$tree\" -p \"$head\" -m 'crucible: the worktree as it is') && \
             git update-ref {snapshot} \"$snap\" && echo \"$head\"",
            wt = quote(&self.worktree),
            snapshot = quote(&snapshot),
        );
        let head = self.run(&script, None).await?.trim().to_string();
        if head.len() < 40 || !head.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(DriverError::Setup(format!(
                "on {}: the remote worktree's HEAD is not a commit ({head})",
                self.host
            )));
        }
        self.git_with_remote(local_worktree, "fetch", &format!("+{snapshot}:{snapshot}"))
            .await?;
        let local_head = git_out(local_worktree, &["rev-parse", "HEAD"]).await?;
        if local_head != head
            && git_out(
                local_worktree,
                &["merge-base", "--is-ancestor", &local_head, &head],
            )
            .await
            .is_err()
        {
            return Err(DriverError::Setup(format!(
                "the session's branch here has commits its worktree on {} lacks; push them there first",
                self.host
            )));
        }
        git_out(local_worktree, &["reset", "-q", "--hard", &head]).await?;
        git_out(local_worktree, &["clean", "-fdq"]).await?;
        git_out(local_worktree, &["read-tree", "-u", "--reset", &snapshot]).await?;
        git_out(local_worktree, &["reset", "-q"]).await?;
        Ok(())
    }

    /// `program args` there, in the session's worktree. With `forward`, the agent socket
    /// is forwarded and the program first reads `NAME=value` lines from stdin up to an
    /// empty one (see [`Remote::preamble`]).
    pub fn command(&self, program: &Path, args: &[String], cwd: &str, forward: bool) -> Command {
        let mut script = format!("cd {} && ", quote(cwd));
        if forward {
            script.push_str(
                "while IFS= read -r crucible_var && [ -n \"$crucible_var\" ]; do export \"$crucible_var\"; done && ",
            );
        }
        script.push_str("exec ");
        script.push_str(&quote(&program.to_string_lossy()));
        for arg in args {
            script.push(' ');
            script.push_str(&quote(arg));
        }
        let mut command = self.base();
        command.arg("-T");
        if forward {
            command.args([
                "-o".to_string(),
                "StreamLocalBindUnlink=yes".to_string(),
                "-R".to_string(),
                format!("{}:{}", self.socket, self.local_socket.display()),
            ]);
        }
        command.arg(&self.host).arg(script);
        command
    }

    /// The variables, as the program's first stdin lines. A value with a line break
    /// cannot be passed this way and is left out (named in the daemon's log).
    pub fn preamble(vars: &[(String, String)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, value) in vars {
            if value.contains('\n') || value.contains('\r') {
                tracing::warn!(variable = %name, "not passed over ssh: its value has a line break");
                continue;
            }
            out.extend_from_slice(format!("{name}={value}\n").as_bytes());
        }
        out.push(b'\n');
        out
    }

    /// Reads a file there.
    pub async fn read(&self, path: &str) -> Result<String, DriverError> {
        self.run(&format!("cat -- {}", quote(path)), None).await
    }

    /// Writes a file there, making its folder.
    pub async fn write(&self, path: &str, content: &str) -> Result<(), DriverError> {
        let parent = Path::new(path)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| "/".into());
        let script = format!("mkdir -p -- {} && cat > {}", quote(&parent), quote(path));
        self.run(&script, Some(content.as_bytes()))
            .await
            .map(|_| ())
    }

    /// The shared connection failed while in use.
    fn lost(&self, e: std::io::Error) -> DriverError {
        DriverError::Ssh {
            host: self.host.clone(),
            source: std::sync::Arc::new(e),
        }
    }

    /// What an exit of the ssh client means, where it is not the remote program's.
    pub fn explain(&self, code: Option<i32>) -> Option<crate::driver::Exit> {
        (code == Some(255)).then(|| crate::driver::Exit {
            status: format!("the ssh connection to {} was lost", self.host),
            code,
        })
    }

    /// Closes the shared connection.
    pub async fn close(&self) {
        let _ = self
            .base()
            .args(["-O", "exit", &self.host])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
}

fn short(session_id: &str) -> String {
    session_id
        .chars()
        .rev()
        .take(10)
        .collect::<String>()
        .chars()
        .rev()
        .collect::<String>()
        .to_lowercase()
}

fn describe(code: Option<i32>) -> String {
    match code {
        Some(255) => "ssh could not connect or lost the connection".into(),
        Some(code) => format!("exit {code}"),
        None => "killed".into(),
    }
}

async fn git_out(dir: &Path, args: &[&str]) -> Result<String, DriverError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| DriverError::program("git", e))?;
    if !out.status.success() {
        return Err(DriverError::Git {
            command: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_any_text() {
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote("a 'b' $HOME `x` \"c\"")))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a 'b' $HOME `x` \"c\""
        );
    }

    #[test]
    fn the_preamble_carries_values_off_the_command_line() {
        let vars = vec![
            ("A".to_string(), "one two".to_string()),
            ("B".to_string(), "bad\nvalue".to_string()),
        ];
        assert_eq!(Remote::preamble(&vars), b"A=one two\n\n");
        let remote = Remote::new(
            "h",
            "/r",
            "01ABCDEFGHJK",
            Path::new("/s"),
            Path::new("/k/a.sock"),
        );
        let command = remote.command(Path::new("agent"), &["--x".into()], "/r/w", true);
        let line = format!("{:?}", command.as_std());
        assert!(line.contains("-R") && line.contains("/k/a.sock"), "{line}");
        assert!(
            !line.contains("one two"),
            "values never on the command line: {line}"
        );
    }
}
