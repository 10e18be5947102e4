//! Scenario files: `experiments/<name>.toml`, one per experiment. The top level holds the
//! full run's parameters; an optional `[quick]` table holds overrides for `--quick` (a key
//! there replaces the same key at the top level; a table merges key by key). The result is
//! handed to the experiment as a `serde_json::Value`, and each experiment reads its own
//! typed parameters with [`parameters`], which names the file and the field on error.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::de::DeserializeOwned;

/// The name of the table of `--quick` overrides.
pub const QUICK_TABLE: &str = "quick";

/// Where the scenario of experiment `name` lives in `dir`.
pub fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.toml"))
}

/// The committed scenarios, compiled in: used when the default directory (`experiments`,
/// relative to where coldwire runs) has no file for the experiment, so `coldwire
/// experiment` works from anywhere.
const EMBEDDED: &[(&str, &str)] = &[
    (
        "cold-scaling",
        include_str!("../../../experiments/cold-scaling.toml"),
    ),
    (
        "rate-response",
        include_str!("../../../experiments/rate-response.toml"),
    ),
    (
        "connections-latency",
        include_str!("../../../experiments/connections-latency.toml"),
    ),
    ("splice", include_str!("../../../experiments/splice.toml")),
    (
        "accept-herd",
        include_str!("../../../experiments/accept-herd.toml"),
    ),
    (
        "slot-alloc",
        include_str!("../../../experiments/slot-alloc.toml"),
    ),
    ("peers", include_str!("../../../experiments/peers.toml")),
    (
        "slow-clients",
        include_str!("../../../experiments/slow-clients.toml"),
    ),
    ("polymix", include_str!("../../../experiments/polymix.toml")),
    ("robots", include_str!("../../../experiments/robots.toml")),
    (
        "live-day",
        include_str!("../../../experiments/live-day.toml"),
    ),
    (
        "network-cost",
        include_str!("../../../experiments/network-cost.toml"),
    ),
];

/// The compiled-in scenario of experiment `name`, if it has one.
pub fn embedded(name: &str) -> Option<&'static str> {
    EMBEDDED
        .iter()
        .find(|(embedded, _)| *embedded == name)
        .map(|(_, text)| *text)
}

/// Reads `<dir>/<name>.toml` and applies its `[quick]` overrides when `quick`. When `dir`
/// is the default (`experiments`) and has no such file (coldwire runs outside the
/// repository), the compiled-in copy of the committed scenario is used.
pub fn load(dir: &Path, name: &str, quick: bool) -> anyhow::Result<serde_json::Value> {
    let file = path(dir, name);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(error)
            if error.kind() == std::io::ErrorKind::NotFound
                && dir == Path::new(crate::DEFAULT_SCENARIOS) =>
        {
            let text = embedded(name).with_context(|| {
                format!(
                    "no scenario for {name:?}: neither {} nor a built-in one",
                    file.display()
                )
            })?;
            return parse(text, quick).with_context(|| format!("in the built-in scenario {name}"));
        }
        Err(error) => {
            return Err(error).with_context(|| {
                format!(
                    "cannot read the scenario {} — give --scenarios DIR (a directory of NAME.toml \
                     files), or leave it out to use the built-in scenarios",
                    file.display()
                )
            });
        }
    };
    parse(&text, quick).with_context(|| format!("in the scenario {}", file.display()))
}

/// Parses a scenario's text and applies its `[quick]` overrides when `quick`.
pub fn parse(text: &str, quick: bool) -> anyhow::Result<serde_json::Value> {
    let mut table: toml::Table = toml::from_str(text).context("not valid TOML")?;
    let overrides = match table.remove(QUICK_TABLE) {
        Some(toml::Value::Table(overrides)) => overrides,
        Some(_) => bail!("`{QUICK_TABLE}` must be a table of overrides ([{QUICK_TABLE}])"),
        None => toml::Table::new(),
    };
    if quick {
        merge(&mut table, overrides);
    }
    serde_json::to_value(&table).context("cannot convert the scenario to JSON")
}

