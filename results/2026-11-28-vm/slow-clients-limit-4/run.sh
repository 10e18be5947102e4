#!/bin/bash
# One full-scale slow-clients point with a census (issue 19, see summary.md): the same
# processes and flags as `coldwire experiment slow-clients` (../slow-clients-3/scenarios/top):
# coldwire origin (think 2.5 s ± 1 s, 8 KiB, CPU 1), coldwire proxy (--io BACKEND, one
# worker, --idle-timeout 600, DEFAULT --max-connections (19,000) and the open-files limit
# (20,000), CPU 0), coldwire bench at RATE requests/s, a new connection per request,
# min(16000, rate × 6.5 + 64) connections, timeout 11.5 s, warm-up 5 s, 6 s measured (CPU 1).
# Every 0.5 s OUT/NAME.samples gets one line:
#   time  proxy_fds  open_connections  closing_connections  accept_backlog  accept_pauses
#   connection_limit_reached  connection_limit_descriptors  accepted  wait_calls
#   accept_throttles  accept_holds  upstream_pool_full  listen_queue(ss Recv-Q)
#   accept_multishot_stops (None on binaries without it)
# usage: BIN=path/to/coldwire [STALL=0.4] [TRACE=1] [MAXCONN=N] run.sh BACKEND RATE OUT NAME
# MAXCONN=N: --max-connections N instead of the default.
# STALL=S: SIGSTOP the proxy for S seconds every 2 s after the warm-up (a loop stall on
# demand, as ../slow-clients-limit-2/run.sh). TRACE=1: COLDWIRE_LIMIT_TRACE=1 for a binary
# built with trace.patch (census every 0.1 s and at every 503, on the proxy's stderr).
set -u
BIN=${BIN:-target/release/coldwire}
B=$1; R=$2; OUT=$3; NAME=$4; THINK=2.5; DUR=${DUR:-6}; WARM=${WARM:-5}
mkdir -p $OUT; P=$OUT/$NAME
taskset -c 1 $BIN origin --listen 127.0.0.1:0 --workers 1 --io epoll --mix 8KiB --think ${THINK}s --think-sd 1s --idle-timeout 600 > $P.origin.log 2>&1 &
OPID=$!
for i in $(seq 100); do grep -q "listening on http://" $P.origin.log && break; sleep 0.1; done
OADDR=$(grep -o "listening on http://[0-9.:]*" $P.origin.log | head -1 | sed 's#.*http://##')
if [ -n "${TRACE:-}" ]; then export COLDWIRE_LIMIT_TRACE=1; fi
taskset -c 0 $BIN proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --workers 1 --idle-timeout 600 --reverse http://$OADDR --io $B ${MAXCONN:+--max-connections $MAXCONN} > $P.proxy.log 2>&1 &
PPID_=$!
unset COLDWIRE_LIMIT_TRACE
for i in $(seq 100); do grep -q "stats on " $P.proxy.log && break; sleep 0.1; done
PADDR=$(grep -o "proxy listening on http://[0-9.:]*" $P.proxy.log | head -1 | sed 's#.*http://##')
PPORT=${PADDR##*:}
SURL=$(grep -o "stats on [^ ]*" $P.proxy.log | head -1 | sed 's#stats on ##')
grep "open files" /proc/$PPID_/limits > $P.limits
CONNS=$(python3 -c "print(min(16000, int(-(-$R*6.5//1))+64))")
( while kill -0 $PPID_ 2>/dev/null; do
    T=$(date +%s.%N); FDS=$(ls /proc/$PPID_/fd 2>/dev/null | wc -l)
    LQ=$(ss -Hltn "sport = :$PPORT" 2>/dev/null | awk '{print $2}' | head -1)
    curl -s --max-time 1 $SURL | python3 -c "
import sys,json
d=json.load(sys.stdin)['total']; l=d['loop']; h=d['http']
print('$T', $FDS, l['open_connections'], l.get('closing_connections'), l.get('accept_backlog'), l['accept_pauses'], h.get('connection_limit_reached'), h.get('connection_limit_descriptors'), l['accepted'], l.get('wait_calls'), l.get('accept_throttles'), l.get('accept_holds'), h.get('upstream_pool_full'), '${LQ:-?}', l.get('accept_multishot_stops'))" 2>/dev/null
    sleep 0.5; done ) > $P.samples &
SPID=$!
STPID=
if [ -n "${STALL:-}" ]; then
  ( sleep $WARM; while kill -0 $PPID_ 2>/dev/null; do sleep 2; kill -STOP $PPID_ 2>/dev/null; sleep $STALL; kill -CONT $PPID_ 2>/dev/null; done ) &
  STPID=$!
fi
START=$(date +%s.%N)
taskset -c 1 $BIN bench --url="http://$PADDR/obj/{seq}" --rate=$R --arrivals=constant --connections=$CONNS --requests-per-connection=1 --timeout=11.5 --warmup=$WARM --duration=$DUR --json $P.bench.json -q --max-error-rate 100% > $P.bench.txt 2>&1
[ -n "$STPID" ] && { kill $STPID; wait $STPID 2>/dev/null; kill -CONT $PPID_; }
curl -s $SURL > $P.stats.json
kill $PPID_ $OPID; wait $PPID_ $OPID 2>/dev/null; kill $SPID 2>/dev/null
echo "$NAME start $START load $(cut -d' ' -f1-3 /proc/loadavg): $(python3 -c "
import json;d=json.load(open('$P.stats.json'))['total'];h=d['http'];l=d['loop']
print('503s',h.get('connection_limit_reached'),'of which descriptors',h.get('connection_limit_descriptors'),'requests',h.get('requests'),'pauses',l['accept_pauses'],'holds',l.get('accept_holds'),'waits',l.get('wait_calls'),'multishot_stops',l.get('accept_multishot_stops'),'max_fds',max(int(x.split()[1]) for x in open('$P.samples') if len(x.split())>2))")"
