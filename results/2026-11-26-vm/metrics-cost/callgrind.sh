#!/usr/bin/env bash
# Instructions per request of the same three variants as measure.sh, counted by
# valgrind's callgrind (exact, unaffected by other work on the machine).
#
# usage: callgrind.sh MAIN_BINARY BRANCH_BINARY OUT_DIR
#
# Each variant runs twice under callgrind, answering `coldwire bench` at LOW and then HIGH
# requests/s for the same time (1 s warm-up + 10 s); the server's own request count is read
# from /stats at the end. Instructions per request = (Ir(HIGH) − Ir(LOW)) / (requests(HIGH)
# − requests(LOW)): start-up, shutdown and once-a-second costs (the stats-log line, the
# scrapes, timer wake-ups) are the same in both runs and cancel; they are reported apart,
# per second, from the LOW run. Results: OUT_DIR/callgrind.tsv (appended; VARIANTS="branch
# metrics" runs only those).
set -euo pipefail
main=$1 branch=$2 out=$3
low=${LOW:-200} high=${HIGH:-600}
mkdir -p "$out/raw"
root=$(mktemp -d)
trap 'rm -rf "$root"; kill $(jobs -p) 2>/dev/null || true' EXIT
head -c 4096 /dev/zero | tr '\0' 'x' >"$root/file.txt"

[[ -f $out/callgrind.tsv ]] || printf "variant\trate\trequests\tinstructions\n" >"$out/callgrind.tsv"
for variant in ${VARIANTS:-main branch metrics}; do
    for rate in "$low" "$high"; do
        binary=$branch; extra=()
        [[ $variant == main ]] && binary=$main
        [[ $variant == metrics ]] && extra=(--stats-log "$root/stats.log" --stats-interval 1s)
        log="$root/server.out"; : >"$log"
        cg="$out/raw/callgrind-$variant-$rate.out"
        valgrind --tool=callgrind --callgrind-out-file="$cg" \
            "$binary" serve --root "$root" --listen 127.0.0.1:0 --workers 1 --io epoll \
            --admin 127.0.0.1:0 "${extra[@]}" >"$log" 2>"$root/valgrind.err" &
        pid=$!
        for _ in $(seq 300); do grep -q "stats on" "$log" && break; sleep 0.1; done
        address=$(sed -n 's|^listening on http://||p' "$log" | head -1)
        admin=$(sed -n 's|^stats on http://\(.*\)/stats|\1|p' "$log" | head -1)
        [[ -n $address && -n $admin ]] || { cat "$log" "$root/valgrind.err" >&2; exit 1; }
        scraper=
        if [[ $variant == metrics ]]; then
            ( while kill -0 "$pid" 2>/dev/null; do
                  curl -s -o /dev/null "http://$admin/metrics" || true
                  curl -s -o /dev/null "http://$admin/stats" || true
                  sleep 1
              done ) &
            scraper=$!
        fi
        "$branch" bench --url "http://$address/file.txt" --rate "$rate" --connections 20 \
            --duration 10 --warmup 1 --json "$out/raw/callgrind-$variant-$rate.json" -q \
            >/dev/null 2>&1 || true
        requests=$(curl -s "http://$admin/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["http"]["requests"])')
        [[ -n $scraper ]] && { kill "$scraper" 2>/dev/null || true; wait "$scraper" 2>/dev/null || true; }
        kill "$pid"; wait "$pid" 2>/dev/null || true
        instructions=$(sed -n 's/^\(summary\|totals\): *//p' "$cg" | head -1)
        printf '%s\t%s\t%s\t%s\n' "$variant" "$rate" "$requests" "$instructions" | tee -a "$out/callgrind.tsv"
    done
done
