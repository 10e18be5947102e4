//! The configuration file: `--config FILE` on every server subcommand and
//! `coldwire check-config FILE`.
//!
//! The file is TOML with one table per role, `[serve]`, `[proxy]`, `[wan]` and `[origin]`
//! (a file may hold several; each subcommand reads its own). A key is the long name of a
//! flag of that subcommand (`idle-timeout = "2m"`, `allow = ["10.0.0.0/8"]`,
//! `revalidate-always = true`), so the keys are not listed anywhere here: they are read
//! from clap's own description of the subcommand ([`clap::Command`]), and a flag added to
//! a subcommand is a key of its table with no other code.
//!
//! How it is applied: the table becomes command-line tokens (`--idle-timeout=2m`) placed
//! before the user's own arguments, and clap parses the whole as usual — the same value
//! parsers, defaults and checks as the flags. A key whose flag is also on the command line
//! is left out: the command line wins (for a repeatable flag such as `--allow`, the
//! command line's list replaces the file's). Each value is checked here first with the
//! flag's own value parser, so a bad value is reported at its line and column in the file.

use std::ffi::OsString;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::builder::Resettable;
use clap::{Arg, ArgAction, Command, CommandFactory};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The subcommands a configuration file configures, each a table of the file.
pub const ROLES: [&str; 4] = ["serve", "proxy", "wan", "origin"];

/// Flags that are never keys: the file's own flag and clap's.
const NOT_KEYS: [&str; 3] = ["config", "help", "version"];

/// The command line the process started with, kept for a reload (SIGHUP re-reads the file
/// and re-applies the same command line over it).
static ORIGINAL_ARGUMENTS: OnceLock<Vec<OsString>> = OnceLock::new();

