#!/usr/bin/env bash
# Opens the admin listener's live page (coldwire serve|proxy --admin ADDR → http://ADDR/)
# in Debian's Chromium, headless, and fails unless the page updated itself from /stats at
# least twice with no failed poll and no console error.
#
# usage: scripts/check-live-page-in-browser.sh http://ADDR/ [SCREENSHOT.png]
#
# How: Chromium runs the page for 5 s of virtual time (--virtual-time-budget; network
# fetches to the server are real) and dumps the DOM. The page counts its successful polls
# in <html data-updates> and failed ones in data-failures; Chromium's own console log
# (--enable-logging=stderr) is scanned for errors and "Uncaught". On success the script
# prints the numbers the page shows. Chromium is installed with apt-get when missing.
set -euo pipefail

fail() { echo "check-live-page-in-browser: FAIL: $*" >&2; exit 1; }

[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 http://ADDR/ [SCREENSHOT.png]" >&2; exit 2; }
url=$1
screenshot=${2:-}

chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium ]]; then
    [[ $(id -u) -eq 0 ]] || fail "Chromium is missing and installing it needs root: sudo apt-get install -y chromium"
    echo "check-live-page-in-browser: installing Debian's chromium (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq chromium >&2
    chromium=$(command -v chromium) || fail "apt-get installed no chromium binary"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run_chromium() {
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$work/profile" --enable-logging=stderr --v=0 \
        --virtual-time-budget=5000 --window-size=1280,900 "$@" "$url"
}
run_chromium --dump-dom >"$work/dom.html" 2>"$work/chromium.log" \
    || fail "Chromium exited with status $? (log: $(tail -3 "$work/chromium.log"))"

html_tag=$(grep -o '<html[^>]*>' "$work/dom.html" | head -1 || true)
[[ -n $html_tag ]] || fail "no page at $url (is the server running with --admin?)"
updates=$(sed -n 's/.*data-updates="\([0-9]*\)".*/\1/p' <<<"$html_tag")
failures=$(sed -n 's/.*data-failures="\([0-9]*\)".*/\1/p' <<<"$html_tag")
console=$(grep -E 'CONSOLE.*(ERROR|"Uncaught)|:ERROR:CONSOLE' "$work/chromium.log" || true)

status=0
if [[ -z $updates || $updates -lt 2 ]]; then
    echo "check-live-page-in-browser: FAIL: the page updated ${updates:-0} time(s) from /stats in 5 s (want 2 or more)" >&2
    status=1
fi
if [[ -n $failures ]]; then echo "check-live-page-in-browser: FAIL: $failures poll(s) of /stats failed" >&2; status=1; fi
if [[ -n $console ]]; then echo "check-live-page-in-browser: FAIL: console errors: $console" >&2; status=1; fi
if [[ -n $screenshot ]]; then
    run_chromium --screenshot="$screenshot" >/dev/null 2>&1 || echo "check-live-page-in-browser: screenshot failed" >&2
fi
[[ $status -eq 0 ]] || exit 1
shown() { grep -o "id=\"$1\">[^<]*" "$work/dom.html" | sed 's/.*>//' | head -1; }
echo "check-live-page-in-browser: ok: $url updated $updates times; requests/s $(shown rate), connections $(shown connections), CPU $(shown cpu)"
