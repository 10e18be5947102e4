#!/usr/bin/env bash
# bench/proxy-data-paths.sh: CPU per request of `coldwire proxy` on cache misses of 4, 16,
# 64 and 256 KiB and 1 MiB objects, for each data path at the same fixed request rate:
#   copy        --data-path copy, cache off (recv + send through user space)
#   copy+store  --data-path copy, every response collected for the store (a copy more)
#   splice      --data-path splice --splice-threshold 1, cache off (socket → pipe → socket)
#   splice+tee  --data-path splice, every response tee'd and collected for the store
# Every request is a distinct cacheable miss: the URL ends in `?v={seq}`, which
# `coldwire bench` replaces by a per-request counter (the origin ignores the query). With
# "+store" and "+tee" each response is collected in full and stored in a store of
# CACHE_BYTES (64 MiB), which evicts least recently used objects once full: the realistic
# miss workload. (A store smaller than one object no longer works for this: it refuses
# such responses at their head and collects nothing.)
#
# Proxy pinned to CPU 0 (one worker); the origin (`coldwire serve`) and the load generator
# (`coldwire bench`, open-loop, constant rate, keep-alive) share CPU 1. The proxy's CPU is
# read by `coldwire bench --server-pid` from /proc (all threads, nanosecond schedstat).
# Variants alternate within each round, so per-round ratios compare runs made side by side.
#
# Each run also records the proxy's own counters (`--admin`): system calls per request by
# kind, waits per request.
#
# Usage: RATE=1000 DURATION=10 ROUNDS=3 bench/proxy-data-paths.sh
# Environment: RATE (requests/s, 1000), DURATION (s, 10), WARMUP (s, 2), ROUNDS (3),
#   CONNECTIONS (50), CACHE_BYTES (67108864), COLDWIRE (target/release/coldwire), MACHINE,
#   PROXY_CPU (0),
#   CLIENT_CPU (1), SIZES (space-separated, "4k 16k 64k 256k 1024k"), OUT (output directory),
#   ORIGIN_PORT, PROXY_PORT, ADMIN_PORT (18190-18192).
# Output: results/<date>-<machine>/proxy-data-paths/{results.csv,summary.md,raw/}
set -euo pipefail

