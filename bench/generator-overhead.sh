#!/usr/bin/env bash
# bench/generator-overhead.sh: does a change to `coldwire bench` cost the generator CPU?
#
# Runs two builds of `coldwire bench` (BASE and NEW, release binaries) one after the other
# in every round against the same `coldwire serve` (NEW's, one worker on CPU 0; clients on
# CPU 1), in a closed loop (`--rate max`, 50 connections) and in an open loop at RATE/s,
# and prints per round the generator's CPU per response (its own schedstat, `bench µs`)
# and the achieved rate, with the NEW/BASE ratios and their medians. Ratios within a round
# are what to read on a shared machine; absolute figures drift with other work.
#
#   BASE=/path/to/old/coldwire NEW=target/release/coldwire ROUNDS=5 DURATION=5 \
#       OUT=results/2026-11-26-vm/bench-generator-overhead bench/generator-overhead.sh
set -euo pipefail

BASE=${BASE:?give BASE=path of the base coldwire binary}
NEW=${NEW:-target/release/coldwire}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
RATE=${RATE:-20000}
OUT=${OUT:-/tmp/bench-generator-overhead}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

die() { echo "generator-overhead: $*" >&2; exit 1; }
[[ -x $BASE ]] || die "$BASE is not an executable"
[[ -x $NEW ]] || die "$NEW is not an executable (cargo build --release -p coldwire)"
mkdir -p "$OUT/raw"
ROOT=$(mktemp -d)
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$ROOT"' EXIT
head -c 1259 /dev/zero | tr '\0' x > "$ROOT/page.html"

taskset -c "$SERVER_CPU" "$NEW" serve --root "$ROOT" --listen 127.0.0.1:0 --workers 1 \
    > "$ROOT/serve.out" 2> "$ROOT/serve.err" &
SERVER=$!
for _ in $(seq 100); do
    grep -q "listening on http://" "$ROOT/serve.out" 2>/dev/null && break
    sleep 0.1
done
ADDRESS=$(sed -n 's/.*listening on http:\/\/\([^ ]*\).*/\1/p' "$ROOT/serve.out" | head -1)
[[ -n $ADDRESS ]] || die "coldwire serve did not start: $(cat "$ROOT/serve.err")"
URL="http://$ADDRESS/page.html"

for round in $(seq "$ROUNDS"); do
    for load in max open; do
        for build in base new; do
            binary=$BASE
            extra=()
            if [[ $build == new ]]; then
                binary=$NEW
                extra=(--max-error-rate 100%)
            fi
            rate=max
            [[ $load == open ]] && rate=$RATE
            taskset -c "$CLIENT_CPU" "$binary" bench --url "$URL" --rate "$rate" --connections 50 \
                --warmup 1 --duration "$DURATION" -q "${extra[@]}" \
                --json "$OUT/raw/r$round-$load-$build.json" > /dev/null
        done
    done
done

# Instructions per request, which a noisy machine does not disturb: each build under
# callgrind at 300 requests/s (open loop, --no-poll so no instruction is spent polling)
# for 1 s and for 3 s; the difference of the two runs' instruction counts divided by the
# difference of their requests leaves out start-up and shutdown.
if command -v valgrind > /dev/null; then
    for build in base new; do
        binary=$BASE
        [[ $build == new ]] && binary=$NEW
        for seconds in 1 3; do
            valgrind --tool=callgrind --callgrind-out-file="$OUT/raw/callgrind-$build-$seconds.out" \
                "$binary" bench --url "$URL" --rate 300 --warmup 0 --duration "$seconds" --no-poll \
                --late-limit 1000 -q --json "$OUT/raw/callgrind-$build-$seconds.json" \
                > /dev/null 2> "$OUT/raw/callgrind-$build-$seconds.err" || true
        done
    done
fi

python3 - "$OUT" "$ROUNDS" "$DURATION" "$RATE" <<'EOF' | tee "$OUT/summary.md"
import json, statistics, sys
out, rounds, duration, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def figures(path):
    phase = json.load(open(path))["runs"][0]["phases"][0]
    generator = phase.get("generator") or {}
    return (generator.get("cpu_us_per_response", float("nan")), phase["achieved_rate"],
            generator.get("runqueue_wait_seconds", float("nan")))
print("# Generator overhead: NEW / BASE `coldwire bench`, same server, alternating\n")
for load, title in (("max", "Closed loop (`--rate max`, 50 connections)"),
                    ("open", f"Open loop ({rate}/s, 50 connections)")):
    print(f"## {title}\n")
    print("| round | bench µs/response base | new | new/base | achieved/s base | new | new/base | CPU wait s base / new |")
    print("|---|---|---|---|---|---|---|---|")
    cpu_ratios, rate_ratios = [], []
    for round in range(1, rounds + 1):
        base = figures(f"{out}/raw/r{round}-{load}-base.json")
        new = figures(f"{out}/raw/r{round}-{load}-new.json")
        cpu_ratios.append(new[0] / base[0])
        rate_ratios.append(new[1] / base[1])
        print(f"| {round} | {base[0]:.2f} | {new[0]:.2f} | {cpu_ratios[-1]:.3f} | {base[1]:.0f} | "
              f"{new[1]:.0f} | {rate_ratios[-1]:.3f} | {base[2]:.2f} / {new[2]:.2f} |")
    print(f"\nMedian new/base: CPU per response {statistics.median(cpu_ratios):.3f}, "
          f"achieved rate {statistics.median(rate_ratios):.3f}.\n")
print(f"{rounds} rounds of {duration} s (+1 s warm-up) each; server `coldwire serve` (NEW), "
      "one worker on CPU 0, clients on CPU 1.\n")
import os, re
def callgrind(build, seconds):
    try:
        text = open(f"{out}/raw/callgrind-{build}-{seconds}.err").read()
        instructions = int(re.search(r"Collected : (\d+)", text).group(1))
        phase = json.load(open(f"{out}/raw/callgrind-{build}-{seconds}.json"))["runs"][0]["phases"][0]
        return instructions, phase["sent_requests"]
    except (OSError, AttributeError, KeyError, ValueError):
        return None
per_request = {}
for build in ("base", "new"):
    short, long = callgrind(build, 1), callgrind(build, 3)
    if short and long and long[1] > short[1]:
        per_request[build] = (long[0] - short[0]) / (long[1] - short[1])
if len(per_request) == 2:
    print("## Instructions per request (callgrind, 300/s open loop, (3 s run − 1 s run) / requests)\n")
    print(f"base {per_request['base']:.0f}, new {per_request['new']:.0f}: "
          f"new/base {per_request['new'] / per_request['base']:.3f}.")
EOF
