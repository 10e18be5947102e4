#!/usr/bin/env python3
"""Tables for summary.md from measure.sh's cpu.tsv and callgrind.sh's callgrind.tsv.

usage: summarise.py OUT_DIR
"""
import csv
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])


def rows(name):
    path = out / name
    if not path.exists():
        return []
    with path.open() as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


cpu = rows("cpu.tsv")
if cpu:
    by_round = {}
    for row in cpu:
        by_round.setdefault(row["round"], {})[row["variant"]] = row
    print("### CPU per request (`coldwire bench --server-pid`), side by side\n")
    print("| round | main µs/req | branch µs/req | metrics µs/req | branch / main | metrics / branch | achieved req/s (main, branch, metrics) |")
    print("|---|---|---|---|---|---|---|")
    ratios_branch, ratios_metrics = [], []
    for round_, variants in sorted(by_round.items(), key=lambda item: int(item[0])):
        if not all(name in variants for name in ("main", "branch", "metrics")):
            continue
        main, branch, metrics = (float(variants[name]["cpu_us_per_request"]) for name in ("main", "branch", "metrics"))
        ratios_branch.append(branch / main)
        ratios_metrics.append(metrics / branch)
        rates = ", ".join(f"{float(variants[name]['achieved_rate']):.0f}" for name in ("main", "branch", "metrics"))
        print(f"| {round_} | {main:.2f} | {branch:.2f} | {metrics:.2f} | {branch / main:.3f} | {metrics / branch:.3f} | {rates} |")
    for label, values in (("branch / main", ratios_branch), ("metrics / branch", ratios_metrics)):
        if values:
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            print(f"\n{label}: median {statistics.median(values):.3f}, mean {statistics.mean(values):.3f}, "
                  f"sd {spread:.3f}, min {min(values):.3f}, max {max(values):.3f} over {len(values)} rounds", end="")
    print("\n")

grind = rows("callgrind.tsv")
if grind:
    per_variant = {}
    for row in grind:
        per_variant.setdefault(row["variant"], []).append((int(row["rate"]), int(row["requests"]), int(row["instructions"])))
    print("### Instructions (valgrind callgrind, exact)\n")
    print("| variant | requests (low, high) | instructions (low, high) | instructions per request (difference) |")
    print("|---|---|---|---|")
    slopes, fixed = {}, {}
    for variant in ("main", "branch", "metrics"):
        runs = sorted(per_variant.get(variant, []))
        if len(runs) != 2:
            continue
        (_, low_requests, low_ir), (_, high_requests, high_ir) = runs
        slope = (high_ir - low_ir) / max(1, high_requests - low_requests)
        slopes[variant] = slope
        fixed[variant] = low_ir - slope * low_requests
        print(f"| {variant} | {low_requests:,}, {high_requests:,} | {low_ir:,}, {high_ir:,} | {slope:,.0f} |")
    if "main" in slopes and "branch" in slopes:
        print(f"\nbranch / main: {slopes['branch'] / slopes['main']:.4f} "
              f"({slopes['branch'] - slopes['main']:+,.0f} instructions per request)")
    if "branch" in slopes and "metrics" in slopes:
        print(f"\nmetrics / branch: {slopes['metrics'] / slopes['branch']:.4f} "
              f"({slopes['metrics'] - slopes['branch']:+,.0f} instructions per request)")
    if "branch" in fixed and "metrics" in fixed:
        print(f"\nfixed cost (start-up, shutdown and once-a-second work over one ~11 s run: the "
              f"intercept): branch {fixed['branch']:,.0f}, metrics {fixed['metrics']:,.0f} instructions; "
              f"the stats log and the 1 Hz scrapes add {(fixed['metrics'] - fixed['branch']) / 11:,.0f} "
              f"instructions per second")
