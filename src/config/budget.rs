//! `[budget]`: what the fleet may spend, in tokens and in US dollars, per session, per
//! agent profile per day and for the whole kiln per day (UTC days). At `warn_percent` of
//! a budget the inbox gets an `info` message; at 100% no new turn starts, the running
//! one is asked to end, and a `decision_needed` asks to raise the budget or stop.
//!
//! Costs are those the agent reports (claude does); for an agent that reports only
//! tokens, `[budget.prices.<profile>]` turns its tokens into dollars. Spending an agent
//! does not report is unknown, and no budget can stop it.
//!
//! `person_day_*` are the person's own day limits (meant for the user's settings): they
//! count what every running kiln of the person spent today, this one's and the others'.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What is wrong with `[budget]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("budget: {0}")]
pub struct BudgetSettingsError(String);

/// Limits of one scope; an unset one is no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// US dollars per UTC day.
    pub day_cost: Option<f64>,
    /// Tokens per UTC day.
    pub day_tokens: Option<u64>,
    /// US dollars over one session's life.
    pub session_cost: Option<f64>,
    /// Tokens over one session's life.
    pub session_tokens: Option<u64>,
}

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Tokens read from the model's prompt cache; unset: priced as input.
    #[serde(default)]
    pub cached: Option<f64>,
}

/// `[budget]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// US dollars all the kiln's sessions may spend in a UTC day.
    pub day_cost: Option<f64>,
    /// Tokens all the kiln's sessions may spend in a UTC day.
    pub day_tokens: Option<u64>,
    /// US dollars one session may spend over its life (unless its profile says).
    pub session_cost: Option<f64>,
    /// Tokens one session may spend over its life (unless its profile says).
    pub session_tokens: Option<u64>,
    /// US dollars all the person's kilns together may spend in a UTC day.
    pub person_day_cost: Option<f64>,
    /// Tokens all the person's kilns together may spend in a UTC day.
    pub person_day_tokens: Option<u64>,
    /// When the inbox is told a budget is nearly spent, in percent of it.
    pub warn_percent: u8,
    /// `[budget.agents.<profile>]`: the limits of one agent profile (`day_*` for all its
    /// sessions in a day, `session_*` for each of its sessions).
    pub agents: BTreeMap<String, Limits>,
    /// `[budget.prices.<profile>]`: prices for a profile whose agent reports tokens but
    /// not cost; over the built-in ones ([`Self::price`]).
    pub prices: BTreeMap<String, Price>,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            day_cost: None,
            day_tokens: None,
            session_cost: None,
            session_tokens: None,
            person_day_cost: None,
            person_day_tokens: None,
            warn_percent: 80,
            agents: BTreeMap::new(),
            prices: BTreeMap::new(),
        }
    }
}

/// The list prices of the default models of the known agents that report tokens but not
/// cost (US dollars per million tokens, as their vendors publish them): codex runs
/// OpenAI's GPT-5 codex models, gemini Google's Gemini 2.5 Pro. claude reports its cost
/// itself.
pub const KNOWN_PRICES: &[(&str, Price)] = &[
    (
        "codex",
        Price {
            input: 1.25,
            output: 10.0,
            cached: Some(0.125),
        },
    ),
    (
        "gemini",
        Price {
            input: 1.25,
            output: 10.0,
            cached: Some(0.31),
        },
    ),
];

impl BudgetConfig {
    /// The kiln's own limits.
    pub fn kiln(&self) -> Limits {
        Limits {
            day_cost: self.day_cost,
            day_tokens: self.day_tokens,
            session_cost: self.session_cost,
            session_tokens: self.session_tokens,
        }
    }

    /// The person's day limits across all their kilns: (US dollars, tokens).
    pub fn person(&self) -> (Option<f64>, Option<u64>) {
        (self.person_day_cost, self.person_day_tokens)
    }

    /// Whether a person's day limit is set: the other kilns' spending then counts.
    pub fn has_person_limit(&self) -> bool {
        self.person_day_cost.is_some() || self.person_day_tokens.is_some()
    }

    /// The price of a profile's tokens: the settings', else the built-in one.
    pub fn price(&self, profile: &str) -> Option<Price> {
        self.prices.get(profile).copied().or_else(|| {
            KNOWN_PRICES
                .iter()
                .find(|(name, _)| *name == profile)
                .map(|(_, p)| *p)
        })
    }

    /// The limits of one session of `profile`: the profile's own, else the kiln's.
    pub fn session_limits(&self, profile: &str) -> (Option<f64>, Option<u64>) {
        let own = self.agents.get(profile);
        (
            own.and_then(|l| l.session_cost).or(self.session_cost),
            own.and_then(|l| l.session_tokens).or(self.session_tokens),
        )
    }

