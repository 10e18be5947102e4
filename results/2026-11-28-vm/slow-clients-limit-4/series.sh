#!/bin/bash
# Before/after of the accept fix (issue 19; summary.md): full-scale slow-clients point at
# 3,200 requests/s (run.sh: default --max-connections 19,000 under 20,000 open files),
# the proxy stopped S s every 2 s (SIGSTOP: a loop stall on demand), interleaved per round:
# uring with the old accept logic (BEFORE binary), uring with the fix (AFTER binary),
# epoll (AFTER binary).
# usage: BEFORE=/work/bin-before/coldwire AFTER=target/release/coldwire [STALLS="1.5 0.4"] [ROUNDS=2] ./series.sh raw
set -u
OUT=$1; RATE=${RATE:-3200}
for STALLV in ${STALLS-1.5 0.4}; do
  for R in $(seq ${ROUNDS:-2}); do
    TAG=stall$STALLV-r$R
    BIN=$BEFORE STALL=$STALLV ./run.sh uring $RATE $OUT uring-before-$RATE-$TAG
    BIN=$AFTER STALL=$STALLV ./run.sh uring $RATE $OUT uring-after-$RATE-$TAG
    BIN=$AFTER STALL=$STALLV ./run.sh epoll $RATE $OUT epoll-$RATE-$TAG
  done
done
