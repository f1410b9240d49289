"""Certificates built by hand for the pure ladder and levers tests (no measurement)."""

from __future__ import annotations

from datetime import datetime, timezone

from afford.fit.time.size_law import fit_sizes_section
from afford.schema.cert import Certificate, Environment, Protocol
from afford.schema.point import ChildPoint, Point, StepFlops
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


SHAPES = ((256, 4), (512, 8), (1024, 16))  # (d, L): 12 L d^2 parameters each, exactly


def size_params(d: int, L: int) -> int:
    """The synthetic family's parameters: 12 L d^2 (no embeddings, no biases)."""
    return 12 * L * d * d


def sizes_section(shapes, seconds: list[float], mode: str = "bf16", batch: int = 8,
                  seq: int = 1024, counted: bool = True) -> SizesSection:
    """Sizes of a synthetic family at ``shapes`` stepping ``seconds`` (wall times only), with
    their FLOPs counted as 6 N per token and 12 L d s (or not counted), and the size law
    fitted over them without ceilings, as the sizes stage stores it."""
    sizes = []
    for (d, L), t in zip(shapes, seconds):
        n = size_params(d, L)
        p = point(t, tokens=batch * seq)
        if counted:
            p = p.model_copy(update={"flops": StepFlops(
                gemm=6.0 * batch * seq * n, attn=12.0 * batch * seq * seq * d * L)})
        sizes.append(SizePoint(spec=f"tinylm@d{d}L{L}", d=d, L=L, H=max(1, d // 64), params=n,
                               point=p))
    law, scaling, notes = fit_sizes_section("tinylm", sizes, batch=batch, seq=seq,
                                            gemm_rate=None, bandwidth=None,
                                            bytes_per_param=16.0)
    return SizesSection(mode=mode, batch=batch, seq=seq, tokens_per_step=batch * seq,
                        sizes=sizes, size_law=law, scaling=scaling, warnings=notes)


def linear_sizes(mode: str = "bf16") -> SizesSection:
    """t = 1e-9 s x N exactly at d256 L4, d512 L8, d1024 L16 (3.1M, 25M, 201M parameters):
    the step costs 1e-9 / 49152 s per GEMM FLOP (6 N FLOPs per token, 8192 tokens)."""
    return sizes_section(SHAPES, [1e-9 * size_params(d, L) for d, L in SHAPES], mode=mode)


def certificate(sizes: SizesSection | None = None, **env) -> Certificate:
    return Certificate(environment=environment(**env), protocol=protocol(), workloads=[],
                       sizes=sizes)
