"""Markdown tables for uring-turns: per rate and backend, the median over rounds of the
proxy's CPU per request, loop turns (waits) per request, system calls per request, events
per wait, answered rate and run-queue wait, and the median of per-round ratios to epoll
(each round's value in brackets). Usage: python3 table.py DIR (a run's results directory)."""
import collections
import glob
import json
import re
import statistics as st
import sys

root = sys.argv[1]
rows = collections.defaultdict(dict)
order = []
for f in sorted(glob.glob(root + '/*/raw/*.json')):
    m = re.match(r'(.*)-([\d.]+)-r(\d+)$', f.split('/')[-1][:-5])
    b, rate, r = m.group(1), float(m.group(2)), int(m.group(3))
    if b not in order:
        order.append(b)
    ph = json.load(open(f))['runs'][0]['phases'][0]
    s = ph.get('server') or {}
    c = ph.get('server_counters') or {}
    rows[rate].setdefault(b, {})[r] = dict(
        cpu=s['cpu_us_per_request'], waits=c.get('waits_per_request', float('nan')),
        sys=c.get('syscalls_per_request', float('nan')),
        epw=c.get('events_per_wait', float('nan')),
        ach=ph['achieved_rate'], err=ph['errors_total'],
        rq=s.get('runqueue_wait_seconds', 0))
order = ['epoll'] + [b for b in ['uring-before', 'uring'] if b in order] + \
    [b for b in order if b not in ('epoll', 'uring-before', 'uring')]


def ratio(v, b, key, r):
    return v[b][r][key] / v['epoll'][r][key]


print('| offered/s | backend | answered/s | µs/request | **CPU / epoll** (per round) '
      '| turns/request | **turns / epoll** | syscalls/request | events/turn | failed | run queue s |')
print('| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |')
for rate in sorted(rows):
    v = rows[rate]
    for b in order:
        if b not in v:
            continue
        rs = v[b]
        common = [r for r in sorted(rs) if r in v.get('epoll', {})]
        cpu_ratios = [ratio(v, b, 'cpu', r) for r in common]
        turn_ratios = [ratio(v, b, 'waits', r) for r in common]
        med = lambda key: st.median([x[key] for x in rs.values()])
        print('| ' + ' | '.join([
            f"{rate:,.0f}", b, f"{med('ach'):,.0f}", f"{med('cpu'):.1f}",
            (f"**{st.median(cpu_ratios):.2f}** (" + ' / '.join('%.2f' % x for x in cpu_ratios) + ')')
            if b != 'epoll' else '1',
            f"{med('waits'):.2f}",
            f"**{st.median(turn_ratios):.2f}**" if b != 'epoll' else '1',
            f"{med('sys'):.2f}", f"{med('epw'):.2f}",
            str(sum(x['err'] for x in rs.values())), f"{med('rq'):.1f}"]) + ' |')
