#!/usr/bin/env bash
# bench/disk-store-cold.sh: disk-cache hits from a COLD page cache, and what they do to a
# concurrent hot request on the same event loop — coldwire proxy --cache-dir with its
# read-ahead off (COLDWIRE_READ_AHEAD=off: sendfile reads the disk on the loop), on (the
# default: a pool of 2 threads reads cold windows first), on --io uring (file splices run in
# the kernel's io-wq), and nginx proxy_cache with `aio threads` (a 2-thread pool, the same
# size), and Squid with a rock store (bench/squid/squid-rock.conf.in, as in
# bench/disk-store.sh: one worker, no memory cache), side by side. Then the same objects with
# the page cache warm, to price the probe (one cachestat per window) that read-ahead adds to
# every disk hit.
#
# Per round, per object size (8 KiB, 256 KiB), per contender (alternating, each started
# fresh on an empty cache): fill OBJECTS objects through the proxy; write the cache files
# back and evict them (posix_fadvise DONTNEED on every file under the contender's cache
# directory: coldwire's --cache-dir, nginx's proxy_cache_path, Squid's rock directory with its
# one database file; posix_fadvise DONTNEED — our own files only; dropping the whole
# machine's caches would disturb the other users of this shared machine); then for DURATION
# seconds at once:
#   - cold load: wrk -t1 -c$CONNECTIONS, each request a random one of the OBJECTS objects;
#   - an evictor re-evicting every cache file every EVICT_EVERY seconds, so hits stay cold;
#   - a hot client: GET /hot (1 KiB; coldwire: a memory hit; nginx: its own cache zone,
#     never evicted; Squid: the same rock database as the cold objects, so evicted with
#     them — Squid here has no memory cache, as in bench/disk-store.sh) HOT_RATE times a second on one keep-alive connection, each latency
#     recorded (from sending to the last byte; a late reply delays the next request).
# Then, evictor stopped and a WARMUP-second warm-up, a warm run (wrk -c$CONNECTIONS on the
# same objects, all in the page cache): hits/s and the proxy's CPU µs per hit.
#
# Proxy pinned to PROXY_CPU with one worker; wrk, the hot client, the evictor and the origin
# on CLIENT_CPU. The machine is shared and noisy: read the ratios of runs made side by side.
#
# Usage: DURATION=10 ROUNDS=2 bench/disk-store-cold.sh
# Environment: DURATION (s, 10), ROUNDS (2), WARMUP (s, 2), CONNECTIONS (16), OBJECTS (400),
#   EVICT_EVERY (s, 0.2), HOT_RATE (/s, 50), THREADS (nginx thread pool, 2), SIZES ("8k 256k"),
#   CONTENDERS ("coldwire-off coldwire-on coldwire-uring nginx-aio"; also "squid-rock"),
#   COLDWIRE (target/release/coldwire), PROXY_CPU (0), CLIENT_CPU (1), OUT.
# Output: $OUT/{cold.csv,warm.csv,tables.md,raw/}
set -euo pipefail

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-16}
OBJECTS=${OBJECTS:-400}
EVICT_EVERY=${EVICT_EVERY:-0.2}
HOT_RATE=${HOT_RATE:-50}
THREADS=${THREADS:-2}
PROXY_CPU=${PROXY_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
read -r -a SIZES <<<"${SIZES:-8k 256k}"
read -r -a CONTENDERS <<<"${CONTENDERS:-coldwire-off coldwire-on coldwire-uring nginx-aio}"

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$REPO/bench"
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
OUT=${OUT:-$REPO/results/$(date +%F)-vm/disk-cold}
RAW="$OUT/raw"
# On a disk file system, not a tmpfs: the eviction must be real.
WORK=$(mktemp -d "${WORK_PARENT:-/var/tmp}/disk-cold.XXXXXX")
chmod 777 "$WORK"
ORIGIN_PORT=${ORIGIN_PORT:-18380}
PROXY_PORT=${PROXY_PORT:-18381}
ADMIN_PORT=${ADMIN_PORT:-18382}
# shellcheck source=bench/lib.sh
source "$BENCH/lib.sh"

require_tools "apt-get install wrk nginx-light" wrk nginx taskset curl python3
if [[ " ${CONTENDERS[*]} " == *" squid-rock "* ]]; then
    require_tools "apt-get install squid" squid
fi
[[ -x $COLDWIRE ]] || die "$COLDWIRE missing: cargo build --release -p coldwire"
mkdir -p "$RAW"

# The origin's files: /8k/N, /256k/N, /hot.
ROOT="$WORK/root"
for size in "${SIZES[@]}"; do
    mkdir -p "$ROOT/$size"
    bytes=$(( ${size%k} * 1024 ))
    for index in $(seq 0 $((OBJECTS - 1))); do
        head -c "$bytes" /dev/urandom >"$ROOT/$size/$index"
    done
done
head -c 1024 /dev/urandom >"$ROOT/hot"
# An old Last-Modified makes the objects heuristically fresh for a day everywhere.
find "$ROOT" -type f -exec touch -d '2020-01-01 00:00:00' {} +

cat >"$WORK/random.lua" <<'LUA'
-- A random one of OBJECTS objects under PREFIX per request.
local count = tonumber(os.getenv("OBJECTS"))
local prefix = os.getenv("PREFIX")
math.randomseed(os.time() + tonumber(os.getenv("SEED") or "0"))
request = function()
    return wrk.format("GET", prefix .. math.random(0, count - 1))
end
LUA

cat >"$WORK/fill.py" <<'PY'
# Requests every object once (and /hot twice) over one keep-alive connection.
import http.client, sys
port, prefix, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for path in [prefix + str(i) for i in range(count)] + ["/hot", "/hot"]:
    connection.request("GET", path)
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        sys.exit(f"{path}: {response.status}")
PY

cat >"$WORK/hits.py" <<'PY'
# Squid writes to its rock store after answering: requests every object (and /hot) until
# each answers `X-Cache: HIT` (a miss fetches it again), for at most LIMIT seconds. Prints
# the objects still missing and the seconds it took.
import http.client, sys, time
port, prefix, count, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
missing = [prefix + str(i) for i in range(count)] + ["/hot"]
start = time.monotonic()
while missing and time.monotonic() - start < limit:
    time.sleep(0.5)
    left = []
    for path in missing:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        if not (response.getheader("X-Cache") or "").startswith("HIT"):
            left.append(path)
    missing = left
print(f"{len(missing)} {time.monotonic() - start:.1f}")
PY

cat >"$WORK/evict.py" <<'PY'
# Writes back once, then evicts every file under ROOT from the page cache every EVERY
# seconds (forever with EVERY > 0; once with EVERY = 0). Prints the pages left cached after
# the first pass (mincore-free: cachestat through ctypes where the kernel has it).
import ctypes, os, sys, time
root, every = sys.argv[1], float(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
class Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]
class Stat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("cache", "dirty", "writeback", "evicted", "recent")]
def files():
    for directory, _, names in os.walk(root):
        for name in names:
            yield os.path.join(directory, name)
