//! The storage engine under the embedded database, driven directly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use surrealkv::{LSMIterator, TreeBuilder};

/// Reads start while memtables are flushed (a small memtable flushes every few commits):
/// every commit and read goes on. The engine as published took its locks in the opposite
/// order to the flush here, and a read and a flush waited on each other for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_racing_memtable_flushes_never_wait_on_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let tree = Arc::new(
        TreeBuilder::new()
            .with_path(dir.path().join("db"))
            .with_max_memtable_size(32 * 1024)
            .build()
            .unwrap(),
    );
    let reads = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (tree, reads, stop) = (tree.clone(), reads.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let txn = tree.begin().unwrap();
                    let mut range = txn.range(b"k".to_vec(), b"l".to_vec()).unwrap();
                    range.seek_first().unwrap();
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let commits = Arc::new(AtomicU64::new(0));
    let writer = {
        let (tree, commits) = (tree.clone(), commits.clone());
        tokio::spawn(async move {
            for i in 0..1500u64 {
                let mut txn = tree.begin().unwrap();
                for j in 0..20 {
                    txn.set(format!("k{i:012}{j:02}").as_bytes(), &[7u8; 200])
                        .unwrap();
                }
                txn.commit().await.unwrap();
                commits.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // A hang shows as neither count moving for 20 s; a slow machine still moves.
    let mut last = (0, 0);
    let mut still = 0;
    while !writer.is_finished() {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = (
            commits.load(Ordering::Relaxed),
            reads.load(Ordering::Relaxed),
        );
        still = if now == last { still + 1 } else { 0 };
        assert!(
            still < 80,
            "no commit and no read for 20 s: the engine hung after {} commits",
            now.0
        );
        last = now;
    }
    writer.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.join().unwrap();
    }
    assert_eq!(commits.load(Ordering::Relaxed), 1500);
    assert!(reads.load(Ordering::Relaxed) > 0);
}
