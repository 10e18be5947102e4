import json,glob,os,sys,statistics
prefix=sys.argv[1]  # e.g. /tmp/uring503/c
rows={}
for d in sorted(glob.glob(prefix+'-*-r*')):
    v=d.split('-')[-2]; r=int(d.split('-r')[-1])
    for st in glob.glob(d+'/*.stats.json'):
        t=json.load(open(st))['total']
        samp=[l.split() for l in open(st.replace('.stats.json','.samples')) if l.strip()]
        def mx(i): 
            vals=[int(x[i]) for x in samp if len(x)>i and x[i] not in ('None',)]
            return max(vals) if vals else None
        rows.setdefault(v,[]).append((r,t['http'].get('connection_limit_reached'),t['http'].get('requests'),t['loop']['accept_pauses'],mx(3),mx(4),mx(1),t['loop'].get('accept_throttles')))
for v,rs in rows.items():
    rs.sort()
    print(v, 'runs',len(rs),'503s per run',[x[1] for x in rs],'total',sum(x[1] for x in rs),'requests',sum(x[2] for x in rs),
      'runs with 503',sum(1 for x in rs if x[1]>0),'max closing',max(x[4] or 0 for x in rs),'max backlog',max(x[5] or 0 for x in rs),'max fds',max(x[6] for x in rs),'pauses',[x[3] for x in rs],'throttles',[x[7] for x in rs])
