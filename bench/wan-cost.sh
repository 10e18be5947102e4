#!/usr/bin/env bash
# bench/wan-cost.sh: what does `coldwire wan` cost? (issue 13: the relay's own CPU per
# forwarded MB and per idle connection)
#
# A `coldwire origin` (--mix $OBJECT, --think 0) behind a `coldwire wan` (--rtt $RTT, one
# worker, CPU 0); the client (curl) and the origin on CPU 1.
#   bytes: curl fetches $FETCHES objects through the relay, one connection each; the
#          relay's CPU (utime+stime from /proc) over the transfer, per forwarded MB;
#   idle:  $IDLE connections held through the relay (hold-connections.py, each relayed to
#          the origin) for $IDLE_SECONDS: the relay's CPU and loop wake-ups while they idle,
#          per connection.
# Each round measures both; the machine is shared, so rounds are repeated and reported.
#
# Usage: ROUNDS=3 bench/wan-cost.sh
# Environment: ROUNDS (3), OBJECT (8MiB), FETCHES (40), RTT (10ms), IDLE (4000),
#   IDLE_SECONDS (10), MACHINE (vm), RELAY_CPU (0), OTHER_CPU (1).
# Output: results/<date>-<machine>/wan-cost/{results.csv,summary.md}
set -euo pipefail

ROUNDS=${ROUNDS:-3}
OBJECT=${OBJECT:-8MiB}
FETCHES=${FETCHES:-40}
RTT=${RTT:-10ms}
IDLE=${IDLE:-4000}
IDLE_SECONDS=${IDLE_SECONDS:-10}
MACHINE=${MACHINE:-vm}
RELAY_CPU=${RELAY_CPU:-0}
OTHER_CPU=${OTHER_CPU:-1}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
COLDWIRE=${COLDWIRE:-"$REPO/target/release/coldwire"}
OUT="$REPO/results/$(date +%F)-$MACHINE/wan-cost"
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

ulimit -Sn "$(ulimit -Hn)"
command -v curl >/dev/null || die "curl not found"
command -v python3 >/dev/null || die "python3 not found"
if [[ ! -x $COLDWIRE || -z ${COLDWIRE_PREBUILT:-} ]]; then
    log "building coldwire (release)"
    cargo build --release -p coldwire
fi
mkdir -p "$OUT"

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# start VAR CPU COMMAND...: starts COMMAND pinned to CPU, waits for its first stdout line
# ("... listening on http://ADDR"), stores ADDR in VAR and the process id in LAST_PID.
start() {
    local var=$1 cpu=$2 out
    shift 2
    out=$(mktemp)
    taskset -c "$cpu" "$@" >"$out" 2>/dev/null &
    LAST_PID=$!
    pids+=("$LAST_PID")
    for _ in $(seq 1 100); do [[ -s $out ]] && break; sleep 0.05; done
    local line
    line=$(head -n 1 "$out")
    rm -f "$out"
    printf -v "$var" '%s' "${line##*http://}"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
stat_waits() {
    curl -s "http://$1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["loop"]["wait_calls"])'
}

TICK=$(getconf CLK_TCK)
echo "round,forwarded_mb,relay_cpu_s,cpu_ms_per_mb,idle_connections,idle_cpu_s,idle_wakeups,cpu_us_per_idle_connection_second" >"$OUT/results.csv"
for round in $(seq 1 "$ROUNDS"); do
    start origin "$OTHER_CPU" "$COLDWIRE" origin --listen 127.0.0.1:0 --workers 1 --mix "$OBJECT" --think 0
    relay_stats_port=$((20000 + RANDOM % 20000))
    start relay "$RELAY_CPU" "$COLDWIRE" wan --listen 127.0.0.1:0 --to "$origin" --rtt "$RTT" \
        --workers 1 --max-connections 19000 --admin "127.0.0.1:$relay_stats_port"
    relay_pid=$LAST_PID
    sleep 0.3
    before=$(cpu_ticks "$relay_pid")
    bytes=0
    for fetch in $(seq 1 "$FETCHES"); do
        got=$(taskset -c "$OTHER_CPU" curl -s -o /dev/null -w '%{size_download}' "http://$relay/obj/$fetch")
        bytes=$((bytes + got))
    done
    after=$(cpu_ticks "$relay_pid")
    mb=$(python3 -c "print($bytes / 1e6)")
    cpu=$(python3 -c "print(($after - $before) / $TICK)")
    per_mb=$(python3 -c "print(round(1000 * ($after - $before) / $TICK / max($bytes / 1e6, 1e-9), 3))")

    taskset -c "$OTHER_CPU" python3 bench/hold-connections.py "${relay%:*}" "${relay##*:}" "$IDLE" >"$OUT/hold.out" &
    holder=$!
    pids+=($holder)
    for _ in $(seq 1 600); do grep -q ready "$OUT/hold.out" 2>/dev/null && break; sleep 0.1; done
    sleep 1
    idle_before=$(cpu_ticks "$relay_pid")
    waits_before=$(stat_waits "127.0.0.1:$relay_stats_port")
    sleep "$IDLE_SECONDS"
    idle_after=$(cpu_ticks "$relay_pid")
    waits_after=$(stat_waits "127.0.0.1:$relay_stats_port")
    kill "$holder" 2>/dev/null || true
    idle_cpu=$(python3 -c "print(($idle_after - $idle_before) / $TICK)")
    per_idle=$(python3 -c "print(round(1e6 * ($idle_after - $idle_before) / $TICK / $IDLE / $IDLE_SECONDS, 4))")
    echo "$round,$mb,$cpu,$per_mb,$IDLE,$idle_cpu,$((waits_after - waits_before)),$per_idle" >>"$OUT/results.csv"
    log "round $round: $mb MB forwarded for ${cpu}s CPU (${per_mb} ms/MB); $IDLE idle for ${IDLE_SECONDS}s: ${idle_cpu}s CPU, $((waits_after - waits_before)) wake-ups"
    cleanup
    pids=()
done
{
    echo "# coldwire wan: its own CPU per forwarded MB and per idle connection"
    echo
    echo "At commit $(git describe --always --dirty), $(date -u +%FT%TZ), machine $MACHINE ($(nproc) cores)."
    echo "Relay: one worker on CPU $RELAY_CPU, --rtt $RTT; origin (coldwire origin --mix $OBJECT --think 0) and clients on CPU $OTHER_CPU."
    echo "CPU is the relay process's utime+stime (/proc, ${TICK} ticks/s: 10 ms resolution)."
    echo
    echo '| round | forwarded MB | relay CPU s | ms CPU per MB | idle connections | CPU s while idle | wake-ups while idle | µs CPU per idle connection-second |'
    echo '|---|---|---|---|---|---|---|---|'
    tail -n +2 "$OUT/results.csv" | tr ',' '|' | sed 's/^/| /; s/$/ |/'
    echo
    echo "Reproduce: ROUNDS=$ROUNDS OBJECT=$OBJECT FETCHES=$FETCHES RTT=$RTT IDLE=$IDLE IDLE_SECONDS=$IDLE_SECONDS bench/wan-cost.sh"
} >"$OUT/summary.md"
rm -f "$OUT/hold.out"
cat "$OUT/summary.md"
