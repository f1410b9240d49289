"""A synthetic certificate built in code from fixed numbers (no timing, no fitting), for the
golden report, the ledger and compare tests: every figure below is exact and stable.

Two workloads on a made-up 80 GiB CUDA card:

- ``softmax`` (fp32), s = 256..2048: t = exp(a) s^b with a = ln(2e-7), b = 1.5, points off
  the law by the residuals below;
- ``tinylm`` (bf16), seq = 128..1024: t = F + c seq^b with F = 0.004, c = 2e-6, b = 1.2;
  seq = 2048 ran out of memory and is excluded, with its reason.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from afford.schema.cert import Certificate, Environment, Protocol, WorkloadResult
from afford.schema.laws import Excluded, LawFit, ThroughputLaw
from afford.schema.point import ChildPoint, Point

GIB = 2**30
PATTERN = (-0.02, -0.01, -0.005, -0.002, -0.001, 0.0, 0.0, 0.001, 0.002, 0.005, 0.01, 0.02)
CHILD_OFFSETS = (-0.004, 0.0, 0.004)


def environment(device: str = "Synthetic GPU 80GB", memory: int = 80 * GIB,
                started: datetime = datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc)
                ) -> Environment:
    return Environment(
        device_type="cuda", device_name=device, device_class="large-gpu", device_index=0,
        compute_capability="9.0", device_memory_bytes=memory, multiprocessors=132,
        driver_version="580.00", os="Linux-6.8-x86_64", python_version="3.11.7",
        torch_version="2.11.0+cu130", cuda_version="13.0", cudnn_version="91000",
        torch_num_threads=16, tf32_matmul=False, tf32_cudnn=True,
        float32_matmul_precision="highest", git_head="0123456789abcdef0123456789abcdef01234567",
        git_dirty=False, afford_version="0.1.0", command="afford certify --out synthetic.json",
        started_at=started, ended_at=started.replace(minute=1, second=30),
        elapsed_seconds=90.0)


def protocol() -> Protocol:
    return Protocol(precision="adaptive", children=3, warmup_steps=3, warmup_seconds=0.3,
                    min_timed_steps=12, floor_seconds=0.5, max_floor_seconds=3.0,
                    target_rel_precision=0.01, clock="cuda-events")


def child(k: int, m: float, step0: float, alloc: int | None, reserved: int | None) -> ChildPoint:
    med = m * (1.0 + CHILD_OFFSETS[k])
    return ChildPoint(child=k, order_position=k, step0_seconds=step0,
                      warmup_seconds=[med * 1.5, med * 1.1, med],
                      timed_seconds=[med * (1.0 + d) for d in PATTERN],
                      timed_step_indices=list(range(4, 4 + len(PATTERN))), median_seconds=med,
                      precision=0.004, reached_target=True, stopped="target",
                      peak_allocated_bytes=alloc, peak_reserved_bytes=reserved,
                      memory_source="torch.cuda.max_memory_*")


def point(value: int, shape: dict, m: float, alloc: int, reserved: int,
          params: int | None = None, tokens: int | None = None) -> Point:
    step0 = 25.0 * m
    kids = [child(k, m, step0, alloc, reserved) for k in range(3)]
    meds = [c.median_seconds for c in kids]
    return Point(value=value, shape=shape, params=params, tokens_per_step=tokens,
                 children=kids, median_seconds=m, child_medians=meds,
                 child_spread=(max(meds) - min(meds)) / m, worst_precision=0.004,
                 step0_seconds=step0, step0_over_warm=25.0, peak_allocated_bytes=alloc,
                 peak_reserved_bytes=reserved, memory_source="torch.cuda.max_memory_*",
                 resident=True)


def oom_point(value: int, shape: dict) -> Point:
    kids = [ChildPoint(child=k, order_position=k, oom=True,
                       error="CUDA out of memory. Tried to allocate 96.00 GiB")
            for k in range(3)]
    return Point(value=value, shape=shape, children=kids, resident=False,
                 excluded_reason="not resident: ran out of memory in child 0: CUDA out of "
                 "memory. Tried to allocate 96.00 GiB")


def softmax(scale: float = 1.0, residuals=(0.01, -0.01, 0.005, -0.005)) -> WorkloadResult:
    a, b = math.log(2e-7 * scale), 1.5
    xs = [256, 512, 1024, 2048]
    law_t = [math.exp(a) * x**b for x in xs]
    meas = [t / (1.0 + r) for t, r in zip(law_t, residuals)]
    pts = [point(x, {"b": 8, "h": 8, "s": x, "d": 64}, m, alloc=x * x * 2048,
                 reserved=x * x * 2560) for x, m in zip(xs, meas)]
    power = LawFit(form="power", params={"a": a, "b": b}, r2=0.99987,
                   residuals=list(residuals), loo_rel_errors=[0.021, -0.015, 0.008, -0.012])
    law = ThroughputLaw(x_name="s", x=[float(x) for x in xs], seconds=meas, x_min=256.0,
                        x_max=2048.0, power=power, chosen="power")
    return WorkloadResult(name="softmax", source="builtin",
                          description="causal softmax attention", mode="fp32",
                          sweep_param="s", points=pts, law=law)


def tinylm(scale: float = 1.0) -> WorkloadResult:
    F, c, b = 0.004 * scale, 2e-6 * scale, 1.2
    xs = [128, 256, 512, 1024]
    residuals = [0.003, -0.004, 0.002, -0.001]
    meas = [(F + c * x**b) / (1.0 + r) for x, r in zip(xs, residuals)]
    shape = {"batch": 8, "d": 256, "layers": 4, "heads": 4}
    pts = [point(x, {**shape, "seq": x}, m, alloc=(3 + x // 64) * GIB,
                 reserved=(4 + x // 64) * GIB, params=3_300_000, tokens=8 * x)
           for x, m in zip(xs, meas)]
    pts.append(oom_point(2048, {**shape, "seq": 2048}))
    floor = LawFit(form="floor_power", params={"F": F, "c": c, "b": b}, r2=0.99991,
                   residuals=residuals, loo_rel_errors=[0.006, -0.009, 0.004, -0.003])
    power = LawFit(form="power", params={"a": math.log(4.9e-4 * scale), "b": 0.46}, r2=0.98,
                   residuals=[0.05, -0.04, -0.03, 0.04], loo_rel_errors=[0.09, -0.05, -0.04, 0.07])
    law = ThroughputLaw(x_name="seq", x=[float(x) for x in xs], seconds=meas, x_min=128.0,
                        x_max=1024.0, power=power, floor_power=floor, chosen="floor_power",
                        excluded=[Excluded(value=2048.0, reason=pts[-1].excluded_reason)])
    return WorkloadResult(name="tinylm", source="builtin",
                          description="byte-level decoder-only transformer", mode="bf16",
                          sweep_param="seq", points=pts, law=law,
                          warnings=["seq=2048: excluded (out of memory)"])


def make_cert(device: str = "Synthetic GPU 80GB", scale: float = 1.0, **env) -> Certificate:
    """The synthetic certificate; ``scale`` multiplies every step time (a faster or slower
    box with the same exponents)."""
    return Certificate(environment=environment(device, **env), protocol=protocol(),
                       workloads=[softmax(scale), tinylm(scale)],
                       warnings=["tinylm (bf16): seq=2048: excluded (out of memory)"])


def ledger_rows():
    """The synthetic certificate's readings, one of them struck and superseded."""
    from afford.figures import cert_readings
    from afford.schema import ledger

    rows = cert_readings.certificate_readings(make_cert(),
                                              "afford certify --out synthetic.json")[:4]
    redo = ledger.new_reading(date=datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc),
                              device="Synthetic GPU 80GB", torch="2.11.0+cu130", commit="fed",
                              command="afford certify --full", quantity=rows[0].quantity,
                              value=0.000805, unit="s", step_indices="c0:4-40;c1:4-38;c2:4-41")
    struck = rows[0].model_copy(update={"status": "withdrawn", "reason": "re-measured under "
                                        "the --full protocol", "superseded_by": redo.id})
    other = ledger.new_reading(date=datetime(2026, 12, 1, tzinfo=timezone.utc),
                               device="Another box", command="afford certify",
                               quantity="x/peak_reserved_bytes", value=1, unit="B")
    return (struck, *rows[1:], redo, other)


