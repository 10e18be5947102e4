#!/bin/bash
# The runs of summary.md, interleaved per round (each ~30 s): uring (default
# --max-connections 19,000), epoll, uring with --max-connections 15,500 (4,500 descriptors
# of headroom under the 20,000 open files: more than a full listen queue, somaxconn 4096),
# at 3,200 requests/s; first with the machine's own stalls only, then with the proxy
# stopped 0.4 s every 2 s. All traced (COLDWIRE_LIMIT_TRACE=1; binary with trace.patch).
# usage: BIN=/tmp/cw-census [STALLS="" 0.4] [ROUNDS=2] [UNTRACED=0.4] ./series.sh raw
# (first series: the defaults, UNTRACED=0.4; second: STALLS="1.5" ROUNDS=2 UNTRACED=1.5, raw-heavy)
set -u
OUT=$1; RATE=${RATE:-3200}; export BIN
for STALLV in ${STALLS-"" 0.4}; do
  for R in $(seq ${ROUNDS:-2}); do
    TAG=${STALLV:+stall$STALLV-}r$R
    for V in uring epoll uring15500; do
      case $V in
        uring15500) B=uring; M=15500 ;;
        *) B=$V; M= ;;
      esac
      STALL=$STALLV TRACE=1 MAXCONN=$M ./run.sh $B $RATE $OUT $V-$RATE-$TAG
    done
  done
done
# One untraced stalled uring run: the trace's own cost does not make the 503s.
[ -n "${UNTRACED:-}" ] && STALL=$UNTRACED ./run.sh uring $RATE $OUT uring-$RATE-stall$UNTRACED-untraced