    /// Whether any budget is set.
    pub fn is_set(&self) -> bool {
        let set = |l: &Limits| {
            l.day_cost.is_some()
                || l.day_tokens.is_some()
                || l.session_cost.is_some()
                || l.session_tokens.is_some()
        };
        set(&self.kiln()) || self.has_person_limit() || self.agents.values().any(set)
    }

    /// The settings' own checks.
    pub fn validate(&self) -> Result<(), BudgetSettingsError> {
        if self.warn_percent == 0 || self.warn_percent > 100 {
            return Err(BudgetSettingsError(format!(
                "warn_percent {} must be from 1 to 100",
                self.warn_percent
            )));
        }
        let kiln = self.kiln();
        if let Some(cost) = self.person_day_cost
            && !(cost.is_finite() && cost > 0.0)
        {
            return Err(BudgetSettingsError(format!(
                "budget.person_day_cost = {cost} must be a positive amount of US dollars"
            )));
        }
        if self.person_day_tokens == Some(0) {
            return Err(BudgetSettingsError(
                "budget.person_day_tokens must be at least 1".into(),
            ));
        }
        let scopes = std::iter::once(("budget".to_string(), &kiln)).chain(
            self.agents
                .iter()
                .map(|(name, l)| (format!("budget.agents.{name}"), l)),
        );
        for (scope, limits) in scopes {
            for (key, cost) in [
                ("day_cost", limits.day_cost),
                ("session_cost", limits.session_cost),
            ] {
                if let Some(cost) = cost
                    && !(cost.is_finite() && cost > 0.0)
                {
                    return Err(BudgetSettingsError(format!(
                        "{scope}.{key} = {cost} must be a positive amount of US dollars"
                    )));
                }
            }
            for (key, tokens) in [
                ("day_tokens", limits.day_tokens),
                ("session_tokens", limits.session_tokens),
            ] {
                if tokens == Some(0) {
                    return Err(BudgetSettingsError(format!(
                        "{scope}.{key} must be at least 1"
                    )));
                }
            }
        }
        for (name, price) in &self.prices {
            let all = [price.input, price.output, price.cached.unwrap_or(0.0)];
            if all.iter().any(|p| !p.is_finite() || *p < 0.0) {
                return Err(BudgetSettingsError(format!(
                    "budget.prices.{name}: prices are US dollars per million tokens, 0 or more"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<BudgetConfig, String> {
        #[derive(Deserialize)]
        struct File {
            budget: BudgetConfig,
        }
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        file.budget.validate().map_err(|e| e.to_string())?;
        Ok(file.budget)
    }

    #[test]
    fn the_kiln_the_profiles_and_the_prices_are_read() {
        let budget = read(
            "[budget]\nday_cost = 20.0\nsession_tokens = 500000\nwarn_percent = 90\n\
             [budget.agents.claude]\nsession_cost = 2.5\nday_tokens = 9000000\n\
             [budget.prices.opencode]\ninput = 3.0\noutput = 15.0\n",
        )
        .unwrap();
        assert_eq!(budget.kiln().day_cost, Some(20.0));
        assert_eq!(budget.warn_percent, 90);
        assert_eq!(budget.session_limits("claude"), (Some(2.5), Some(500_000)));
        assert_eq!(budget.session_limits("codex"), (None, Some(500_000)));
        assert_eq!(budget.price("opencode").unwrap().output, 15.0);
        // Built in for the known agents that report only tokens; claude reports cost.
        assert_eq!(budget.price("codex").unwrap().input, 1.25);
        assert!(budget.price("claude").is_none());
        assert!(budget.is_set());
        assert!(!budget.has_person_limit());
        assert!(!BudgetConfig::default().is_set());
        let person = read("[budget]\nperson_day_cost = 30.0\nperson_day_tokens = 9\n").unwrap();
        assert_eq!(person.person(), (Some(30.0), Some(9)));
        assert!(person.has_person_limit() && person.is_set());
    }

    #[test]
    fn a_budget_that_cannot_be_meant_is_refused_by_name() {
        for (text, names) in [
            ("[budget]\nday_cost = 0.0\n", "budget.day_cost"),
            ("[budget]\nday_cost = -3.0\n", "budget.day_cost"),
            (
                "[budget.agents.codex]\nsession_tokens = 0\n",
                "budget.agents.codex.session_tokens",
            ),
            ("[budget]\nwarn_percent = 0\n", "warn_percent"),
            (
                "[budget]\nperson_day_cost = 0.0\n",
                "budget.person_day_cost",
            ),
            (
                "[budget]\nperson_day_tokens = 0\n",
                "budget.person_day_tokens",
            ),
            (
                "[budget.prices.x]\ninput = -1.0\noutput = 1.0\n",
                "budget.prices.x",
            ),
        ] {
            let error = read(text).unwrap_err();
            assert!(error.contains(names), "{text}: {error}");
        }
        assert!(
            read("[budget]\nday_costs = 3.0\n")
                .unwrap_err()
                .contains("day_costs")
        );
    }
}
