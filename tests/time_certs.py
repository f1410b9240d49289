"""A step-time section with round numbers, on the synthetic P100 certificate of
:mod:`tests.plan_helpers`, so plans at other shapes can be checked by hand.

The model: t = max(0.01 s, B*s / 4096 x 0.5 s) for tinylm fp32 (d 512, L 8, H 8), that is
0.5 s at 8 x 256 and 1.0 s at 8 x 512 as the sweep measured, 2.0 s at 16 x 512. Fitted at
batch 4..16, seq 256..512 (tokens 2048..4096); one held-out shape, 2 x 1024 (tokens 2048),
measured 0.52 s, predicted 0.5 s (-3.85 %). So the measured range is batch 2..16,
seq 256..1024, tokens 2048..4096. A design point at 16 x 256 was measured at 1.0 s.

The two real H200 certificates with a time section are in tests/data, gzipped (from an
H200 run of 2026-12-02; tests/data/README.md).
"""

from __future__ import annotations

import json
from collections import defaultdict

from afford.schema.cert import Certificate, load_certificate
from afford.schema.point import Point
from afford.schema.time_features import FeatureLaw, FeatureScaling
from afford.schema.time_law import (
    CandidateFit,
    DeviceLaw,
    HostSide,
    KernelCount,
    ModelPoint,
    SidesModel,
    StepTimeModel,
    TimeVerdict,
)
from afford.schema.time_section import CertTimeVerdict, Regime, WorkloadTime
from tests.paths import data_file
from tests.plan_helpers import GIB, make_cert

H200_DEFAULT = data_file("h200_time_default_2026-12-02.json")
H200_HF = data_file("h200_time_hf_2026-12-02.json")
PER_TOKEN = 0.5 / 2048
FLOOR = 0.01
RULE = "children may disagree by 5 %; a held-out shape may miss by 5 %"


def seconds(batch: int, seq: int) -> float:
    return max(FLOOR, batch * seq * PER_TOKEN)


def model_point(batch, seq, measured, *, label=None) -> ModelPoint:
    pred = seconds(batch, seq)
    return ModelPoint(batch=batch, seq=seq, tokens=batch * seq, measured_seconds=measured,
                      predicted_seconds=pred, rel_error=pred / measured - 1,
                      label=label or f"{batch} x {seq}")


def time_model(*, warnings: list[str] | None = None) -> StepTimeModel:
    fitted = [model_point(8, 256, 0.5), model_point(8, 512, 1.0), model_point(16, 256, 1.0),
              model_point(4, 512, 0.5)]
    laws = {"tokens": FeatureLaw(feature="tokens", terms=["B*s"], coefs=[1.0], n_counted=4,
                                 max_rel_error=0.0, varied=["batch", "seq"])}
    params = {"F": FLOOR, "w0": 0.0, "w_tokens": PER_TOKEN}
    cand = CandidateFit(form="max", params=params, n_params=2, r2_log=1.0,
                        residuals=[0.0] * 4, loo_rel_errors=[0.01, -0.02, 0.0, 0.01])
    return StepTimeModel(
        axes="batch_seq", form="max", params=params,
        reason="max: LOO worst 2.0% vs sum 9.0%",
        scaling=FeatureScaling(axes="batch_seq", laws=laws), candidates=[cand],
        points=fitted, held_out=[model_point(2, 1024, 0.52)], floor_left=True,
        floor_note="the step grew 2x per doubling of tokens", warnings=warnings or [])


def verdict(label: str = "OK", reasons: list[str] | None = None) -> TimeVerdict:
    return TimeVerdict(label=label, reasons=reasons or [], noisy_points=[], failed_held_out=[],
                       child_tolerance=0.05, held_out_tolerance=0.05, floor_tolerance=0.5,
                       remeasured=label == "NOISY")


def design_point(batch: int, seq: int, secs: float, role: str = "across") -> Point:
    return Point(value=seq, shape={"batch": batch, "seq": seq, "d": 512, "L": 8, "H": 8},
                 batch=batch, seq=seq, role=role, params=25_000_000,
                 tokens_per_step=batch * seq, children=[], median_seconds=secs,
                 child_medians=[secs] * 3, step0_seconds=10 * secs,
                 peak_allocated_bytes=11 * GIB, peak_reserved_bytes=12 * GIB, resident=True)


