//! What counting a turn's usage costs, for the fleet benchmark.
//!
//! One turn's accounting is: its tokens added to the session's spending (priced, by
//! day), the spending written as the JSON the session record keeps, the charge counted
//! with the daemon's budget keeper and, when a budget is set, every running session's
//! actor judging again whether it is over (the keeper tells them all that a verdict may
//! have changed). The last part grows with the sessions, so it is measured at 1, 100 and
//! 1,000 sessions, and with no budget set (no judging at all).

use std::hint::black_box;
use std::time::Instant;

use crucible::config::{BudgetConfig, Price};
use crucible::protocol::Spent;
use crucible::sessions::budget::{Budgets, TurnTokens, add_tokens, today};

const TURNS: u32 = 2_000;

pub fn run(dir: &std::path::Path) {
    println!("\n== usage accounting per turn (release: pure, in process) ==");
    println!(
        "{:<28} {:>10} {:>14}",
        "budget set / sessions", "turns", "per turn (µs)"
    );
    let price = Price {
        input: 1.25,
        output: 10.0,
        cached: Some(0.125),
    };
    for (set, sessions) in [(false, 1), (true, 1), (true, 100), (true, 1_000)] {
        let config = if set {
            BudgetConfig {
                day_cost: Some(1e9),
                session_cost: Some(1e9),
                ..BudgetConfig::default()
            }
        } else {
            BudgetConfig::default()
        };
        let budgets = Budgets::new(config, dir.join("budget-raises.json"), &[]);
        let ids: Vec<String> = (0..sessions).map(|i| format!("s{i}")).collect();
        let others: Vec<Spent> = vec![Spent::default(); sessions];
        let mut spent = Spent::default();
        let day = today();
        let start = Instant::now();
        for turn in 0..TURNS {
            let tokens = TurnTokens {
                input: 1_200 + u64::from(turn % 7),
                output: 300,
                cached: 800,
            };
            let charge = add_tokens(&mut spent, &day, tokens, Some(price));
            black_box(serde_json::to_string(&spent).ok());
            black_box(budgets.charge(&ids[0], "codex", &spent, charge, &day));
            if set {
                for (id, other) in ids.iter().zip(&others) {
                    black_box(budgets.judge(id, "codex", other));
                }
            }
        }
        let per_turn = start.elapsed().as_secs_f64() * 1e6 / f64::from(TURNS);
        let label = if set {
            format!("yes / {sessions}")
        } else {
            format!("no / {sessions}")
        };
        println!("{label:<28} {TURNS:>10} {per_turn:>14.2}");
    }
}
