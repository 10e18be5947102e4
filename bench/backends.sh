#!/usr/bin/env bash
# bench/backends.sh — coldwire serve on epoll, uring-poll, uring and uring+sqpoll, side by
# side in one run, with 0, 2,000 and 15,000 cold (idle) connections held open (issue 5).
#
# For every round, cold level and configuration a fresh server is started, pinned to CPU
# $SERVER_CPU, one worker; bench/hold-connections.py opens the cold connections (RSS is read
# before and after: memory per idle connection); wrk (pinned to $CLIENT_CPU, keep-alive,
# -t1 -c$CONNS) warms up, then saturates the server for $DURATION seconds while we take
# deltas of
#   - the server's own counters from its stats endpoint: system calls (accept, recv, send,
#     sendfile, close, shutdown, epoll_ctl, and waits — io_uring_enter calls for the io_uring
#     backends), io_uring submissions and completions, requests answered;
#   - the CPU time of all the server's threads (/proc/PID/task/*/schedstat, first field,
#     so the io_uring SQPOLL and io-wq kernel threads of the process are included).
# Configurations alternate within a round so that machine noise hits them alike.
#
# Output: $OUT/runs.csv (one row per run), $OUT/summary.csv (medians per configuration and
# cold level), $OUT/machine.txt. Usage: bench/backends.sh [OUT_DIR]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
OUT=${1:-$REPO/results/$(date -u +%F)-vm/backends}
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-50}
COLD_LEVELS=${COLD_LEVELS:-"0 2000 15000"}
CONFIGS=${CONFIGS:-"epoll uring-poll uring uring+sqpoll"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BODY_BYTES=${BODY_BYTES:-1024}

die() { echo "backends.sh: $*" >&2; exit 1; }
log() { echo "[$(date -u +%T)] $*" >&2; }
for tool in wrk taskset python3 curl; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt-get install -y $tool)"
done
[ -x "$COLDWIRE" ] || die "$COLDWIRE missing: cargo build --release -p coldwire"

