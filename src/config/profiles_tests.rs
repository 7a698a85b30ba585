//! The `fallback` chain of a profile: one name or a list, and what validation refuses.

use crate::config::Config;

const TWO: &str = "[agents.a]\ncommand = \"a\"\n[agents.b]\ncommand = \"b\"\n";

fn parsed(text: &str) -> Config {
    Config::parse_layer(text).expect("valid settings");
    toml::from_str(text).expect("a config")
}

#[test]
fn a_fallback_is_one_name_or_a_list_and_one_name_is_a_list_of_one() {
    let one = parsed(&format!(
        "{TWO}[agents.c]\ncommand = \"c\"\nfallback = \"a\"\n"
    ));
    assert_eq!(one.agents["c"].fallback, ["a"]);
    assert!(!one.agents["c"].fallback_return);
    let list = parsed(&format!(
        "{TWO}[agents.c]\ncommand = \"c\"\nfallback = [\"b\", \"a\", \"claude\"]\nfallback_return = true\n"
    ));
    assert_eq!(list.agents["c"].fallback, ["b", "a", "claude"]);
    assert!(list.agents["c"].fallback_return);
    let none = parsed(TWO);
    assert!(none.agents["a"].fallback.is_empty());
    // Written back as a list, it reads the same.
    let again: Config = toml::from_str(&toml::to_string(&list).unwrap()).unwrap();
    assert_eq!(again.agents["c"].fallback, ["b", "a", "claude"]);
}

#[test]
fn a_fallback_chain_names_other_profiles_each_once() {
    for (chain, needle) in [
        ("\"c\"", "other agent profiles, not \"c\""),
        ("[\"a\", \"c\"]", "other agent profiles, not \"c\""),
        ("[\"a\", \"\"]", "other agent profiles, not \"\""),
        (
            "[\"a\", \"nobody\"]",
            "names \"nobody\", which is no agent profile",
        ),
        ("[\"a\", \"b\", \"a\"]", "names \"a\" twice"),
        ("7", "a profile name or a list of profile names"),
    ] {
        let text = format!("{TWO}[agents.c]\ncommand = \"c\"\nfallback = {chain}\n");
        let err = Config::parse_layer(&text).unwrap_err().to_string();
        assert!(err.contains(needle), "{chain} gave {err}");
    }
    let lonely = format!("{TWO}[agents.c]\ncommand = \"c\"\nfallback_return = true\n");
    let err = Config::parse_layer(&lonely).unwrap_err().to_string();
    assert!(
        err.contains("agents.c.fallback_return needs a fallback"),
        "{err}"
    );
}
