"""Markdown table of the interleaved rounds (summary.md): python3 table.py raw/a"""
import glob
import json
import sys

prefix = sys.argv[1]
rows = {}
for d in sorted(glob.glob(prefix + '-*-r*')):
    variant = d.split('-')[-2]
    rnd = int(d.split('-r')[-1])
    for st in glob.glob(d + '/*.stats.json'):
        t = json.load(open(st))['total']
        samples = [l.split() for l in open(st.replace('.stats.json', '.samples')) if l.strip()]

        def most(i):
            vals = [int(x[i]) for x in samples if len(x) > i and x[i] != 'None']
            return max(vals) if vals else 0
        rows.setdefault(variant, []).append(dict(
            r=rnd, e503=t['http'].get('connection_limit_reached', 0), req=t['http'].get('requests', 0),
            limit=most(2) >= 2000, backlog=most(4), closing=most(3), holds=t['loop'].get('accept_holds'),
            pauses=t['loop']['accept_pauses']))
print('| variant | 503s per run (round order) | total 503s / requests | runs with 503s | runs at the limit (accepting paused) | max backlog | accept_holds per run |')
print('| --- | --- | ---: | ---: | ---: | ---: | --- |')
for variant in ['uringbefore', 'uringafter', 'epollbefore', 'epollafter']:
    rs = sorted(rows.get(variant, []), key=lambda x: x['r'])
    if not rs:
        continue
    print(f"| {variant} | {', '.join(str(x['e503']) for x in rs)} | {sum(x['e503'] for x in rs):,} / {sum(x['req'] for x in rs):,} "
          f"| {sum(1 for x in rs if x['e503'] > 0)} of {len(rs)} | {sum(1 for x in rs if x['pauses'] > 0)} of {len(rs)} "
          f"| {max(x['backlog'] for x in rs)} | {', '.join(str(x['holds']) for x in rs)} |")
