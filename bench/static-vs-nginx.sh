#!/usr/bin/env bash
# bench/static-vs-nginx.sh: `coldwire serve` (epoll, poll, select) against nginx serving
# two static files (1,259 B and 8 KiB) over keep-alive on loopback, plus user-space memory
# per idle connection.
#
# Throughput: server pinned to CPU 0 (one worker), wrk pinned to CPU 1
# (`wrk -t1 -c$CONNECTIONS -d${DURATION}s --latency`), after a discarded ${WARMUP}s warm-up.
# Contenders alternate within each round (round -> file -> contender, each started fresh,
# only one loaded at a time), so per-round ratios compare runs made side by side; the
# machine is shared and noisy, so only ratios are meaningful, not absolute numbers.
#
# Memory: each server is started fresh, its VmRSS read, $IDLE_CONNS idle TCP connections
# opened and held (bench/hold-connections.py), and once the server holds them all, VmRSS is
# read again: (RSS_with - RSS_without) / IDLE_CONNS bytes per connection.
#
# Usage (from anywhere):  DURATION=10 ROUNDS=3 bench/static-vs-nginx.sh
# Environment: DURATION (s, 10), ROUNDS (3), WARMUP (s, 2), CONNECTIONS (50),
#   IDLE_CONNS (10000), MACHINE (hostname -s), SERVER_CPU (0), CLIENT_CPU (1).
# Output: results/<date>-<machine>/static-vs-nginx/{results.csv,memory.csv,summary.md,raw/}
set -euo pipefail

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-50}
IDLE_CONNS=${IDLE_CONNS:-10000}
MACHINE=${MACHINE:-$(hostname -s)}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
BENCH="$REPO/bench"
COLDWIRE="$REPO/target/release/coldwire"
OUT="$REPO/results/$(date +%F)-$MACHINE/static-vs-nginx"
RAW="$OUT/raw"
CONTENDERS=(nginx coldwire-epoll coldwire-poll coldwire-select)
FILES=(1259 8k)
CLK_TCK=$(getconf CLK_TCK)

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- prerequisites
ulimit -Sn "$(ulimit -Hn)"
[[ $(ulimit -n) == unlimited || $(ulimit -n) -ge $((IDLE_CONNS + 200)) ]] ||
    die "open-files limit $(ulimit -n) is too low for IDLE_CONNS=$IDLE_CONNS"

missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
for tool in nginx wrk taskset python3 getconf; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done

log "building coldwire (release)"
cargo build --release -p coldwire
[[ -x $COLDWIRE ]] || die "$COLDWIRE missing after the build"

