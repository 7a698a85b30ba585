//! A real terminal for end-to-end tests: the real `cru` binary in a detached tmux
//! session of a fixed size, driven with `send-keys` and read with `capture-pane`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// One tmux server of its own (a private socket), so tests never touch the user's tmux
/// and run side by side.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `program args…` in a `width`×`height` window, in `cwd`, with `env` set.
    pub fn start(
        name: &str,
        (width, height): (u16, u16),
        cwd: &Path,
        env: &[(&str, &str)],
        program: &str,
        args: &[&str],
    ) -> Tmux {
        let tmux = Tmux {
            socket: format!("cru-test-{name}-{}", std::process::id()),
        };
        let mut command = vec![
            "new-session".to_string(),
            "-d".into(),
            "-x".into(),
            width.to_string(),
            "-y".into(),
            height.to_string(),
            "-c".into(),
            cwd.display().to_string(),
        ];
        for (key, value) in env {
            command.push("-e".into());
            command.push(format!("{key}={value}"));
        }
        command.push(shell_words(program, args));
        let out = tmux.run(&command.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Keep the pane after the program exits, so its last screen can be read.
        tmux.run(&["set-option", "-g", "remain-on-exit", "on"]);
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux")
    }

    /// Types keys as tmux names them (`Enter`, `M-1`, `C-c`, `Tab`) or literal text.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        let out = self.run(&args);
        assert!(out.status.success(), "send-keys {keys:?}");
    }

    /// Types text literally (no key names).
    pub fn type_text(&self, text: &str) {
        let out = self.run(&["send-keys", "-t", "0", "-l", text]);
        assert!(out.status.success(), "send-keys -l {text:?}");
    }

    /// The pane's text now.
    pub fn screen(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", "0"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen satisfies `check`; fails with the screen if it never does.
    pub fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen is:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the screen shows `text`.
    pub fn wait_text(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?}"), |s| s.contains(text))
    }

    /// Whether the program in the pane has exited.
    pub fn exited(&self) -> bool {
        let out = self.run(&["display-message", "-p", "-t", "0", "#{pane_dead}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Whether the pane shows the alternate screen (a full-screen program is running).
    pub fn alternate_screen(&self) -> bool {
        let out = self.run(&["display-message", "-p", "-t", "0", "#{alternate_on}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Resizes the window, as a terminal emulator would.
    pub fn resize(&self, width: u16, height: u16) {
        let out = self.run(&[
            "resize-window",
            "-t",
            "0",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
        assert!(out.status.success(), "resize-window");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

/// A shell command line that runs `program args…` exactly.
fn shell_words(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().copied())
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}
