#!/usr/bin/env bash
# bench/disk-crash.sh — the disk store's fault injection at length: $CYCLES cycles of a
# `coldwire proxy --cache-dir` (4 MiB on disk, so it evicts) filled by three clients and
# killed with SIGKILL after a pseudo-random 50-850 ms, then restarted on the same directory
# and asked for every object of the cycle (60), each checked byte for byte against the
# origin's bytes (objects 1 KB-200 KB, each its own pseudo-random bytes). It is the e2e
# test `proxy_disk::<backend>::sigkill_while_filling_never_serves_a_wrong_object` with
# COLDWIRE_DISK_CRASH_CYCLES set (CI runs 3 cycles per backend).
# Output: $OUT/disk-crash.txt. Usage: bench/disk-crash.sh [OUT_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
OUT=${1:-$REPO/results/$(date -u +%F)-vm/disk-store}
CYCLES=${CYCLES:-200}
BACKENDS=${BACKENDS:-"epoll uring"}
mkdir -p "$OUT"
cd "$REPO"
: >"$OUT/disk-crash.txt"
for backend in $BACKENDS; do
    module=${backend/-/_}
    COLDWIRE_DISK_CRASH_CYCLES=$CYCLES cargo test -q -p coldwire --test e2e \
        "proxy_disk::${module}::sigkill_while_filling_never_serves_a_wrong_object" \
        -- --exact --nocapture 2>&1 | grep -E '^disk-crash|test result' | tee -a "$OUT/disk-crash.txt"
done
