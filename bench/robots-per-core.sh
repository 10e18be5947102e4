#!/usr/bin/env bash
# bench/robots-per-core.sh — how many PolyMix robots one generator core drives. A
# `coldwire origin` with no think time (one worker, CPU $ORIGIN_CPU) is the cheap target;
# `coldwire bench --workload polymix` (pinned to CPU $GENERATOR_CPU) runs $ROBOTS robots at
# 0.4 requests/s each straight to it: a $RAMP ramp (0 → all robots, so connections open
# gradually) then a $TOP top phase, every body verified. From the JSON's top phase:
# offered and achieved rate, skipped (late) arrivals, errors, integrity failures, open
# connections, and the generator's CPU (schedstat of its process over the phase) as cores
# and µs per response. Output: $OUT/robots.csv and one JSON per robot count.
# Usage: bench/robots-per-core.sh [OUT_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
OUT=${1:-$REPO/results/$(date -u +%F)-vm/robots-per-core}
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
ROBOTS=${ROBOTS:-"2500 5000 10000"}
RAMP=${RAMP:-20s}
TOP=${TOP:-30s}
ORIGIN_CPU=${ORIGIN_CPU:-0}
GENERATOR_CPU=${GENERATOR_CPU:-1}
die() { echo "robots-per-core.sh: $*" >&2; exit 1; }
[ -x "$COLDWIRE" ] || die "$COLDWIRE missing: cargo build --release -p coldwire"
mkdir -p "$OUT"
TMP=$(mktemp -d)
ORIGIN_PID=""
trap '[ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
cat >"$TMP/scenario.toml" <<EOF
[[phase]]
name = "ramp"
duration = "$RAMP"
robots = [0.0, 1.0]
[[phase]]
name = "top"
duration = "$TOP"
robots = [1.0, 1.0]
EOF
echo "robots,offered_per_s,achieved_per_s,late_skipped,errors,integrity_failures,verified,max_open_connections,generator_cores,generator_us_per_response,generator_runqueue_wait_s,lateness_p99_ms" >"$OUT/robots.csv"
for robots in $ROBOTS; do
    taskset -c "$ORIGIN_CPU" "$COLDWIRE" origin --listen 127.0.0.1:0 --think 0 --workers 1 \
        --max-connections 19000 >"$TMP/origin.out" 2>"$TMP/origin.err" &
    ORIGIN_PID=$!
    for _ in $(seq 200); do grep -q 'listening' "$TMP/origin.out" 2>/dev/null && break; sleep 0.05; done
    origin=$(sed -n 's|^origin listening on http://||p' "$TMP/origin.out")
    [ -n "$origin" ] || die "the origin did not start: $(cat "$TMP/origin.err")"
    "$COLDWIRE" bench --workload polymix --url "http://$origin/" --scenario "$TMP/scenario.toml" \
        --robots "$robots" --cpu "$GENERATOR_CPU" -q --json "$OUT/robots-$robots.json" \
        >"$OUT/robots-$robots.txt"
    kill "$ORIGIN_PID"; wait "$ORIGIN_PID" 2>/dev/null || true; ORIGIN_PID=""
    python3 - "$OUT/robots-$robots.json" "$robots" >>"$OUT/robots.csv" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
top = report["runs"][0]["phases"][-1]
population, generator = top["population"], top["generator"] or {}
window = top["window_seconds"]
print(",".join(str(value) for value in [
    sys.argv[2],
    round(top["offered_requests"] / window, 1),
    round(top["achieved_rate"], 1),
    top["missed_slots"],
    top["errors_total"],
    population["integrity_failures"],
    population["verified"],
    population["max_open_connections"],
    round(generator.get("cpu_seconds", 0) / window, 3),
    round(generator.get("cpu_us_per_response", 0), 1),
    round(generator.get("runqueue_wait_seconds", 0), 2),
    round(top["schedule_lateness"]["p99_us"] / 1000, 2),
]))
PY
    tail -1 "$OUT/robots.csv"
done
