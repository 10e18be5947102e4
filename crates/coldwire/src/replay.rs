//! `coldwire bench --replay FILE`: replays an access log (Common Log Format or Squid
//! native) against the server `--url` names (or through `--proxy`), each logged client a
//! user of the population engine with its own source address, connections and logged
//! order, at the logged pace divided by `--speedup`. Reports as the bench's other modes
//! (table, JSON) plus the replay's own account: logged vs offered vs achieved rate,
//! connections planned vs opened. With `--replay-connections N` the same log is replayed
//! in a closed loop on N connections for `--duration` after `--warmup`
//! ([`ClosedReplayPopulation`]). docs/replay.md.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use coldwire_bench::population::Population;
use coldwire_bench::population::PopulationConfig;
use coldwire_bench::population::run::{PopulationPlan, run_population_on};
use coldwire_bench::replay::{ReplayPopulation, connection_rule};
use coldwire_bench::replay_closed::ClosedReplayPopulation;
use coldwire_bench::report::{BenchReport, MachineInfo, ServerInfo};
use coldwire_bench::{LoadConfig, ServerWatch, Target};
use coldwire_io::{Backend, DriverConfig};
use coldwire_server::system;
use coldwire_workload::trace::{ReplayPlan, TraceFormat};

use crate::bench::{Bar, BenchArgs, finish, unix_seconds};

/// A late arrival is sent late, never skipped: a replay sends every logged request.
const NEVER_SKIP: Duration = Duration::from_secs(24 * 3600);

/// Most connections a replay holds at once (one per client at most).
const MAX_OPEN: usize = 60_000;

