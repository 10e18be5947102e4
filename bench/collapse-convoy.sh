#!/usr/bin/env bash
# bench/collapse-convoy.sh: tail latency of `coldwire proxy` when every request asks for
# one URL whose cacheable 64 KiB response is never stored (a store smaller than the
# object), with collapsed forwarding on (the default, --collapse-wait 10) and off
# (--collapse-wait 0), alternated in each round. Before commit 44014ef, followers waited
# until the key was unclaimed and starved under steady load (p99 703 ms at 1,266/s in
# results/2026-11-22-vm/splice/raw/response-65536-splice-tee.txt at commit d16037d);
# now each waits for one leader.
#
# Proxy pinned to CPU 0 (one worker), origin and generator on CPU 1, open loop at RATE.
# Usage: RATE=1200 DURATION=4 ROUNDS=3 bench/collapse-convoy.sh
# Output: results/<date>-<machine>/collapse-convoy/{summary.txt,raw/}
set -euo pipefail
RATE=${RATE:-1200}
DURATION=${DURATION:-4}
ROUNDS=${ROUNDS:-3}
MACHINE=${MACHINE:-$(hostname -s)}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
OUT=${OUT:-$REPO/results/$(date +%F)-$MACHINE/collapse-convoy}
WORK=$(mktemp -d /tmp/collapse-convoy.XXXXXX)
[[ -x $COLDWIRE ]] || (cd "$REPO" && cargo build --release -p coldwire)
command -v taskset >/dev/null || { echo "taskset not found (util-linux)" >&2; exit 1; }
mkdir -p "$OUT/raw" "$WORK/root"
head -c 65536 /dev/urandom >"$WORK/root/64k"
touch -d '2020-01-01 00:00:00' "$WORK/root/64k"
taskset -c 1 "$COLDWIRE" serve --root "$WORK/root" --listen 127.0.0.1:18301 --workers 1 \
    --memory-file-limit 1048576 >/dev/null 2>&1 &
ORIGIN=$!
PROXY=
trap 'kill $PROXY $ORIGIN 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
sleep 0.5
: >"$OUT/summary.txt"
for round in $(seq 1 "$ROUNDS"); do
    for wait in 10 0; do
        taskset -c 0 "$COLDWIRE" proxy --reverse http://127.0.0.1:18301 --listen 127.0.0.1:18302 \
            --workers 1 --data-path splice --splice-threshold 1 --cache-bytes 1 \
            --max-object-bytes 1048576 --collapse-wait "$wait" >/dev/null 2>&1 &
        PROXY=$!
        sleep 0.5
        taskset -c 1 "$COLDWIRE" bench --url http://127.0.0.1:18302/64k --rate "$RATE" \
            --duration "$DURATION" --warmup 1 --json "$OUT/raw/wait$wait-r$round.json" \
            >"$OUT/raw/wait$wait-r$round.txt" 2>&1
        p99=$(python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['runs'][0]['phases'][-1]; print(p['latency']['corrected']['p99_us']/1000, p['latency']['corrected']['max_us']/1000, p['achieved_rate'])" "$OUT/raw/wait$wait-r$round.json")
        echo "round $round --collapse-wait $wait: p99 ms, max ms, achieved/s = $p99" | tee -a "$OUT/summary.txt"
        kill "$PROXY"; wait "$PROXY" 2>/dev/null || true; PROXY=
    done
done
