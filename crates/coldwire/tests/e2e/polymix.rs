//! End-to-end tests of `coldwire bench --workload polymix`: a tiny PolyMix through the
//! real `coldwire proxy`, `coldwire wan` and `coldwire origin` that the bench starts itself
//! (on every backend of the generator): hits and misses are counted apart, repeats of
//! cachable objects become hits, every body verifies and the JSON carries the population
//! section; robots sent straight to an origin that corrupts some bodies count exactly
//! those as integrity failures; a scenario file with an unknown key is refused.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use coldwire_testkit::scripted::{Reply, ScriptedOrigin, ScriptedRequest};

const COLDWIRE: &str = env!("CARGO_BIN_EXE_coldwire");

/// 30 robots at 2 requests/s each, a 2 s fill and a 3 s top; origins answer after
/// 100 ± 20 ms behind a 20 ms relay.
const TINY: &str = r#"
[robots]
count = 30
rate = 2.0
[origin]
think = "100ms"
think_sd = "20ms"
rtt = "20ms"
loss = 0.0
[[phase]]
name = "fill"
duration = "2s"
robots = [1.0, 1.0]
recurrence = [0.0909, 0.0909]
freeze_working_set = true
[[phase]]
name = "top"
duration = "3s"
robots = [1.0, 1.0]
"#;

fn run_bench(scenario: &str, extra: &[&str]) -> (serde_json::Value, String, String) {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("scenario.toml");
    std::fs::write(&file, scenario).unwrap();
    let json = directory.path().join("result.json");
    let output = Command::new(COLDWIRE)
        .args(["bench", "--workload", "polymix", "-q", "--scenario"])
        .arg(&file)
        .arg("--json")
        .arg(&json)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "coldwire bench failed: {stderr}\n{stdout}"
    );
    let text = std::fs::read_to_string(&json).unwrap();
    (serde_json::from_str(&text).unwrap(), stdout, stderr)
}

