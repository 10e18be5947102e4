#!/bin/bash
# Load testers' tools against coldwire proxy (reverse, hits: 13129; cache off, misses: 13130)
# and nginx proxy_cache (hits: 18091; no cache: 18092), side by side (interleaved).
# Proxies: one worker each, pinned to CPU 0; origin (coldwire serve) and tools on CPU 1.
set -u
CW=${CW:-coldwire}
ROUNDS=${ROUNDS:-2}
WWW=/tmp/ut-www
OUT=${OUT:-/tmp/ut-trials/raw}
mkdir -p "$OUT" /tmp/ut-nginx "$WWW"   # the nginx configs keep their pid and temp files in /tmp/ut-nginx
[ -f $WWW/small.html ] || head -c 1259 /dev/urandom | base64 | head -c 1259 > $WWW/small.html
[ -f $WWW/8k.txt ] || head -c 8192 /dev/zero | tr '\0' a > $WWW/8k.txt
taskset -c 1 $CW serve --root $WWW --listen 127.0.0.1:18080 --workers 1 >/dev/null 2>&1 & CWPID=$!
taskset -c 0 $CW proxy --listen 127.0.0.1:13129 --workers 1 --reverse http://127.0.0.1:18080 >/dev/null 2>&1 & P1=$!
taskset -c 0 $CW proxy --listen 127.0.0.1:13130 --workers 1 --cache-bytes 0 --reverse http://127.0.0.1:18080 >/dev/null 2>&1 & P2=$!
taskset -c 0 nginx -c $(dirname $0)/nginx-proxy.conf >/dev/null 2>&1 & NGPID=$!
sleep 1
for p in 13129 18091; do curl -s -o /dev/null http://127.0.0.1:$p/small.html; done
T="taskset -c 1"
run() { # name port
  local name=$1 port=$2 u=http://127.0.0.1:$2
  case $name in
    wrk-c50) $T wrk -t1 -c50 -d5s $u/small.html ;;
    wrk-c1000) $T wrk -t1 -c1000 -d5s $u/small.html ;;
    wrk-pipe10) $T wrk -t1 -c10 -d5s -s $(dirname $0)/pipeline.lua $u -- 10 /small.html ;;
    wrk-8k) $T wrk -t1 -c50 -d5s $u/8k.txt ;;
    ab-k-c50) $T ab -k -n 100000 -c 50 $u/small.html ;;
    ab-c50) $T ab -n 20000 -c 50 $u/small.html ;;
    ab-k-c1000) $T ab -k -n 100000 -c 1000 $u/small.html ;;
    h2load-c100) $T h2load --h1 -n 200000 -c 100 $u/small.html ;;
    h2load-m10) $T h2load --h1 -n 200000 -c 10 -m 10 $u/small.html ;;
    hey-c50) $T hey -n 50000 -c 50 $u/small.html ;;
    siege-c50) $T siege -b -c 50 -t 5S $u/small.html ;;
  esac
}
rate() { # extract requests/s from a tool's output
  grep -Eo 'Requests/sec:[[:space:]]+[0-9.]+|Requests per second:[[:space:]]+[0-9.]+|finished in [0-9.]+m?s, [0-9.]+ req/s|"transaction_rate":[[:space:]]+[0-9.]+' "$1" | grep -Eo '[0-9.]+( req/s)?$' | grep -Eo '^[0-9.]+' | head -1
}
errs() {
  grep -E 'Non-2xx|Socket errors|Failed requests|failed, [0-9]+ errored|"failed_transactions"|Error distribution' "$1" | tr -s ' ' | tr '\n' ';'
}
printf "%-17s %5s %12s %12s %7s  %s\n" tool round coldwire nginx ratio "errors (coldwire | nginx)"
for round in $(seq 1 $ROUNDS); do
  for kind in hit miss; do
  for tool in wrk-c50 wrk-c1000 wrk-pipe10 ab-k-c50 ab-c50 h2load-c100 h2load-m10 hey-c50; do
    if [ $((round % 2)) = 1 ]; then order="coldwire nginx"; else order="nginx coldwire"; fi
    for server in $order; do
      case $kind-$server in hit-coldwire) port=13129;; hit-nginx) port=18091;; miss-coldwire) port=13130;; miss-nginx) port=18092;; esac
      run $tool $port > "$OUT/$kind-$tool-$server-$round.txt" 2>&1
    done
    c=$(rate "$OUT/$kind-$tool-coldwire-$round.txt"); n=$(rate "$OUT/$kind-$tool-nginx-$round.txt")
    ratio=$(python3 -c "print(f'{float(\"$c\")/float(\"$n\"):.2f}')" 2>/dev/null || echo "?")
    printf "%-17s %5s %12s %12s %7s  %s | %s\n" $kind-$tool $round "$c" "$n" "$ratio" "$(errs $OUT/$kind-$tool-coldwire-$round.txt)" "$(errs $OUT/$kind-$tool-nginx-$round.txt)"
  done
  done
done
kill $CWPID $P1 $P2 $NGPID; wait