def manifest():
    from afford.schema.manifest import Manifest, Source

    at = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)
    return Manifest(sources=[
        Source(name="enwik8", kind="file", status="PINNED", path="data/enwik8",
               sha256="2b49720ec4d78c3c9fabaee6e4179a5e997302b3a70029f30f2d582218c024a8",
               size_bytes=100_000_000, pinned_at=at),
        Source(name="held-out", kind="file", status="UNPINNED", path="data/held.bin",
               reason="not present: no such file or folder", pinned_at=at)])


def plan_doc():
    """A plan as ``afford plan --json`` might write it: tagged figures (as JSON), one bare
    number (not shown), a NOT EXECUTABLE figure, a ladder, and an unpinned data source."""
    def t(value, unit, tag, source):
        return {"value": value, "unit": unit, "tag": tag, "source": source,
                "extrapolated": False, "provisional": False}

    return {
        "schema": "afford.plan/1",
        "platform": {"name": "kaggle-p100", "device": "Tesla P100-PCIE-16GB",
                     "session_cap": t(43200.0, "s", "INHERITED", "Kaggle docs")},
        "run": {"data_sources": ["enwik8", "held-out"], "tokens_per_step": 8192},
        "chunk": {"chunk": t(39600.0, "s", "MODULE", "cap - margin"),
                  "import_torch": {"what": "import torch", "reason": "no CUDA here",
                                   "status": "NOT EXECUTABLE"}},
        "ladder": [
            {"params": t(7.5e6, "params", "ASSUMED", "ladder size"),
             "wall_law": t(3600.0, "s", "FITTED", "law over sizes"),
             "wall_roofline": t(900.0, "s", "MODULE", "6ND / measured GEMM rate")},
            {"params": t(1.24e8, "params", "ASSUMED", "ladder size"),
             "wall_law": t(86400.0, "s", "FITTED", "law over sizes"),
             "wall_roofline": t(20000.0, "s", "MODULE", "6ND / measured GEMM rate")}],
    }


def report_inputs():
    from afford.report.build import Inputs

    return Inputs(certs=(("synthetic.json", make_cert()),),
                  plans=(("plan-kaggle.json", plan_doc()),),
                  manifest=("afford.manifest.json", manifest()),
                  history=("history.tsv", ledger_rows()),
                  expect=("Tesla T4",))
