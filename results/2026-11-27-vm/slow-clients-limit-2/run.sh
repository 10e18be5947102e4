#!/bin/bash
# One point of the connection-limit reproduction (issue 19, see summary.md; copied from
# ../slow-clients/limit/run.sh with the accept_holds column added): coldwire origin
# (think 2.5 s ± 1 s, CPU 1), coldwire proxy (--io BACKEND, one worker, --max-connections
# MAXCONN, CPU 0), coldwire bench at RATE requests/s, a new connection per request (CPU 1);
# the proxy's /stats sampled every 0.5 s into OUT/BACKEND-RATE-MAXCONN.samples, columns:
#   time  proxy-fds  open_connections  closing_connections  accept_backlog  accept_pauses
#   connection_limit_reached  accepted  uring_connects  connect_calls  accept_throttles  accept_holds
# usage: BIN=path/to/coldwire [WARM=4 DUR=8 THINK=2.5 STALL=0.4] run.sh BACKEND RATE MAXCONN OUT
# STALL=S: stops the proxy (SIGSTOP) for S seconds every 2 s after the warm-up, as a loaded
# machine stalls its loop: responses then complete together (the trigger seen in the traces).
set -u
BIN=${BIN:-target/debug/coldwire}
B=$1; R=$2; M=$3; OUT=$4; THINK=${THINK:-2.5}; DUR=${DUR:-10}; WARM=${WARM:-4}
mkdir -p $OUT; P=$OUT/$B-$R-$M
taskset -c 1 $BIN origin --listen 127.0.0.1:0 --workers 1 --io epoll --mix 8KiB --think ${THINK}s --think-sd 1s --idle-timeout 600 > $P.origin.log 2>&1 &
OPID=$!
for i in $(seq 50); do grep -q "listening on http://" $P.origin.log && break; sleep 0.1; done
OADDR=$(grep -o "listening on http://[0-9.:]*" $P.origin.log | head -1 | sed 's#.*http://##')
taskset -c 0 $BIN proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --workers 1 --idle-timeout 600 --reverse http://$OADDR --io $B --max-connections $M > $P.proxy.log 2>&1 &
PPID_=$!
for i in $(seq 50); do grep -q "stats on " $P.proxy.log && break; sleep 0.1; done
PADDR=$(grep -o "proxy listening on http://[0-9.:]*" $P.proxy.log | head -1 | sed 's#.*http://##')
SURL=$(grep -o "stats on [^ ]*" $P.proxy.log | head -1 | sed 's#stats on ##')
CONNS=$(python3 -c "print(int($R*($THINK+4))+64)")
( while kill -0 $PPID_ 2>/dev/null; do
    T=$(date +%s.%N); FDS=$(ls /proc/$PPID_/fd 2>/dev/null | wc -l)
    curl -s --max-time 1 $SURL | python3 -c "
import sys,json
d=json.load(sys.stdin)['total']; l=d['loop']; h=d['http']
print('$T', $FDS, l['open_connections'], l.get('closing_connections'), l.get('accept_backlog'), l['accept_pauses'], h.get('connection_limit_reached'), l['accepted'], l.get('uring_connects'), l['connect_calls'], l.get('accept_throttles'), l.get('accept_holds'))" 2>/dev/null
    sleep 0.5; done ) > $P.samples &
SPID=$!
STPID=
if [ -n "${STALL:-}" ]; then
  ( sleep $WARM; while kill -0 $PPID_ 2>/dev/null; do sleep 2; kill -STOP $PPID_ 2>/dev/null; sleep $STALL; kill -CONT $PPID_ 2>/dev/null; done ) &
  STPID=$!
fi
taskset -c 1 $BIN bench --url="http://$PADDR/obj/{seq}" --rate=$R --arrivals=constant --connections=$CONNS --requests-per-connection=1 --timeout=12 --warmup=$WARM --duration=$DUR --json $P.bench.json -q --max-error-rate 100% > $P.bench.txt 2>&1
[ -n "$STPID" ] && { kill $STPID; wait $STPID 2>/dev/null; kill -CONT $PPID_; }
curl -s $SURL > $P.stats.json
kill $PPID_ $OPID; wait $PPID_ $OPID 2>/dev/null; kill $SPID 2>/dev/null
echo "$B rate $R max $M: $(python3 -c "
import json;d=json.load(open('$P.stats.json'))['total'];print('503s',d['http'].get('connection_limit_reached'),'requests',d['http'].get('requests'),'pauses',d['loop']['accept_pauses'],'holds',d['loop'].get('accept_holds'))")"
