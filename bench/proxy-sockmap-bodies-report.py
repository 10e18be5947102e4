#!/usr/bin/env python3
"""Tables for bench/proxy-sockmap-bodies.sh: proxy CPU per request and per MiB by data
path and body size, at the fixed rate and at saturation; ratios are medians of per-round
ratios against `copy` (runs side by side in the same round).

Usage: proxy-sockmap-bodies-report.py results.csv DURATION_SECONDS
"""
import csv
import statistics
import sys

rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["cpu_us_per_request"]]
duration = float(sys.argv[2])
variants = ["copy", "splice", "sockmap"]
sizes = list(dict.fromkeys(r["size"] for r in rows))
cpu, calls, done, kernel = {}, {}, {}, {}
for r in rows:
    key = (r["load"], r["size"], r["variant"])
    cpu.setdefault(key, {})[r["round"]] = float(r["cpu_us_per_request"])
    if r["syscalls_per_request"]:
        calls.setdefault(key, []).append(float(r["syscalls_per_request"]))
    done.setdefault(key, []).append(int(r["completed"] or 0))
    if r["kernel_bodies"]:
        kernel.setdefault(key, []).append(int(r["kernel_bodies"]))


def mib(size):
    return int(size.rstrip("k")) / 1024


def median(key):
    values = cpu.get(key, {}).values()
    return statistics.median(values) if values else None


def ratio(load, size, variant):
    a, b = cpu.get((load, size, variant), {}), cpu.get((load, size, "copy"), {})
    values = [a[k] / b[k] for k in a if k in b and b[k]]
    return f"{statistics.median(values):.2f}" if values else "-"


for load in ["fixed", "max"]:
    title = "fixed rate (about 64 MiB/s, at most 1,000 requests/s)" if load == "fixed" else "saturation (`--rate max`)"
    print(f"### {title}\n")
    print("| body | rate | " + " | ".join(f"{v} µs/req" for v in variants) + " | "
          + " | ".join(f"{v} µs/MiB" for v in variants) + " | splice/copy | sockmap/copy | sockmap/splice |")
    print("|---" * (2 + 2 * len(variants) + 3) + "|")
    for size in sizes:
        key_rows = [r for r in rows if r["load"] == load and r["size"] == size]
        if not key_rows:
            continue
        if load == "fixed":
            rate = key_rows[0]["rate"]
        else:
            rates = [statistics.median(done[(load, size, v)]) / duration for v in variants if (load, size, v) in done]
            rate = "/".join(f"{x:.0f}" for x in rates)
        per_request = [median((load, size, v)) for v in variants]
        cells = [f"{x:.0f}" if x is not None else "-" for x in per_request]
        cells += [f"{x / mib(size):.0f}" if x is not None else "-" for x in per_request]
        a = cpu.get((load, size, "sockmap"), {})
        b = cpu.get((load, size, "splice"), {})
        values = [a[k] / b[k] for k in a if k in b and b[k]]
        versus_splice = f"{statistics.median(values):.2f}" if values else "-"
        print(f"| {size} | {rate} | " + " | ".join(cells)
              + f" | {ratio(load, size, 'splice')} | {ratio(load, size, 'sockmap')} | {versus_splice} |")
    print()
    print("System calls per request (median; waits included), and bodies the sockmap run handed to the kernel:\n")
    print("| body | " + " | ".join(variants) + " | kernel bodies (sockmap run) |")
    print("|---" * (2 + len(variants)) + "|")
    for size in sizes:
        cells = [f"{statistics.median(calls[(load, size, v)]):.1f}" if (load, size, v) in calls else "-" for v in variants]
        k = kernel.get((load, size, "sockmap"))
        print(f"| {size} | " + " | ".join(cells) + f" | {'/'.join(map(str, k)) if k else '-'} |")
    print()
errors = sum(int(r["errors"] or 0) for r in csv.DictReader(open(sys.argv[1])))
print(f"Failed requests over all runs: {errors}. Saturation rate cells: completed requests/s for copy/splice/sockmap.")
