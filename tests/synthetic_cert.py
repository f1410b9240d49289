"""Certificates built by hand for the pure ladder and levers tests (no measurement)."""

from __future__ import annotations

from datetime import datetime, timezone

from afford.fit.time.throughput import fit_throughput
from afford.schema.cert import Certificate, Environment, Protocol
from afford.schema.point import ChildPoint, Point
from afford.schema.sizes_section import SizePoint, SizesSection

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)


def environment(**over) -> Environment:
    fields = dict(device_type="cuda", device_name="NVIDIA H200", device_class="large-gpu",
                  device_memory_bytes=100 * 2**30, os="Linux", python_version="3.11.7",
                  torch_version="2.11.0", torch_num_threads=16,
                  float32_matmul_precision="highest", tf32_matmul=False,
                  afford_version="0.1.0", command="afford certify --sizes", started_at=T0)
    fields.update(over)
    return Environment(**fields)


def protocol() -> Protocol:
    return Protocol(precision="adaptive", children=3, warmup_steps=3, warmup_seconds=0.3,
                    min_timed_steps=12, floor_seconds=0.5, max_floor_seconds=3.0,
                    target_rel_precision=0.01, clock="fake")


def point(seconds: float | None, value: int = 1024, children: list[ChildPoint] | None = None,
          resident: bool | None = True, excluded: str | None = None,
          tokens: int | None = 8192) -> Point:
    return Point(value=value, shape={}, children=children or [], median_seconds=seconds,
                 child_medians=[seconds] * 3 if seconds else [], resident=resident,
                 excluded_reason=excluded, tokens_per_step=tokens)


def sizes_section(params: list[int], seconds: list[float], mode: str = "bf16",
                  batch: int = 8, seq: int = 1024) -> SizesSection:
    sizes = [SizePoint(spec=f"tinylm@size{i}", d=64, L=1, H=1, params=n, point=point(t))
             for i, (n, t) in enumerate(zip(params, seconds))]
    law = fit_throughput("params", [float(n) for n in params], seconds)
    return SizesSection(mode=mode, batch=batch, seq=seq, tokens_per_step=batch * seq,
                        sizes=sizes, law=law)


def linear_sizes(mode: str = "bf16") -> SizesSection:
    """t = 1e-9 s x N exactly at N = 1M, 10M, 100M (a power law with b = 1)."""
    return sizes_section([10**6, 10**7, 10**8], [1e-3, 1e-2, 1e-1], mode=mode)


def certificate(sizes: SizesSection | None = None, **env) -> Certificate:
    return Certificate(environment=environment(**env), protocol=protocol(), workloads=[],
                       sizes=sizes)