/// Replaces `base`'s keys by `overrides`' (tables merge recursively).
fn merge(base: &mut toml::Table, overrides: toml::Table) {
    for (key, value) in overrides {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(value)) => merge(inner, value),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The experiment's typed parameters from its scenario (use `#[serde(deny_unknown_fields)]`
/// so a misspelt key is an error rather than a silent default).
pub fn parameters<T: DeserializeOwned>(
    name: &str,
    scenario: &serde_json::Value,
) -> anyhow::Result<T> {
    serde_json::from_value(scenario.clone()).map_err(|error| {
        anyhow::anyhow!(
            "the scenario experiments/{name}.toml does not fit the {name} experiment: {error} \
             (see docs/experiments.md for its keys)"
        )
    })
}

/// Sorts and deduplicates the list `key` of experiment `name`'s scenario, and checks it is
/// not empty and every value is 1 to `max`; `example` shows a good list in the error.
pub fn check_list<T>(
    name: &str,
    key: &str,
    values: &mut Vec<T>,
    max: T,
    example: &str,
) -> anyhow::Result<()>
where
    T: Ord + Copy + std::fmt::Display + From<u8>,
{
    values.sort_unstable();
    values.dedup();
    anyhow::ensure!(
        !values.is_empty(),
        "{name}: `{key}` is empty — list the values to measure, e.g. {example}"
    );
    if let Some(&bad) = values
        .iter()
        .find(|&&value| value < T::from(1) || value > max)
    {
        anyhow::bail!("{name}: `{key}` has {bad}; each value must be 1 to {max}");
    }
    Ok(())
}

/// Checks that the count `key` of experiment `name`'s scenario is 1 to `max`.
pub fn check_count<T>(name: &str, key: &str, value: T, max: T) -> anyhow::Result<()>
where
    T: Ord + Copy + std::fmt::Display + From<u8>,
{
    anyhow::ensure!(
        value >= T::from(1) && value <= max,
        "{name}: `{key}` is {value}; it must be 1 to {max}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn every_experiment_has_a_built_in_scenario_that_parses() {
        for experiment in crate::EXPERIMENTS {
            let text = embedded(experiment.name)
                .unwrap_or_else(|| panic!("no built-in scenario for {}", experiment.name));
            assert!(parse(text, true).is_ok(), "{}", experiment.name);
        }
        assert!(embedded("no-such").is_none());
    }

    #[test]
    fn a_given_directory_without_the_file_says_how_to_do_without_it() {
        let missing = Path::new("/nonexistent-coldwire-scenarios");
        let error = format!("{:#}", load(missing, "splice", false).unwrap_err());
        assert!(error.contains("--scenarios DIR"), "{error}");
        assert!(error.contains("built-in"), "{error}");
    }
    use super::*;

    const SCENARIO: &str = r#"
        backends = ["select", "epoll"]
        cold = [0, 1000, 15000]
        duration = 5.0
        [server]
        cpu = 0
        workers = 1
        [quick]
        cold = [0, 500]
        duration = 1.0
        [quick.server]
        workers = 2
    "#;

    #[test]
    fn full_run_ignores_the_quick_table() {
        let value = parse(SCENARIO, false).unwrap();
        assert_eq!(value["cold"], serde_json::json!([0, 1000, 15000]));
        assert_eq!(value["duration"], 5.0);
        assert_eq!(value["server"]["workers"], 1);
        assert!(value.get(QUICK_TABLE).is_none());
    }

    #[test]
    fn quick_run_overrides_keys_and_merges_tables() {
        let value = parse(SCENARIO, true).unwrap();
        assert_eq!(value["cold"], serde_json::json!([0, 500]));
        assert_eq!(value["duration"], 1.0);
        assert_eq!(value["backends"], serde_json::json!(["select", "epoll"]));
        assert_eq!(value["server"]["workers"], 2);
        assert_eq!(value["server"]["cpu"], 0, "keys not overridden stay");
        assert!(value.get(QUICK_TABLE).is_none());
    }

    #[test]
    fn errors_name_the_problem() {
        let error = parse("quick = 3", true).unwrap_err();
        assert!(
            format!("{error:#}").contains("table of overrides"),
            "{error:#}"
        );
        let error = parse("x = [", false).unwrap_err();
        assert!(format!("{error:#}").contains("not valid TOML"), "{error:#}");

        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Typed {
            duration: f64,
        }
        let error = parameters::<Typed>("demo", &parse("durration = 1.0", false).unwrap())
            .unwrap_err()
            .to_string();
        assert!(error.contains("experiments/demo.toml"), "{error}");
        assert!(error.contains("durration"), "{error}");
    }

    #[test]
    fn missing_file_says_where_it_looked() {
        let dir = tempfile::tempdir().unwrap();
        let error = load(dir.path(), "nothing", false).unwrap_err();
        assert!(format!("{error:#}").contains("nothing.toml"), "{error:#}");
    }
}
