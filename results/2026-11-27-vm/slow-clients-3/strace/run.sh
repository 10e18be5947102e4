#!/bin/bash
# usage: uringfinal-strace.sh BINARY IO RATE OUT  — origin + proxy + bench, strace -c -f the proxy for 5 s mid-run
B=$1; IO=$2; RATE=$3; OUT=$4
ulimit -n 20000
$B origin --listen 127.0.0.1:0 --workers 1 --io epoll --mix 8KiB --think 2.5s --think-sd 1s --idle-timeout 600 > $OUT.origin.log 2>&1 &
OP=$!
sleep 1
OADDR=$(grep -o 'http://[0-9.:]*' $OUT.origin.log | head -1)
taskset -c 0 $B proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --workers 1 --idle-timeout 600 --reverse $OADDR --io $IO > $OUT.proxy.log 2>&1 &
PP=$!
sleep 1
PADDR=$(grep -o 'proxy listening on http://[0-9.:]*' $OUT.proxy.log | grep -o 'http://.*' | head -1)
taskset -c 1 $B bench --url=$PADDR/obj/{seq} --rate=$RATE --arrivals=constant --connections=4000 --requests-per-connection=1 --timeout=12 --warmup=2 --duration=12 > $OUT.bench.json 2> $OUT.bench.err &
BP=$!
sleep 7
timeout -s INT 5 strace -c -f -p $PP -o $OUT.strace 2>/dev/null
wait $BP
kill $PP $OP
wait
grep -E '"requests"|"completed"|answered' $OUT.bench.json | head -3
cat $OUT.strace
