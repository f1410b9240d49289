"""Where a certify's wall time went, from its certificate: per stage, per sweep child (first
point's extra overhead, step 0), the startup runs, and per probe. Usage:
python3 benches/speed_report.py CERT.json"""

import json
import sys
from collections import defaultdict

d = json.load(open(sys.argv[1]))
env, proto = d["environment"], d["protocol"]
print(f"total {env['elapsed_seconds']:.1f} s; prewarmed children {proto.get('prewarmed_children')}"
      f"; warm-up {proto['warmup_steps']} steps / {proto['warmup_seconds']} s")
walls, first = defaultdict(float), {}
for w in d["workloads"]:
    for p in w["points"]:
        for c in p["children"]:
            walls[c["child"]] += c.get("wall_seconds") or 0
            other = (c.get("wall_seconds") or 0) - (c.get("step0_seconds") or 0) - \
                sum(c.get("warmup_seconds") or []) - sum(c.get("timed_seconds") or [])
            if c["order_position"] == 0:
                first[c["child"]] = (f"{w['name']} {p['value']}", c.get("step0_seconds"), other)
for c in sorted(walls):
    name, s0, other = first.get(c, ("?", None, None))
    print(f"sweep child {c}: points {walls[c]:.1f} s; first point {name}: step0 {s0:.3f} s, "
          f"other {other:.2f} s")
for key in ("probes", "memory"):
    if d.get(key):
        print(f"{key} stage {d[key]['wall_seconds']:.1f} s")
pr = d.get("probes") or {}
st = pr.get("startup") or {}
for r in st.get("runs", []):
    print(f"  startup {r['role'][:40]:40s} process {r['process_seconds']:.2f} torch "
          f"{r['import_torch_seconds']:.2f} tf {r.get('import_transformers_seconds')} cuda "
          f"{r.get('cuda_init_seconds')}")
for k, v in sorted((pr.get("probe_seconds") or {}).items(), key=lambda kv: -kv[1]):
    print(f"  probe {k:24s} {v:7.2f} s")
print("sweep (total - stages) ~", round(env["elapsed_seconds"] - sum(
    (d.get(k) or {}).get("wall_seconds", 0) for k in ("probes", "memory")), 1), "s (incl. gates)")
for w in pr.get("workloads") or []:
    lad = w.get("ladder") or {}
    for r in lad.get("rungs", []) if isinstance(lad, dict) else []:
        if r.get("wall_seconds") is not None:
            print(f"  ladder {w.get('name', '?'):10s} x{r['multiplier']}: build "
                  f"{r.get('build_seconds') or 0:.2f} s, "
                  f"step0 {r.get('step0_seconds') or 0:.3f} s, "
                  f"wall {r['wall_seconds']:.2f} s")
for law in (d.get("memory") or {}).get("laws", []):
    walls = [(s["role"], s.get("wall_seconds") or 0) for s in law["shapes"]]
    print(f"  memory {law['workload']} {law['mode']}: {sum(w for _, w in walls):.2f} s "
          f"(first shape {walls[0][0]} {walls[0][1]:.2f} s)")