mkdir -p "$OUT"
TMP=$(mktemp -d)
ROOT="$TMP/root"
mkdir -p "$ROOT"
head -c "$BODY_BYTES" /dev/urandom | base64 -w 0 | head -c "$BODY_BYTES" >"$ROOT/file.txt"
SERVER_PID=""
HOLD_PID=""
cleanup() {
    [ -n "$HOLD_PID" ] && kill "$HOLD_PID" 2>/dev/null || true
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "backends.sh: failed at line $LINENO: $BASH_COMMAND; server stderr: $(cat "$TMP/server.err" 2>/dev/null)" >&2' ERR

{
    echo "date: $(date -u +%FT%TZ)"
    echo "kernel: $(uname -r)"
    echo "cpus: $(nproc)"
    echo "coldwire: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "wrk: -t1 -c$CONNS -d${DURATION}s keep-alive, GET /file.txt ($BODY_BYTES bytes), warm-up ${WARMUP}s"
    echo "server: --workers 1, pinned to CPU $SERVER_CPU; wrk and hold-connections.py on CPU $CLIENT_CPU"
    echo "io_uring_disabled: $(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo n/a)"
} >"$OUT/machine.txt"

cpu_ns() { # pid: on-CPU nanoseconds of all its threads
    cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{sum += $1} END {printf "%.0f", sum}'
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

echo "round,config,cold,held,requests,requests_per_s,syscalls_per_request,enter_calls_per_request,submissions_per_request,completions_per_request,cpu_us_per_request,rss_before_kib,rss_after_kib,bytes_per_idle_connection" >"$OUT/runs.csv"

for round in $(seq 1 "$ROUNDS"); do
    for cold in $COLD_LEVELS; do
        for config in $CONFIGS; do
            io=${config%+sqpoll}
            extra=()
            [ "$config" != "$io" ] && extra=(--sqpoll)
            log "round $round, $cold cold, $config"
            start_server() {
                taskset -c "$SERVER_CPU" "$COLDWIRE" serve --root "$ROOT" --listen 127.0.0.1:0 \
                    --io "$io" "${extra[@]}" --workers 1 --admin 127.0.0.1:0 \
                    --idle-timeout 600 --max-connections 19000 >"$TMP/server.out" 2>"$TMP/server.err" &
                SERVER_PID=$!
                for _ in $(seq 200); do
                    grep -q '^stats on' "$TMP/server.out" 2>/dev/null && return 0
                    kill -0 "$SERVER_PID" 2>/dev/null || return 1
                    sleep 0.05
                done
                return 1
            }
            if ! start_server; then
                # Seen twice under load: a server that printed nothing for 10 s. Keep what its
                # threads were waiting on, and try once more.
                failure="$OUT/start-failure-r$round-$config-$cold.txt"
                for task in /proc/"$SERVER_PID"/task/*; do
                    echo "$(cat "$task/comm" 2>/dev/null): $(cat "$task/wchan" 2>/dev/null)"
                    cat "$task/stack" 2>/dev/null
                done >"$failure" || true
                log "server did not start in 10 s (see $failure); retrying once"
                kill -9 "$SERVER_PID" 2>/dev/null || true
                wait "$SERVER_PID" 2>/dev/null || true
                start_server || die "server did not start: $(cat "$TMP/server.err" "$TMP/server.out")"
            fi
            port=$(sed -n 's|^listening on http://127.0.0.1:||p' "$TMP/server.out")
            admin=$(sed -n 's|^stats on http://127.0.0.1:\([0-9]*\)/stats|\1|p' "$TMP/server.out")
            curl -s -o /dev/null "http://127.0.0.1:$port/file.txt"
            rss0=$(rss_kib "$SERVER_PID")
            held=0
            if [ "$cold" -gt 0 ]; then
                taskset -c "$CLIENT_CPU" python3 "$HERE/hold-connections.py" 127.0.0.1 "$port" "$cold" \
                    >"$TMP/hold.out" 2>"$TMP/hold.err" &
                HOLD_PID=$!
                for _ in $(seq 600); do
                    grep -q '^ready' "$TMP/hold.out" 2>/dev/null && break
                    kill -0 "$HOLD_PID" 2>/dev/null || die "hold-connections.py failed: $(cat "$TMP/hold.err")"
                    sleep 0.1
                done
                held=$(awk '/^ready/ {print $2}' "$TMP/hold.out")
                sleep 1
            fi
            rss1=$(rss_kib "$SERVER_PID")
            taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${WARMUP}s" "http://127.0.0.1:$port/file.txt" >/dev/null
            curl -s "http://127.0.0.1:$admin/stats" >"$TMP/stats0.json"
            cpu0=$(cpu_ns "$SERVER_PID")
            taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$port/file.txt" >"$TMP/wrk.out"
            cpu1=$(cpu_ns "$SERVER_PID")
            curl -s "http://127.0.0.1:$admin/stats" >"$TMP/stats1.json"
            cp "$TMP/wrk.out" "$OUT/wrk-r$round-$config-$cold.txt"
            python3 - "$TMP/stats0.json" "$TMP/stats1.json" "$cpu0" "$cpu1" "$TMP/wrk.out" \
                "$round" "$config" "$cold" "$held" "$rss0" "$rss1" >>"$OUT/runs.csv" <<'PY'
import json, re, sys
s0, s1 = (json.load(open(path)) for path in sys.argv[1:3])
cpu0, cpu1 = int(sys.argv[3]), int(sys.argv[4])
wrk = open(sys.argv[5]).read()
round_, config, cold, held, rss0, rss1 = sys.argv[6:12]
def delta(group, field):
    return s1["total"][group].get(field, 0) - s0["total"][group].get(field, 0)
requests = delta("http", "requests")
kinds = ["accept_calls", "connect_calls", "recv_calls", "send_calls", "sendfile_calls",
         "close_calls", "shutdown_calls", "control_calls"]
waits = max(delta("loop", "wait_calls"), delta("loop", "uring_enter_calls"))
syscalls = sum(delta("loop", kind) for kind in kinds) + waits
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", wrk).group(1))
per = lambda value: value / requests if requests else float("nan")
held_n = int(held)
per_idle = (int(rss1) - int(rss0)) * 1024 / held_n if held_n else float("nan")
print(f"{round_},{config},{cold},{held},{requests},{rate:.0f},{per(syscalls):.3f},"
      f"{per(delta('loop', 'uring_enter_calls')):.3f},{per(delta('loop', 'uring_submissions')):.3f},"
      f"{per(delta('loop', 'uring_completions')):.3f},{per(cpu1 - cpu0) / 1000:.3f},{rss0},{rss1},{per_idle:.0f}")
PY
            tail -1 "$OUT/runs.csv" >&2
            if [ -n "$HOLD_PID" ]; then
                kill "$HOLD_PID" 2>/dev/null || true
                wait "$HOLD_PID" 2>/dev/null || true
                HOLD_PID=""
            fi
            kill "$SERVER_PID" 2>/dev/null || true
            wait "$SERVER_PID" 2>/dev/null || true
            SERVER_PID=""
        done
    done
done

python3 - "$OUT/runs.csv" >"$OUT/summary.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fields = ["requests_per_s", "syscalls_per_request", "enter_calls_per_request",
          "submissions_per_request", "completions_per_request", "cpu_us_per_request",
          "bytes_per_idle_connection"]
print("config,cold," + ",".join(fields) + ",rounds")
seen = []
for row in rows:
    key = (row["config"], row["cold"])
    if key not in seen:
        seen.append(key)
for config, cold in sorted(seen, key=lambda key: (int(key[1]), key[0])):
    group = [row for row in rows if (row["config"], row["cold"]) == (config, cold)]
    medians = []
    for field in fields:
        values = [float(row[field]) for row in group if row[field] not in ("nan", "")]
        medians.append(f"{statistics.median(values):.3f}" if values else "")
    print(f"{config},{cold}," + ",".join(medians) + f",{len(group)}")
PY
log "done: $OUT/summary.csv"
column -s, -t "$OUT/summary.csv" >&2
