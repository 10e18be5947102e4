#!/usr/bin/env bash
# bench/replay-traces.sh — the committed synthetic traces replayed end to end: `coldwire
# origin --trace T --think 0` (one worker, pinned to CPU $SERVER_CPU, its stats endpoint
# read) against `coldwire bench --replay T` (pinned to CPU $CLIENT_CPU), each trace sped
# up so that the replay lasts about a minute. Records, per trace, the bench's JSON (rates,
# latency, lateness, connections, verification, server and generator CPU per request).
# Usage: bench/replay-traces.sh [OUT_DIR]   (SPEEDUP_NASA, SPEEDUP_WORLDCUP to change)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
OUT=${1:-$REPO/results/$(date -u +%F)-vm/replay}
COLDWIRE=${COLDWIRE:-$REPO/target/release/coldwire}
SPEEDUP_NASA=${SPEEDUP_NASA:-360}
SPEEDUP_WORLDCUP=${SPEEDUP_WORLDCUP:-60}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
die() { echo "replay-traces.sh: $*" >&2; exit 1; }
[ -x "$COLDWIRE" ] || die "$COLDWIRE missing: cargo build --release -p coldwire"
mkdir -p "$OUT"
TMP=$(mktemp -d)
ORIGIN_PID=""
trap '[ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
for pair in "nasa-like:$SPEEDUP_NASA" "worldcup-like:$SPEEDUP_WORLDCUP"; do
    name=${pair%%:*}
    speedup=${pair##*:}
    trace="$REPO/traces/$name.log"
    taskset -c "$SERVER_CPU" "$COLDWIRE" origin --trace "$trace" --think 0 --workers 1 \
        --listen 127.0.0.1:0 --admin 127.0.0.1:0 >"$TMP/origin.out" 2>"$TMP/origin.err" &
    ORIGIN_PID=$!
    for _ in $(seq 200); do grep -q '^stats on' "$TMP/origin.out" 2>/dev/null && break; sleep 0.05; done
    listen=$(sed -n 's|^origin listening on http://||p' "$TMP/origin.out")
    stats=$(sed -n 's|^stats on ||p' "$TMP/origin.out")
    [ -n "$listen" ] || die "the origin did not start: $(cat "$TMP/origin.err")"
    "$COLDWIRE" bench --replay "$trace" --url "http://$listen/" --speedup "$speedup" \
        --server-pid "$ORIGIN_PID" --server-stats "$stats" --cpu "$CLIENT_CPU" -q \
        --json "$OUT/$name.json" | tee "$OUT/$name.txt"
    kill "$ORIGIN_PID"
    wait "$ORIGIN_PID" 2>/dev/null || true
    ORIGIN_PID=""
done
