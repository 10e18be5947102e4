#!/usr/bin/env bash
# bench/cold-cost.sh: what does holding 15,000 cold connections cost `coldwire bench`?
#
# Two `coldwire serve` processes on CPU 0: the hot one answers the requests (1,259-byte
# file, keep-alive, 50 connections); a second one, the sink, only holds the cold
# connections (`--cold-target`), so whatever changes is the generator's own cost, not the
# server's. The generator runs on CPU 1 with and without `--cold 15000`, alternating within
# each round (order flipped every round):
#   max   closed loop (`--rate max`): the request rate the generator drives;
#   open  open loop at $OPEN_RATE/s: achieved rate, missed slots, schedule lateness.
# The machine is shared: compare the with/without ratios of one round.
#
# Usage: DURATION=8 ROUNDS=4 bench/cold-cost.sh
# Environment: DURATION (8), ROUNDS (4), COLD (15000), OPEN_RATE (30000), MACHINE (vm),
#   SERVER_CPU (0), CLIENT_CPU (1).
# Output: results/<date>-<machine>/bench-cold-cost/{results.csv,summary.md,meta.txt,raw/}
set -euo pipefail

DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-4}
COLD=${COLD:-15000}
OPEN_RATE=${OPEN_RATE:-30000}
MACHINE=${MACHINE:-vm}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
COLDWIRE="$REPO/target/release/coldwire"
OUT="$REPO/results/$(date +%F)-$MACHINE/bench-cold-cost"
RAW="$OUT/raw"
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

ulimit -Sn "$(ulimit -Hn)"
[[ $(ulimit -n) == unlimited || $(ulimit -n) -ge $((COLD + 200)) ]] ||
    die "open-files limit $(ulimit -n) is too low for COLD=$COLD"
command -v python3 >/dev/null || die "python3 not found"
log "building coldwire (release)"
cargo build --release -p coldwire

TMP=$(mktemp -d /tmp/coldwire-cold-cost.XXXXXX)
head -c 1259 /dev/urandom >"$TMP/1259.bin"
rm -rf "$RAW"
mkdir -p "$RAW"
PIDS=()
cleanup() {
    set +e
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

# start_serve NAME: starts a server and sets ADDRESS (called in this shell, not in a
# command substitution, so that PIDS reaches the cleanup trap).
start_serve() {
    taskset -c "$SERVER_CPU" "$COLDWIRE" serve --root "$TMP" --listen 127.0.0.1:0 --workers 1 \
        --idle-timeout 600 --max-connections 19000 >"$RAW/$1.stdout" 2>"$RAW/$1.stderr" &
    PIDS+=($!)
    local i
    for i in $(seq 1 100); do
        grep -q '^listening on http://' "$RAW/$1.stdout" 2>/dev/null && break
        sleep 0.1
    done
    ADDRESS=$(sed -n 's|^listening on http://||p' "$RAW/$1.stdout")
}
start_serve hot
HOT=$ADDRESS
start_serve sink
SINK=$ADDRESS
[[ -n $HOT && -n $SINK ]] || die "a server did not start (see $RAW/*.stderr)"
URL="http://$HOT/1259.bin"

{
    echo "date=$(date -Is)"
    echo "machine=$MACHINE"
    echo "nproc=$(nproc)"
    echo "kernel=$(uname -r)"
    echo "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "coldwire_rev=$(git -C "$REPO" rev-parse HEAD)"
    echo "command=DURATION=$DURATION ROUNDS=$ROUNDS COLD=$COLD OPEN_RATE=$OPEN_RATE MACHINE=$MACHINE bench/cold-cost.sh"
} >"$OUT/meta.txt"

taskset -c "$CLIENT_CPU" "$COLDWIRE" bench --url "$URL" --rate max --warmup 0 --duration 2 -q >/dev/null

echo "round,load,cold,offered_rate,achieved_rate,missed,errors,cold_held,generator_us_per_response,lateness_p99_us,p50_ms,p99_ms" >"$OUT/results.csv"
for round in $(seq 1 "$ROUNDS"); do
    if ((round % 2)); then colds=(0 "$COLD"); else colds=("$COLD" 0); fi
    for load in max open; do
        for cold in "${colds[@]}"; do
            prefix="$RAW/r$round-$load-cold$cold"
            rate=max
            [[ $load == open ]] && rate=$OPEN_RATE
            taskset -c "$CLIENT_CPU" "$COLDWIRE" bench --url "$URL" --rate "$rate" --connections 50 \
                --warmup 1 --duration "$DURATION" --cold "$cold" --cold-target "$SINK" --cold-rate 10000 \
                -q --json "$prefix.json" >"$prefix.txt"
            line=$(python3 - "$round" "$load" "$cold" "$prefix.json" <<'PY'
import json, sys
round_, load, cold, path = sys.argv[1:]
run = json.load(open(path))["runs"][0]
p = run["phases"][0]
offered = p["offered_rate"] or ""
print(f"{round_},{load},{cold},{offered if offered == '' else round(offered)},{p['achieved_rate']:.0f},{p['missed_slots']},"
      f"{p['errors_total']},{p['cold_held'][1]},{p['generator']['cpu_us_per_response']:.2f},"
      f"{p['schedule_lateness']['p99_us']:.1f},{p['latency']['corrected']['p50_us'] / 1000:.3f},"
      f"{p['latency']['corrected']['p99_us'] / 1000:.3f}")
PY
)
            echo "$line" >>"$OUT/results.csv"
            log "    $line"
        done
    done
done
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"

python3 - "$OUT" <<'PY' >"$OUT/summary.md"
import csv, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(out + "/results.csv")))
meta = dict(line.rstrip("\n").split("=", 1) for line in open(out + "/meta.txt") if "=" in line)
cold = max(int(row["cold"]) for row in rows)
print(f"# What holding {cold:,} cold connections costs `coldwire bench`\n")
print(f"Reproduce: `{meta['command']}` (at git `{meta['coldwire_rev'][:12]}`)\n")
print(f"Machine `{meta['machine']}`: {meta['nproc']} CPUs, {meta['cpu']}, Linux {meta['kernel']}; load average "
      f"{meta['loadavg_start']} at start, {meta.get('loadavg_end', '?')} at end (shared, noisy: compare within a round).\n")
