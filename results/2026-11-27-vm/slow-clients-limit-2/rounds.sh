#!/bin/bash
# Interleaved rounds (summary.md): for each round, uring and epoll, before and after.
# usage: ROUNDS=6 RATE=430 PREFIX=raw/a rounds.sh   (BEFORE/AFTER: the two binaries)
set -u
ROUNDS=${ROUNDS:-6}; RATE=${RATE:-430}; PREFIX=${PREFIX:-raw/a}
BEFORE=${BEFORE:-/tmp/cw503-before}; AFTER=${AFTER:-/tmp/cw503-after}
cd "$(dirname "$0")"
for r in $(seq $ROUNDS); do
  for b in uring epoll; do
    for v in before after; do
      if [ $v = before ]; then BIN=$BEFORE; else BIN=$AFTER; fi
      BIN=$BIN WARM=4 DUR=8 ./run.sh $b $RATE 2000 $PREFIX-$b$v-r$r | sed "s/^/$v r$r /"
    done
  done
done
