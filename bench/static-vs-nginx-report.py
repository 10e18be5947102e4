#!/usr/bin/env python3
"""Helpers for bench/static-vs-nginx.sh.

  static-vs-nginx-report.py parse-wrk FILE   -> "rps,p50_ms,p99_ms,socket_errors,non_2xx"
  static-vs-nginx-report.py summary OUTDIR   -> summary.md on stdout (reads results.csv,
                                                memory.csv, meta.txt and raw/ in OUTDIR)
"""
import csv
import json
import re
import statistics
import sys
from pathlib import Path

UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
CONTENDERS = ["nginx", "coldwire-epoll", "coldwire-poll", "coldwire-select"]
FILES = ["1259", "8k"]
FILE_LABEL = {"1259": "1,259 B", "8k": "8 KiB (8,192 B)"}


def parse_wrk(text: str) -> dict:
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    if not rps:
        raise SystemExit("no Requests/sec in wrk output")
    latency = {}
    for pct, value, unit in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M):
        latency[pct] = float(value) * UNITS_MS[unit]
    socket_errors = 0
    match = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if match:
        socket_errors = sum(int(x) for x in match.groups())
    match = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    non_2xx = int(match.group(1)) if match else 0
    return {
        "rps": float(rps.group(1)),
        "p50": latency.get("50", float("nan")),
        "p99": latency.get("99", float("nan")),
        "socket_errors": socket_errors,
        "non_2xx": non_2xx,
    }


def read_meta(out: Path) -> dict:
    meta = {}
    for line in (out / "meta.txt").read_text().splitlines():
        key, _, value = line.partition("=")
        meta[key] = value
    return meta


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}×"


