"""Markdown tables for slow-clients-3: per rate and backend, the median over rounds of the
proxy's CPU per request, open connections and requests answered, the median of per-round
ratios to epoll (each round's value in brackets), and the requests answered 503 in the
measured phase (the bench's `error_causes`, every round listed, then the total) and all
other failures. Usage: python3 table.py DIR (a run's results directory)."""
import collections
import glob
import json
import re
import statistics as st
import sys

root = sys.argv[1]
rows = collections.defaultdict(dict)
for f in sorted(glob.glob(root + '/*/raw/*.json')):
    m = re.match(r'(.*)-([\d.]+)-r(\d+)$', f.split('/')[-1][:-5])
    b, rate, r = m.group(1), float(m.group(2)), int(m.group(3))
    ph = json.load(open(f))['runs'][0]['phases'][0]
    s = ph.get('server') or {}
    c = ph.get('server_counters') or {}
    s503 = ph.get('error_causes', {}).get('status 503', 0)
    rows[rate].setdefault(b, {})[r] = dict(
        cpu=s['cpu_us_per_request'], open=(c.get('open_connections') or [0])[0],
        ach=ph['achieved_rate'], e503=s503, other=ph['errors_total'] - s503,
        rq=s.get('runqueue_wait_seconds', 0))
print('| offered/s | backend | open conns | answered/s | µs/request | **/ epoll** (per round) '
      '| 503s per round (total) | other failures | run queue s |')
print('| ---: | --- | ---: | ---: | ---: | --- | --- | ---: | ---: |')
for rate in sorted(rows):
    v = rows[rate]
    for b in ['epoll', 'uring']:
        if b not in v:
            continue
        rs = v[b]
        ratios = [rs[r]['cpu'] / v['epoll'][r]['cpu'] for r in sorted(rs) if r in v.get('epoll', {})]
        per = ' / '.join('%.2f' % x for x in ratios)
        e = [rs[r]['e503'] for r in sorted(rs)]
        print('| ' + ' | '.join([
            f"{rate:,.0f}", b, f"{st.median([x['open'] for x in rs.values()]):,.0f}",
            f"{st.median([x['ach'] for x in rs.values()]):,.0f}",
            f"{st.median([x['cpu'] for x in rs.values()]):.1f}",
            f"**{st.median(ratios):.2f}** ({per})" if b != 'epoll' else '1',
            ', '.join(str(x) for x in e) + f" ({sum(e):,})",
            str(sum(x['other'] for x in rs.values())),
            f"{st.median([x['rq'] for x in rs.values()]):.1f}"]) + ' |')
