//! The daemon under test: a connection that calls the methods of the protocol's table by
//! type, and the daemon's process when the test started it.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crucible::client::{Client, ClientError};
use crucible::kiln::Kiln;
use crucible::protocol::methods::Method;

/// Calls the method `M` of the table on `client` with its typed params and returns its
/// typed result; panics naming the method and the daemon's error when the call fails.
pub async fn call<M: Method>(client: &Client, params: M::Params) -> M::Result {
    match client.call::<M>(&params).await {
        Ok(result) => result,
        Err(e) => panic!("{} failed: {e}", M::NAME),
    }
}

/// The method `M`'s typed result or the daemon's error, for a test that expects a refusal.
pub async fn try_call<M: Method>(
    client: &Client,
    params: M::Params,
) -> Result<M::Result, ClientError> {
    client.call::<M>(&params).await
}

/// A connection to the daemon of a test's kiln. [`TestDaemon::call`] calls a method of
/// the protocol's table by its type (`call::<m::SessionGet>(SessionIdParams { … })`);
/// everything else of [`Client`] is there too.
pub struct TestDaemon {
    client: Client,
}

impl TestDaemon {
    /// `M`'s typed result; panics naming the method when the daemon refuses the call.
    pub async fn call<M: Method>(&self, params: M::Params) -> M::Result {
        call::<M>(&self.client, params).await
    }

    /// `M`'s typed result or the error, for a test that expects a refusal.
    pub async fn try_call<M: Method>(&self, params: M::Params) -> Result<M::Result, ClientError> {
        self.client.call::<M>(&params).await
    }

    pub fn client(&self) -> &Client {
        &self.client
    }
}

impl From<Client> for TestDaemon {
    fn from(client: Client) -> Self {
        TestDaemon { client }
    }
}

impl std::ops::Deref for TestDaemon {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

/// A daemon started by the test; killed if the test ends first.
pub struct DaemonProcess {
    pub child: Child,
}

impl DaemonProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL the daemon");
        self.child.wait().expect("reap the daemon");
    }

    /// Waits for the process to exit by itself.
    pub async fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "daemon did not exit within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Kills whatever daemon runs for the kiln when dropped (for daemons started detached).
pub struct KillOnDrop(pub Kiln);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0.read_pid() {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    }
}
