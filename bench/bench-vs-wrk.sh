#!/usr/bin/env bash
# bench/bench-vs-wrk.sh: is `coldwire bench` fast enough not to be the bottleneck?
#
# Against the same server (nginx, then `coldwire serve`), one worker pinned to CPU 0,
# keep-alive, a 1,259-byte file, every client pinned to CPU 1 with 50 connections:
#   wrk          `wrk -t1 -c50 -d${DURATION}s` (closed loop, the reference);
#   bench-max    `coldwire bench --rate max --connections 50` (closed loop, the same
#                discipline as wrk: the request rate one core of generator can drive);
#   bench-open   `coldwire bench --rate R --connections 50` open loop at R = the rate
#                wrk reached in the same round (does the open loop sustain it?).
# The three alternate within each round (their order rotates per round) so every ratio
# compares runs made side by side; the machine is shared, so only ratios mean anything.
#
# Usage: DURATION=8 ROUNDS=3 bench/bench-vs-wrk.sh
# Environment: DURATION (s, 8), ROUNDS (3), CONNECTIONS (50), MACHINE (vm), OUT (directory),
#   SERVER_CPU (0), CLIENT_CPU (1).
# Output: results/<date>-<machine>/bench-vs-wrk/{results.csv,summary.md,meta.txt,raw/}
set -euo pipefail

DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-50}
MACHINE=${MACHINE:-vm}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
COLDWIRE="$REPO/target/release/coldwire"
OUT=${OUT:-"$REPO/results/$(date +%F)-$MACHINE/bench-vs-wrk"}
RAW="$OUT/raw"

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

ulimit -Sn "$(ulimit -Hn)"
missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
for tool in nginx wrk taskset python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
log "building coldwire (release)"
cargo build --release -p coldwire
[[ -x $COLDWIRE ]] || die "$COLDWIRE missing after the build"

TMP=$(mktemp -d /tmp/coldwire-bench-vs-wrk.XXXXXX)
chmod 755 "$TMP"
ROOT="$TMP/root"
mkdir -p "$ROOT"
head -c 1259 /dev/urandom >"$ROOT/1259.bin"
chmod 644 "$ROOT/1259.bin"
chmod 755 "$ROOT"
rm -rf "$RAW"
mkdir -p "$RAW"

SERVER_PID=""
PORT=""
cleanup() {
    set +e
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_listening() {
    local i
    for i in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

start_server() { # nginx|coldwire LOGPREFIX
    PORT=$(free_port)
    case $1 in
        nginx)
            mkdir -p "$TMP/nginx"
            sed -e "s|@TMP@|$TMP/nginx|g" -e "s|@PORT@|$PORT|g" -e "s|@ROOT@|$ROOT|g" \
                "$REPO/bench/nginx/static.conf.template" >"$TMP/nginx/nginx.conf"
            taskset -c "$SERVER_CPU" nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" \
                -e "$TMP/nginx/nginx-error.log" >"$2.stdout" 2>"$2.stderr" &
            ;;
        coldwire)
            taskset -c "$SERVER_CPU" "$COLDWIRE" serve --root "$ROOT" --listen "127.0.0.1:$PORT" \
                --workers 1 --idle-timeout 600 >"$2.stdout" 2>"$2.stderr" &
            ;;
    esac
    SERVER_PID=$!
    wait_listening "$PORT" || die "$1 did not start (see $2.stderr)"
}

stop_server() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

# timed OUTFILE CMD...: runs CMD pinned to the client CPU; writes "wall_seconds cpu_ticks"
# (the command's own user+system time, in 1/100 s) to OUTFILE.time.
timed() {
    local out=$1
    shift
    bash -c 'start=$(date +%s.%N); taskset -c "$1" "${@:3}" >"$2"; status=$?
             end=$(date +%s.%N); echo "$(echo "$end - $start" | bc) $(awk "{print \$16 + \$17}" /proc/$$/stat)" >"$2.time"
             exit $status' _ "$CLIENT_CPU" "$out" "$@"
}

{
    echo "date=$(date -Is)"
    echo "machine=$MACHINE"
    echo "nproc=$(nproc)"
    echo "kernel=$(uname -r)"
    echo "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "nginx=$(nginx -v 2>&1 | head -1)"
    echo "wrk=$( (wrk -v 2>&1 || true) | head -1)"
    echo "coldwire_rev=$(git -C "$REPO" rev-parse HEAD)"
    echo "command=DURATION=$DURATION ROUNDS=$ROUNDS CONNECTIONS=$CONNECTIONS MACHINE=$MACHINE bench/bench-vs-wrk.sh"
} >"$OUT/meta.txt"

