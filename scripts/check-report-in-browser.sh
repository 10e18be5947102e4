#!/usr/bin/env bash
# Opens an HTML page (the `coldwire report` index.html) in Debian's Chromium, headless, and
# fails unless the page loads with no console errors and every image renders.
#
# usage: scripts/check-report-in-browser.sh REPORT.html [SCREENSHOT.png]
#
# How: a copy of the page, next to it (so relative links resolve the same way), gets a
# probe script injected at the top of <head>. The probe counts uncaught exceptions
# (syntax errors included), unhandled promise rejections, console.error calls and failed
# resource loads; on `load` it records, on <html>, how many <img> there are and which did
# not decode (complete with naturalWidth > 0), and which inline <svg> have no size.
# Chromium dumps the DOM; the script reads the probe's attributes and also scans
# Chromium's own console log (--enable-logging=stderr) for "Uncaught". The copy is removed
# on exit. Chromium is installed with apt-get when missing (root needed).
set -euo pipefail

fail() { echo "check-report-in-browser: FAIL: $*" >&2; exit 1; }

[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 REPORT.html [SCREENSHOT.png]" >&2; exit 2; }
page=$1
screenshot=${2:-}
[[ -f $page ]] || fail "$page does not exist (build it first: coldwire report DIR)"

chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium ]]; then
    [[ $(id -u) -eq 0 ]] || fail "Chromium is missing and installing it needs root: sudo apt-get install -y chromium"
    echo "check-report-in-browser: installing Debian's chromium (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq chromium >&2
    chromium=$(command -v chromium) || fail "apt-get installed no chromium binary"
fi
command -v perl >/dev/null || fail "perl is needed to inject the probe (apt-get install -y perl)"

page_dir=$(cd "$(dirname "$page")" && pwd)
work=$(mktemp -d)
probe_page="$page_dir/.check-report-$$.html"
cleanup() { rm -rf "$work"; rm -f "$probe_page"; }
trap cleanup EXIT

cat >"$work/probe.html" <<'PROBE'
<script>/* check-report-in-browser probe */(function () {
  var root = document.documentElement, errors = [];
  function note(message) { errors.push(String(message).slice(0, 200)); }
  window.addEventListener('error', function (event) {
    var target = event.target;
    if (target && target !== window && (target.src || target.href)) {
      note('failed to load ' + String(target.src || target.href).slice(0, 100));
    } else {
      note('uncaught: ' + event.message);
    }
  }, true);
  window.addEventListener('unhandledrejection', function (event) { note('unhandled rejection: ' + event.reason); });
  var consoleError = console.error;
  console.error = function () { note('console.error: ' + Array.prototype.join.call(arguments, ' ')); return consoleError.apply(console, arguments); };
  window.addEventListener('load', function () {
    var images = Array.prototype.slice.call(document.images), broken = [];
    images.forEach(function (image) {
      if (!(image.complete && image.naturalWidth > 0)) { broken.push((image.getAttribute('src') || '(no src)').slice(0, 80)); }
    });
    var svgs = Array.prototype.slice.call(document.querySelectorAll('body svg')).filter(function (svg) { return !svg.parentNode.closest('svg'); });
    svgs.forEach(function (svg, index) {
      var box = svg.getBoundingClientRect();
      if (!(box.width > 0 && box.height > 0)) { broken.push('inline svg #' + index); }
    });
    root.setAttribute('data-check-images', String(images.length + svgs.length));
    root.setAttribute('data-check-broken', broken.join(' | '));
    root.setAttribute('data-check-errors', errors.join(' | '));
    root.setAttribute('data-check-done', 'yes');
  });
})();</script>
PROBE

PROBE_FILE="$work/probe.html" perl -0777 -pe '
    BEGIN { local $/; open my $f, "<", $ENV{PROBE_FILE} or die; $probe = <$f>; }
    s/(<head\b[^>]*>)/$1$probe/i
      or s/(<html\b[^>]*>)/$1$probe/i
      or s/\A((?:\s*<!DOCTYPE[^>]*>)?)/$1$probe/i;
' "$page" >"$probe_page"

run_chromium() {
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$work/profile" --enable-logging=stderr --v=0 \
        --virtual-time-budget=10000 --window-size=1280,2000 "$@" "file://$probe_page"
}
run_chromium --dump-dom >"$work/dom.html" 2>"$work/chromium.log" \
    || fail "Chromium exited with status $? (log: $(tail -3 "$work/chromium.log"))"

attribute() {
    # The attribute's value from the dumped <html ...> tag, entities decoded.
    perl -0777 -ne 'if (/<html\b[^>]*?\s'"$1"'="([^"]*)"/) { $v = $1; $v =~ s/&quot;/"/g; $v =~ s/&lt;/</g; $v =~ s/&gt;/>/g; $v =~ s/&#39;/'"'"'/g; $v =~ s/&amp;/&/g; print $v }' "$work/dom.html"
}

[[ $(attribute data-check-done) == yes ]] \
    || fail "the page never finished loading (no load event within Chromium's time budget)"
images=$(attribute data-check-images)
broken=$(attribute data-check-broken)
errors=$(attribute data-check-errors)
uncaught=$(grep -E 'CONSOLE.*"Uncaught' "$work/chromium.log" || true)

status=0
if [[ -n $broken ]]; then echo "check-report-in-browser: FAIL: images that did not render: $broken" >&2; status=1; fi
if [[ -n $errors ]]; then echo "check-report-in-browser: FAIL: console errors: $errors" >&2; status=1; fi
if [[ -n $uncaught ]]; then echo "check-report-in-browser: FAIL: Chromium logged: $uncaught" >&2; status=1; fi
if [[ -n $screenshot ]]; then
    run_chromium --screenshot="$screenshot" >/dev/null 2>&1 || echo "check-report-in-browser: screenshot failed" >&2
fi
[[ $status -eq 0 ]] || exit 1
echo "check-report-in-browser: ok: $page loaded in $("$chromium" --version 2>/dev/null | head -1), $images image(s) rendered, no console errors"
