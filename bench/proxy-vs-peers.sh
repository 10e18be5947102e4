#!/usr/bin/env bash
# bench/proxy-vs-peers.sh: cache hits per second of `coldwire proxy` against Squid, Varnish
# and nginx proxy_cache (Debian packages, configurations in bench/{squid,varnish,nginx}/),
# each a reverse proxy with a memory cache in front of the same origin, for a 1,259-byte
# and an 8 KiB object (seed 000's setup; DESIGN.md's bar).
#
# Proxy pinned to CPU 0 (one worker / process; Varnish's threads all on CPU 0), wrk pinned
# to CPU 1 (`wrk -t1 -c$CONNECTIONS -d${DURATION}s`), keep-alive, logs off, after the cache
# was filled and a discarded ${WARMUP}s warm-up. The origin (`coldwire serve`, CPU 1) sees
# only the fills: its request count during each run is recorded to prove they were hits.
# Contenders alternate within each round (round → object → contender, each started fresh),
# so per-round ratios compare runs made side by side; the machine is shared and noisy, so
# read the ratios, not the absolute numbers.
#
# Usage: DURATION=10 ROUNDS=3 bench/proxy-vs-peers.sh
# Environment: DURATION (s, 10), ROUNDS (3), WARMUP (s, 2), CONNECTIONS (50),
#   CONTENDERS ("coldwire varnish nginx squid"), COLDWIRE (target/release/coldwire),
#   MACHINE (hostname -s), PROXY_CPU (0), CLIENT_CPU (1), ORIGIN_PORT, PROXY_PORT (18180-1).
# Output: results/<date>-<machine>/proxy-vs-peers/{results.csv,summary.md,raw/}
set -euo pipefail

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-50}
MACHINE=${MACHINE:-$(hostname -s)}
PROXY_CPU=${PROXY_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
read -r -a CONTENDERS <<<"${CONTENDERS:-coldwire varnish nginx squid}"

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$REPO/bench"
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
OUT=${OUT:-$REPO/results/$(date +%F)-$MACHINE/proxy-vs-peers}
RAW="$OUT/raw"
WORK=$(mktemp -d /tmp/proxy-vs-peers.XXXXXX)
chmod 777 "$WORK"
OBJECTS=(1259 8k)
ORIGIN_PORT=${ORIGIN_PORT:-18180}
PROXY_PORT=${PROXY_PORT:-18181}
# shellcheck source=bench/lib.sh
source "$BENCH/lib.sh"

# ---------------------------------------------------------------- prerequisites
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v squid >/dev/null 2>&1 || missing+=(squid)
command -v varnishd >/dev/null 2>&1 || missing+=(varnish)
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
if [[ ! -x $COLDWIRE ]]; then
    log "building coldwire (release)"
    (cd "$REPO" && cargo build --release -p coldwire)
fi
require_tools "" wrk squid varnishd nginx taskset curl python3
mkdir -p "$RAW"

# ---------------------------------------------------------------- origin
ROOT="$WORK/root"
mkdir -p "$ROOT"
head -c 1259 /dev/urandom >"$ROOT/1259"
head -c 8192 /dev/urandom >"$ROOT/8k"
# An old Last-Modified makes the objects heuristically fresh for a day everywhere.
touch -d '2020-01-01 00:00:00' "$ROOT"/*
start_origin "$ROOT" "$ORIGIN_PORT" --access-log "$WORK/origin.log"
CONTENDER_PID=
cleanup() {
    [[ -f $WORK/varnish.pid ]] && kill "$(cat "$WORK/varnish.pid")" 2>/dev/null || true
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
        coldwire)
            taskset -c "$PROXY_CPU" "$COLDWIRE" proxy --listen "127.0.0.1:$PROXY_PORT" \
                --reverse "http://127.0.0.1:$ORIGIN_PORT" --workers 1 >/dev/null 2>&1 &
            CONTENDER_PID=$!
            ;;
        squid)
            sed -e "s|@PORT@|$PROXY_PORT|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@DIR@|$dir|g" \
                "$BENCH/squid/squid.conf.in" >"$dir/squid.conf"
            taskset -c "$PROXY_CPU" squid -N -f "$dir/squid.conf" >/dev/null 2>&1 &
            CONTENDER_PID=$!
            ;;
        varnish)
            sed -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" "$BENCH/varnish/default.vcl" >"$dir/default.vcl"
            taskset -c "$PROXY_CPU" varnishd -F -j none -n "$dir/varnish" -f "$dir/default.vcl" \
                -a "127.0.0.1:$PROXY_PORT" -s malloc,256m -p default_ttl=600 \
                -p thread_pools=1 >/dev/null 2>&1 &
            CONTENDER_PID=$!
            ;;
        nginx)
            sed -e "s|@PORT@|$PROXY_PORT|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@DIR@|$dir|g" \
                "$BENCH/nginx/proxy-cache.conf.in" >"$dir/nginx.conf"
            taskset -c "$PROXY_CPU" nginx -c "$dir/nginx.conf" -p "$dir" >/dev/null 2>&1 &
            CONTENDER_PID=$!
            ;;
    esac
    wait_port "$PROXY_PORT" || die "$name did not start (see $dir)"
}

stop_contender() {
    kill "$CONTENDER_PID" 2>/dev/null || true
    wait "$CONTENDER_PID" 2>/dev/null || true
    CONTENDER_PID=
    # Squid forks its worker; make sure the port is free before the next contender.
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/" 2>/dev/null || return 0
        sleep 0.1
    done
    # Still answering: a process of ours that outlived its parent (Squid's kid). Stop it by
    # the id it wrote down.
    [[ -f $WORK/squid/squid.pid ]] && kill "$(cat "$WORK/squid/squid.pid")" 2>/dev/null || true
    sleep 1
}

echo "round,object,contender,requests_per_second,origin_requests_during_run,non_2xx" >"$OUT/results.csv"
for round in $(seq 1 "$ROUNDS"); do
    for object in "${OBJECTS[@]}"; do
        for contender in "${CONTENDERS[@]}"; do
            start_contender "$contender"
            url="http://127.0.0.1:$PROXY_PORT/$object"
            # Fill the cache (twice: some caches store on the second request).
            curl -s -o /dev/null "$url"
            curl -s -o /dev/null "$url"
            curl -s -D "$RAW/headers-$contender-$object.txt" -o /dev/null "$url"
            taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" "$url" >/dev/null 2>&1
            before=$(origin_requests)
            raw="$RAW/wrk-$round-$object-$contender.txt"
            taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "$url" >"$raw" 2>&1
            after=$(origin_requests)
            read -r rps _ non2xx < <(wrk_totals "$raw")
            echo "$round,$object,$contender,$rps,$((after - before)),$non2xx" >>"$OUT/results.csv"
            log "round $round $object $contender: ${rps:-?} req/s (origin saw $((after - before)))"
            stop_contender
        done
    done
done

python3 - "$OUT/results.csv" >"$OUT/summary.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
objects = sorted({r["object"] for r in rows}, key=lambda o: (len(o), o))
contenders = list(dict.fromkeys(r["contender"] for r in rows))
rps = {}
for r in rows:
    rps.setdefault((r["object"], r["contender"]), {})[r["round"]] = float(r["requests_per_second"])
print("# coldwire proxy vs Squid, Varnish, nginx proxy_cache: cache hits per second\n")
print("Median over rounds of requests/s (wrk -t1, one proxy core); ratio = median over rounds")
print("of the per-round ratio coldwire / peer (runs side by side in the same round).\n")
print("| object | " + " | ".join(contenders) + " | " + " | ".join(f"coldwire / {c}" for c in contenders if c != "coldwire") + " |")
print("|---" * (1 + len(contenders) + len(contenders) - 1) + "|")
for o in objects:
    cells = [f"{statistics.median(rps[(o, c)].values()):,.0f}" for c in contenders]
    ratios = []
    for c in contenders:
        if c == "coldwire":
            continue
        per_round = [rps[(o, "coldwire")][k] / v for k, v in rps[(o, c)].items() if v > 0 and k in rps[(o, "coldwire")]]
        ratios.append(f"{statistics.median(per_round):.2f}x" if per_round else "-")
    print(f"| {o} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
origin = sum(int(r["origin_requests_during_run"]) for r in rows)
errors = sum(int(r["non_2xx"] or 0) for r in rows)
print(f"\nOrigin requests during all measured runs: {origin} (0 means every measured request was a hit); non-2xx responses: {errors}.")
PY
cat "$OUT/summary.md"
log "results in $OUT"
