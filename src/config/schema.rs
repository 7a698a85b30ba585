//! The JSON Schema of the settings file, made from the settings types (their doc comments
//! are its descriptions), so editors that read TOML against a schema (Taplo, Even Better
//! TOML) complete keys and flag typos and wrong types as you type. JSON Schema draft-07,
//! the draft editors support most widely; `cru config schema` prints it and the
//! repository keeps a copy in [`SCHEMA_FILE`].

use schemars::generate::SchemaSettings;

use super::Config;

/// Where the repository keeps the schema, for editors to point at without running `cru`.
pub const SCHEMA_FILE: &str = "assets/crucible.schema.json";

/// The schema's own name.
const SCHEMA_ID: &str = "urn:crucible:settings";

/// The schema as `cru config schema` prints it: pretty JSON, keys sorted, ending in a
/// newline.
pub fn schema_text() -> String {
    let mut schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<Config>();
    schema.insert("$id".into(), SCHEMA_ID.into());
    schema.insert(
        "title".into(),
        "crucible settings (.crucible.toml, ~/.config/crucible/config.toml)".into(),
    );
    let sorted = sorted(schema.to_value());
    let mut text = serde_json::to_string_pretty(&sorted).unwrap_or_default();
    text.push('\n');
    text
}

/// `value` with every object's keys in order, whatever order serde_json keeps maps in.
fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let entries: std::collections::BTreeMap<String, serde_json::Value> =
                map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            serde_json::Value::Object(entries.into_iter().collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validator() -> jsonschema::Validator {
        let schema: serde_json::Value = serde_json::from_str(&schema_text()).unwrap();
        jsonschema::draft7::new(&schema).unwrap()
    }

    /// The schema's verdict on a settings file: `Ok`, or what it found wrong.
    fn judged(validator: &jsonschema::Validator, text: &str) -> Result<(), String> {
        let doc: serde_json::Value = toml::from_str(text).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    #[test]
    fn the_committed_schema_is_the_one_the_settings_types_make() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_FILE);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == schema_text(),
            "{SCHEMA_FILE} is not what the settings types make; regenerate it with \
             `cargo run -- config schema > {SCHEMA_FILE}` and commit it"
        );
        let schema: serde_json::Value = serde_json::from_str(&committed).unwrap();
        assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
        assert_eq!(schema["$id"], SCHEMA_ID);
        assert_eq!(schema["additionalProperties"], false);
        // Doc comments are the descriptions editors show.
        let grace = &schema["definitions"]["DaemonConfig"]["properties"]["grace_period_secs"];
        assert!(
            grace["description"]
                .as_str()
                .unwrap()
                .contains("after its last client leaves"),
            "{grace}"
        );
        assert_eq!(grace["default"], 5);
    }

    #[test]
    fn the_example_and_the_tests_settings_pass_the_schema_and_the_loader() {
        let example = include_str!("../../.crucible.toml.example");
        assert!(
            example.starts_with(&format!("#:schema ./{SCHEMA_FILE}\n")),
            "the example names its schema on its first line"
        );
        let validator = validator();
        for text in [
            example,
            "",
            "[drivers]\nidle_timeout_minutes = 5\n\
             [drivers.sandbox]\nmemory = 512\nnetwork = \"host\"\nmounts = [\"/data:/d:ro\"]\n\
             [drivers.ssh]\nhost = \"me@box\"\n",
            "[agents.local]\ntype = \"internal\"\nbase_url = \"http://localhost:11434/v1\"\n\
             model = \"qwen\"\nidle_stop_minutes = 2.5\n",
            "[tui]\nattention = \"osc9\"\n[tui.keys]\nnext_waiting = \"ctrl-n\"\n\
             toggle_inbox = [\"f2\", \"alt-i\"]\ntoggle_context = []\n",
            "[[rules]]\nid = \"no-curl\"\nwhen = { command = \"curl\" }\naction = \"deny\"\n\
             [[rules]]\nid = \"r\"\nwhen = [{ kind = [\"edit\", \"delete\"], path = \"**/.env\" }]\n\
             action = \"ask\"\n",
            "[[webhooks]]\nname = \"gh\"\nsecret_env = \"S\"\nagent = \"a\"\nprompt = \"{{/x}}\"\n\
             ref = \"/issue/number\"\n[[cron]]\nid = \"nightly\"\nschedule = \"0 9 * * *\"\n\
             agent = \"a\"\ninstructions = \"check\"\n[channels.http]\nlisten = \"127.0.0.1:8421\"\n",
            "[budget]\nday_cost = 5\nwarn_percent = 80\n[budget.agents.claude]\nsession_tokens = 100\n\
             [budget.prices.local]\ninput = 0.5\noutput = 1.5\n\
             [secrets.TOKEN]\ncommand = \"pass show t\"\n[[hub.remotes]]\nssh = \"me@build\"\n\
             kilns = [\"/srv/api\"]\n",
        ] {
            if let Err(why) = Config::parse_layer(text) {
                panic!("{text:?} is not valid settings: {why}");
            }
            if let Err(why) = judged(&validator, text) {
                panic!("the schema refuses {text:?}: {why}");
            }
        }
    }

    #[test]
    fn a_misspelled_key_or_a_wrong_type_fails_the_schema_as_it_fails_the_loader() {
        let validator = validator();
        for (text, at) in [
            // Misspelled keys, at every depth.
            ("[deamon]\ngrace_period_secs = 1\n", ""),
            ("[daemon]\ngrace_perod_secs = 1\n", "/daemon"),
            (
                "[agents.x]\ncommand = \"a\"\ncomand = \"sh\"\n",
                "/agents/x",
            ),
            ("[drivers.sandbox]\nmemroy = 1\n", "/drivers/sandbox"),
            ("[drivers.lxc]\nmemory = 1\n", "/drivers"),
            ("[drivers.local]\nmemory = 1\n", "/drivers"),
            (
                "[[rules]]\nid = \"r\"\nwehn = { command = \"x\" }\n",
                "/rules/0",
            ),
            // Wrong types and values.
            (
                "[daemon]\ngrace_period_secs = \"soon\"\n",
                "/daemon/grace_period_secs",
            ),
            (
                "[daemon]\ngrace_period_secs = -1\n",
                "/daemon/grace_period_secs",
            ),
            ("[tui]\nattention = \"beep\"\n", "/tui/attention"),
            (
                "[agents.x]\ntype = \"telnet\"\ncommand = \"a\"\n",
                "/agents/x/type",
            ),
            ("[inbox]\ndefault_limit = 0\n", "/inbox/default_limit"),
            ("[web]\npairing_minutes = 5000\n", "/web/pairing_minutes"),
            (
                "[drivers.sandbox]\nnetwork = \"wifi\"\n",
                "/drivers/sandbox/network",
            ),
            ("[[webhooks]]\nname = \"gh\"\n", "/webhooks/0"),
        ] {
            assert!(
                Config::parse_layer(text).is_err(),
                "the loader takes {text:?}"
            );
            let why = judged(&validator, text).expect_err(text);
            assert!(why.contains(&format!(" at {at}")), "{text:?}: {why}");
        }
    }
}
