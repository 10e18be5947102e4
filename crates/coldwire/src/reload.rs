//! The lifecycle signals' actions in the binary. SIGHUP for every server (`serve`,
//! `proxy`, `wan`, `origin`): read the configuration file again under the same command line
//! ([`crate::config_file::reparse`]), build the new configuration as at start, hand it to
//! the running server, and say on stderr what changed live and what was kept (needs a
//! restart). A bad file changes nothing: the server runs on as it was and says why.
//! SIGUSR2 for every server: the binary upgrade ([`upgrade_action`]).

use coldwire_server::notify;

/// Reloads with `apply` (which builds and publishes the new configuration, returning the
/// settings kept as they were), reporting as `program`; tells systemd `RELOADING=1`, then
/// `READY=1` again.
pub fn reload(
    program: &str,
    apply: impl FnOnce(crate::cli::Command) -> anyhow::Result<Vec<&'static str>>,
) {
    let Some(command) = crate::config_file::reparse() else {
        coldwire_server::console::err(format_args!(
            "{program}: SIGHUP ignored: started without --config, there is no file to reload"
        ));
        return;
    };
    notify::reloading();
    match command.and_then(apply) {
        Ok(kept) if kept.is_empty() => {
            coldwire_server::console::err(format_args!("{program}: SIGHUP, configuration reloaded"))
        }
        Ok(kept) => coldwire_server::console::err(format_args!(
            "{program}: SIGHUP, configuration reloaded; not changed while running (a binary \
             upgrade, SIGUSR2, applies them but --listen; a restart applies all): {}",
            kept.join(", ")
        )),
        Err(error) => coldwire_server::console::err(format_args!(
            "{program}: SIGHUP, configuration NOT reloaded, the server runs on unchanged: {} — \
             fix the file (coldwire check-config) and send SIGHUP again",
            crate::error_chain(&error)
        )),
    }
    notify::notify("READY=1");
}

/// The SIGUSR2 action of a server: a binary upgrade through `handle`, reported as
/// `program` (the new process's id, or why this one serves on).
pub fn upgrade_action(
    program: &'static str,
    handle: coldwire_server::runtime::UpgradeHandle,
) -> Box<dyn FnMut() + Send> {
    Box::new(move || {
        coldwire_server::console::err(format_args!(
            "{program}: SIGUSR2, binary upgrade: starting the new process"
        ));
        match handle.upgrade() {
            Ok(pid) => coldwire_server::console::err(format_args!(
                "{program}: SIGUSR2, binary upgrade: new process {pid} serves; this one ({}) \
                 stops accepting, drains and exits",
                std::process::id()
            )),
            Err(error) => coldwire_server::console::err(format_args!(
                "{program}: SIGUSR2, binary upgrade failed: {error}"
            )),
        }
    })
}
