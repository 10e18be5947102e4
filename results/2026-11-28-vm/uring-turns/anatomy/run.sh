#!/bin/bash
# usage: run.sh BINARY IO RATE OUT [PROXY FLAGS...]
# origin (think 2.5 ± 1 s, 8 KiB) + proxy (one worker, CPU 0) + bench (CPU 1, a new
# connection per request, open loop at RATE) for 16 s; from second 6 to second 14 the
# proxy's threads are sampled: CPU time (schedstat), voluntary and involuntary context
# switches per thread, the loop counters of /stats, and (if STRACE=1) an `strace -T` of the
# worker thread's io_uring_enter / epoll_wait / sendmsg / shutdown calls for 3 s.
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
ADMIN=$(grep -o 'stats.*http://[0-9.:]*' $OUT.proxy.log | grep -o 'http://.*' | head -1)
taskset -c 1 $B bench --url=$PADDR/obj/{seq} --rate=$RATE --arrivals=constant --connections=4000 --requests-per-connection=1 --timeout=12 --warmup=2 --duration=14 > $OUT.bench.json 2> $OUT.bench.err &
BP=$!
snap() {
  for t in /proc/$PP/task/*; do
    echo "$(basename $t) $(cat $t/comm | tr ' ' _) $(cut -d' ' -f1 $t/schedstat) $(grep -E '^(voluntary|nonvoluntary)_ctxt' $t/status | awk '{print $2}' | tr '\n' ' ')"
  done
  curl -s $ADMIN/stats > $OUT.stats.$1.json
}
sleep 6
snap a > $OUT.snap.a
if [ "$STRACE" = 1 ]; then
  W=$(for t in /proc/$PP/task/*; do grep -q proxy $t/comm && basename $t; done | head -1)
  timeout -s INT 3 strace -T -tt -e trace=io_uring_enter,epoll_wait,sendmsg,sendto,shutdown,recvfrom,accept4 -p $W -o $OUT.strace 2>/dev/null
  sleep 5
else
  sleep 8
fi
snap b > $OUT.snap.b
wait $BP
kill $PP $OP
wait 2>/dev/null
echo "proxy log:"; cat $OUT.proxy.log | head -5
