//! The budget keeper and the accounting of what a session spent.

use super::*;
use crate::protocol::{DaySpent, Usage};

fn config(text: &str) -> BudgetConfig {
    #[derive(Deserialize)]
    struct File {
        budget: BudgetConfig,
    }
    toml::from_str::<File>(text).unwrap().budget
}

fn usage(cost: f64) -> Usage {
    Usage {
        used: 1,
        size: 100,
        cost: Some(cost),
        currency: Some("USD".into()),
    }
}

fn keeper(text: &str, sessions: &[Session]) -> (Budgets, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let budgets = Budgets::new(config(text), dir.path().join("raises.json"), sessions);
    (budgets, dir)
}

#[test]
fn only_the_increase_of_a_reported_cost_is_spent_and_a_new_process_counts_again() {
    let mut spent = Spent::default();
    assert_eq!(
        add_reported(&mut spent, "d1", &usage(0.25)).cost,
        Some(0.25)
    );
    assert_eq!(add_reported(&mut spent, "d1", &usage(0.75)).cost, Some(0.5));
    // The same figure again adds nothing.
    assert_eq!(
        add_reported(&mut spent, "d1", &usage(0.75)),
        Charge::default()
    );
    // A restarted agent counts from zero.
    assert_eq!(add_reported(&mut spent, "d2", &usage(0.1)).cost, Some(0.1));
    assert!((spent.cost.unwrap() - 0.85).abs() < 1e-9);
    assert!((spent.days["d1"].cost.unwrap() - 0.75).abs() < 1e-9);
    assert!((spent.days["d2"].cost.unwrap() - 0.1).abs() < 1e-9);
    // Credits are not dollars: unknown, not zero.
    let mut credits = Spent::default();
    let mut u = usage(3.0);
    u.currency = Some("credits".into());
    assert_eq!(add_reported(&mut credits, "d1", &u), Charge::default());
    assert_eq!(credits.cost, None);
}

#[test]
fn tokens_are_priced_only_for_an_agent_that_tells_no_cost() {
    let price = Price {
        input: 2.0,
        output: 10.0,
        cached: None,
    };
    let turn = TurnTokens {
        input: 1_000_000,
        output: 100_000,
        cached: 500_000,
    };
    let mut spent = Spent::default();
    let charge = add_tokens(&mut spent, "d1", turn, Some(price));
    assert_eq!(charge.tokens, Some(1_600_000));
    // 2.00 + 1.00 + 0.5 × 2.00 (cached priced as input when unset)
    assert!((charge.cost.unwrap() - 4.0).abs() < 1e-9);
    assert!(spent.priced);
    let mut reporting = Spent::default();
    add_reported(&mut reporting, "d1", &usage(0.5));
    let charge = add_tokens(&mut reporting, "d1", turn, Some(price));
    assert_eq!(charge.cost, None);
    assert_eq!(reporting.tokens, Some(1_600_000));
    // Without a price and a cost, the cost stays unknown.
    let mut unknown = Spent::default();
    add_tokens(&mut unknown, "d1", turn, None);
    assert_eq!(unknown.cost, None);
}

#[test]
fn a_session_over_its_own_budget_is_judged_over_until_raised() {
    let (budgets, _dir) = keeper("[budget]\nsession_cost = 1.0\n", &[]);
    let mut spent = Spent::default();
    add_reported(&mut spent, &today(), &usage(0.5));
    assert_eq!(budgets.judge("s1", "claude", &spent), None);
    add_reported(&mut spent, &today(), &usage(1.01));
    let over = budgets.judge("s1", "claude", &spent).unwrap();
    assert_eq!(over.scope, Scope::Session);
    assert_eq!(over.what, "this session's budget: 1.01 of 1.00 USD");
    assert_eq!(over.raise_option(), "Raise by 1.00 USD");
    spent.raised_cost += over.raise.cost;
    assert_eq!(budgets.judge("s1", "claude", &spent), None);
}

