"""Per-run table of the census runs (summary.md): python3 table.py raw

For each raw/NAME.stats.json: the proxy's 503s (connection_limit_reached) split into
connection_limit_descriptors (EMFILE/ENFILE/...) and the rest (at --max-connections), the
bench's measured phase (answered/s, p50, status 503s), and from the 0.5 s samples the
maxima of the process's open descriptors, open connections, accept_backlog,
closing_connections and the listen queue, plus the loop turns per accepted connection.
With a traced run (TRACE=1) the T503 lines are split by errno."""
import glob
import json
import os
import re
import sys

root = sys.argv[1]
print('| run | answered/s | p50 ms | bench 503s | 503s (proxy) | of which descriptors | at --max-connections | max fds | max open conns | max backlog | max closing | max listen queue | turns/request | accept pauses / holds | pool-full closes |')
print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |')
for st in sorted(glob.glob(os.path.join(root, '*.stats.json')), key=os.path.getmtime):
    name = os.path.basename(st)[:-len('.stats.json')]
    t = json.load(open(st))['total']
    h, l = t['http'], t['loop']
    samples = [x.split() for x in open(st.replace('.stats.json', '.samples')) if x.strip()]

    def most(i):
        vals = [int(x[i]) for x in samples if len(x) > i and x[i] not in ('None', '?', '')]
        return max(vals) if vals else 0
    try:
        b = json.load(open(st.replace('.stats.json', '.bench.json')))
        ph = b['runs'][0]['phases'][-1]
        rate = ph['achieved_rate']
        p50 = ph['latency']['raw']['p50_us'] / 1000
        b503 = ph['error_causes'].get('status 503', 0)
    except Exception:
        rate, p50, b503 = float('nan'), float('nan'), '?'
    e503 = h.get('connection_limit_reached', 0)
    desc = h.get('connection_limit_descriptors', 0)
    turns = l.get('wait_calls', 0) / max(1, l.get('accepted', 1))
    print(f"| {name} | {rate:,.0f} | {p50:,.0f} | {b503} | {e503:,} | {desc:,} | {e503 - desc:,} | {most(1):,} | {most(2):,} | {most(4):,} | {most(3):,} | {most(13):,} | {turns:.3f} | {l['accept_pauses']} / {l.get('accept_holds')} | {h.get('upstream_pool_full', 0):,} |")
    log = st.replace('.stats.json', '.proxy.log')
    if os.path.exists(log):
        errnos = {}
        for line in open(log, errors='replace'):
            m = re.match(r'T503 errno=(\S+)', line)
            if m:
                errnos[m.group(1)] = errnos.get(m.group(1), 0) + 1
        if errnos:
            print(f"|   ↳ traced 503s by errno: {errnos} | | | | | | | | | | | | | | |")