/// What is wrong with a configuration file: where (line and column, 1-based, when the
/// problem has a place) and what to do.
#[derive(Debug)]
pub struct ConfigError {
    path: PathBuf,
    place: Option<(usize, usize)>,
    message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.place {
            Some((line, column)) => write!(
                formatter,
                "{}:{line}:{column}: {}",
                self.path.display(),
                self.message
            ),
            None => write!(formatter, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// One file being read: its path and text, to place errors.
struct Source<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: self.path.to_path_buf(),
            place: span.map(|span| line_and_column(self.text, span.start)),
            message: message.into(),
        }
    }
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The clap description of `role`'s subcommand, built (value parsers ready).
fn role_command(role: &str) -> Option<Command> {
    let mut command = crate::cli::Cli::command();
    command.build();
    command.find_subcommand(role).cloned()
}

/// The flags of a subcommand that are keys of its table.
fn keys(command: &Command) -> impl Iterator<Item = &Arg> {
    command
        .get_arguments()
        .filter(|arg| arg.get_long().is_some_and(|long| !NOT_KEYS.contains(&long)))
}

/// The key names (long flag names) of `role`, in the order of its `--help`.
pub fn role_keys(role: &str) -> Vec<String> {
    role_command(role)
        .map(|command| {
            keys(&command)
                .filter_map(|arg| arg.get_long().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads and parses `path`.
fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|error| ConfigError {
        path: path.to_path_buf(),
        place: None,
        message: format!(
            "cannot read the configuration file: {error} — check the path given to --config"
        ),
    })
}

/// The document's tables by role, each checked; `only` limits the check to one role (a
/// server reads only its own table; check-config checks them all).
fn roles_of<'i>(
    source: &Source<'_>,
    document: &'i DeTable<'i>,
) -> Result<Vec<(&'i str, &'i DeTable<'i>)>, ConfigError> {
    let mut entries: Vec<_> = document.iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    let mut roles = Vec::new();
    for (key, value) in entries {
        let name: &str = key.get_ref();
        match value.get_ref() {
            DeValue::Table(table) if ROLES.contains(&name) => roles.push((name, table)),
            DeValue::Table(_) => {
                return Err(source.error(
                    Some(key.span()),
                    format!("unknown table [{name}]; the tables are [serve], [proxy], [wan] and [origin]"),
                ));
            }
            _ => {
                return Err(source.error(
                    Some(key.span()),
                    format!(
                        "key {name:?} is outside a table; put it under the table of its \
                         subcommand: [serve], [proxy], [wan] or [origin]"
                    ),
                ));
            }
        }
    }
    Ok(roles)
}

/// The tokens of one role's table, checked key by key against the subcommand's flags;
/// keys in `skip` (given on the command line) are left out.
fn tokens_of(
    source: &Source<'_>,
    role: &str,
    table: &DeTable<'_>,
    skip: &[String],
) -> Result<Vec<OsString>, ConfigError> {
    let command = role_command(role).expect("every role is a subcommand");
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    let mut tokens = Vec::new();
    for (key, value) in entries {
        let name: &str = key.get_ref();
        let Some(arg) = keys(&command).find(|arg| arg.get_long() == Some(name)) else {
            return Err(source.error(Some(key.span()), unknown_key(role, name, &command)));
        };
        if skip.iter().any(|given| given == name) {
            continue;
        }
        append_tokens(source, arg, value, &mut tokens)?;
    }
    Ok(tokens)
}

/// The message for a key that is no flag of `role`.
fn unknown_key(role: &str, name: &str, command: &Command) -> String {
    let dashed = name.replace('_', "-");
    if dashed != name && keys(command).any(|arg| arg.get_long() == Some(dashed.as_str())) {
        return format!("unknown key {name:?} in [{role}]; keys are spelt as the flags: {dashed}");
    }
    if let Some(other) = ROLES
        .iter()
        .find(|other| **other != role && role_keys(other).iter().any(|key| key == name))
    {
        return format!(
            "unknown key {name:?} in [{role}]: it is a flag of `coldwire {other}`, not of `coldwire {role}`"
        );
    }
    format!(
        "unknown key {name:?} in [{role}]; its keys are the long flags of `coldwire {role} --help`: {}",
        keys(command)
            .filter_map(Arg::get_long)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Appends the tokens of `key = value` for `arg`, each value checked by the flag's parser.
fn append_tokens(
    source: &Source<'_>,
    arg: &Arg,
    value: &Spanned<DeValue<'_>>,
    tokens: &mut Vec<OsString>,
) -> Result<(), ConfigError> {
    let long = arg.get_long().unwrap_or_default();
    match arg.get_action() {
        ArgAction::SetTrue | ArgAction::SetFalse => match value.get_ref() {
            DeValue::Boolean(on) => {
                let set = *on == matches!(arg.get_action(), ArgAction::SetTrue);
                if set {
                    tokens.push(format!("--{long}").into());
                }
                Ok(())
            }
            other => Err(source.error(
                Some(value.span()),
                format!(
                    "{long} is a switch: write {long} = true or false, not {}",
                    describe(other)
                ),
            )),
        },
        ArgAction::Append => match value.get_ref() {
            DeValue::Array(items) => {
                for item in items.iter() {
                    let text = scalar(source, arg, item)?;
                    check_value(source, arg, item.span(), &text)?;
                    tokens.push(format!("--{long}={text}").into());
                }
                Ok(())
            }
            _ => {
                let text = scalar(source, arg, value)?;
                check_value(source, arg, value.span(), &text)?;
                tokens.push(format!("--{long}={text}").into());
                Ok(())
            }
        },
        _ => {
            if let DeValue::Array(_) = value.get_ref() {
                return Err(source.error(
                    Some(value.span()),
                    format!(
                        "{long} takes one value, not a list: {long} = {}",
                        example(arg)
                    ),
                ));
            }
            let text = scalar(source, arg, value)?;
            check_value(source, arg, value.span(), &text)?;
            tokens.push(format!("--{long}={text}").into());
            Ok(())
        }
    }
}

/// A value as the text of a flag's value: strings as written, numbers in decimal.
fn scalar(
    source: &Source<'_>,
    arg: &Arg,
    value: &Spanned<DeValue<'_>>,
) -> Result<String, ConfigError> {
    let long = arg.get_long().unwrap_or_default();
    match value.get_ref() {
        DeValue::String(text) => Ok(text.to_string()),
        DeValue::Integer(integer) => {
            let digits = integer.as_str().replace('_', "");
            Ok(
                i128::from_str_radix(digits.trim_start_matches('+'), integer.radix())
                    .map_or(digits, |number| number.to_string()),
            )
        }
        DeValue::Float(float) => Ok(float.as_str().replace('_', "")),
        other => Err(source.error(
            Some(value.span()),
            format!(
                "{long} takes a value, not {}: {long} = {}",
                describe(other),
                example(arg)
            ),
        )),
    }
}

/// Runs the flag's own value parser on `text` (through a command holding that flag
/// alone), so that a bad value is placed in the file.
fn check_value(
    source: &Source<'_>,
    arg: &Arg,
    span: Range<usize>,
    text: &str,
) -> Result<(), ConfigError> {
    let long = arg.get_long().unwrap_or_default();
    Command::new("coldwire")
        .no_binary_name(true)
        // Alone, the flag's relations to the subcommand's other flags (`--trace-format`
        // requires `--trace`) would name flags this one-flag command lacks: drop them.
        .arg(
            arg.clone()
                .required(false)
                .requires(Resettable::Reset)
                .conflicts_with(Resettable::Reset)
                .group(Resettable::Reset),
        )
        .try_get_matches_from([format!("--{long}={text}")])
        .map(drop)
        .map_err(|error| source.error(Some(span), one_line(&error)))
}

/// A clap error on one line, without its "error: " and "For more information" parts.
fn one_line(error: &clap::Error) -> String {
    let rendered = error.to_string();
    let lines: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("For more information"))
        .collect();
    let text = lines.join(" ");
    text.strip_prefix("error: ").unwrap_or(&text).to_owned()
}

/// What kind of TOML value this is, for messages.
fn describe(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "a number",
        DeValue::Float(_) => "a number",
        DeValue::Boolean(_) => "true or false",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "a list",
        DeValue::Table(_) => "a table",
    }
}

/// An example of the value form `arg` takes, for messages: its default when it has one.
fn example(arg: &Arg) -> String {
    match arg.get_default_values().first() {
        Some(default) => format!("{:?}", default.to_string_lossy()),
        None => format!(
            "\"{}\"",
            arg.get_value_names()
                .and_then(|names| names.first())
                .map_or("VALUE".to_owned(), ToString::to_string)
        ),
    }
}

/// Checks a whole file: every table, every key, every value. Returns the roles found and
/// how many keys each sets.
pub fn check(path: &Path) -> Result<Vec<(String, usize)>, ConfigError> {
    let text = read(path)?;
    let source = Source { path, text: &text };
    let document = parse(&source)?;
    let roles = roles_of(&source, document.get_ref())?;
    if roles.is_empty() {
        return Err(source.error(
            None,
            "no [serve], [proxy], [wan] or [origin] table: nothing is configured",
        ));
    }
    roles
        .into_iter()
        .map(|(role, table)| {
            tokens_of(&source, role, table, &[])?;
            Ok((role.to_owned(), table.len()))
        })
        .collect()
}

fn parse<'i>(source: &Source<'i>) -> Result<Spanned<DeTable<'i>>, ConfigError> {
    DeTable::parse(source.text).map_err(|error| {
        source.error(
            error.span(),
            format!("not valid TOML: {}", error.message().trim()),
        )
    })
}

