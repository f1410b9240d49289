"""Device run of the memory stage (issue 3): certify tinylm in fp32 and bf16 on CUDA, keep the
certificate, and answer a few sizing questions from it, with the library only (no typer or
rich needed on the device box).

    python lab/scripts/device_memory.py OUT_DIR

Writes OUT_DIR/cert-memory.json and OUT_DIR/size-answers.json; prints the elapsed times.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from afford.certify import certify
from afford.certify.request import CertifyRequest
from afford.figures import memory_figures as sizing
from afford.schema.cert import save_certificate


def answers(cert) -> list[dict]:
    run = sizing.run_label(cert)
    out = []
    for law in cert.memory.laws:
        for seq in (1024, 4096, 16384):
            r = sizing.size(cert, law.workload, seq, None, law.mode, 0.90, run)
            p = r.prediction
            out.append({
                "mode": law.mode, "seq": seq, "max_batch": r.max_batch.model_dump(mode="json"),
                "at_max_batch": {"allocated": p.allocated.model_dump(mode="json"),
                                 "reserved": p.reserved.model_dump(mode="json")
                                 if p.reserved else None},
                "comparisons": {c.key: {"peak": c.peak.model_dump(mode="json"),
                                        "max_batch": c.max_batch.model_dump(mode="json")
                                        if c.max_batch else None} for c in r.comparisons}})
    return out


def main(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    req = CertifyRequest(workloads=["tinylm"], sweeps={"seq": [256, 512, 1024]},
                         modes=["fp32", "bf16"], precision="quick", device="cuda",
                         command="lab/scripts/device_memory.py")
    cert = certify(req, on_event=lambda e: print(e.get("event"), e.get("key", ""),
                                                  file=sys.stderr, flush=True))
    path = save_certificate(cert, out / "cert-memory.json", overwrite=True)
    print(f"certificate {path}: certify {time.perf_counter() - t0:.1f} s, memory stage "
          f"{cert.memory.wall_seconds:.1f} s")
    (out / "size-answers.json").write_text(json.dumps(answers(cert), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "out"))
