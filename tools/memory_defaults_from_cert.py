"""Print the ``src/afford/data/memory_defaults.toml`` block from a certificate's memory laws.

    python tools/memory_defaults_from_cert.py CERT [--workload tinylm] [--stored]

The lead runs it on the certificate that ``lab/scripts/device_memory.sh`` wrote on the H200 and
pastes the output into the data file: the INHERITED defaults then carry that run's device,
date, commit and torch version. The laws are refitted from the certificate's raw readings by
this afford (:func:`afford.certification.stage_memory.refit_section`; ``--stored``: as stored), so a
certificate made by an older fit gives the current law's constants.
"""

from __future__ import annotations

import argparse
import sys

from afford.certification.stage_memory import refit_section
from afford.schema.cert import load_certificate


def block(cert, workload: str, refit: bool = True) -> str:
    env = cert.environment
    mem = cert.memory
    if mem is not None and refit:
        mem = refit_section(mem)
    laws = [law for law in (mem.laws if mem else []) if law.workload == workload]
    if not laws:
        raise SystemExit(f"{workload}: no memory law in this certificate")
    b = laws[0].base_dims
    date = f"{env.started_at:%Y-%m-%d}"
    commit = (env.git_head or "unknown")[:12] + (" (dirty)" if env.git_dirty else "")
    lines = [
        "[source]",
        f'citation = "afford certify memory stage ({workload}), {env.device_name}, {date}"',
        f'device = "{env.device_name}"',
        f'date = "{date}"',
        f'commit = "{commit}"',
        f'torch = "{env.torch_version} (CUDA {env.cuda_version})"',
        f'workload = "{workload} (d{b["d"]}, L{b["L"]}, H{b["H"]}; fitted at B x s = '
        f'{b["B"]} x {b["s"]} +- sweeps)"',
    ]
    for law in laws:
        f = law.allocated
        held = max((abs(h.error) for h in law.heldout), default=float("nan"))
        held_r = max((abs(h.reserved_error) for h in law.heldout
                      if h.reserved_error is not None), default=float("nan"))
        lines += [
            "",
            f"[modes.{law.mode}]",
            f"# {f.describe()}",
            f"# held-out max |error|: allocated {held:.2%}, reserved {held_r:.2%}",
            f"bytes_per_param = {law.bytes_per_param:.4f}",
            f"c_res = {f.c_res:.4f}",
            f"c_op = {f.c_op:.4f}",
            f"fixed_bytes = {f.fixed_bytes:.0f}",
        ]
        if law.worst_reserved_ratio is not None:
            lines.append(f"worst_reserved_ratio = {law.worst_reserved_ratio:.4f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cert")
    ap.add_argument("--workload", default="tinylm")
    ap.add_argument("--stored", action="store_true",
                    help="the certificate's own fit, not a refit of its raw readings")
    args = ap.parse_args(argv)
    sys.stdout.write(block(load_certificate(args.cert), args.workload, not args.stored))
    return 0


if __name__ == "__main__":
    sys.exit(main())
