#!/usr/bin/env bash
# The cost of coldwire's metrics and stats log on CPU per request, side by side.
#
# usage: measure.sh MAIN_BINARY BRANCH_BINARY OUT_DIR [ROUNDS] [RATE]
#
# Three variants of `coldwire serve` (1 worker, epoll, pinned to CPU 1) answer the same
# load from `coldwire bench` (pinned to CPU 0; RATE requests/s, default 4000, keep-alive,
# 50 connections, 2 s warm-up, 10 s measured window, a 4 KiB file):
#   main     the binary before this work (no response-time histogram, no stats log);
#   branch   this work, no --admin, no --stats-log (the always-on cost: histograms);
#   metrics  this work with --admin scraped once a second (/metrics and /stats) and
#            --stats-log FILE --stats-interval 1s.
# The order rotates every round (round 1: main branch metrics; round 2: metrics main
# branch; ...), so drift on the shared machine hits every variant alike. The server's
# CPU per request is `coldwire bench --server-pid`'s (schedstat of every thread: the admin
# and stats-log threads included). Results: OUT_DIR/raw/*.json, OUT_DIR/cpu.tsv.
set -euo pipefail
main=$1 branch=$2 out=$3 rounds=${4:-6} rate=${5:-4000}
mkdir -p "$out/raw"
root=$(mktemp -d)
trap 'rm -rf "$root"; kill $(jobs -p) 2>/dev/null || true' EXIT
head -c 4096 /dev/zero | tr '\0' 'x' >"$root/file.txt"

start_server() { # binary, extra args...: sets pid, address, admin
    local binary=$1; shift
    local log="$root/server.out"
    : >"$log"
    taskset -c 1 "$binary" serve --root "$root" --listen 127.0.0.1:0 --workers 1 --io epoll \
        --admin 127.0.0.1:0 "$@" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        grep -q "stats on" "$log" && break
        sleep 0.1
    done
    address=$(sed -n 's|^listening on http://||p' "$log" | head -1)
    admin=$(sed -n 's|^stats on http://\(.*\)/stats|\1|p' "$log" | head -1)
    [[ -n $address && -n $admin ]] || { cat "$log" >&2; exit 1; }
}

variants=(main branch metrics)
printf 'round\tvariant\tcpu_us_per_request\tachieved_rate\trunqueue_wait_seconds\n' >"$out/cpu.tsv"
for round in $(seq "$rounds"); do
    shift_by=$(( (round - 1) % 3 ))
    order=("${variants[@]:shift_by}" "${variants[@]:0:shift_by}")
    for variant in "${order[@]}"; do
        scraper=
        case $variant in
            main) start_server "$main" ;;
            branch) start_server "$branch" ;;
            metrics)
                start_server "$branch" --stats-log "$out/raw/stats-$round.log" --stats-interval 1s
                ( while kill -0 "$pid" 2>/dev/null; do
                      curl -s -o /dev/null "http://$admin/metrics" || true
                      curl -s -o /dev/null "http://$admin/stats" || true
                      sleep 1
                  done ) &
                scraper=$!
                ;;
        esac
        json="$out/raw/$round-$variant.json"
        "$branch" bench --url "http://$address/file.txt" --rate "$rate" --connections 50 \
            --duration 10 --warmup 2 --server-pid "$pid" --cpu 0 --json "$json" -q \
            >"$out/raw/$round-$variant.txt" 2>&1 || true
        kill "$pid"; wait "$pid" 2>/dev/null || true
        [[ -n $scraper ]] && { kill "$scraper" 2>/dev/null || true; wait "$scraper" 2>/dev/null || true; }
        python3 - "$json" "$round" "$variant" >>"$out/cpu.tsv" <<'PY'
import json, sys
path, round_, variant = sys.argv[1:]
phase = json.load(open(path))["runs"][0]["phases"][0]
server = phase["server"]
print(f"{round_}\t{variant}\t{server['cpu_us_per_request']:.3f}\t{phase['achieved_rate']:.1f}\t{server['runqueue_wait_seconds']:.3f}")
PY
        tail -1 "$out/cpu.tsv"
    done
done