def summary(out: Path) -> str:
    meta = read_meta(out)
    rows = list(csv.DictReader((out / "results.csv").open()))
    for row in rows:
        for key in ("requests_per_second", "p50_ms", "p99_ms", "server_cpu_pct", "wrk_cpu_pct",
                    "server_cpu_idle_pct", "client_cpu_idle_pct"):
            row[key] = float(row[key])
        for key in ("socket_errors", "non_2xx", "round"):
            row[key] = int(row[key])
    rounds = sorted({row["round"] for row in rows})
    by = {(r["round"], r["file"], r["contender"]): r for r in rows}
    total_errors = sum(r["socket_errors"] + r["non_2xx"] for r in rows)

    lines = []
    add = lines.append
    add("# coldwire serve vs nginx: static files, keep-alive, one core")
    add("")
    if total_errors:
        add(f"**INVALID RUN: wrk reported {total_errors} socket errors / non-2xx responses (see the table).**")
    else:
        add("Valid run: wrk reported no socket errors and no non-2xx responses in any measurement.")
    add("")
    add(f"Reproduce: `{meta.get('command', '')}`")
    add("")
    add(
        f"Machine: `{meta.get('machine')}` ({meta.get('hostname')}), nproc {meta.get('nproc')}, "
        f"{meta.get('cpu')}, Linux {meta.get('kernel')}; started {meta.get('date')}; "
        f"load average at start {meta.get('loadavg_start')}, at end {meta.get('loadavg_end', '?')} "
        "(shared, noisy machine: only the ratios are meaningful)."
    )
    add("")
    add(
        f"Versions: {meta.get('nginx')}; {meta.get('wrk')}; {meta.get('coldwire')} at git "
        f"`{meta.get('coldwire_rev')}` ({meta.get('coldwire_dirty')}; see raw/git-status.txt, raw/git-diff.patch); "
        f"{meta.get('python')}."
    )
    add("")
    add(
        f"Method: each server on CPU {meta.get('server_cpu')} with one worker (nginx: "
        "`bench/nginx/static.conf.template`, one worker, `worker_cpu_affinity`, sendfile, tcp_nopush, "
        "tcp_nodelay, open_file_cache, access_log off, keepalive_requests 1000000; coldwire: "
        "`taskset -c 0 coldwire serve --io BACKEND --workers 1 --idle-timeout 600 --admin …`); load "
        f"`taskset -c {meta.get('client_cpu')} wrk -t1 -c{meta.get('connections')} -d{meta.get('duration')}s --latency` "
        f"(keep-alive) after a discarded {meta.get('warmup')} s warm-up; {meta.get('rounds')} rounds, "
        "each round runs every file × contender in turn (servers restarted for every measurement, one loaded at a time)."
    )
    add("")

    for file in FILES:
        add(f"## {FILE_LABEL[file]} file: requests/s")
        add("")
        nginx_rps = {r: by[(r, file, "nginx")]["requests_per_second"] for r in rounds if (r, file, "nginx") in by}
        nginx_median = statistics.median(nginx_rps.values()) if nginx_rps else float("nan")
        header = "| contender | median req/s | ratio to nginx (medians) | " + " | ".join(
            f"round {r} ratio" for r in rounds) + " | median p50 ms | median p99 ms | server CPU % | wrk CPU % | errors |"
        add(header)
        add("|" + "---|" * (header.count("|") - 1))
        for contender in CONTENDERS:
            runs = [by[(r, file, contender)] for r in rounds if (r, file, contender) in by]
            if not runs:
                continue
            median = statistics.median(x["requests_per_second"] for x in runs)
            per_round = []
            for r in rounds:
                row = by.get((r, file, contender))
                if row and r in nginx_rps:
                    per_round.append(fmt_ratio(row["requests_per_second"] / nginx_rps[r]))
                else:
                    per_round.append("–")
            errors = sum(x["socket_errors"] + x["non_2xx"] for x in runs)
            add(
                f"| {contender} | {median:,.0f} | {fmt_ratio(median / nginx_median)} | "
                + " | ".join(per_round)
                + f" | {statistics.median(x['p50_ms'] for x in runs):.3f}"
                + f" | {statistics.median(x['p99_ms'] for x in runs):.3f}"
                + f" | {statistics.median(x['server_cpu_pct'] for x in runs):.0f}"
                + f" | {statistics.median(x['wrk_cpu_pct'] for x in runs):.0f}"
                + f" | {errors} |"
            )
        add("")
        add("Raw requests/s per round: " + "; ".join(
            f"{c}: " + ", ".join(f"{by[(r, file, c)]['requests_per_second']:,.0f}" for r in rounds if (r, file, c) in by)
            for c in CONTENDERS))
        add("")

    add("## CPU use during the measurements")
    add("")
    add(
        "server CPU % = user+sys time of the serving process (nginx worker / coldwire) over the run; wrk CPU % "
        "likewise for wrk. Both sides have one core each: when wrk is near 100 %, the single wrk thread, not "
        "the server, may set the pace, which compresses ratios toward 1. A server below ~90 % while its CPU "
        "shows no idle time was preempted by other work on this shared machine."
    )
    add("")
    suspicious = [
        r for r in rows
        if r["server_cpu_pct"] < 90 or r["wrk_cpu_pct"] >= 95
    ]
    if suspicious:
        add("| round | file | contender | req/s | server CPU % | wrk CPU % | server-CPU idle % | client-CPU idle % |")
        add("|---|---|---|---|---|---|---|---|")
        for r in suspicious:
            add(
                f"| {r['round']} | {r['file']} | {r['contender']} | {r['requests_per_second']:,.0f} | "
                f"{r['server_cpu_pct']:.0f} | {r['wrk_cpu_pct']:.0f} | {r['server_cpu_idle_pct']:.0f} | "
                f"{r['client_cpu_idle_pct']:.0f} |"
            )
        add("")
        add("(Runs listed: server below 90 % CPU, or wrk at 95 % or more.)")
    else:
        add("Every server ran at ≥ 90 % CPU with wrk below 95 %.")
    add("")

    memory_path = out / "memory.csv"
    if memory_path.exists():
        mem = list(csv.DictReader(memory_path.open()))
        add(f"## User-space memory per idle connection ({meta.get('idle_conns')} connections)")
        add("")
        add("| contender | connections held | server fds added | VmRSS without (KiB) | VmRSS with (KiB) | bytes / connection |")
        add("|---|---|---|---|---|---|")
        for m in mem:
            add(
                f"| {m['contender']} | {m['connections_held']} | {m['server_fds_added']} | {int(m['rss_without_kib']):,} "
                f"| {int(m['rss_with_kib']):,} | {int(m['bytes_per_connection']):,} |"
            )
        add("")
        add(
            "(VmRSS of the serving process — the nginx worker, the coldwire process — before and ~1 s after "
            "the server has accepted all the connections, which send nothing; bytes/connection = "
            "(with − without) / connections held. Kernel socket memory is not included. coldwire runs with "
            "`--idle-timeout 600` and nginx with keepalive_timeout/client_header_timeout 600s so neither "
            "closes the held connections (nginx's default client_header_timeout of 60 s would). nginx "
            "preallocates its connection and event arrays for worker_connections (19000) at startup, so "
            "that part is in its baseline, not in the difference.)"
        )
        add("")

    # Diagnostics: coldwire's own counters and stderr, nginx's error log.
    notes = []
    raw = out / "raw"
    for stats_path in sorted(raw.glob("*.stats.json")):
        try:
            stats = json.loads(stats_path.read_text())
        except (OSError, ValueError):
            notes.append(f"{stats_path.name}: unreadable")
            continue
        http = stats.get("total", {}).get("http", {})
        # Schema 2 names the classes ({"2xx": ...}); schema 1 had a positional array.
        by_class = http.get("responses") or dict(zip(("1xx", "2xx", "3xx", "4xx", "5xx"),
                                                     http.get("responses_by_class", [])))
        bad = sum(count for name, count in by_class.items() if name[0] in "345")
        counters = {k: http.get(k, 0) for k in ("rejected", "header_timeouts", "idle_timeouts", "write_timeouts")}
        if bad or any(counters.values()):
            notes.append(f"{stats_path.name}: responses {by_class}, {counters}")
    for err_path in sorted(raw.glob("*.stderr")):
        text = err_path.read_text(errors="replace")
        interesting = [line for line in text.splitlines()
                       if line.strip() and not line.startswith("coldwire serve: backend")
                       and "finishing in-flight responses" not in line]
        if interesting:
            notes.append(f"{err_path.name}: " + " / ".join(interesting[:3]))
    for log_path in sorted(raw.glob("*.nginx-error.log")):
        text = log_path.read_text(errors="replace")
        interesting = [line for line in text.splitlines() if "[notice]" not in line]
        if interesting:
            notes.append(f"{log_path.name}: " + " / ".join(interesting[:3]))
    add("## Diagnostics")
    add("")
    if notes:
        for note in notes:
            add(f"- {note}")
    else:
        add("- No coldwire 4xx/5xx, rejections or timeouts in its /stats; no unexpected stderr; nginx error logs clean.")
    add("")
    add("Files: `results.csv` (one row per measurement), `memory.csv`, `meta.txt`, `raw/` (wrk outputs, "
        "coldwire /stats JSON and stderr per run, nginx error logs, idle-connection client logs).")
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "parse-wrk":
        r = parse_wrk(Path(sys.argv[2]).read_text())
        print(f"{r['rps']:.2f},{r['p50']:.3f},{r['p99']:.3f},{r['socket_errors']},{r['non_2xx']}")
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "summary":
        sys.stdout.write(summary(Path(sys.argv[2])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
