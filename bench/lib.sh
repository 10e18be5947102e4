#!/usr/bin/env bash
# bench/lib.sh: what the shell benchmarks share (sourced, not run): logging, tool checks,
# the origin's files, process and request count, waiting for a port, a process tree's CPU,
# wrk's numbers, stopping what a script started.
# A script sets REPO, COLDWIRE, CLIENT_CPU (and WORK for its files) before calling these.
# shellcheck shell=bash

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# require_tools HINT TOOL...: dies naming the first missing tool, then HINT (may be empty).
require_tools() {
    local hint=$1 tool
    shift
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool not found${hint:+ ($hint)}"
    done
}

# random_files DIR NAME...: a file of random bytes per NAME, sized by it ("16k": 16 KiB).
random_files() {
    local dir=$1 name
    shift
    mkdir -p "$dir"
    for name in "$@"; do
        head -c "$((${name%k} * 1024))" /dev/urandom >"$dir/$name"
    done
}

# start_origin ROOT PORT [FLAG...]: `coldwire serve --root ROOT` on 127.0.0.1:PORT, one
# worker, pinned to CLIENT_CPU, in the background; its pid in ORIGIN_PID.
start_origin() {
    local root=$1 port=$2
    shift 2
    taskset -c "$CLIENT_CPU" "$COLDWIRE" serve --root "$root" --listen "127.0.0.1:$port" \
        --workers 1 "$@" >/dev/null 2>&1 &
    ORIGIN_PID=$!
}

# origin_requests: requests the origin has answered so far, the lines of its access log
# ($WORK/origin.log, when started with `--access-log "$WORK/origin.log"`).
origin_requests() { [[ -f $WORK/origin.log ]] && wc -l <"$WORK/origin.log" || echo 0; }

# wait_port PORT [PATH] [TRIES]: until a GET of PATH (/) on 127.0.0.1:PORT answers, every
# 0.1 s, TRIES (100) times at most; fails if it never did.
wait_port() {
    local port=$1 path=${2:-/} tries=${3:-100}
    for _ in $(seq 1 "$tries"); do
        curl -s -o /dev/null "http://127.0.0.1:$port$path" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# cpu_ticks PID: utime + stime, in clock ticks, of PID, its children and theirs (/proc).
cpu_ticks() {
    local total=0 pid
    for pid in $1 $(pgrep -P "$1" 2>/dev/null) $(for child in $(pgrep -P "$1" 2>/dev/null); do pgrep -P "$child"; done); do
        [[ -r /proc/$pid/stat ]] || continue
        total=$((total + $(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$pid/stat")))
    done
    echo "$total"
}

# wrk_totals FILE: "REQUESTS_PER_SECOND REQUESTS NON_2XX" from wrk's output (0 for what
# it lacks).
wrk_totals() {
    local rps requests non2xx
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$1")
    requests=$(awk '/requests in/ {print $1}' "$1")
    non2xx=$(awk '/Non-2xx/ {print $5}' "$1")
    echo "${rps:-0} ${requests:-0} ${non2xx:-0}"
}

# cpu_per_request TICKS_BEFORE TICKS_AFTER REQUESTS: "CPU_SECONDS CPU_US_PER_REQUEST".
cpu_per_request() {
    python3 -c "
import os, sys
before, after, requests = (int(value or 0) for value in sys.argv[1:])
cpu = (after - before) / os.sysconf('SC_CLK_TCK')
print(cpu, round(1e6 * cpu / max(1, requests), 2))" "$@"
}

# stop_all VAR...: SIGTERM to the pid held by each named variable (where set), then waits
# for every background job of the script (a cleanup trap's first line).
stop_all() {
    local name
    for name in "$@"; do
        [[ -n ${!name:-} ]] && kill "${!name}" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
