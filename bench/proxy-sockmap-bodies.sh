#!/usr/bin/env bash
# bench/proxy-sockmap-bodies.sh: proxy CPU per request and per MiB for pass-through
# `Content-Length` bodies of 16 KiB to 16 MiB (cache off, every request a miss), by data path:
#   copy     --data-path copy (recv + send through user space)
#   splice   --data-path splice --splice-threshold 1 (socket → pipe → socket)
#   sockmap  --data-path sockmap --splice-threshold 1 (the body's rest handed to the kernel
#            through a BPF sockmap when at least 64 KiB; a pipe splice below)
# each at a fixed rate (about FIXED_MIB MiB/s: 1,000 requests/s at most) and at saturation
# (`--rate max`, closed loop) — seed 002 Fig. 7's axes. The proxy's CPU is read by
# `coldwire bench --server-pid` from /proc/PID/task/*/schedstat (all threads, ns).
#
# Proxy pinned to CPU 0 (one worker, epoll); origin (`coldwire serve`, bodies in memory)
# and load generator share CPU 1. Variants alternate within each size and round, so the
# per-round ratios compare runs made side by side. After each sockmap run the proxy's
# `kernel_bodies` counter is recorded (bodies that really went through the kernel).
#
# Usage: ROUNDS=2 DURATION=5 bench/proxy-sockmap-bodies.sh
# Environment: ROUNDS (2), DURATION (s, 5), WARMUP (s, 1), CONNECTIONS (fixed rate, 20),
#   MAX_CONNECTIONS (saturation, 4), FIXED_MIB (64), SIZES ("16k 64k 256k 1024k 4096k 16384k"),
#   COLDWIRE (target/release/coldwire), PROXY_CPU (0), CLIENT_CPU (1), OUT.
# Output: $OUT/{results.csv,summary.md,raw/}
set -euo pipefail

ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONNECTIONS=${CONNECTIONS:-20}
MAX_CONNECTIONS=${MAX_CONNECTIONS:-4}
FIXED_MIB=${FIXED_MIB:-64}
PROXY_CPU=${PROXY_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
OUT=${OUT:-$REPO/results/$(date +%F)-$(hostname -s)/sockmap-bodies}
RAW="$OUT/raw"
WORK=$(mktemp -d /tmp/sockmap-bodies.XXXXXX)
read -r -a SIZES <<<"${SIZES:-16k 64k 256k 1024k 4096k 16384k}"
VARIANTS=(copy splice sockmap)
ORIGIN_PORT=${ORIGIN_PORT:-18290}
PROXY_PORT=${PROXY_PORT:-18291}
ADMIN_PORT=${ADMIN_PORT:-18292}
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
[[ -x $COLDWIRE ]] || die "$COLDWIRE not built (cargo build --release -p coldwire)"
require_tools "" taskset curl python3
mkdir -p "$RAW"

ROOT="$WORK/root"
random_files "$ROOT" "${SIZES[@]}"
start_origin "$ROOT" "$ORIGIN_PORT" --memory-file-limit 17000000
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
        splice) echo "--data-path splice --splice-threshold 1 --cache-bytes 0" ;;
        sockmap) echo "--data-path sockmap --splice-threshold 1 --cache-bytes 0" ;;
    esac
}

fixed_rate() { # requests/s for FIXED_MIB MiB/s, 1..1000
    local kib=${1%k}
    local rate=$((FIXED_MIB * 1024 / kib))
    ((rate > 1000)) && rate=1000
    ((rate < 1)) && rate=1
    echo "$rate"
}

echo "round,load,size,variant,rate,cpu_us_per_request,completed,errors,p99_us,syscalls_per_request,kernel_bodies" >"$OUT/results.csv"
for round in $(seq 1 "$ROUNDS"); do
    for load in fixed max; do
        for size in "${SIZES[@]}"; do
            if [[ $load == fixed ]]; then
                rate=$(fixed_rate "$size")
                connections=$CONNECTIONS
            else
                rate=max
                connections=$MAX_CONNECTIONS
            fi
            for variant in "${VARIANTS[@]}"; do
                # shellcheck disable=SC2046
                taskset -c "$PROXY_CPU" "$COLDWIRE" proxy --listen "127.0.0.1:$PROXY_PORT" \
                    --reverse "http://127.0.0.1:$ORIGIN_PORT" --workers 1 --io epoll \
                    $(variant_flags "$variant") --admin "127.0.0.1:$ADMIN_PORT" >/dev/null 2>&1 &
                PROXY_PID=$!
                wait_port "$PROXY_PORT" /16k 50 || true
                name="$round-$load-$size-$variant"
                taskset -c "$CLIENT_CPU" "$COLDWIRE" bench --url "http://127.0.0.1:$PROXY_PORT/$size?v={seq}" \
                    --rate "$rate" --duration "$DURATION" --warmup "$WARMUP" --timeout 30s \
                    --connections "$connections" --server-pid "$PROXY_PID" --json "$RAW/bench-$name.json" \
                    --quiet --server-stats "http://127.0.0.1:$ADMIN_PORT/stats" \
                    >"$RAW/bench-$name.txt" 2>&1 || true
                kernel=$(curl -s "http://127.0.0.1:$ADMIN_PORT/stats" |
                    python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["loop"].get("kernel_bodies",""))' 2>/dev/null || echo "")
                python3 "$REPO/bench/phase-row.py" "$RAW/bench-$name.json" "$round,$load,$size,$variant,$rate" \
                    cpu_us_per_request completed errors p99_us syscalls_per_request "=$kernel" >>"$OUT/results.csv"
                log "$name: $(tail -1 "$OUT/results.csv")"
                kill "$PROXY_PID" 2>/dev/null || true
                wait "$PROXY_PID" 2>/dev/null || true
                PROXY_PID=
            done
        done
    done
done

python3 "$REPO/bench/proxy-sockmap-bodies-report.py" "$OUT/results.csv" "$DURATION" >"$OUT/summary-tables.md"
cat "$OUT/summary-tables.md"
log "results in $OUT"