RATE=${RATE:-1000}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-50}
CACHE_BYTES=${CACHE_BYTES:-67108864}
MACHINE=${MACHINE:-$(hostname -s)}
PROXY_CPU=${PROXY_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
OUT=${OUT:-$REPO/results/$(date +%F)-$MACHINE/proxy-data-paths}
RAW="$OUT/raw"
WORK=$(mktemp -d /tmp/proxy-data-paths.XXXXXX)
read -r -a SIZES <<<"${SIZES:-4k 16k 64k 256k 1024k}"
VARIANTS=(copy copy+store splice splice+tee)
ORIGIN_PORT=${ORIGIN_PORT:-18190}
PROXY_PORT=${PROXY_PORT:-18191}
ADMIN_PORT=${ADMIN_PORT:-18192}
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"

if [[ ! -x $COLDWIRE ]]; then
    log "building coldwire (release)"
    (cd "$REPO" && cargo build --release -p coldwire)
fi
require_tools "" taskset curl python3
mkdir -p "$RAW"

ROOT="$WORK/root"
random_files "$ROOT" "${SIZES[@]}"
touch -d '2020-01-01 00:00:00' "$ROOT"/*
# Files above 64 KiB go out with sendfile; keep every object in memory for a steady origin.
start_origin "$ROOT" "$ORIGIN_PORT" --memory-file-limit 2097152
PROXY_PID=
cleanup() {
    stop_all PROXY_PID ORIGIN_PID
    rm -rf "$WORK"
}
trap cleanup EXIT
sleep 0.5

variant_flags() {
    case $1 in
        copy) echo "--data-path copy --cache-bytes 0" ;;
        copy+store) echo "--data-path copy --cache-bytes $CACHE_BYTES --max-object-bytes 2097152" ;;
        splice) echo "--data-path splice --splice-threshold 1 --cache-bytes 0" ;;
        splice+tee) echo "--data-path splice --splice-threshold 1 --cache-bytes $CACHE_BYTES --max-object-bytes 2097152" ;;
    esac
}

echo "round,size,variant,rate,cpu_us_per_request,completed,errors,p99_us,syscalls_per_request,waits_per_request" >"$OUT/results.csv"
for round in $(seq 1 "$ROUNDS"); do
    for size in "${SIZES[@]}"; do
        for variant in "${VARIANTS[@]}"; do
            # shellcheck disable=SC2046
            taskset -c "$PROXY_CPU" "$COLDWIRE" proxy --listen "127.0.0.1:$PROXY_PORT" \
                --reverse "http://127.0.0.1:$ORIGIN_PORT" --workers 1 $(variant_flags "$variant") \
                --admin "127.0.0.1:$ADMIN_PORT" >/dev/null 2>&1 &
            PROXY_PID=$!
            wait_port "$PROXY_PORT" "/$size" 50 || true
            json="$RAW/bench-$round-$size-$variant.json"
            taskset -c "$CLIENT_CPU" "$COLDWIRE" bench --url "http://127.0.0.1:$PROXY_PORT/$size?v={seq}" \
                --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP" \
                --connections "$CONNECTIONS" --server-pid "$PROXY_PID" --json "$json" --quiet \
                --server-stats "http://127.0.0.1:$ADMIN_PORT/stats" \
                >"$RAW/bench-$round-$size-$variant.txt" 2>&1 || true
            python3 "$REPO/bench/phase-row.py" "$json" "$round,$size,$variant,$RATE" cpu_us_per_request \
                completed errors p99_us syscalls_per_request waits_per_request >>"$OUT/results.csv"
            log "round $round $size $variant: $(tail -1 "$OUT/results.csv")"
            kill "$PROXY_PID" 2>/dev/null || true
            wait "$PROXY_PID" 2>/dev/null || true
            PROXY_PID=
        done
    done
done

python3 - "$OUT/results.csv" >"$OUT/summary.md" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["cpu_us_per_request"]]
sizes = list(dict.fromkeys(r["size"] for r in rows))
variants = ["copy", "copy+store", "splice", "splice+tee"]
cpu = {}
for r in rows:
    cpu.setdefault((r["size"], r["variant"]), {})[r["round"]] = float(r["cpu_us_per_request"])
rate = rows[0]["rate"] if rows else "?"
print("# coldwire proxy misses: CPU per request by data path\n")
print(f"Proxy CPU µs per request at {rate} requests/s (median over rounds); ratios are medians of")
print("per-round ratios against `copy` (runs side by side in the same round).\n")
print("| object | " + " | ".join(variants) + " | splice / copy | splice+tee / copy | splice+tee / copy+store |")
print("|---" * (1 + len(variants) + 3) + "|")
def ratio(size, a, b):
    values = [cpu[(size, a)][k] / v for k, v in cpu.get((size, b), {}).items() if v and k in cpu.get((size, a), {})]
    return f"{statistics.median(values):.2f}" if values else "-"
for s in sizes:
    cells = [f"{statistics.median(cpu[(s, v)].values()):.1f}" if (s, v) in cpu else "-" for v in variants]
    print(f"| {s} | " + " | ".join(cells) + f" | {ratio(s, 'splice', 'copy')} | {ratio(s, 'splice+tee', 'copy')} | {ratio(s, 'splice+tee', 'copy+store')} |")
calls = {}
for r in rows:
    if r.get("syscalls_per_request"):
        calls.setdefault((r["size"], r["variant"]), []).append(float(r["syscalls_per_request"]))
if calls:
    print("\nProxy system calls per request (median over rounds; waits included):\n")
    print("| object | " + " | ".join(variants) + " |")
    print("|---" * (1 + len(variants)) + "|")
    for s in sizes:
        cells = [f"{statistics.median(calls[(s, v)]):.1f}" if (s, v) in calls else "-" for v in variants]
        print(f"| {s} | " + " | ".join(cells) + " |")
errors = sum(int(r["errors"] or 0) for r in csv.DictReader(open(sys.argv[1])))
print(f"\nFailed requests over all runs: {errors}.")
PY
cat "$OUT/summary.md"
log "results in $OUT"
