//! Budgets. A session's spending is kept on its record by its machine
//! ([`budget_spending`]). The [`Budgets`] keeper adds up today's spending of the kiln and of each agent profile, says when a
//! budget is nearly spent, and judges whether a session is over one of its budgets: its
//! own, its profile's for today, the kiln's for today, or the person's for today across
//! all their kilns (the other kilns' spending asked of their daemons, [`budget_kilns`]).
//! A person's raise of a day's budget is kept in a file until the day ends; a session's
//! raise is on its record.
//!
//! [`budget_kilns`]: super::budget_kilns
//! [`budget_spending`]: super::budget_spending

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::budget_kilns::{self, DayTotal, KilnSpent, OtherKilns};
pub(super) use super::budget_spending::add_reported;
pub use super::budget_spending::{Charge, TurnTokens, add_tokens, today};
use crate::config::{BudgetConfig, BudgetLimits, Price};
use crate::protocol::{Session, Spent};

/// The answer to a budget's question that ends the session.
pub(super) const STOP: &str = "Stop the session";

/// Whose budget.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The session's own, over its life.
    Session,
    /// An agent profile's, for today.
    Agent(String),
    /// The kiln's, for today.
    Kiln,
    /// The person's, for today, across all their kilns.
    Person,
}

/// A budget spent: whose, how far, and what raising it adds.
#[derive(Debug, Clone, PartialEq)]
pub struct Over {
    pub scope: Scope,
    /// `this session's budget: 1.02 of 1.00 USD`.
    pub what: String,
    pub raise: Raise,
}

/// What a raise adds to a budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Raise {
    #[serde(default)]
    pub cost: f64,
    #[serde(default)]
    pub tokens: u64,
}

impl Over {
    pub fn title(&self) -> String {
        format!("Budget reached: {}", self.what)
    }

    /// The answer that raises it.
    pub fn raise_option(&self) -> String {
        if self.raise.cost > 0.0 {
            format!("Raise by {:.2} USD", self.raise.cost)
        } else {
            format!("Raise by {} tokens", self.raise.tokens)
        }
    }

    pub fn body(&self) -> String {
        format!(
            "No new turn starts until the budget is raised; the running turn was asked to end \
             at the agent's next stop point. Prompts sent meanwhile wait in the queue.\n\n\
             {} to go on (it applies at once), or \"{STOP}\".",
            self.raise_option()
        )
    }
}

/// Spending of one scope today (`None`: nothing known).
type Tally = DayTotal;

/// Today's raises of the day budgets, as kept in their file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Raised {
    day: String,
    #[serde(default)]
    kiln: Raise,
    #[serde(default)]
    agents: BTreeMap<String, Raise>,
    #[serde(default)]
    person: Raise,
}

struct Keeper {
    config: BudgetConfig,
    day: String,
    kiln: Tally,
    agents: HashMap<String, Tally>,
    raised: Raised,
    /// What the person's other kilns spent today, as last asked.
    others: Vec<KilnSpent>,
    /// Budgets already said to be nearly spent: `session <id>`, `agent <name>`, `kiln`.
    warned: HashSet<String>,
}

impl Keeper {
    /// A new UTC day: nothing spent on it yet, no raise, nothing said.
    fn roll(&mut self, day: &str) {
        if self.day != day {
            self.day = day.to_string();
            self.kiln = Tally::default();
            self.agents.clear();
            self.others.clear();
            self.warned.retain(|w| w.starts_with("session "));
            self.raised = Raised {
                day: day.to_string(),
                ..Raised::default()
            };
        }
    }
}

/// The keeper of the day budgets; see the module's notes.
pub struct Budgets {
    keeper: Mutex<Keeper>,
    /// Bumped whenever a verdict may have changed: spending, a raise, new settings.
    changed: watch::Sender<u64>,
    /// Where today's raises are kept.
    path: PathBuf,
    /// The person's other kilns, asked when a person's limit is set.
    other_kilns: OtherKilns,
}

