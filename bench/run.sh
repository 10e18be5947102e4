#!/usr/bin/env bash
# bench/run.sh — the one entry point to the shell benchmarks in this folder.
#
#   bench/run.sh                 lists them, with the first line of each one's description
#   bench/run.sh NAME [ARGS...]  runs bench/NAME.sh (environment variables as the script
#                                documents, e.g. `DURATION=8 ROUNDS=3 bench/run.sh cold-cost`)
#
# Which of them became `coldwire experiment` scenarios and why the rest stay scripts:
# bench/README.md. Helpers (lib.sh, phase-row.py, hold-connections.py,
# static-vs-nginx-report.py) are used by the scripts, not run by name.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

list() {
  echo "usage: bench/run.sh NAME [ARGS...]   (see bench/README.md)"
  echo
  for script in "$here"/*.sh; do
    name="$(basename "$script" .sh)"
    { [ "$name" = run ] || [ "$name" = lib ]; } && continue
    # The first description line: the script's second line, without its "# bench/NAME.sh" lead.
    summary="$(sed -n 2p "$script" | sed -e 's/^# *//' -e "s|^bench/$name.sh *[—:-]* *||")"
    printf '  %-20s %s\n' "$name" "$summary"
  done
}

if [ $# -eq 0 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  list
  exit 0
fi
name="$1"
shift
script="$here/$name.sh"
if [ "$name" = run ] || [ "$name" = lib ] || [ ! -f "$script" ]; then
  echo "bench/run.sh: no benchmark named \`$name\`" >&2
  list >&2
  exit 2
fi
exec bash "$script" "$@"
