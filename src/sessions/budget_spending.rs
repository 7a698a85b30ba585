//! What a session spent, kept on its record ([`Spent`]) by its machine from what the
//! agent reports: the session cost it tells (`usage_update`; only its increase counts, as
//! an agent counts from zero again in a new process) and the tokens each turn used,
//! priced with `[budget.prices]` when the agent tells no cost.

pub use crate::agent::TurnTokens;
use crate::config::Price;
use crate::protocol::{Spent, Usage};

/// What one report added to a session's spending (`None`: nothing known).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Charge {
    pub tokens: Option<u64>,
    pub cost: Option<f64>,
}

/// Today's UTC day, `YYYY-MM-DD`.
pub fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

/// Adds the tokens of a turn; priced when the agent tells no cost of its own.
pub fn add_tokens(
    spent: &mut Spent,
    day: &str,
    tokens: TurnTokens,
    price: Option<Price>,
) -> Charge {
    let n = tokens.total();
    spent.tokens = Some(spent.tokens.unwrap_or(0).saturating_add(n));
    let on_day = spent.days.entry(day.to_string()).or_default();
    on_day.tokens = Some(on_day.tokens.unwrap_or(0).saturating_add(n));
    let mut charge = Charge {
        tokens: Some(n),
        cost: None,
    };
    if spent.reported.is_none()
        && let Some(price) = price
    {
        let cost = (tokens.input as f64 * price.input
            + tokens.output as f64 * price.output
            + tokens.cached as f64 * price.cached.unwrap_or(price.input))
            / 1_000_000.0;
        spent.priced = true;
        add_cost(spent, day, cost);
        charge.cost = Some(cost);
    }
    charge
}

/// Adds the increase of the session cost the agent reports (US dollars only).
pub(in crate::sessions) fn add_reported(spent: &mut Spent, day: &str, usage: &Usage) -> Charge {
    let Some(cost) = usage.cost else {
        return Charge::default();
    };
    let dollars = matches!(usage.currency.as_deref(), None | Some("USD"));
    if !dollars || !cost.is_finite() || cost < 0.0 {
        return Charge::default();
    }
    let increase = match spent.reported {
        Some(last) if cost >= last => cost - last,
        // A new agent process counts from zero again.
        _ => cost,
    };
    if spent.priced {
        // The agent tells its cost after all: its word, not the price list, from now.
        spent.priced = false;
    }
    spent.reported = Some(cost);
    if increase == 0.0 && spent.cost.is_some() {
        return Charge::default();
    }
    add_cost(spent, day, increase);
    Charge {
        tokens: None,
        cost: Some(increase),
    }
}

fn add_cost(spent: &mut Spent, day: &str, cost: f64) {
    spent.cost = Some(spent.cost.unwrap_or(0.0) + cost);
    let on_day = spent.days.entry(day.to_string()).or_default();
    on_day.cost = Some(on_day.cost.unwrap_or(0.0) + cost);
}
