"""Per-request figures of one anatomy run (run.sh): the loop counters of /stats between the
two snapshots over the requests answered between them, and per thread the CPU time
(schedstat) and voluntary / involuntary context switches. Usage: python3 summarize.py OUT
(the OUT prefix given to run.sh)."""
import json,sys
p=sys.argv[1]
a=json.load(open(p+'.stats.a.json'))['total']; b=json.load(open(p+'.stats.b.json'))['total']
req=b['http']['requests']-a['http']['requests']
def snap(f):
    d={}
    for l in open(f):
        x=l.split()
        d[x[1]]=(int(x[2]),int(x[3]),int(x[4]))
    return d
sa=snap(p+'.snap.a'); sb=snap(p+'.snap.b')
out={'requests':req}
for k in b['loop']:
    if isinstance(b['loop'][k],(int,float)) and isinstance(a['loop'].get(k),(int,float)):
        d=b['loop'][k]-a['loop'][k]
        if d and k not in ('bytes_received','bytes_sent','open_connections'): out[k]=round(d/req,3)
cpu=sum(sb[t][0]-sa.get(t,(0,0,0))[0] for t in sb)
out['cpu_us_per_req_all_threads']=round(cpu/1e3/req,1)
for t in sb:
    if 'proxy' in t or 'iou' in t:
        out[t+'_cpu_us']=round((sb[t][0]-sa.get(t,(0,0,0))[0])/1e3/req,1)
        out[t+'_vcsw']=round((sb[t][1]-sa.get(t,(0,0,0))[1])/req,2)
        out[t+'_ivcsw']=round((sb[t][2]-sa.get(t,(0,0,0))[2])/req,2)
print(p, json.dumps(out))