def cached(fd):
    stat = Stat()
    if libc.syscall(451, fd, ctypes.byref(Range(0, 0)), ctypes.byref(stat), 0) != 0:
        return -1
    return stat.cache
def evict(sync):
    left = 0
    for path in files():
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if sync:
                os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if sync:
                left += max(0, cached(fd))
        finally:
            os.close(fd)
    return left
print(f"pages cached after eviction: {evict(True)}", flush=True)
while every > 0:
    time.sleep(every)
    evict(False)
PY

cat >"$WORK/hot.py" <<'PY'
# GET /hot RATE times a second for DURATION seconds on one keep-alive connection; prints
# count, p50, p99 and max latency in ms.
import http.client, sys, time
port, duration, rate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
latencies = []
end = time.monotonic() + duration
due = time.monotonic()
while time.monotonic() < end:
    now = time.monotonic()
    if now < due:
        time.sleep(due - now)
    start = time.monotonic()
    connection.request("GET", "/hot")
    response = connection.getresponse()
    response.read()
    latencies.append((time.monotonic() - start) * 1000)
    due = max(due + 1 / rate, time.monotonic())
latencies.sort()
pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
print(f"{len(latencies)} {pick(0.5):.3f} {pick(0.99):.3f} {latencies[-1]:.3f}")
PY

start_origin "$ROOT" "$ORIGIN_PORT"
CONTENDER_PID=
EVICTOR_PID=
cleanup() {
    [[ -f $WORK/squid-rock/squid.pid ]] && kill "$(cat "$WORK/squid-rock/squid.pid")" 2>/dev/null || true
    stop_all EVICTOR_PID CONTENDER_PID ORIGIN_PID
    rm -rf "$WORK"
}
trap cleanup EXIT
sleep 0.5

