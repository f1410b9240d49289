"""The size law checked offline on recorded H100 truths (no device needed).

lab/device-runs/2026-12-06-h100-truths/ladder-truth.jsonl holds tinylm at five sizes (304M to
1.89B, 8 x 1024, bf16), each timed in a fresh process with its device busy time and kernels
profiled. Here the size law (afford.fit.time.size_law) is fitted on the three smallest as if
a certificate had measured them, within the H100's measured ceilings (the GEMM rate and copy
bandwidth of cert-neox.json, same machine, same call), and predicts the two largest (1.5x and
2.3x beyond): the extrapolation the ladder makes, checked against steps it never saw.
FLOPs per size are the ladder's own count (6 N per token, 12 L d s attention), state bytes
16 per parameter.

    python3 lab/scripts/ladder_offline_check.py
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from afford.fit.time.size_law import SizeObs, fit_size_law
from afford.schema.cert import load_certificate
from afford.schema.sizes_section import SizeWork

RUN = Path(__file__).parents[1] / "device-runs" / "2026-12-06-h100-truths"
B, S = 8, 1024


def observation(t: dict) -> SizeObs:
    d, L = (int(g) for g in re.search(r"d(\d+)L(\d+)", t["spec"]).groups())
    n = float(t["params"])
    work = SizeWork(d=d, L=L, params=n, gemm_flops=6.0 * B * S * n,
                    attn_flops=12.0 * B * S * S * d * L, state_bytes=16.0 * n,
                    kernels=t["kernels"])
    return SizeObs(label=t["spec"], work=work, seconds=t["step_seconds"],
                   busy_seconds=t["busy_seconds"],
                   gap_seconds=statistics.median(x["queued_gap_seconds"] for x in t["sides"]))


def main() -> None:
    truths = [json.loads(x) for x in (RUN / "ladder-truth.jsonl").read_text().splitlines()]
    obs = [observation(t) for t in truths if t["spec"].startswith("tinylm@")]
    cert = load_certificate(RUN / "cert-neox.json")
    law = fit_size_law(obs[:3], batch=B, seq=S,
                       gemm_rate=cert.probes.gemm["bf16"].flops_per_second,
                       bandwidth=cert.probes.device_copy.bytes_per_second, bytes_per_param=16.0)
    print(law.describe())
    top = max(o.work.params for o in obs[:3])
    for o in obs:
        got = law.predict(o.work.model_copy(update={"kernels": None}))
        print(f"{o.label:22s} {o.work.params / 1e6:6.0f}M x{o.work.params / top:4.2f} "
              f"truth {o.seconds * 1e3:6.1f} ms  law {got.seconds * 1e3:6.1f} ms  "
              f"{got.seconds / o.seconds - 1:+.1%}")


if __name__ == "__main__":
    main()