echo "server,round,client,offered_rate,requests_per_second,errors,missed,p50_ms,p99_ms,client_cpu_pct,client_runqueue_wait_s" >"$OUT/results.csv"
for server in nginx coldwire; do
    log "server $server"
    start_server "$server" "$RAW/$server-server"
    url="http://127.0.0.1:$PORT/1259.bin"
    taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d2s "$url" >/dev/null # warm-up
    for round in $(seq 1 "$ROUNDS"); do
        case $((round % 3)) in
            1) order=(wrk bench-max bench-open) ;;
            2) order=(bench-max bench-open wrk) ;;
            0) order=(bench-open wrk bench-max) ;;
        esac
        wrk_rate=""
        for client in "${order[@]}"; do
            prefix="$RAW/$server-r$round-$client"
            case $client in
                wrk)
                    timed "$prefix.txt" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "$url"
                    ;;
                bench-max)
                    timed "$prefix.txt" "$COLDWIRE" bench --url "$url" --rate max \
                        --connections "$CONNECTIONS" --warmup 1 --duration "$DURATION" -q --json "$prefix.json"
                    ;;
                bench-open)
                    # Open loop at the rate wrk reached in this round (or the previous one).
                    rate=$(awk -F, -v s="$server" '$1 == s && $3 == "wrk" {r = $5} END {print (r ? r : 20000)}' "$OUT/results.csv")
                    timed "$prefix.txt" "$COLDWIRE" bench --url "$url" --rate "$rate" \
                        --connections "$CONNECTIONS" --warmup 1 --duration "$DURATION" -q --json "$prefix.json"
                    ;;
            esac
            line=$(python3 - "$server" "$round" "$client" "$prefix" <<'PY'
import json, re, sys
server, round_, client, prefix = sys.argv[1:]
wall, ticks = open(prefix + ".txt.time").read().split()
cpu = float(ticks) / 100 / float(wall) * 100
if client == "wrk":
    text = open(prefix + ".txt").read()
    rate = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors += int(non2xx.group(1)) if non2xx else 0
    def ms(label):
        m = re.search(label + r"\s+([\d.]+)(us|ms|s)", text)
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
    print(f"{server},{round_},{client},,{rate:.0f},{errors},,{ms('50%'):.3f},{ms('99%'):.3f},{cpu:.0f},")
else:
    phase = json.load(open(prefix + ".json"))["runs"][0]["phases"][0]
    offered = phase["offered_rate"] or ""
    latency = phase["latency"]["corrected"]
    print(f"{server},{round_},{client},{offered if offered == '' else round(offered)},{phase['achieved_rate']:.0f},"
          f"{phase['errors_total']},{phase['missed_slots']},{latency['p50_us'] / 1000:.3f},{latency['p99_us'] / 1000:.3f},{cpu:.0f},"
          f"{phase['generator']['runqueue_wait_seconds']:.2f}")
PY
)
            echo "$line" >>"$OUT/results.csv"
            log "    round $round $client: $line"
        done
    done
    stop_server
done
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"

python3 - "$OUT" <<'PY' >"$OUT/summary.md"
import csv, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(out + "/results.csv")))
meta = dict(line.rstrip("\n").split("=", 1) for line in open(out + "/meta.txt") if "=" in line)
print("# coldwire bench vs wrk: request rate from one core\n")
print(f"Reproduce: `{meta['command']}` (at git `{meta['coldwire_rev'][:12]}`)\n")
print(f"Machine `{meta['machine']}`: {meta['nproc']} CPUs, {meta['cpu']}, Linux {meta['kernel']}; "
      f"load average {meta['loadavg_start']} at start, {meta.get('loadavg_end', '?')} at end "
      "(shared and noisy: compare ratios within a round, not absolute numbers).\n")
print("Server pinned to CPU 0 (one worker), every client pinned to CPU 1, 50 keep-alive connections, "
      "1,259-byte file. `bench-max` = `coldwire bench --rate max` (closed loop, like wrk); "
      "`bench-open` = open loop offered at the rate wrk reached in that round (latency corrected).\n")
for server in dict.fromkeys(row["server"] for row in rows):
    mine = [row for row in rows if row["server"] == server]
    print(f"## {server}\n")
    print("| round | wrk req/s | bench-max req/s | bench-max / wrk | bench-open offered | bench-open achieved | achieved / offered | open missed slots | open: generator waited for a CPU (s) | wrk CPU % | bench-max CPU % | client CPU µs/request wrk / bench-max | errors (wrk / max / open) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, open_ratios, cost_ratios = [], [], []
    per_request = lambda row: float(row["client_cpu_pct"]) / 100 / float(row["requests_per_second"]) * 1e6
    for round_ in dict.fromkeys(row["round"] for row in mine):
        by = {row["client"]: row for row in mine if row["round"] == round_}
        w, m, o = by["wrk"], by["bench-max"], by["bench-open"]
        ratio = float(m["requests_per_second"]) / float(w["requests_per_second"])
        open_ratio = float(o["requests_per_second"]) / float(o["offered_rate"])
        ratios.append(ratio)
        open_ratios.append(open_ratio)
        cost_ratios.append(per_request(m) / per_request(w))
        print(f"| {round_} | {int(w['requests_per_second']):,} | {int(m['requests_per_second']):,} | {ratio:.2f}× | "
              f"{int(o['offered_rate']):,} | {int(o['requests_per_second']):,} | {open_ratio:.3f} | {o['missed']} | {o['client_runqueue_wait_s']} | "
              f"{w['client_cpu_pct']} | {m['client_cpu_pct']} | {per_request(w):.1f} / {per_request(m):.1f} | {w['errors']} / {m['errors']} / {o['errors']} |")
    print(f"\nMedian bench-max / wrk: **{statistics.median(ratios):.2f}×** requests/s; client CPU per request "
          f"bench-max / wrk: **{statistics.median(cost_ratios):.2f}×** (CPU % over the whole client process, "
          f"warm-up included for coldwire bench); median open-loop achieved / offered: "
          f"**{statistics.median(open_ratios):.3f}**.\n")
PY
cat "$OUT/summary.md"
log "results in $OUT"
