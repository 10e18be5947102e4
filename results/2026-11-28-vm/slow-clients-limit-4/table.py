"""The table of summary.md from raw/ (python3 table.py raw)."""
import glob, json, re, sys

raw = sys.argv[1] if len(sys.argv) > 1 else "raw"
log = {}
for line in open("series.log"):
    m = re.match(r"(\S+) start \S+ load ([\d.]+) .*503s (\S+) of which descriptors (\S+) requests (\S+) pauses (\S+) holds (\S+) waits (\S+) multishot_stops (\S+) max_fds (\S+)", line)
    if m:
        log[m.group(1)] = m.groups()[1:]
print("| run | load | proxy 503s (of which descriptors) | bench: succeeded / errors (timeouts) | p50 / p99 s | most descriptors | accept pauses | multishot stops |")
print("|---|---|---|---|---|---|---|---|")
for name, (load, r503, desc, req, pauses, holds, waits, stops, fds) in log.items():
    bench = json.load(open(f"{raw}/{name}.bench.json"))
    phase = bench["runs"][-1]["phases"][-1]
    lat = phase["latency"]["corrected"]
    print(f"| {name} | {load} | {r503} ({desc}) | {phase['succeeded_requests']} / {phase['errors_total']} ({phase['errors']['timeout']}) | "
          f"{lat['p50_us']/1e6:.1f} / {lat['p99_us']/1e6:.1f} | {fds} | {pauses} | {stops} |")