/// Runs `coldwire bench --replay`.
pub fn run(arguments: &BenchArgs, trace_path: &Path, stop: &Arc<AtomicBool>) -> anyhow::Result<()> {
    let Some(url) = arguments.urls.first() else {
        bail!(
            "give the server to replay against with --url http://HOST:PORT (e.g. a `coldwire origin --trace {}`)",
            trace_path.display()
        );
    };
    if arguments.urls.len() > 1 {
        bail!("--replay sends every request to one server: give one --url");
    }
    if arguments.spawn.is_some() {
        bail!("--replay does not start the server: start it first and give --server-pid");
    }
    if arguments.cold > 0 {
        bail!(
            "--replay does not hold cold connections (--cold): run a second `coldwire bench --cold N --rate 1` beside it, as `coldwire experiment live-day` does"
        );
    }
    if !(arguments.speedup.is_finite() && arguments.speedup > 0.0) {
        bail!("--speedup must be a positive number (1: the logged pace)");
    }
    if !(arguments.timeout.is_finite() && arguments.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let target = Target::parse(url)?;
    let server = target.resolve()?;
    let trace = crate::trace::read_trace(trace_path, arguments.replay_format)?;
    let rule = connection_rule(
        Duration::from_secs_f64(arguments.replay_idle_gap.max(0.0)),
        arguments.replay_max_requests,
    );
    let plan = ReplayPlan::new(&trace.records, arguments.speedup, rule);
    if plan.requests == 0 {
        bail!(
            "{} has no GET or HEAD request to replay ({} records of other methods)",
            trace_path.display(),
            plan.skipped
        );
    }
    let connect_to = arguments.proxy.unwrap_or(server);
    let own_sources = connect_to.ip().is_loopback();
    let closed = arguments.replay_connections;
    if let Some(connections) = closed {
        if connections == 0 || connections > MAX_OPEN {
            bail!("--replay-connections must be 1 to {MAX_OPEN}");
        }
        if arguments.speedup != 1.0 {
            bail!(
                "--replay-connections replays as fast as the server answers: leave out --speedup (it sets the logged pace)"
            );
        }
    }
    let max_open = closed.unwrap_or_else(|| plan.clients.len().min(MAX_OPEN));
    let limit = system::raise_open_files_limit().context("cannot read the open-files limit")?;
    if (limit as usize) < max_open + 64 {
        if let Some(connections) = closed {
            bail!(
                "--replay-connections {connections} needs about {} descriptors but the open-files limit is {limit} — raise the hard limit (ulimit -Hn) or use fewer connections",
                max_open + 64
            );
        }
        bail!(
            "{} has {} clients and the replay may hold a connection for each: it needs about {} \
             descriptors but the open-files limit is {limit} — raise the hard limit (ulimit -Hn)",
            trace_path.display(),
            plan.clients.len(),
            max_open + 64
        );
    }
    let timeout = Duration::from_secs_f64(arguments.timeout);
    let logged_seconds = plan.logged_span.as_secs_f64();
    let logged_rate = if logged_seconds > 0.0 {
        plan.requests as f64 / logged_seconds
    } else {
        0.0
    };
    let scenario = serde_json::json!({
        "replay": {
            "file": trace_path.display().to_string(),
            "format": trace.format.map_or("-", TraceFormat::name),
            "records": trace.records.len(),
            "malformed_lines": trace.malformed,
            "skipped_records": plan.skipped,
            "requests": plan.requests,
            "clients": plan.clients.len(),
            "planned_connections": plan.connections(),
            "connection_idle_gap_seconds": rule.idle_gap_ms as f64 / 1000.0,
            "connection_max_requests": rule.max_requests,
            "logged_span_seconds": logged_seconds,
            "speedup": plan.speedup,
            "logged_rate": logged_rate,
            "offered_mean_rate": logged_rate * plan.speedup,
            "own_source_addresses": own_sources,
            "closed_loop_connections": closed,
        }
    });
    let mut parameters = LoadConfig::new(vec![target.clone()]);
    parameters.proxy = arguments.proxy;
    parameters.timeout = timeout;
    parameters.connections = max_open;
    parameters.late_limit = NEVER_SKIP;
    parameters.seed = arguments.seed;
    parameters.workload = "replay";
    let pid = arguments.server_pid;
    let phases = match closed {
        Some(connections) => vec![
            ("warmup".to_owned(), arguments.warmup()),
            (format!("{connections} connections"), arguments.duration()),
        ],
        None => vec![(
            format!("{}x", plan.speedup),
            plan.replay_span() + timeout + Duration::from_secs(1),
        )],
    };
    let population_plan = PopulationPlan {
        name: "replay".into(),
        phases,
        kind_names: vec!["get", "head"],
        watch: ServerWatch {
            pid,
            stats_url: arguments.server_stats.clone(),
        },
        parameters,
        scenario: Some(scenario),
    };
    let config = PopulationConfig {
        timeout,
        late_limit: NEVER_SKIP,
        max_open,
        drain: timeout,
        seed: arguments.seed,
    };
    if let Some(connections) = closed {
        coldwire_server::errln!(
            "coldwire bench: replaying {} in a closed loop on {connections} connections — {} logged connections              ({} requests from {} clients) taken in logged order and repeated, {:.1} s warm-up, {:.1} s measured{}",
            trace_path.display(),
            plan.connections(),
            plan.requests,
            plan.clients.len(),
            arguments.warmup().as_secs_f64(),
            arguments.duration().as_secs_f64(),
            if own_sources {
                ", each from its client's own 127.1.x.y address"
            } else {
                ""
            }
        );
    } else {
        coldwire_server::errln!(
            "coldwire bench: replaying {} — {} requests from {} clients over {:.0} s logged, at {}× ({:.1} s), \
             {} connections (a new one after {:.0} s idle or {} requests){}",
            trace_path.display(),
            plan.requests,
            plan.clients.len(),
            logged_seconds,
            plan.speedup,
            plan.replay_span().as_secs_f64(),
            plan.connections(),
            rule.idle_gap_ms as f64 / 1000.0,
            rule.max_requests,
            if own_sources {
                ", each client from its own 127.1.x.y address"
            } else {
                ""
            }
        );
    }
    if let Some(cpu) = arguments.cpu {
        system::pin_current_thread(cpu)
            .with_context(|| format!("cannot pin the generator to CPU {cpu}"))?;
    }
    let planned_connections = plan.connections();
    let requests = plan.requests;
    let population: Box<dyn Population> = match closed {
        Some(connections) => Box::new(ClosedReplayPopulation::new(
            &plan,
            connections,
            server,
            target.authority(),
            arguments.proxy,
            own_sources,
        )),
        None => Box::new(ReplayPopulation::new(
            plan,
            server,
            target.authority(),
            arguments.proxy,
            own_sources,
        )),
    };
    let started = unix_seconds();
    let mut bar = Bar::new(arguments.quiet);
    let backend = arguments.backend.unwrap_or_else(Backend::best_available);
    let driver_config = DriverConfig {
        max_connections: max_open + 64,
        ..DriverConfig::default()
    };
    let result = run_population_on(
        backend,
        &driver_config,
        population,
        config,
        &population_plan,
        stop,
        &mut bar,
    );
    bar.finish();
    let run = result?;
    if let (Some(connections), Some(phase)) = (closed, run.phases.last()) {
        coldwire_server::outln!(
            "replay: closed loop on {connections} connections (at most {} open at once): {} requests answered \
             ({} errors) in {:.1} s, {:.1}/s, {} connections opened",
            phase
                .population
                .as_ref()
                .map_or(0, |population| population.max_open_connections),
            phase.succeeded_requests,
            phase.errors_total,
            phase.window_seconds,
            phase.achieved_rate,
            phase.connections_opened,
        );
    } else if let Some(phase) = run.phases.first() {
        coldwire_server::outln!(
            "replay: {} of {requests} requests answered ({} errors), {} connections opened of {planned_connections} planned; \
             logged {logged_rate:.3}/s × {} = {:.3}/s offered, {:.3}/s achieved",
            phase.succeeded_requests,
            phase.errors_total,
            phase.connections_opened,
            arguments.speedup,
            logged_rate * arguments.speedup,
            phase.achieved_rate,
        );
    }
    let report = BenchReport::of_this_process(
        started,
        MachineInfo::current(arguments.cpu),
        ServerInfo {
            command: None,
            pid,
            stats_url: arguments.server_stats.clone(),
        },
        vec![run],
        stop.load(Ordering::Relaxed),
    );
    finish(&report, arguments.json.as_deref())
}
