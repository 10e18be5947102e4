"""Markdown tables for slow-clients-2: per rate, median over rounds of each variant's CPU
per request, waits per request, open connections and errors, and the median of per-round
ratios to epoll (the run's raw JSON files)."""
import json, glob, sys, re, statistics as st, collections
root = sys.argv[1]
lat = len(sys.argv) > 2 and sys.argv[2] == 'latency'
rows = collections.defaultdict(dict)
for f in sorted(glob.glob(root + '/*/raw/*.json')):
    m = re.match(r'(.*)-([\d.]+)-r(\d+)$', f.split('/')[-1][:-5])
    b, rate, r = m.group(1), float(m.group(2)), int(m.group(3))
    ph = json.load(open(f))['runs'][0]['phases'][0]
    s = ph.get('server') or {}; c = ph.get('server_counters') or {}
    l = ph['latency']['raw']
    rows[rate].setdefault(b, {})[r] = dict(cpu=s['cpu_us_per_request'], waits=c['waits_per_request'],
        open=(c.get('open_connections') or [0])[0], err=ph['errors_total'], ach=ph['achieved_rate'],
        p50=l['p50_us'] / 1000, p99=l['p99_us'] / 1000, rq=s.get('runqueue_wait_seconds', 0))
order = ['epoll', 'uring', 'uring-mw250us', 'uring-mw1ms']
def med(xs): return st.median(xs) if xs else float('nan')
for rate in sorted(rows):
    v = rows[rate]
    for b in order:
        if b not in v: continue
        rs = v[b]
        ratios = [rs[r]['cpu'] / v['epoll'][r]['cpu'] for r in rs if r in v.get('epoll', {})]
        per = ' / '.join('%.2f' % x for x in ratios)
        cols = [f"{rate:,.0f}", b, f"{med([x['open'] for x in rs.values()]):,.0f}",
                f"{med([x['ach'] for x in rs.values()]):,.0f}",
                f"{med([x['cpu'] for x in rs.values()]):.1f}",
                f"**{med(ratios):.2f}** ({per})" if b != 'epoll' else '1',
                f"{med([x['waits'] for x in rs.values()]):.2f}"]
        if lat:
            cols += [f"{med([x['p50'] for x in rs.values()]):.2f}", f"{med([x['p99'] for x in rs.values()]):.1f}"]
        cols += [str(sum(x['err'] for x in rs.values())), f"{med([x['rq'] for x in rs.values()]):.1f}"]
        print('| ' + ' | '.join(cols) + ' |')
