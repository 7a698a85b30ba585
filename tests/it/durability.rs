//! Durability and robustness of the real daemon, tested from the outside with the
//! self-contained equipment in tests/equipment/reliability.rs (also run at length by
//! `cargo bench --bench reliability`): kill -9 under concurrent durable writers, and
//! malformed or hostile protocol input.

#[path = "../equipment/reliability.rs"]
mod reliability;

use std::path::Path;
use std::time::Duration;

use reliability::{KillOptions, fuzz, kill_loop};

const CRU: &str = env!("CARGO_BIN_EXE_cru");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_minus_nine_under_eight_writers_twenty_times_loses_nothing_acknowledged() {
    let report = kill_loop(Path::new(CRU), &KillOptions::cycles(20, 8))
        .await
        .expect("the kill loop ran (this is an equipment or daemon-restart failure, not a loss)");
    println!("{report}");
    assert!(
        report.acknowledged > 0,
        "no send was acknowledged in 20 cycles:\n{report}"
    );
    assert!(
        report.ok(),
        "acknowledged sends were lost or altered:\n{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_for_ten_seconds_gets_well_formed_replies() {
    let report = fuzz(Path::new(CRU), Duration::from_secs(10))
        .await
        .expect("the fuzzer ran (an equipment failure)");
    println!("{report}");
    assert!(report.replies > 0, "no replies at all:\n{report}");
    assert_eq!(report.violations, 0, "protocol violations:\n{report}");
}