fn number(value: &serde_json::Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

coldwire_testkit::backend_tests! {
    robots_through_proxy_wan_and_origin_get_hits_misses_and_verified_bodies,
}

fn robots_through_proxy_wan_and_origin_get_hits_misses_and_verified_bodies(backend: &str) {
    let pressure = coldwire_testkit::starvation::CpuPressure::start();
    let (json, stdout, stderr) = run_bench(TINY, &["--io", backend]);
    let pressure = pressure.share();
    assert!(stderr.contains("behind WAN relays"), "{stderr}");
    assert!(stdout.contains("integrity failures"), "{stdout}");
    let run = &json["runs"][0];
    assert_eq!(run["name"], "polymix");
    assert_eq!(run["parameters"]["workload"], "polymix");
    assert_eq!(run["scenario"]["robots"]["count"], 30);
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    for phase in phases {
        let population = &phase["population"];
        for field in [
            "hit_latency",
            "miss_latency",
            "offered_document_hit_ratio",
            "measured_byte_hit_ratio",
            "integrity",
            "request_kinds",
            "max_open_connections",
            "intervals",
        ] {
            assert!(
                !population[field].is_null(),
                "{field} missing: {population}"
            );
        }
        assert_eq!(phase["errors_total"], 0, "{phase}");
        assert_eq!(population["integrity_failures"], 0, "{population}");
        assert!(number(&population["verified"]) > 0.0);
        assert_eq!(population["unverified"], 0);
        // The proxy was watched: its cost per request is there.
        assert!(
            number(&phase["server"]["cpu_us_per_request"]) > 0.0,
            "{phase}"
        );
    }
    let top = &phases[1]["population"];
    let offered = number(&top["offered_document_hit_ratio"]);
    let measured = number(&top["measured_document_hit_ratio"]);
    // PolyMix-4's 55% offered, with the few hundred requests of a 3 s top.
    assert!((0.35..0.75).contains(&offered), "offered {offered}");
    // The proxy caches what is cachable: most offered hits are hits.
    assert!(
        measured > offered * 0.6 && measured <= offered + 0.1,
        "{measured} vs {offered}"
    );
    let (hits, misses) = (&top["hit_latency"], &top["miss_latency"]);
    assert!(number(&hits["count"]) > 20.0 && number(&misses["count"]) > 20.0);
    // A miss waits for the origin's think time (100 ms) and the relay's round trips.
    assert!(number(&misses["p50_us"]) > 100_000.0, "{misses}");
    // Hits answered faster than misses: unless the machine was starved (tasks waited for
    // a CPU at least half of the run), which can hold a hit back longer than a miss.
    if number(&hits["p50_us"]) >= number(&misses["p50_us"]) {
        assert!(
            pressure.is_some_and(|share| share >= 0.5),
            "hits are not faster than misses and the machine was not starved (CPU pressure \
             {pressure:?}): {hits} {misses}"
        );
        println!(
            "{backend}: not checking that hits beat misses: CPU pressure {pressure:?} \
             (starved): {hits} {misses}"
        );
    }
    assert!(number(&phases[0]["population"]["offered_document_hit_ratio"]) < 0.2);
}

/// Bodies the corrupting origin sent, and of them the corrupted ones (only the test below
/// uses this origin).
static SENT: AtomicU64 = AtomicU64::new(0);
static CORRUPTED: AtomicU64 = AtomicU64::new(0);

/// Answers every object with its own header and generated body, one byte flipped for ids
/// divisible by three.
fn corrupting(request: &ScriptedRequest) -> Reply {
    let id: u64 = request
        .path
        .rsplit('/')
        .next()
        .and_then(|id| id.parse().ok())
        .unwrap_or(0);
    let size = 500 + id % 700;
    let mut body = Vec::new();
    coldwire_workload::fill_body(&mut body, id, 0, 0, size);
    SENT.fetch_add(1, Ordering::Relaxed);
    if id.is_multiple_of(3) {
        body[size as usize / 2] ^= 1;
        CORRUPTED.fetch_add(1, Ordering::Relaxed);
    }
    let object = format!("id={id:x}; v=0; size={size}");
    Reply::new("200 OK", &[("X-Coldwire-Object", &object)], &body)
}

#[test]
fn an_origin_serving_wrong_bytes_is_caught_by_the_robots() {
    let origin = ScriptedOrigin::start(corrupting);
    let scenario = TINY.replace("[origin]", "[requests]\nhead = 0.0\n[origin]");
    let (json, _, _) = run_bench(&scenario, &["--url", &origin.url("/")]);
    let mut failures = 0;
    let mut verified = 0;
    for phase in json["runs"][0]["phases"].as_array().unwrap() {
        let population = &phase["population"];
        failures += population["integrity"]["wrong_bytes"].as_u64().unwrap();
        verified += population["verified"].as_u64().unwrap();
        assert_eq!(population["integrity"]["wrong_object"], 0);
        assert_eq!(
            population["integrity_failures"],
            population["integrity"]["wrong_bytes"]
        );
        // Straight to an origin: no cache, no hit.
        assert_eq!(population["hit_latency"]["count"], 0);
    }
    // Every corrupted body was caught, and only those.
    let (sent, corrupted) = (
        SENT.load(Ordering::Relaxed),
        CORRUPTED.load(Ordering::Relaxed),
    );
    assert!(corrupted > 10 && sent > corrupted, "{corrupted} of {sent}");
    assert_eq!(failures, corrupted, "{verified} verified");
    assert_eq!(verified + failures, sent);
}

/// Answers every object with its own header and generated body, after 400 ms.
fn slow_objects(request: &ScriptedRequest) -> Reply {
    std::thread::sleep(std::time::Duration::from_millis(400));
    let id: u64 = request
        .path
        .rsplit('/')
        .next()
        .and_then(|id| id.parse().ok())
        .unwrap_or(0);
    let size = 500 + id % 700;
    let mut body = Vec::new();
    coldwire_workload::fill_body(&mut body, id, 0, 0, size);
    let object = format!("id={id:x}; v=0; size={size}");
    Reply::new("200 OK", &[("X-Coldwire-Object", &object)], &body)
}

#[test]
fn ctrl_c_reports_what_ran_without_counting_requests_in_flight_as_errors() {
    // Every answer takes 400 ms: at 60 requests/s about 24 are in flight at any moment.
    let origin = ScriptedOrigin::start(slow_objects);
    let scenario = TINY
        .replace("[origin]", "[requests]\nhead = 0.0\n[origin]")
        .replace("duration = \"3s\"", "duration = \"60s\"");
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("scenario.toml");
    std::fs::write(&file, scenario).unwrap();
    let json = directory.path().join("result.json");
    let child = Command::new(COLDWIRE)
        .args(["bench", "--workload", "polymix", "-q", "--scenario"])
        .arg(&file)
        .arg("--json")
        .arg(&json)
        .args(["--url", &origin.url("/")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on the pid of the child this test started and has not waited for.
    let sent = unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(sent, 0);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(json["interrupted"], true, "{json}");
    let phases = json["runs"][0]["phases"].as_array().unwrap();
    let errors: u64 = phases
        .iter()
        .map(|phase| phase["errors_total"].as_u64().unwrap())
        .sum();
    let abandoned: u64 = phases
        .iter()
        .map(|phase| phase["abandoned"].as_u64().unwrap())
        .sum();
    assert!(abandoned > 0, "requests were in flight at the interrupt");
    let causes: Vec<&serde_json::Value> =
        phases.iter().map(|phase| &phase["error_causes"]).collect();
    assert_eq!(errors, 0, "{abandoned} abandoned; error causes: {causes:?}");
}

#[test]
fn a_scenario_with_an_unknown_key_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("scenario.toml");
    std::fs::write(&file, "[robots]\nrobot_count = 3\n").unwrap();
    let output = Command::new(COLDWIRE)
        .args(["bench", "--workload", "polymix", "--scenario"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("robot_count"), "{stderr}");
}
