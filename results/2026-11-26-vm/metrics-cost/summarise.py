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
    # Rows come in pairs (LOW then HIGH) per variant and repetition, in file order.
    pairs = {}
    for low, high in zip(grind[0::2], grind[1::2]):
        assert low["variant"] == high["variant"], (low, high)
        requests = (int(low["requests"]), int(high["requests"]))
        instructions = (int(low["instructions"]), int(high["instructions"]))
        slope = (instructions[1] - instructions[0]) / max(1, requests[1] - requests[0])
        pairs.setdefault(low["variant"], []).append((requests, instructions, slope))
    print("### Instructions (valgrind callgrind, user space, exact for a given run)\n")
    print("| variant | repetition | requests (low, high) | instructions (low, high) | instructions per request (difference) |")
    print("|---|---|---|---|---|")
    means = {}
    for variant in ("main", "branch", "metrics"):
        for index, (requests, instructions, slope) in enumerate(pairs.get(variant, []), 1):
            print(f"| {variant} | {index} | {requests[0]:,}, {requests[1]:,} | "
                  f"{instructions[0]:,}, {instructions[1]:,} | {slope:,.0f} |")
        if pairs.get(variant):
            means[variant] = statistics.mean(slope for _, _, slope in pairs[variant])
    print()
    for variant, mean in means.items():
        print(f"- {variant}: {mean:,.0f} instructions per request (mean of {len(pairs[variant])})")
    if "main" in means and "branch" in means:
        print(f"- branch / main: {means['branch'] / means['main']:.4f}")
    if "branch" in means and "metrics" in means:
        print(f"- metrics / branch: {means['metrics'] / means['branch']:.4f}")