impl Budgets {
    /// Today's spending, added up from the sessions' records; today's raises from `path`.
    pub fn new(config: BudgetConfig, path: PathBuf, sessions: &[Session]) -> Self {
        let day = today();
        let mut kiln = Tally::default();
        let mut agents: HashMap<String, Tally> = HashMap::new();
        for session in sessions {
            let Some(spent) = session.spent.as_ref().and_then(|s| s.days.get(&day)) else {
                continue;
            };
            kiln.add(spent.tokens, spent.cost);
            agents
                .entry(session.agent_name.clone())
                .or_default()
                .add(spent.tokens, spent.cost);
        }
        let raised = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Raised>(&bytes).ok())
            .filter(|r| r.day == day)
            .unwrap_or_else(|| Raised {
                day: day.clone(),
                ..Raised::default()
            });
        Self {
            keeper: Mutex::new(Keeper {
                config,
                day,
                kiln,
                agents,
                raised,
                others: Vec::new(),
                warned: HashSet::new(),
            }),
            changed: watch::channel(0).0,
            path,
            other_kilns: OtherKilns::none(),
        }
    }

    /// Asks the person's other kilns (of their registry, `own` left out) when a person's
    /// day limit is set.
    pub fn asking_kilns(mut self, own: &Path) -> Self {
        match crate::kilns::Registry::for_user() {
            Ok(registry) => self.other_kilns = OtherKilns::of(own.to_path_buf(), registry),
            Err(e) => tracing::warn!("the person's day budget counts this kiln only: {e}"),
        }
        self
    }

    /// When a person's day limit is set, what the other kilns spent today, asked again
    /// unless asked within [`budget_kilns::KEEP`]; a verdict it changes is told.
    pub async fn refresh_others(&self) {
        if !self.lock().config.has_person_limit() {
            return;
        }
        let day = today();
        let Some(others) = self.other_kilns.ask_if_stale(&day).await else {
            return;
        };
        let mut keeper = self.lock();
        keeper.roll(&day);
        if keeper.others != others {
            keeper.others = others;
            drop(keeper);
            self.bump();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Keeper> {
        self.keeper.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Told whenever a verdict may have changed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// New settings: they apply at once.
    pub fn set_config(&self, config: BudgetConfig) {
        let mut keeper = self.lock();
        if keeper.config != config {
            keeper.config = config;
            drop(keeper);
            self.bump();
        }
    }

    /// The price of a profile's tokens.
    pub fn price(&self, agent: &str) -> Option<Price> {
        self.lock().config.price(agent)
    }

    /// Counts what a session of `agent` spent on `day`; the budgets it brought near their
    /// end, in words, each said once.
    pub fn charge(
        &self,
        session_id: &str,
        agent: &str,
        spent: &Spent,
        charge: Charge,
        day: &str,
    ) -> Vec<String> {
        let mut keeper = self.lock();
        keeper.roll(day);
        keeper.kiln.add(charge.tokens, charge.cost);
        keeper
            .agents
            .entry(agent.to_string())
            .or_default()
            .add(charge.tokens, charge.cost);
        let set = keeper.config.is_set();
        let mut warnings = Vec::new();
        for (key, fraction, what) in fractions(&keeper, session_id, agent, spent) {
            let near = fraction * 100.0 >= f64::from(keeper.config.warn_percent);
            if near && fraction < 1.0 && keeper.warned.insert(key.clone()) {
                let kilns = match key.as_str() {
                    "person" => {
                        let by_cost = keeper.config.person_day_cost.is_some();
                        format!(" ({})", person_kilns(&keeper, by_cost))
                    }
                    _ => String::new(),
                };
                warnings.push(format!("{what} is {:.0}% spent{kilns}", fraction * 100.0));
            }
        }
        drop(keeper);
        if set {
            self.bump();
        }
        warnings
    }

    /// Whether a session of `agent` that spent `spent` is over a budget: the first of its
    /// own, its profile's and the kiln's that is.
    pub fn judge(&self, session_id: &str, agent: &str, spent: &Spent) -> Option<Over> {
        let mut keeper = self.lock();
        keeper.roll(&today());
        let over = fractions(&keeper, session_id, agent, spent)
            .into_iter()
            .find(|(_, fraction, _)| *fraction >= 1.0)?;
        let (key, _, what) = over;
        let scope = if key.starts_with("session ") {
            Scope::Session
        } else if key == "kiln" {
            Scope::Kiln
        } else if key == "person" {
            Scope::Person
        } else {
            Scope::Agent(agent.to_string())
        };
        let limits = scope_limits(&keeper.config, &scope, agent);
        Some(Over {
            what: spelled(&keeper, &scope, agent, spent, &what),
            raise: Raise {
                cost: limits.0.unwrap_or(0.0),
                tokens: if limits.0.is_some() {
                    0
                } else {
                    limits.1.unwrap_or(0)
                },
            },
            scope,
        })
    }

    /// Raises a day budget (a session's own is raised on its record); kept until the day
    /// ends, written before it applies.
    pub fn raise(&self, scope: &Scope, by: Raise) -> std::io::Result<()> {
        let mut keeper = self.lock();
        keeper.roll(&today());
        let mut raised = keeper.raised.clone();
        let slot = match scope {
            Scope::Session => return Ok(()),
            Scope::Kiln => &mut raised.kiln,
            Scope::Person => &mut raised.person,
            Scope::Agent(name) => raised.agents.entry(name.clone()).or_default(),
        };
        slot.cost += by.cost;
        slot.tokens = slot.tokens.saturating_add(by.tokens);
        let bytes = serde_json::to_vec_pretty(&raised).map_err(std::io::Error::other)?;
        crate::sys::write_private(&self.path, &bytes)?;
        keeper.raised = raised;
        // Said again when it nears the raised end.
        match scope {
            Scope::Kiln => keeper.warned.remove("kiln"),
            Scope::Person => keeper.warned.remove("person"),
            Scope::Agent(name) => keeper.warned.remove(&format!("agent {name}")),
            Scope::Session => false,
        };
        drop(keeper);
        self.bump();
        Ok(())
    }

    /// A session's budget was raised on its record: its verdict changes.
    pub fn session_raised(&self, session_id: &str) {
        self.lock().warned.remove(&format!("session {session_id}"));
        self.bump();
    }
}

/// The limits of a scope: (US dollars, tokens).
fn scope_limits(config: &BudgetConfig, scope: &Scope, agent: &str) -> (Option<f64>, Option<u64>) {
    match scope {
        Scope::Session => config.session_limits(agent),
        Scope::Agent(name) => config
            .agents
            .get(name)
            .map_or((None, None), |l: &BudgetLimits| (l.day_cost, l.day_tokens)),
        Scope::Kiln => (config.day_cost, config.day_tokens),
        Scope::Person => config.person(),
    }
}

/// The person's spending today: this kiln's and the other kilns' that answered.
fn person_tally(keeper: &Keeper) -> Tally {
    budget_kilns::person_day(keeper.kiln, &keeper.others).known
}

/// Each kiln's spending today, in words (in dollars when the dollar limit is the one
/// spelled).
fn person_kilns(keeper: &Keeper, by_cost: bool) -> String {
    budget_kilns::per_kiln(keeper.kiln, &keeper.others, by_cost)
}

/// How far each budget of a session is spent (1.0: all of it), with its key and name,
/// in the order they are judged.
fn fractions(
    keeper: &Keeper,
    session_id: &str,
    agent: &str,
    spent: &Spent,
) -> Vec<(String, f64, String)> {
    let session = Tally {
        tokens: spent.tokens,
        cost: spent.cost,
    };
    let session_raise = Raise {
        cost: spent.raised_cost,
        tokens: spent.raised_tokens,
    };
    let agent_today = keeper.agents.get(agent).copied().unwrap_or_default();
    let agent_raise = keeper.raised.agents.get(agent).copied().unwrap_or_default();
    let scopes = [
        (
            format!("session {session_id}"),
            Scope::Session,
            session,
            session_raise,
            "this session's budget".to_string(),
        ),
        (
            format!("agent {agent}"),
            Scope::Agent(agent.to_string()),
            agent_today,
            agent_raise,
            format!("{agent}'s budget for today"),
        ),
        (
            "kiln".to_string(),
            Scope::Kiln,
            keeper.kiln,
            keeper.raised.kiln,
            "the kiln's budget for today".to_string(),
        ),
        (
            "person".to_string(),
            Scope::Person,
            person_tally(keeper),
            keeper.raised.person,
            "your day budget across all your kilns".to_string(),
        ),
    ];
    let mut out = Vec::new();
    for (key, scope, tally, raise, what) in scopes {
        let (cost_limit, token_limit) = scope_limits(&keeper.config, &scope, agent);
        let by_cost = cost_limit
            .zip(tally.cost)
            .map(|(limit, cost)| cost / (limit + raise.cost));
        let by_tokens = token_limit
            .zip(tally.tokens)
            .map(|(limit, tokens)| tokens as f64 / (limit.saturating_add(raise.tokens)) as f64);
        if let Some(fraction) = by_cost.into_iter().chain(by_tokens).reduce(f64::max) {
            out.push((key, fraction, what));
        }
    }
    out
}

/// `this session's budget: 1.02 of 1.00 USD`.
fn spelled(keeper: &Keeper, scope: &Scope, agent: &str, spent: &Spent, what: &str) -> String {
    let (tally, raise) = match scope {
        Scope::Session => (
            Tally {
                tokens: spent.tokens,
                cost: spent.cost,
            },
            Raise {
                cost: spent.raised_cost,
                tokens: spent.raised_tokens,
            },
        ),
        Scope::Agent(name) => (
            keeper.agents.get(name).copied().unwrap_or_default(),
            keeper.raised.agents.get(name).copied().unwrap_or_default(),
        ),
        Scope::Kiln => (keeper.kiln, keeper.raised.kiln),
        Scope::Person => (person_tally(keeper), keeper.raised.person),
    };
    let kilns = |by_cost| match scope {
        Scope::Person => format!(" ({})", person_kilns(keeper, by_cost)),
        _ => String::new(),
    };
    let (cost_limit, token_limit) = scope_limits(&keeper.config, scope, agent);
    if let (Some(limit), Some(cost)) = (cost_limit, tally.cost)
        && cost >= limit + raise.cost
    {
        return format!(
            "{what}: {cost:.2} of {:.2} USD{}",
            limit + raise.cost,
            kilns(true)
        );
    }
    match (token_limit, tally.tokens) {
        (Some(limit), Some(tokens)) => format!(
            "{what}: {tokens} of {} tokens{}",
            limit.saturating_add(raise.tokens),
            kilns(false)
        ),
        _ => what.to_string(),
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