/// Where `--config FILE` is among `arguments` (after the subcommand), if given.
fn config_path(arguments: &[OsString]) -> Option<PathBuf> {
    let mut tokens = arguments.iter();
    while let Some(token) = tokens.next() {
        let text = token.to_string_lossy();
        if text == "--" {
            return None;
        }
        if text == "--config" {
            return tokens.next().map(PathBuf::from);
        }
        if let Some(path) = token.as_encoded_bytes().strip_prefix(b"--config=") {
            return Some(PathBuf::from(String::from_utf8_lossy(path).into_owned()));
        }
    }
    None
}

/// The long names of the flags of `command` present in `arguments` (short forms mapped
/// to their long names).
fn given_flags(command: &Command, arguments: &[OsString]) -> Vec<String> {
    let mut given = Vec::new();
    for token in arguments {
        let text = token.to_string_lossy();
        if text == "--" {
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            given.push(long.split('=').next().unwrap_or_default().to_owned());
        } else if let Some(short) = text.strip_prefix('-').and_then(|rest| rest.chars().next())
            && let Some(arg) = command
                .get_arguments()
                .find(|arg| arg.get_short() == Some(short))
            && let Some(long) = arg.get_long()
        {
            given.push(long.to_owned());
        }
    }
    given
}

/// The command line with the configuration file's values put in: for a server
/// subcommand given `--config FILE`, the tokens of the file's table for it go right after
/// the subcommand's name (the command line's own flags win). Other command lines are
/// returned as they are. Also keeps the command line for [`reparse`].
pub fn expand(arguments: Vec<OsString>) -> Result<Vec<OsString>, ConfigError> {
    let _ = ORIGINAL_ARGUMENTS.set(arguments.clone());
    expand_from(arguments)
}

fn expand_from(arguments: Vec<OsString>) -> Result<Vec<OsString>, ConfigError> {
    let Some(role) = arguments
        .get(1)
        .and_then(|role| role.to_str())
        .filter(|role| ROLES.contains(role))
        .map(str::to_owned)
    else {
        return Ok(arguments);
    };
    let Some(path) = config_path(&arguments[2..]) else {
        return Ok(arguments);
    };
    let text = read(&path)?;
    let source = Source {
        path: &path,
        text: &text,
    };
    let document = parse(&source)?;
    let roles = roles_of(&source, document.get_ref())?;
    let Some((_, table)) = roles.iter().find(|(name, _)| *name == role) else {
        let found: Vec<String> = roles.iter().map(|(name, _)| format!("[{name}]")).collect();
        return Err(source.error(
            None,
            format!(
                "no [{role}] table for `coldwire {role}` (the file has {}); add one",
                if found.is_empty() {
                    "none".to_owned()
                } else {
                    found.join(", ")
                }
            ),
        ));
    };
    let command = role_command(&role).expect("every role is a subcommand");
    let given = given_flags(&command, &arguments[2..]);
    let tokens = tokens_of(&source, &role, table, &given)?;
    let mut expanded = arguments[..2].to_vec();
    expanded.extend(tokens);
    expanded.extend_from_slice(&arguments[2..]);
    Ok(expanded)
}

/// The command line of this process again, with the configuration file read anew (for a
/// reload): `None` when the process was not started with a configuration file.
pub fn reparse() -> Option<anyhow::Result<crate::cli::Command>> {
    let original = ORIGINAL_ARGUMENTS.get()?;
    config_path(original.get(2..).unwrap_or_default())?;
    Some((|| {
        let expanded = expand_from(original.clone())?;
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(expanded)
            .map_err(|error| anyhow::anyhow!("{}", one_line(&error)))?;
        Ok(cli.command)
    })())
}

#[cfg(test)]
mod tests;
