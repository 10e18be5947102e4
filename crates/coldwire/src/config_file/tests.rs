//! The configuration file's tests: tokens, precedence, errors at their place, every flag
//! a key, every example valid.

use super::*;

fn write(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

fn expand_with(file: &Path, extra: &[&str]) -> Result<Vec<String>, ConfigError> {
    let mut arguments: Vec<OsString> = vec!["coldwire".into(), "proxy".into()];
    arguments.extend(extra.iter().map(OsString::from));
    arguments.push("--config".into());
    arguments.push(file.into());
    expand_from(arguments).map(|tokens| {
        tokens
            .into_iter()
            .map(|token| token.to_string_lossy().into_owned())
            .collect()
    })
}

#[test]
fn a_table_becomes_flags_before_the_command_line() {
    let file = write(
        "[proxy]\nlisten = \"127.0.0.1:0\"\nworkers = 2\nallow = [\"10.0.0.0/8\", \"192.168.0.0/16\"]\n\
         revalidate-always = true\nconnect-any-port = false\nidle-timeout = \"2m\"\n",
    );
    let tokens = expand_with(file.path(), &[]).unwrap();
    assert_eq!(
        tokens[2..8],
        [
            "--listen=127.0.0.1:0",
            "--workers=2",
            "--allow=10.0.0.0/8",
            "--allow=192.168.0.0/16",
            "--revalidate-always",
            "--idle-timeout=2m",
        ]
    );
}

#[test]
fn the_command_line_wins_over_the_file() {
    let file = write("[proxy]\nworkers = 2\nallow = [\"10.0.0.0/8\"]\n");
    let tokens = expand_with(file.path(), &["--workers", "3", "--allow=172.16.0.0/12"]).unwrap();
    assert!(
        !tokens.iter().any(|token| token == "--workers=2"),
        "{tokens:?}"
    );
    assert!(
        !tokens.iter().any(|token| token == "--allow=10.0.0.0/8"),
        "{tokens:?}"
    );
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(tokens).unwrap();
    let crate::cli::Command::Proxy(proxy) = cli.command else {
        panic!("not proxy")
    };
    assert_eq!(proxy.runtime.workers, Some(3));
    assert_eq!(proxy.allow, ["172.16.0.0/12"]);
}

#[test]
fn unknown_keys_name_their_line_and_column() {
    let file = write("[proxy]\nworkers = 2\n  idle_timeout = \"2m\"\n");
    let error = expand_with(file.path(), &[]).unwrap_err().to_string();
    assert!(
        error.contains(":3:3: unknown key \"idle_timeout\""),
        "{error}"
    );
    assert!(error.contains("idle-timeout"), "{error}");
    let file = write("[proxy]\nroot = \"/srv\"\n");
    let error = expand_with(file.path(), &[]).unwrap_err().to_string();
    assert!(
        error.contains(":2:1:") && error.contains("coldwire serve"),
        "{error}"
    );
}

#[test]
fn wrong_types_and_values_say_the_expected_form() {
    let cases = [
        ("revalidate-always = \"yes\"", "2:21", "switch"),
        ("workers = [1, 2]", "2:11", "one value, not a list"),
        ("idle-timeout = true", "2:16", "idle-timeout takes a value"),
        ("idle-timeout = \"soon\"", "2:16", "30s"),
        ("listen = \"nowhere\"", "2:10", "HOST:PORT"),
        ("io = \"carrier-pigeon\"", "2:6", "epoll"),
        ("workers = -1", "2:11", "invalid value"),
    ];
    for (line, place, expected) in cases {
        let file = write(&format!("[proxy]\n{line}\n"));
        let error = expand_with(file.path(), &[]).unwrap_err().to_string();
        assert!(error.contains(&format!(":{place}: ")), "{line}: {error}");
        assert!(error.contains(expected), "{line}: {error}");
    }
}

#[test]
fn a_file_without_the_role_or_with_stray_keys_is_refused() {
    let file = write("[serve]\nroot = \"/srv\"\n");
    let error = expand_with(file.path(), &[]).unwrap_err().to_string();
    assert!(
        error.contains("no [proxy] table") && error.contains("[serve]"),
        "{error}"
    );
    let file = write("listen = \"127.0.0.1:0\"\n");
    let error = expand_with(file.path(), &[]).unwrap_err().to_string();
    assert!(
        error.contains(":1:1:") && error.contains("outside a table"),
        "{error}"
    );
    let file = write("[proxy\n");
    let error = expand_with(file.path(), &[]).unwrap_err().to_string();
    assert!(
        error.contains("not valid TOML") && error.contains(":1:"),
        "{error}"
    );
}

/// A value of the form `arg` takes: its default, or a sample for its value name.
fn sample(arg: &Arg) -> Option<String> {
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return Some("true".to_owned());
    }
    if let Some(default) = arg.get_default_values().first() {
        return Some(format!("{:?}", default.to_string_lossy()));
    }
    let name = arg.get_value_names()?.first()?.to_string();
    let value = match name.as_str() {
        "ADDR" => "\"127.0.0.1:9\"",
        "ROOT" => "\"/tmp\"",
        "DURATION" => "\"1s\"",
        "FILE" => "\"/tmp/coldwire-sample\"",
        "URL" => "\"http://127.0.0.1:9\"",
        "CIDR" => "[\"10.0.0.0/8\"]",
        "PORT" => "[8443]",
        "BACKEND" => "\"epoll\"",
        "RATE" => "\"10Mbit\"",
        "BYTES" => "\"1MiB\"",
        _ => return None,
    };
    Some(value.to_owned())
}

#[test]
fn every_flag_of_every_server_is_accepted_as_a_key() {
    for role in ROLES {
        let command = role_command(role).unwrap();
        let mut whole = format!("[{role}]\n");
        let mut flags = 0;
        for arg in keys(&command) {
            flags += 1;
            let long = arg.get_long().unwrap();
            let value = sample(arg);
            let text = format!(
                "[{role}]\n{long} = {}\n",
                value.as_deref().unwrap_or("\"?\"")
            );
            let file = write(&text);
            match (check(file.path()), &value) {
                (Ok(_), _) => whole.push_str(&text[role.len() + 3..]),
                // No sample for this value form: the key must still be known.
                (Err(error), None) => {
                    assert!(
                        !error.to_string().contains("unknown key"),
                        "{role}.{long}: {error}"
                    )
                }
                (Err(error), Some(_)) => panic!("{role}.{long}: {error}"),
            }
        }
        assert!(flags > 10, "{role} has {flags} keys");
        // All of them at once, through clap as the subcommand would be started.
        let file = write(&whole);
        let arguments = vec![
            OsString::from("coldwire"),
            role.into(),
            "--config".into(),
            file.path().into(),
        ];
        let expanded = expand_from(arguments).unwrap();
        if let Err(error) = <crate::cli::Cli as clap::Parser>::try_parse_from(&expanded) {
            panic!("[{role}] {whole}: {error}");
        }
    }
}

#[test]
fn every_example_passes_check_config() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        if path
            .extension()
            .is_some_and(|extension| extension == "toml")
        {
            let roles = check(&path).unwrap_or_else(|error| panic!("{error}"));
            checked.extend(roles.into_iter().map(|(role, _)| role));
        }
    }
    checked.sort();
    assert_eq!(checked, ["origin", "proxy", "serve", "wan"]);
}
