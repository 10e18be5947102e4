#!/usr/bin/env bash
# bench/disk-store.sh: disk-cache hits per second and CPU per hit of `coldwire proxy
# --cache-dir` against nginx proxy_cache (files, sendfile on) and Squid's rock store, each a
# reverse proxy whose hits come from its disk store (coldwire: --max-object-bytes 4096, so
# 8 KiB and 256 KiB bodies live on disk only and go out with sendfile; Squid: no memory
# cache), page cache warm, in front of the same origin.
#
# Proxy pinned to CPU 0 (one worker / process), wrk pinned to CPU 1 (`wrk -t1
# -c$CONNECTIONS -d${DURATION}s`), keep-alive, logs off, after the cache was filled and a
# discarded ${WARMUP}s warm-up. CPU per hit = the proxy's utime + stime (its whole process
# tree, /proc/PID/stat) during the run / requests. The origin sees only the fills (its
# request count during each run is recorded); coldwire's /stats `hits_on_disk` proves its
# hits were disk hits. Contenders alternate within each round (round → object → contender,
# each started fresh), so per-round ratios compare runs made side by side; the machine is
# shared and noisy, so read the ratios, not the absolute numbers.
#
# MODE=fill measures stored misses instead: every request a new URL (`/8k?N`, a wrk Lua
# script), so each is fetched from the origin and written to the disk store; the table is
# then fills per second and CPU per fill, and the CSV adds the disk objects written, the
# copies dropped by back-pressure and the ring writes completed during the run.
#
# coldwire contenders: `coldwire` (the default backend), `coldwire-uring` (--io uring:
# segment writes on the worker's ring) and `coldwire-uring-thread` (--io uring
# --disk-thread-writes: segment writes on the store's I/O thread). Ratios are against
# BASELINE (coldwire).
#
# Usage: DURATION=10 ROUNDS=3 bench/disk-store.sh
#   CONTENDERS="coldwire-uring coldwire-uring-thread" BASELINE=coldwire-uring MODE=fill \
#     bench/disk-store.sh
# Environment: DURATION (s, 10), ROUNDS (3), WARMUP (s, 2), CONNECTIONS (50),
#   CONTENDERS ("coldwire nginx squid-rock"), BASELINE (coldwire), MODE (hits | fill),
#   COLDWIRE (target/release/coldwire), PROXY_CPU (0), CLIENT_CPU (1), OUT.
# Output: $OUT/{results.csv,hits.md (fill.md),raw/}
set -euo pipefail

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-50}
PROXY_CPU=${PROXY_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
read -r -a CONTENDERS <<<"${CONTENDERS:-coldwire nginx squid-rock}"
BASELINE=${BASELINE:-coldwire}
MODE=${MODE:-hits}
[[ $MODE == hits || $MODE == fill ]] || { echo "MODE=$MODE: hits or fill" >&2; exit 1; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$REPO/bench"
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
OUT=${OUT:-$REPO/results/$(date +%F)-vm/disk-store}
RAW="$OUT/raw"
WORK=$(mktemp -d /tmp/disk-store.XXXXXX)
chmod 777 "$WORK"
OBJECTS=(8k 256k)
ORIGIN_PORT=${ORIGIN_PORT:-18280}
PROXY_PORT=${PROXY_PORT:-18281}
ADMIN_PORT=${ADMIN_PORT:-18282}
# shellcheck source=bench/lib.sh
source "$BENCH/lib.sh"

require_tools "apt-get install wrk nginx-light squid" wrk nginx squid taskset curl python3
[[ -x $COLDWIRE ]] || die "$COLDWIRE missing: cargo build --release -p coldwire"
mkdir -p "$RAW"

ROOT="$WORK/root"
random_files "$ROOT" "${OBJECTS[@]}"
# An old Last-Modified makes the objects heuristically fresh for a day everywhere.
touch -d '2020-01-01 00:00:00' "$ROOT"/*
start_origin "$ROOT" "$ORIGIN_PORT" --access-log "$WORK/origin.log"
CONTENDER_PID=
cleanup() {
    stop_all CONTENDER_PID ORIGIN_PID
    rm -rf "$WORK"
}
trap cleanup EXIT
sleep 0.5

start_contender() {
    local name=$1 dir="$WORK/$1"
    rm -rf "$dir"
    mkdir -p "$dir"
    chmod 777 "$dir"
    case $name in
        coldwire*)
            local io=()
            case $name in
                coldwire-uring) io=(--io uring) ;;
                coldwire-uring-thread) io=(--io uring --disk-thread-writes) ;;
            esac
            taskset -c "$PROXY_CPU" "$COLDWIRE" proxy --listen "127.0.0.1:$PROXY_PORT" \
                --reverse "http://127.0.0.1:$ORIGIN_PORT" --workers 1 "${io[@]}" \
                --cache-dir "$dir/cache" --cache-dir-size 1GiB --cache-bytes 16777216 \
                --max-object-bytes 4096 --admin "127.0.0.1:$ADMIN_PORT" >/dev/null 2>&1 &
            CONTENDER_PID=$!
            ;;
        nginx)
            sed -e "s|@PORT@|$PROXY_PORT|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@DIR@|$dir|g" \
                "$BENCH/nginx/proxy-cache-disk.conf.in" >"$dir/nginx.conf"
            taskset -c "$PROXY_CPU" nginx -c "$dir/nginx.conf" -p "$dir" >/dev/null 2>&1 &
            CONTENDER_PID=$!
            ;;
        squid-rock)
            sed -e "s|@PORT@|$PROXY_PORT|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@DIR@|$dir|g" \
                "$BENCH/squid/squid-rock.conf.in" >"$dir/squid.conf"
            taskset -c "$PROXY_CPU" squid -z -N -f "$dir/squid.conf" >/dev/null 2>&1 || true
            taskset -c "$PROXY_CPU" squid -N -f "$dir/squid.conf" >/dev/null 2>&1 &
            CONTENDER_PID=$!
            ;;
    esac
    wait_port "$PROXY_PORT" || die "$name did not start (see $dir)"
}

stop_contender() {
    kill "$CONTENDER_PID" 2>/dev/null || true
    wait "$CONTENDER_PID" 2>/dev/null || true
    CONTENDER_PID=
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/" 2>/dev/null || return 0
        sleep 0.1
    done
    [[ -f $WORK/squid-rock/squid.pid ]] && kill "$(cat "$WORK/squid-rock/squid.pid")" 2>/dev/null || true
    sleep 1
}

# A new URL per request (fills): `/OBJECT?N`, N counting up per connection thread.
cat >"$WORK/fill.lua" <<'LUA'
-- wrk ... -s fill.lua URL -- START: the first N (the warm-up and the run use apart ranges).
local counter = 0
init = function(args)
    counter = tonumber(args[1]) or 0
end
request = function()
    counter = counter + 1
    return wrk.format(nil, wrk.path .. "?" .. counter)
end
LUA
# One number from coldwire's /stats: a Python expression over `cache`.
stat() { curl -s "http://127.0.0.1:$ADMIN_PORT/stats" | python3 -c "import json,sys; cache=json.load(sys.stdin)['cache']; print($1)"; }
DISK_STATS='cache["hits_on_disk"], cache["disk"]["objects_written"], cache["disk"]["dropped"], cache["disk"]["ring_writes_completed"]'

echo "round,object,contender,requests_per_second,requests,cpu_seconds,cpu_us_per_hit,origin_requests_during_run,non_2xx,disk_hits,disk_objects_written,disk_dropped,ring_writes" >"$OUT/results.csv"
for round in $(seq 1 "$ROUNDS"); do
    for object in "${OBJECTS[@]}"; do
        for contender in "${CONTENDERS[@]}"; do
            start_contender "$contender"
            url="http://127.0.0.1:$PROXY_PORT/$object"
            script=() warm=()
            if [[ $MODE == fill ]]; then
                script=(-s "$WORK/fill.lua" "$url" -- 1000000000)
                warm=(-s "$WORK/fill.lua" "$url" -- 0)
            else
                for _ in 1 2 3; do curl -s -o /dev/null "$url"; sleep 0.2; done
                curl -s -D "$RAW/headers-$contender-$object.txt" -o /dev/null "$url"
            fi
            [[ $MODE == fill ]] || warm=("$url") script=("$url")
            taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" "${warm[@]}" >/dev/null 2>&1
            disk_before=(0 0 0 0)
            [[ $contender == coldwire* ]] && read -r -a disk_before <<<"$(stat "$DISK_STATS" | tr -d '(),')"
            before=$(origin_requests)
            cpu_before=$(cpu_ticks "$CONTENDER_PID")
            raw="$RAW/wrk-$MODE-$round-$object-$contender.txt"
            taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "${script[@]}" >"$raw" 2>&1
            cpu_after=$(cpu_ticks "$CONTENDER_PID")
            after=$(origin_requests)
            disk=(- - - -)
            if [[ $contender == coldwire* ]]; then
                read -r -a disk_after <<<"$(stat "$DISK_STATS" | tr -d '(),')"
                for i in 0 1 2 3; do disk[i]=$((disk_after[i] - disk_before[i])); done
            fi
            read -r rps requests non2xx < <(wrk_totals "$raw")
            read -r cpu per_hit < <(cpu_per_request "$cpu_before" "$cpu_after" "$requests")
            echo "$round,$object,$contender,$rps,$requests,$cpu,$per_hit,$((after - before)),$non2xx,${disk[0]},${disk[1]},${disk[2]},${disk[3]}" >>"$OUT/results.csv"
            log "round $round $MODE $object $contender: ${rps:-?} req/s, $per_hit us CPU/request (origin saw $((after - before)), disk hits ${disk[0]}, written ${disk[1]}, dropped ${disk[2]}, ring writes ${disk[3]})"
            stop_contender
        done
    done
done

python3 - "$OUT/results.csv" "$DURATION" "$ROUNDS" "$CONNECTIONS" "$BASELINE" "$MODE" >"$OUT/$MODE.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
objects = list(dict.fromkeys(r["object"] for r in rows))
contenders = list(dict.fromkeys(r["contender"] for r in rows))
base, mode = sys.argv[5], sys.argv[6]
peers = [c for c in contenders if c != base]
what = "hit" if mode == "hits" else "fill"
def table(field, label, higher_better):
    values = {}
    for r in rows:
        values.setdefault((r["object"], r["contender"]), {})[r["round"]] = float(r[field])
    print(f"### {label}\n")
    print("| object | " + " | ".join(contenders) + " | " + " | ".join(f"{base} / {c}" for c in peers) + " |")
    print("|---" * (1 + len(contenders) + len(peers)) + "|")
    for o in objects:
        cells = [f"{statistics.median(values[(o, c)].values()):,.1f}" if (o, c) in values else "-" for c in contenders]
        ratios = []
        for c in peers:
            mine, theirs = values.get((o, base), {}), values.get((o, c), {})
            per_round = [mine[k] / v for k, v in theirs.items() if v > 0 and k in mine]
            ratios.append(f"{statistics.median(per_round):.2f}x" if per_round else "-")
        print(f"| {o} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    print()
print(f"# Disk cache, {mode}: " + " vs ".join(contenders) + "\n")
print(f"wrk -t1 -c{sys.argv[4]} -d{sys.argv[2]}s, {sys.argv[3]} rounds, one proxy core (CPU 0), page cache warm.")
print("Medians over rounds; ratios are medians of per-round ratios (runs side by side).\n")
table("requests_per_second", f"{what.capitalize()}s per second (higher is better)", True)
table("cpu_us_per_hit", f"CPU microseconds per {what} (lower is better; ratio < 1 means {base} uses less)", False)
origin = sum(int(r["origin_requests_during_run"]) for r in rows)
errors = sum(int(r["non_2xx"] or 0) for r in rows)
disk = [r for r in rows if r["contender"].startswith("coldwire")]
if mode == "hits":
    print(f"Origin requests during all measured runs: {origin} (0: every measured request was a hit); non-2xx: {errors}.")
    print("coldwire disk hits (/stats hits_on_disk) per run vs requests: " + ", ".join(f"{r['contender']} {r['disk_hits']}/{r['requests']}" for r in disk) + ".")
else:
    print(f"Origin requests during all measured runs: {origin} (every request a miss); non-2xx: {errors}.\n")
    print("| round | object | contender | fills | disk objects written | dropped (back-pressure) | ring writes |")
    print("|---|---|---|---|---|---|---|")
    for r in disk:
        print(f"| {r['round']} | {r['object']} | {r['contender']} | {r['requests']} | {r['disk_objects_written']} | {r['disk_dropped']} | {r['ring_writes']} |")
PY
cat "$OUT/$MODE.md"
log "results in $OUT"