stats() { curl -s "http://127.0.0.1:$ADMIN_PORT/stats"; }

# One field of coldwire's /stats (0 for nginx): "loop.file_reads_offloaded" etc.
stat_of() {
    [[ $1 == coldwire-* ]] || { echo 0; return; }
    stats | python3 -c '
import json, sys
value = json.load(sys.stdin)
for part in sys.argv[1].split("."):
    value = value.get(part, {}) if isinstance(value, dict) else {}
print(value if isinstance(value, int) else 0)' "$2"
}

start_contender() {
    local name=$1 dir="$WORK/$1"
    rm -rf "$dir"
    mkdir -p "$dir"
    chmod 777 "$dir"
    local coldwire_args=(proxy --listen "127.0.0.1:$PROXY_PORT"
        --reverse "http://127.0.0.1:$ORIGIN_PORT" --workers 1
        --cache-dir "$dir/cold" --cache-dir-size 1GiB --cache-bytes 67108864
        --max-object-bytes 4096 --admin "127.0.0.1:$ADMIN_PORT")
    case $name in
        coldwire-off)
            COLDWIRE_READ_AHEAD=off taskset -c "$PROXY_CPU" "$COLDWIRE" "${coldwire_args[@]}" >"$dir/log" 2>&1 &
            ;;
        coldwire-on)
            taskset -c "$PROXY_CPU" "$COLDWIRE" "${coldwire_args[@]}" >"$dir/log" 2>&1 &
            ;;
        coldwire-uring)
            taskset -c "$PROXY_CPU" "$COLDWIRE" "${coldwire_args[@]}" --io uring >"$dir/log" 2>&1 &
            ;;
        nginx-aio)
            sed -e "s|@PORT@|$PROXY_PORT|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@DIR@|$dir|g" \
                -e "s|@THREADS@|$THREADS|g" "$BENCH/nginx/proxy-cache-disk-aio.conf.in" >"$dir/nginx.conf"
            taskset -c "$PROXY_CPU" nginx -c "$dir/nginx.conf" -p "$dir" >/dev/null 2>&1 &
            ;;
        squid-rock)
            # The rock directory is "$dir/cold/rock": the evictor walks "$dir/cold".
            mkdir -p "$dir/cold"
            chmod 777 "$dir/cold"
            sed -e "s|@PORT@|$PROXY_PORT|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@DIR@|$dir|g" \
                -e "s|$dir/rock|$dir/cold/rock|" "$BENCH/squid/squid-rock.conf.in" >"$dir/squid.conf"
            taskset -c "$PROXY_CPU" squid -z -N -f "$dir/squid.conf" >/dev/null 2>&1 || true
            taskset -c "$PROXY_CPU" squid -N -f "$dir/squid.conf" >/dev/null 2>&1 &
            ;;
        *) die "unknown contender $name" ;;
    esac
    CONTENDER_PID=$!
    wait_port "$PROXY_PORT" /hot || die "$name did not start (see $dir)"
}

stop_contender() {
    kill "$CONTENDER_PID" 2>/dev/null || true
    wait "$CONTENDER_PID" 2>/dev/null || true
    CONTENDER_PID=
    # Squid closes its port after shutdown_lifetime (1 s): wait for it to go.
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/hot" 2>/dev/null || break
        sleep 0.1
    done
    sleep 0.5
}

# Waits until coldwire's disk queue is empty (nginx writes its files before answering;
# Squid writes after answering: wait until every object answers X-Cache: HIT, up to 60 s).
settle() {
    if [[ $1 == squid-rock ]]; then
        taskset -c "$CLIENT_CPU" python3 "$WORK/hits.py" "$PROXY_PORT" "/$2/" "$OBJECTS" 60 >"$RAW/settle-$3-$2-$1.txt"
        read -r missing seconds <"$RAW/settle-$3-$2-$1.txt"
        log "squid-rock: $missing objects not yet hits after ${seconds}s"
        sleep 1
        return
    fi
    [[ $1 == coldwire-* ]] || { sleep 1; return; }
    for _ in $(seq 1 200); do
        [[ $(stat_of "$1" cache.disk.queue_depth) == 0 ]] && return 0
        sleep 0.1
    done
}

