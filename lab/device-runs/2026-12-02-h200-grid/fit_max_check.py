import json, collections, numpy as np
from scipy.optimize import least_squares
rows=[json.loads(l) for l in open('benches/device-runs/2026-12-02-h200-grid/grid.jsonl')]
D=collections.defaultdict(dict)
for r in rows:
    if 'async_median' in r: D[(r['workload'],r['B'],r['s'])][r['repeat']]=r
def feats(B,s): return np.array([1.0, B*s, B*s*s])
def fit(pts):
    X=np.array([feats(B,s) for B,s,_ in pts]); y=np.array([t for *_,t in pts])
    best=None
    for F0 in np.linspace(y.min()*0.5, y.min()*1.2, 8):
        def res(p):
            F=p[0]; w=p[1:]
            return (np.maximum(F, X@w)-y)/y
        p0=np.r_[F0, 0.0, y.max()/X[:,1].max(), 0.0]
        r=least_squares(res, p0, bounds=(0, np.inf))
        if best is None or r.cost<best.cost: best=r
    return best.x
def pred(p,B,s): return max(p[0], feats(B,s)@p[1:])
designs={'tinylm':[(8,1024),(8,2048),(8,4096),(8,8192),(2,2048),(32,1024),(16,2048)],
         'gpt2':[(4,256),(4,512),(4,1024),(4,2048),(1,1024),(16,512),(8,1024)],
         'softmax':[(16,1024),(16,2048),(16,4096),(16,8192),(4,4096),(64,2048)],
         'scan':[(8,256),(8,512),(8,1024),(8,2048),(2,1024),(32,512)]}
for w,des in designs.items():
    pts=[(B,s,np.median([d['async_median'] for d in D[(w,B,s)].values()])) for B,s in des]
    p=fit(pts)
    print(w, 'F=%.2fms w0=%.2fms'%(p[0]*1e3,p[1]*1e3))
    errs=[]
    for (ww,B,s),d in sorted(D.items()):
        if ww!=w: continue
        m=np.median([x['async_median'] for x in d.values()]); pr=pred(p,B,s)
        tag='fit' if (B,s) in des else 'HELD'
        e=pr/m-1
        if tag=='HELD': errs.append(abs(e))
        print(f'  {tag} {B:3d}x{s:5d} meas {m*1e3:7.2f} pred {pr*1e3:7.2f} err {e:+.1%}')
    print('  held-out median %.1f%% worst %.1f%%'%(np.median(errs)*100, max(errs)*100))
