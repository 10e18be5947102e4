//! `coldwire check-config FILE`: checks a configuration file as the servers read it (every
//! table, key and value; see [`crate::config_file`]) and says what it configures.

use crate::cli::CheckConfigArgs;
use crate::config_file;

/// Checks the file; an error (exit status 78) names the line and column of the problem.
pub fn run(arguments: CheckConfigArgs) -> anyhow::Result<()> {
    let roles = config_file::check(&arguments.file)?;
    let summary: Vec<String> = roles
        .iter()
        .map(|(role, keys)| format!("[{role}] {keys} key(s)"))
        .collect();
    coldwire_server::console::out(format_args!(
        "{}: valid ({})",
        arguments.file.display(),
        summary.join(", ")
    ));
    Ok(())
}