# wrk's --latency table in ms ("50%" and "99%" rows).
wrk_ms() {
    awk -v key="$2" '$1 == key {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' "$1"
}

echo "round,size,contender,cold_hits_per_second,cold_requests,cold_p50_ms,cold_p99_ms,hot_requests,hot_p50_ms,hot_p99_ms,hot_max_ms,pages_left_after_eviction,file_reads_offloaded,file_probe_calls,hits_on_disk,non_2xx" >"$OUT/cold.csv"
echo "round,size,contender,hits_per_second,requests,cpu_seconds,cpu_us_per_hit,file_probe_calls,non_2xx" >"$OUT/warm.csv"
for round in $(seq 1 "$ROUNDS"); do
    for size in "${SIZES[@]}"; do
        for contender in "${CONTENDERS[@]}"; do
            start_contender "$contender"
            dir="$WORK/$contender/cold"
            taskset -c "$CLIENT_CPU" python3 "$WORK/fill.py" "$PROXY_PORT" "/$size/" "$OBJECTS"
            settle "$contender" "$size" "$round"
            # Cold run.
            taskset -c "$CLIENT_CPU" python3 "$WORK/evict.py" "$dir" "$EVICT_EVERY" >"$RAW/evict-$round-$size-$contender.txt" &
            EVICTOR_PID=$!
            sleep 0.5
            offloaded_before=$(stat_of "$contender" total.loop.file_reads_offloaded)
            probes_before=$(stat_of "$contender" total.loop.file_probe_calls)
            disk_before=$(stat_of "$contender" cache.hits_on_disk)
            raw="$RAW/cold-wrk-$round-$size-$contender.txt"
            OBJECTS=$OBJECTS PREFIX="/$size/" SEED=$round taskset -c "$CLIENT_CPU" \
                wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/random.lua" \
                "http://127.0.0.1:$PROXY_PORT" >"$raw" 2>&1 &
            wrk_pid=$!
            read -r hot_count hot_p50 hot_p99 hot_max < <(taskset -c "$CLIENT_CPU" python3 "$WORK/hot.py" "$PROXY_PORT" "$DURATION" "$HOT_RATE")
            wait "$wrk_pid"
            kill "$EVICTOR_PID" 2>/dev/null || true
            wait "$EVICTOR_PID" 2>/dev/null || true
            EVICTOR_PID=
            left=$(awk '/pages cached/ {print $5}' "$RAW/evict-$round-$size-$contender.txt")
            offloaded=$(( $(stat_of "$contender" total.loop.file_reads_offloaded) - offloaded_before ))
            probes=$(( $(stat_of "$contender" total.loop.file_probe_calls) - probes_before ))
            disk_hits=$(( $(stat_of "$contender" cache.hits_on_disk) - disk_before ))
            read -r rps requests non2xx < <(wrk_totals "$raw")
            echo "$round,$size,$contender,$rps,$requests,$(wrk_ms "$raw" 50%),$(wrk_ms "$raw" 99%),$hot_count,$hot_p50,$hot_p99,$hot_max,${left:-?},$offloaded,$probes,$disk_hits,$non2xx" >>"$OUT/cold.csv"
            log "round $round $size $contender cold: ${rps:-?} hits/s; hot p50 $hot_p50 ms p99 $hot_p99 ms (offloaded $offloaded, pages left $left)"
            # Warm run: the same objects, all in the page cache now.
            OBJECTS=$OBJECTS PREFIX="/$size/" taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" \
                -d"${WARMUP}s" -s "$WORK/random.lua" "http://127.0.0.1:$PROXY_PORT" >/dev/null 2>&1
            probes_before=$(stat_of "$contender" total.loop.file_probe_calls)
            cpu_before=$(cpu_ticks "$CONTENDER_PID")
            raw="$RAW/warm-wrk-$round-$size-$contender.txt"
            OBJECTS=$OBJECTS PREFIX="/$size/" SEED=$round taskset -c "$CLIENT_CPU" \
                wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/random.lua" \
                "http://127.0.0.1:$PROXY_PORT" >"$raw" 2>&1
            cpu_after=$(cpu_ticks "$CONTENDER_PID")
            probes=$(( $(stat_of "$contender" total.loop.file_probe_calls) - probes_before ))
            read -r rps requests non2xx < <(wrk_totals "$raw")
            read -r cpu per_hit < <(cpu_per_request "$cpu_before" "$cpu_after" "$requests")
            echo "$round,$size,$contender,$rps,$requests,$cpu,$per_hit,$probes,$non2xx" >>"$OUT/warm.csv"
            log "round $round $size $contender warm: ${rps:-?} hits/s, $per_hit us CPU/hit"
            [[ $contender == coldwire-* ]] && stats >"$RAW/stats-$round-$size-$contender.json"
            stop_contender
        done
    done