print("Hot requests to one `coldwire serve` (CPU 0), cold connections held on a second one (the sink, CPU 0), "
      "the generator on CPU 1; 50 keep-alive connections, 1,259-byte file. Runs with and without cold "
      "connections alternate within each round.\n")
for load, title in (("max", "Closed loop (`--rate max`): request rate"), ("open", "Open loop: fixed offered rate")):
    print(f"## {title}\n")
    print("| round | achieved without | achieved with | with / without | generator µs/response without | with | missed without | with | lateness p99 µs without | with | cold held |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for round_ in dict.fromkeys(row["round"] for row in rows):
        by = {row["cold"] != "0": row for row in rows if row["round"] == round_ and row["load"] == load}
        a, b = by[False], by[True]
        ratio = float(b["achieved_rate"]) / float(a["achieved_rate"])
        ratios.append(ratio)
        print(f"| {round_} | {int(a['achieved_rate']):,} | {int(b['achieved_rate']):,} | {ratio:.3f} | "
              f"{a['generator_us_per_response']} | {b['generator_us_per_response']} | {a['missed']} | {b['missed']} | "
              f"{a['lateness_p99_us']} | {b['lateness_p99_us']} | {int(b['cold_held']):,} |")
    cost = {with_cold: statistics.median(float(row["generator_us_per_response"]) for row in rows
                                        if row["load"] == load and (row["cold"] != "0") == with_cold)
            for with_cold in (False, True)}
    print(f"\nMedian achieved with / without: **{statistics.median(ratios):.3f}** "
          f"(range {min(ratios):.3f}–{max(ratios):.3f}). Median generator CPU per response: "
          f"**{cost[False]:.2f} µs without, {cost[True]:.2f} µs with** ({cost[True] / cost[False]:.3f}×)"
          + (" — in the open loop this includes polling before each slot, so it is not a cost of the requests." if load == "open" else ".") + "\n")
PY
cat "$OUT/summary.md"
log "results in $OUT"
