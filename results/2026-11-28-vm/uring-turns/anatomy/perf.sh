#!/bin/bash
# usage: perf.sh BINARY IO RATE OUT [PROXY FLAGS...] — run.sh's setup, then
# `perf record -e cpu-clock` of the proxy's worker thread for 6 s from second 6, and the
# flat profile by symbol (OUT.top.txt) and the share of each command/DSO (OUT.dso.txt).
B=$1; IO=$2; RATE=$3; OUT=$4; shift 4
ulimit -n 20000
$B origin --listen 127.0.0.1:0 --workers 1 --io epoll --mix 8KiB --think 2.5s --think-sd 1s --idle-timeout 600 > $OUT.origin.log 2>&1 &
OP=$!
sleep 1
OADDR=$(grep -o 'http://[0-9.:]*' $OUT.origin.log | head -1)
taskset -c 0 $B proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --workers 1 --idle-timeout 600 --reverse $OADDR --io $IO "$@" > $OUT.proxy.log 2>&1 &
PP=$!
sleep 1
PADDR=$(grep -o 'proxy listening on http://[0-9.:]*' $OUT.proxy.log | grep -o 'http://.*' | head -1)
taskset -c 1 $B bench --url=$PADDR/obj/{seq} --rate=$RATE --arrivals=constant --connections=4000 --requests-per-connection=1 --timeout=12 --warmup=2 --duration=12 > $OUT.bench.txt 2>&1 &
BP=$!
sleep 6
W=$(for t in /proc/$PP/task/*; do grep -q proxy $t/comm && basename $t; done | head -1)
perf record -q -e cpu-clock -F 10000 -t $W -o $OUT.perf.data -- sleep 6 2>/dev/null
wait $BP
kill $PP $OP
wait 2>/dev/null
perf report -i $OUT.perf.data --no-children --sort sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 > $OUT.top.txt
perf report -i $OUT.perf.data --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -10 > $OUT.dso.txt
rm -f $OUT.perf.data
