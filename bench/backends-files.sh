#!/usr/bin/env bash
# bench/backends-files.sh — the large-file path: epoll (sendfile) vs uring (SPLICE file →
# pipe linked to SPLICE pipe → socket, up to 256 KiB pieces), side by side. One worker
# pinned to CPU $SERVER_CPU serves files of $FILE_SIZES bytes (above --memory-file-limit, so
# not served from memory) to wrk (-t1 -c$CONNS keep-alive, CPU $CLIENT_CPU) for $DURATION s
# per run; configurations alternate over $ROUNDS rounds. Reports MB/s and the server's CPU
# per MB sent: utime + stime of the whole process from /proc/PID/stat, which includes the
# io_uring io-wq worker threads (iou-wrk-*) even after they exit (per-thread schedstat
# would lose those). Output: $OUT/files.csv. Usage: bench/backends-files.sh [OUT_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
OUT=${1:-$REPO/results/$(date -u +%F)-vm/backends}
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNS=${CONNS:-10}
FILE_SIZES=${FILE_SIZES:-"1048576 16777216"}
CONFIGS=${CONFIGS:-"epoll uring"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
die() { echo "backends-files.sh: $*" >&2; exit 1; }
[ -x "$COLDWIRE" ] || die "$COLDWIRE missing: cargo build --release -p coldwire"
mkdir -p "$OUT"
TMP=$(mktemp -d)
for size in $FILE_SIZES; do head -c "$size" /dev/urandom >"$TMP/big-$size.bin"; done
SERVER_PID=""
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
TICK=$(getconf CLK_TCK)
# utime + stime of the whole process (exited threads included), in nanoseconds.
cpu_ns() { awk -v tick="$TICK" '{sub(/.*\) /, ""); printf "%.0f", ($12 + $13) * 1e9 / tick}' /proc/"$1"/stat; }
echo "round,config,file_bytes,mb_per_s,server_cpu_ms_per_mb" >"$OUT/files.csv"
for round in $(seq 1 "$ROUNDS"); do
  for FILE_BYTES in $FILE_SIZES; do
    for io in $CONFIGS; do
        taskset -c "$SERVER_CPU" "$COLDWIRE" serve --root "$TMP" --listen 127.0.0.1:0 --io "$io" \
            --workers 1 >"$TMP/server.out" 2>"$TMP/server.err" &
        SERVER_PID=$!
        for _ in $(seq 200); do grep -q '^listening' "$TMP/server.out" 2>/dev/null && break; sleep 0.05; done
        port=$(sed -n 's|^listening on http://127.0.0.1:||p' "$TMP/server.out")
        [ -n "$port" ] || die "server did not start: $(cat "$TMP/server.err")"
        taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d1s "http://127.0.0.1:$port/big-$FILE_BYTES.bin" >/dev/null
        cpu0=$(cpu_ns "$SERVER_PID")
        taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$port/big-$FILE_BYTES.bin" >"$TMP/wrk.out"
        cpu1=$(cpu_ns "$SERVER_PID")
        python3 - "$TMP/wrk.out" "$cpu0" "$cpu1" "$round" "$io" "$FILE_BYTES" "$DURATION" >>"$OUT/files.csv" <<'PY'
import re, sys
wrk = open(sys.argv[1]).read()
cpu = (int(sys.argv[3]) - int(sys.argv[2])) / 1e6
requests = int(re.search(r"(\d+) requests in", wrk).group(1))
mb = requests * int(sys.argv[6]) / 1e6
print(f"{sys.argv[4]},{sys.argv[5]},{sys.argv[6]},{mb / float(sys.argv[7]):.0f},{cpu / mb:.3f}")
PY
        tail -1 "$OUT/files.csv" >&2
        kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
    done
  done
done
