//! `cru daemon bridge`: the kiln's daemon socket relayed over standard input and output,
//! for the person's hub on another machine to reach this kiln through their own ssh
//! (`ssh HOST cru --kiln PATH daemon bridge`) with no port opened here. The daemon is
//! started first if none runs; the relay ends when either side closes.

use std::process::ExitCode;

use anyhow::Context as _;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

use crate::kiln::Kiln;

pub(super) async fn run(kiln: &Kiln) -> anyhow::Result<ExitCode> {
    // Started if it rests, as any command acting on the kiln does; the relay then
    // speaks to it as a client of its own.
    drop(super::connect(kiln).await?);
    let socket = kiln.socket_path();
    let stream = UnixStream::connect(&socket)
        .await
        .with_context(|| format!("cannot reach the daemon at {}", socket.display()))?;
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let inward = async {
        let copied = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        let _ = to_daemon.shutdown().await;
        copied
    };
    let outward = async {
        let copied = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        let _ = stdout.flush().await;
        copied
    };
    // Whichever side closes first ends the relay.
    tokio::select! {
        _ = inward => {}
        _ = outward => {}
    }
    Ok(ExitCode::SUCCESS)
}