#[test]
fn the_day_budgets_add_up_every_session_and_a_raise_outlives_the_keeper() {
    let day = today();
    let earlier = Session {
        id: "s0".into(),
        agent_name: "codex".into(),
        spent: Some(Spent {
            tokens: Some(900),
            days: [(
                day.clone(),
                DaySpent {
                    tokens: Some(900),
                    cost: None,
                },
            )]
            .into(),
            ..Spent::default()
        }),
        ..Session::default()
    };
    let text = "[budget]\nday_tokens = 1000\n[budget.agents.codex]\nday_tokens = 5000\n";
    let (budgets, dir) = keeper(text, std::slice::from_ref(&earlier));
    let mut spent = Spent::default();
    let turn = TurnTokens {
        input: 50,
        output: 10,
        cached: 0,
    };
    let charge = add_tokens(&mut spent, &day, turn, None);
    let warned = budgets.charge("s1", "codex", &spent, charge, &day);
    assert_eq!(warned, vec!["the kiln's budget for today is 96% spent"]);
    // Said once.
    let charge = add_tokens(&mut spent, &day, TurnTokens::default(), None);
    assert!(
        budgets
            .charge("s1", "codex", &spent, charge, &day)
            .is_empty()
    );
    assert_eq!(budgets.judge("s1", "codex", &spent), None);
    let charge = add_tokens(&mut spent, &day, turn, None);
    budgets.charge("s1", "codex", &spent, charge, &day);
    let over = budgets.judge("s1", "codex", &spent).unwrap();
    assert_eq!(over.scope, Scope::Kiln);
    assert_eq!(
        over.what,
        "the kiln's budget for today: 1020 of 1000 tokens"
    );
    // Every session of the kiln is over it, not only the one that spent it.
    assert!(budgets.judge("s2", "claude", &Spent::default()).is_some());
    budgets.raise(&over.scope, over.raise).unwrap();
    assert_eq!(budgets.judge("s2", "claude", &Spent::default()), None);
    // The raise is kept for the rest of the day.
    let again = Budgets::new(config(text), dir.path().join("raises.json"), &[earlier]);
    assert_eq!(again.judge("s2", "claude", &Spent::default()), None);
}

#[test]
fn a_verdict_change_is_told_to_subscribers_only_when_budgets_are_set() {
    let (unset, _d1) = keeper("[budget]\n", &[]);
    let told = unset.subscribe();
    unset.charge("s", "a", &Spent::default(), Charge::default(), &today());
    assert!(!told.has_changed().unwrap());
    let (set, _d2) = keeper("[budget]\nday_cost = 5.0\n", &[]);
    let mut told = set.subscribe();
    set.charge("s", "a", &Spent::default(), Charge::default(), &today());
    assert!(told.has_changed().unwrap());
    told.mark_unchanged();
    set.set_config(config("[budget]\nday_cost = 6.0\n"));
    assert!(told.has_changed().unwrap());
}

#[test]
fn the_persons_limit_counts_the_other_kilns_and_names_each_one() {
    let (budgets, _dir) = keeper("[budget]\nperson_day_cost = 1.0\n", &[]);
    let spent = Spent::default();
    assert_eq!(budgets.judge("s1", "claude", &spent), None);
    // Another kiln spent 1.20 today, a third did not answer: over, with nothing spent here.
    budgets.lock().others = vec![
        KilnSpent {
            name: "alpha".into(),
            spent: Some(DayTotal {
                tokens: None,
                cost: Some(1.2),
            }),
        },
        KilnSpent {
            name: "beta".into(),
            spent: None,
        },
    ];
    let over = budgets.judge("s1", "claude", &spent).unwrap();
    assert_eq!(over.scope, Scope::Person);
    assert_eq!(
        over.title(),
        "Budget reached: your day budget across all your kilns: 1.20 of 1.00 USD \
         (this kiln 0.00 USD, alpha 1.20 USD, beta unknown (its daemon did not answer))"
    );
    assert_eq!(over.raise_option(), "Raise by 1.00 USD");
    // A raise of the person's limit applies here at once.
    budgets.raise(&Scope::Person, over.raise).unwrap();
    assert_eq!(budgets.judge("s1", "claude", &spent), None);
}

#[test]
fn the_persons_limit_warns_near_its_end_naming_the_kilns() {
    let (budgets, _dir) = keeper("[budget]\nperson_day_tokens = 1000\n", &[]);
    budgets.lock().others = vec![KilnSpent {
        name: "alpha".into(),
        spent: Some(DayTotal {
            tokens: Some(700),
            cost: None,
        }),
    }];
    let mut spent = Spent::default();
    let charge = add_tokens(
        &mut spent,
        &today(),
        TurnTokens {
            input: 100,
            output: 50,
            cached: 0,
        },
        None,
    );
    let near = budgets.charge("s1", "claude", &spent, charge, &today());
    assert_eq!(
        near,
        [
            "your day budget across all your kilns is 85% spent (this kiln 150 tokens, alpha 700 tokens)"
        ]
    );
}