# ---------------------------------------------------------------- workspace
TMP=$(mktemp -d /tmp/coldwire-bench.XXXXXX)
chmod 755 "$TMP" # nginx workers run as an unprivileged user and must read the root
ROOT="$TMP/root"
mkdir -p "$ROOT"
head -c 1259 /dev/urandom >"$ROOT/1259.bin"
head -c 8192 /dev/urandom >"$ROOT/8k.bin"
chmod 644 "$ROOT"/*.bin
chmod 755 "$ROOT"

rm -rf "$RAW"
mkdir -p "$RAW"
rm -f "$OUT/results.csv" "$OUT/memory.csv" "$OUT/summary.md"

SERVER_PID=""   # the process we started (nginx master or coldwire)
MEASURE_PID=""  # the process that serves (nginx worker or coldwire)
HOLD_PID=""
PORT=""
ADMIN_PORT=""

cleanup() {
    set +e
    [[ -n $HOLD_PID ]] && kill "$HOLD_PID" 2>/dev/null && wait "$HOLD_PID" 2>/dev/null
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_listening() { # port
    local i
    for i in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

cpu_ticks() { # pid -> utime+stime of the whole process, in clock ticks
    awk '{print $14 + $15}' "/proc/$1/stat"
}

cpu_stat() { # cpu number -> "idle_ticks total_ticks" from /proc/stat
    awk -v cpu="cpu$1" '$1 == cpu {t = 0; for (i = 2; i <= NF; i++) t += $i; print $5 + $6, t}' /proc/stat
}

idle_pct() { # "idle total" before, "idle total" after -> idle percentage in between
    awk -v b="$1" -v a="$2" 'BEGIN {split(b, x, " "); split(a, y, " "); d = y[2] - x[2];
        printf "%.1f", (d > 0 ? (y[1] - x[1]) / d * 100 : 0)}'
}

rss_kib() { # pid
    awk '/^VmRSS:/ {print $2}' "/proc/$1/status"
}

fd_count() { # pid
    find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l
}

# start_server CONTENDER LOGPREFIX: sets SERVER_PID, MEASURE_PID, PORT (and ADMIN_PORT).
start_server() {
    local contender=$1 prefix=$2
    PORT=$(free_port)
    case $contender in
        nginx)
            mkdir -p "$TMP/nginx"
            rm -f "$TMP/nginx/nginx-error.log"
            sed -e "s|@TMP@|$TMP/nginx|g" -e "s|@PORT@|$PORT|g" -e "s|@ROOT@|$ROOT|g" \
                "$BENCH/nginx/static.conf.template" >"$TMP/nginx/nginx.conf"
            taskset -c "$SERVER_CPU" nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" \
                -e "$TMP/nginx/nginx-error.log" >"$prefix.stdout" 2>"$prefix.stderr" &
            SERVER_PID=$!
            wait_listening "$PORT" || die "nginx did not start (see $prefix.stderr)"
            local i
            MEASURE_PID=""
            for i in $(seq 1 50); do
                MEASURE_PID=$(pgrep -P "$SERVER_PID" | head -1 || true)
                [[ -n $MEASURE_PID ]] && break
                sleep 0.1
            done
            [[ -n $MEASURE_PID ]] || die "no nginx worker process"
            ;;
        coldwire-*)
            local backend=${contender#coldwire-}
            ADMIN_PORT=$(free_port)
            taskset -c "$SERVER_CPU" "$COLDWIRE" serve --root "$ROOT" --listen "127.0.0.1:$PORT" \
                --io "$backend" --workers 1 --admin "127.0.0.1:$ADMIN_PORT" --idle-timeout 600 \
                >"$prefix.stdout" 2>"$prefix.stderr" &
            SERVER_PID=$!
            MEASURE_PID=$SERVER_PID
            wait_listening "$PORT" || die "coldwire did not start (see $prefix.stderr)"
            ;;
    esac
}

# stop_server CONTENDER LOGPREFIX
stop_server() {
    local contender=$1 prefix=$2 i
    if [[ $contender == coldwire-* ]]; then
        python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
            "http://127.0.0.1:$ADMIN_PORT/stats" >"$prefix.stats.json" 2>/dev/null ||
            log "warning: could not read coldwire stats"
    fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        log "WARNING: $contender (pid $SERVER_PID) died during the run"
        echo "server died during the run" >>"$prefix.stderr"
    fi
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for i in $(seq 1 120); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        log "WARNING: $contender did not stop within 12 s of SIGTERM (grace is 10 s); killing it"
        echo "did not stop within 12 s of SIGTERM; killed with SIGKILL" >>"$prefix.stderr"
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    wait "$SERVER_PID" 2>/dev/null || true
    if [[ $contender == nginx && -s $TMP/nginx/nginx-error.log ]]; then
        cp "$TMP/nginx/nginx-error.log" "$prefix.nginx-error.log"
    fi
    SERVER_PID=""
    MEASURE_PID=""
}

# run_wrk SECONDS URL OUTFILE: wrk output to OUTFILE, its CPU ticks to OUTFILE.cpu
run_wrk() {
    bash -c 'taskset -c "$1" wrk -t1 -c"$2" -d"$3"s --latency "$4" >"$5"; status=$?
             awk "{print \$16 + \$17}" /proc/$$/stat >"$5.cpu"; exit $status' \
        _ "$CLIENT_CPU" "$CONNECTIONS" "$1" "$2" "$3"
}

# ---------------------------------------------------------------- metadata
{
    echo "date=$(date -Is)"
    echo "machine=$MACHINE"
    echo "hostname=$(hostname)"
    echo "nproc=$(nproc)"
    echo "kernel=$(uname -r)"
    echo "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "nginx=$(nginx -v 2>&1 | head -1)"
    echo "wrk=$( (wrk -v 2>&1 || true) | head -1)"
    echo "coldwire=$("$COLDWIRE" --version 2>&1 | head -1)"
    echo "coldwire_rev=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "coldwire_dirty=$(git -C "$REPO" status --porcelain --untracked-files=no -- crates Cargo.toml Cargo.lock 2>/dev/null | wc -l) modified tracked file(s) under crates/ at build time"
    echo "python=$(python3 --version 2>&1)"
    echo "duration=$DURATION"
    echo "rounds=$ROUNDS"
    echo "warmup=$WARMUP"
    echo "connections=$CONNECTIONS"
    echo "idle_conns=$IDLE_CONNS"
    echo "server_cpu=$SERVER_CPU"
    echo "client_cpu=$CLIENT_CPU"
    echo "command=cd $REPO && DURATION=$DURATION ROUNDS=$ROUNDS WARMUP=$WARMUP CONNECTIONS=$CONNECTIONS IDLE_CONNS=$IDLE_CONNS MACHINE=$MACHINE bench/static-vs-nginx.sh"
} >"$OUT/meta.txt"
git -C "$REPO" status --porcelain -- crates Cargo.toml Cargo.lock >"$RAW/git-status.txt" 2>/dev/null || true
git -C "$REPO" diff -- crates >"$RAW/git-diff.patch" 2>/dev/null || true

# ---------------------------------------------------------------- throughput
echo "round,file,contender,requests_per_second,p50_ms,p99_ms,socket_errors,non_2xx,server_cpu_pct,wrk_cpu_pct,server_cpu_idle_pct,client_cpu_idle_pct" >"$OUT/results.csv"
total=$((ROUNDS * ${#FILES[@]} * ${#CONTENDERS[@]}))
n=0
for round in $(seq 1 "$ROUNDS"); do
    for file in "${FILES[@]}"; do
        for contender in "${CONTENDERS[@]}"; do
            n=$((n + 1))
            prefix="$RAW/r$round-$file-$contender"
            log "[$n/$total] round $round, $file, $contender"
            start_server "$contender" "$prefix"
            url="http://127.0.0.1:$PORT/$file.bin"
            run_wrk "$WARMUP" "$url" "$prefix.warmup.txt" || log "warning: warm-up wrk failed"
            before=$(cpu_ticks "$MEASURE_PID")
            server_stat0=$(cpu_stat "$SERVER_CPU")
            client_stat0=$(cpu_stat "$CLIENT_CPU")
            wrk_ok=1
            run_wrk "$DURATION" "$url" "$prefix.wrk.txt" || wrk_ok=0
            after=$(cpu_ticks "$MEASURE_PID" 2>/dev/null || echo "$before")
            server_idle=$(idle_pct "$server_stat0" "$(cpu_stat "$SERVER_CPU")")
            client_idle=$(idle_pct "$client_stat0" "$(cpu_stat "$CLIENT_CPU")")
            stop_server "$contender" "$prefix"
            ((wrk_ok)) || die "wrk failed for $contender (see $prefix.wrk.txt)"
            server_cpu=$(awk -v a="$after" -v b="$before" -v t="$CLK_TCK" -v d="$DURATION" \
                'BEGIN {printf "%.1f", (a - b) / t / d * 100}')
            wrk_cpu=$(awk -v c="$(cat "$prefix.wrk.txt.cpu")" -v t="$CLK_TCK" -v d="$DURATION" \
                'BEGIN {printf "%.1f", c / t / d * 100}')
            fields=$(python3 "$BENCH/static-vs-nginx-report.py" parse-wrk "$prefix.wrk.txt")
            echo "$round,$file,$contender,$fields,$server_cpu,$wrk_cpu,$server_idle,$client_idle" >>"$OUT/results.csv"
            log "    $fields (rps,p50_ms,p99_ms,socket_errors,non_2xx); server CPU $server_cpu%, wrk CPU $wrk_cpu%, CPU idle $server_idle% / $client_idle%"
        done
    done
done

# ---------------------------------------------------------------- memory per idle connection
echo "contender,connections_requested,connections_held,server_fds_added,rss_without_kib,rss_with_kib,bytes_per_connection" >"$OUT/memory.csv"
for contender in "${CONTENDERS[@]}"; do
    prefix="$RAW/mem-$contender"
    log "memory: $contender, $IDLE_CONNS idle connections"
    start_server "$contender" "$prefix"
    sleep 0.5
    fd0=$(fd_count "$MEASURE_PID")
    rss0=$(rss_kib "$MEASURE_PID")
    : >"$TMP/hold.out"
    taskset -c "$CLIENT_CPU" python3 "$BENCH/hold-connections.py" 127.0.0.1 "$PORT" "$IDLE_CONNS" \
        >"$TMP/hold.out" 2>"$prefix.hold.stderr" &
    HOLD_PID=$!
    for i in $(seq 1 1200); do
        grep -q '^ready' "$TMP/hold.out" && break
        kill -0 "$HOLD_PID" 2>/dev/null || die "hold-connections.py exited early (see $prefix.hold.stderr)"
        sleep 0.1
    done
    grep -q '^ready' "$TMP/hold.out" || die "hold-connections.py did not finish connecting"
    held=$(awk '/^ready/ {print $2}' "$TMP/hold.out")
    # Wait until the server has accepted them (its descriptor count rises by one per connection).
    for i in $(seq 1 300); do
        (($(fd_count "$MEASURE_PID") - fd0 >= held)) && break
        sleep 0.1
    done
    sleep 1
    fd1=$(fd_count "$MEASURE_PID")
    rss1=$(rss_kib "$MEASURE_PID")
    cp "$TMP/hold.out" "$prefix.hold.stdout"
    kill "$HOLD_PID" 2>/dev/null || true
    wait "$HOLD_PID" 2>/dev/null || true
    HOLD_PID=""
    stop_server "$contender" "$prefix"
    per=$(awk -v a="$rss1" -v b="$rss0" -v n="$held" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}')
    echo "$contender,$IDLE_CONNS,$held,$((fd1 - fd0)),$rss0,$rss1,$per" >>"$OUT/memory.csv"
    log "    held $held, server fds +$((fd1 - fd0)), RSS $rss0 -> $rss1 KiB: $per B/connection"
done

echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"

# ---------------------------------------------------------------- summary
python3 "$BENCH/static-vs-nginx-report.py" summary "$OUT" >"$OUT/summary.md"
cat "$OUT/summary.md"
log "results in $OUT"
