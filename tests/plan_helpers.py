"""A synthetic certificate with round numbers, so plans can be checked by hand.

One NVIDIA P100 (16 GiB), tinylm fp32 at seq 256 (0.5 s warm, step 0 5 s, 8 GiB allocated,
9 GiB reserved) and seq 512 (1.0 s, step 0 10 s, 10 GiB allocated, 12 GiB reserved: the
worst ratio, 1.2), and seq 1024 out of memory (excluded). 25 M parameters, batch 8.
"""

from __future__ import annotations

from datetime import datetime, timezone

from afford.fit.time.throughput import fit_throughput
from afford.schema.cert import Certificate, Environment, Protocol, WorkloadResult
from afford.schema.laws import Excluded
from afford.schema.platform import Platform
from afford.schema.point import Point
from afford.schema.run import RunFile

GIB = 2**30
STARTED = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def point(seq, seconds, step0, alloc, reserved, resident=True, excluded=None) -> Point:
    return Point(value=seq, shape={"batch": 8, "seq": seq, "d": 512, "L": 8, "H": 8},
                 params=25_000_000, tokens_per_step=8 * seq, children=[],
                 median_seconds=seconds, child_medians=[seconds] * 3 if seconds else [],
                 step0_seconds=step0, step0_over_warm=step0 / seconds if seconds else None,
                 peak_allocated_bytes=alloc, peak_reserved_bytes=reserved,
                 resident=resident, excluded_reason=excluded)


def make_cert(*, alloc_512: int = 10 * GIB, reserved_512: int = 12 * GIB,
              device: str = "Tesla P100-PCIE-16GB", memory: int = 16 * GIB,
              torch: str = "2.11.0", started: datetime = STARTED,
              step_512: float = 1.0) -> Certificate:
    """``step_512`` (warm seconds at seq 512; seq 256 takes half) lets a plan run at a step
    other than 1 s, where n x t and n / t differ."""
    pts = [point(256, step_512 / 2, 5.0, 8 * GIB, 9 * GIB),
           point(512, step_512, 10.0, alloc_512, reserved_512),
           point(1024, None, None, None, None, resident=False,
                 excluded="not resident: ran out of memory in child 0: CUDA out of memory")]
    law = fit_throughput("seq", [256, 512], [step_512 / 2, step_512],
                         [Excluded(value=1024, reason="not resident")])
    env = Environment(device_type="cuda", device_name=device, device_class="small-gpu",
                      device_memory_bytes=memory, os="Linux", python_version="3.11",
                      torch_version=torch, torch_num_threads=4,
                      float32_matmul_precision="highest", afford_version="0.1.0",
                      command="afford certify", started_at=started)
    proto = Protocol(precision="quick", children=3, warmup_steps=2, warmup_seconds=0.1,
                     min_timed_steps=12, floor_seconds=0.1, max_floor_seconds=0.1,
                     target_rel_precision=0.01, clock="cuda-events")
    wl = WorkloadResult(name="tinylm", source="builtin", mode="fp32", sweep_param="seq",
                        points=pts, law=law)
    return Certificate(environment=env, protocol=proto, workloads=[wl])


def make_platform(**over) -> Platform:
    """12 h cap, 1 h margin, 30 h a week, 20 GB disk; install 170 s + attach 118.5 s, so that
    with import 20 + preflight 10 (assumed), step 0 10 and the final save 1.5 s (assumed
    3e8 B / 200 MB/s) the startup is 330 s."""
    raw = {
        "name": "test-p100",
        "device": {"name": "P100", "memory": {"value": "16GiB", "cite": "datasheet"}},
        "session_cap": {"value": "12h", "cite": "docs"},
        "weekly_quota": {"value": "30h", "cite": "docs"},
        "disk": {"value": "20GB", "cite": "docs"},
        "startup": {"package_install": {"value": 170, "assumed": "guess"},
                    "data_attach": {"value": 118.5, "assumed": "guess"}},
    }
    raw.update(over)
    return Platform.model_validate(raw)


def make_run(**over) -> RunFile:
    raw = {"name": "r", "workload": "tinylm", "mode": "fp32", "value": 512,
           "target_tokens": "1B", "checkpoints_kept": 2}
    raw.update(over)
    return RunFile.model_validate({k: v for k, v in raw.items() if v is not None})