def make_time_cert(*, workload_verdict: str = "OK", cert_verdict: str | None = "OK",
                   reasons: list[str] | None = None, model: bool = True,
                   warnings: list[str] | None = None, **over) -> Certificate:
    """The synthetic certificate with a time section for tinylm fp32."""
    cert = make_cert(**over)
    r = cert.workloads[0]
    t = WorkloadTime(axes="batch_seq", batch_key="batch", seq_key="seq", base_batch=8,
                     features="the shape only (tokens = B*s)",
                     model=time_model() if model else None,
                     not_fitted=None if model else "fewer than 3 resident shapes",
                     floor_seconds=0.5, regimes=[Regime(label="2 x 1024", role="held_out_seq",
                                                        seconds=0.52, work=True)],
                     verdict=verdict(workload_verdict, reasons))
    r = r.model_copy(update={"time": t, "design_points": [design_point(16, 256, 1.0)],
                             "warnings": list(warnings or [])})
    cv = None if cert_verdict is None else CertTimeVerdict(
        label=cert_verdict, reasons=[f"tinylm (fp32): {x}" for x in (reasons or [])]
        if cert_verdict == "NOISY" else [], child_tolerance=0.05, held_out_tolerance=0.05,
        floor_tolerance=0.5, rule=RULE)
    return cert.model_copy(update={"workloads": [r], "time_verdict": cv,
                                   "warnings": [f"tinylm (fp32): {w}" for w in warnings or []]})


def h200(which: str = "default") -> Certificate:
    return load_certificate(H200_DEFAULT if which == "default" else H200_HF)


# A two-sided model on the same certificate: 1000 kernels a step, each issued in 0.5 ms by
# the median process, 0.4 ms by the fastest child and 0.7 ms by the slowest (the host band
# 0.4-0.7 s); the device busy PER_TOKEN a token (0.5 s at 8 x 256, 1.0 s at 8 x 512), no gap,
# its law's worst leave-one-out error 10 %. So 2 x 256 (device 0.125 s) is host-bound: 0.5 s
# in the band 0.4-0.7 s; 8 x 256 (device 0.5 s, within 10 %: 0.45-0.55 s) is 0.5 s in the band
# 0.45-0.7 s; 8 x 512 (device 1.0 s, 0.9 s at its low end, above 0.7 s) is a point, 1.0 s.
KERNELS, ISSUE, ISSUE_RANGE, DEVICE_LOO = 1000.0, 0.5e-3, (0.4e-3, 0.7e-3), 0.10


def sides_model() -> SidesModel:
    params = {"F": 0.0, "w_tokens": PER_TOKEN}
    cand = CandidateFit(form="sum", params=params, n_params=2, r2_log=1.0,
                        residuals=[0.0] * 4, loo_rel_errors=[DEVICE_LOO, -0.02, 0.0, 0.01])
    return SidesModel(
        device=DeviceLaw(form="sum", params=params, reason="sum: LOO worst 10.0%",
                         candidates=[cand]),
        host=HostSide(issue_seconds=ISSUE, issue_range=ISSUE_RANGE,
                      points=["8 x 256", "4 x 512"]),
        kernels=[KernelCount(tokens=2048, seq=256, kernels=KERNELS)], gap_seconds=0.0,
        gap_source="none measured")


def make_sides_cert(**over) -> Certificate:
    """:func:`make_time_cert` whose model is the two-sided :func:`sides_model`; the sweep's
    8 x 256 point measured 0.5 s by children at 0.42, 0.5 and 0.66 s."""
    cert = make_time_cert(**over)
    r = cert.workloads[0]
    model = r.time.model.model_copy(update={"sides": sides_model()})
    pts = [p.model_copy(update={"child_medians": [0.42, 0.5, 0.66]}) if p.value == 256 else p
           for p in r.points]
    r = r.model_copy(update={"points": pts, "time": r.time.model_copy(
        update={"model": model})})
    return cert.model_copy(update={"workloads": [r]})


def h200_grid(name: str) -> tuple[dict[tuple[int, int], list[float]], dict]:
    """The recorded H200 2-D grid of one workload (tests/data/h200_grid.jsonl.gz): each
    (batch, seq)'s repeated pipelined medians, and its counted FLOPs where recorded."""
    by: dict[tuple[int, int], list[float]] = defaultdict(list)
    flops: dict = {}
    for line in data_file("h200_grid.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("workload") == name and "async_median" in r:
            by[(r["B"], r["s"])].append(r["async_median"])
            if r.get("flops"):
                flops[(r["B"], r["s"])] = r["flops"]
    return by, flops
