"""bench/phase-row.py: one CSV row from a `coldwire bench --json` result, for the shell
benchmarks (bench/proxy-data-paths.sh, bench/proxy-sockmap-bodies.sh).

usage: phase-row.py JSON LEADING COLUMN...

Prints LEADING (the row's first cells, already joined by commas), then a cell per COLUMN
from the last phase of the first run: cpu_us_per_request and p99_us (corrected) rounded to
2 and 0 digits, completed, errors, syscalls_per_request and waits_per_request (the server's
counters, 2 digits), or `=TEXT` for TEXT as it is. A missing value is an empty cell; when
the JSON cannot be read (the run failed), completed is 0 and the rest empty.
"""

import json
import sys


def cells(phase, columns):
    server = phase.get("server") or {}
    counters = phase.get("server_counters") or {}
    corrected = (phase.get("latency") or {}).get("corrected") or {}

    def figure(value, digits):
        return "" if value is None else round(value, digits)

    values = {
        "cpu_us_per_request": lambda: figure(server.get("cpu_us_per_request"), 2),
        "completed": lambda: phase.get("completed_in_window", 0),
        "errors": lambda: phase.get("errors_total", 0),
        "p99_us": lambda: figure(corrected.get("p99_us"), 0),
        "syscalls_per_request": lambda: figure(counters.get("syscalls_per_request"), 2),
        "waits_per_request": lambda: figure(counters.get("waits_per_request"), 2),
    }
    return [column[1:] if column.startswith("=") else str(values[column]()) for column in columns]


def failed(columns):
    return [column[1:] if column.startswith("=") else "0" if column == "completed" else "" for column in columns]


def main():
    path, leading, columns = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        phase = json.load(open(path))["runs"][0]["phases"][-1]
        row = cells(phase, columns)
    except (OSError, ValueError, KeyError, IndexError):
        row = failed(columns)
    print(",".join([leading] + row))


if __name__ == "__main__":
    main()