done

python3 - "$OUT" >"$OUT/tables.md" <<'PY'
import csv, statistics, sys
out = sys.argv[1]
cold = list(csv.DictReader(open(f"{out}/cold.csv")))
warm = list(csv.DictReader(open(f"{out}/warm.csv")))
def med(rows, size, contender, field):
    values = [float(r[field]) for r in rows if r["size"] == size and r["contender"] == contender]
    return statistics.median(values) if values else float("nan")
def ratio(rows, size, a, b, field):
    mine = {r["round"]: float(r[field]) for r in rows if r["size"] == size and r["contender"] == a}
    theirs = {r["round"]: float(r[field]) for r in rows if r["size"] == size and r["contender"] == b}
    per_round = [mine[k] / v for k, v in theirs.items() if v > 0 and k in mine]
    return f"{statistics.median(per_round):.2f}x" if per_round else "-"
sizes = list(dict.fromkeys(r["size"] for r in cold))
contenders = list(dict.fromkeys(r["contender"] for r in cold))
print("## Cold page cache: cold hits, and a hot request beside them\n")
print("| size | contender | cold hits/s | cold p50 ms | cold p99 ms | hot p50 ms | hot p99 ms | hot max ms | offloaded | disk hits |")
print("|---|---|---|---|---|---|---|---|---|---|")
for s in sizes:
    for c in contenders:
        print(f"| {s} | {c} | {med(cold, s, c, 'cold_hits_per_second'):,.0f} | {med(cold, s, c, 'cold_p50_ms'):.2f} | {med(cold, s, c, 'cold_p99_ms'):.2f} | "
              f"{med(cold, s, c, 'hot_p50_ms'):.2f} | {med(cold, s, c, 'hot_p99_ms'):.2f} | {med(cold, s, c, 'hot_max_ms'):.2f} | "
              f"{med(cold, s, c, 'file_reads_offloaded'):,.0f} | {med(cold, s, c, 'hits_on_disk'):,.0f} |")
print()
pairs = [("coldwire-on", "coldwire-off"), ("coldwire-on", "nginx-aio"), ("coldwire-uring", "nginx-aio"),
         ("coldwire-on", "squid-rock")]
print("Per-round ratios (median): cold hits/s, and hot p50 / p99 latency (lower is better)\n")
print("| size | pair | cold hits/s | hot p50 | hot p99 |")
print("|---|---|---|---|---|")
for s in sizes:
    for a, b in pairs:
        if a in contenders and b in contenders:
            print(f"| {s} | {a} / {b} | {ratio(cold, s, a, b, 'cold_hits_per_second')} | {ratio(cold, s, a, b, 'hot_p50_ms')} | {ratio(cold, s, a, b, 'hot_p99_ms')} |")
print()
print("## Warm page cache: the probe's cost\n")
print("| size | contender | hits/s | CPU µs/hit | probes per hit |")
print("|---|---|---|---|---|")
for s in sizes:
    for c in contenders:
        hits = med(warm, s, c, "requests")
        print(f"| {s} | {c} | {med(warm, s, c, 'hits_per_second'):,.0f} | {med(warm, s, c, 'cpu_us_per_hit'):.1f} | {med(warm, s, c, 'file_probe_calls') / max(1, hits):.2f} |")
print()
warm_pairs = [(a, b) for a, b in [("coldwire-on", "coldwire-off"), ("coldwire-on", "nginx-aio"), ("coldwire-on", "squid-rock")]
              if a in contenders and b in contenders]
print("| size | " + " | ".join(f"{a} / {b} hits/s | CPU µs/hit" for a, b in warm_pairs) + " |")
print("|---" * (1 + 2 * len(warm_pairs)) + "|")
for s in sizes:
    print(f"| {s} | " + " | ".join(f"{ratio(warm, s, a, b, 'hits_per_second')} | {ratio(warm, s, a, b, 'cpu_us_per_hit')}" for a, b in warm_pairs) + " |")
PY
cat "$OUT/tables.md"
log "results in $OUT"
