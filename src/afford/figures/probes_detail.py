"""The probes stage's records beyond its summary (:mod:`afford.figures.probes_figures`), each
tagged, for the report (the report to the end, never a schema dump): every rung of each batch
ladder, every fresh process whose start-up was timed, and the protocol the probes ran under.

Derived from the certificate alone; figures come from its raw fields, tagged with the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from afford.core.provenance import NotExecutable, Tagged, measured, module, run_label
from afford.schema.cert import Certificate
from afford.schema.probes_section import Ladder, Startup

Cell = Tagged | NotExecutable | str | None


@dataclass(frozen=True)
class RungRow:
    name: str
    mode: str
    multiplier: str             # "x1", "x2", ...
    shape: str
    tokens: Cell
    step0: Cell
    warm: Cell                  # median of the timed steps, or the error
    steps: Cell                 # timed steps, with their indices in the source


@dataclass(frozen=True)
class StartupRow:
    role: str
    process: Cell
    import_torch: Cell
    import_transformers: Cell
    cuda_init: Cell
    counted: str                # yes, or why its imports are left out of the medians


def _shape(shape: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def ladder_rows(cert: Certificate) -> list[RungRow]:
    """Every rung of every workload's batch ladder (a failed rung says why)."""
    pr, run, out = cert.probes, run_label(cert), []
    for w in pr.workloads if pr else []:
        if not isinstance(w.ladder, Ladder):
            continue
        for r in w.ladder.rungs:
            src = f"{w.name} {w.mode} batch ladder x{r.multiplier}, {run}"
            warm: Cell = measured(r.median_seconds, "s", f"median of {len(r.timed_seconds)} "
                                  f"timed steps, {src}") if r.median_seconds is not None else \
                ("out of memory" if r.oom else r.error or "-")
            idx = r.timed_step_indices
            out.append(RungRow(
                w.name, w.mode, f"x{r.multiplier}", _shape(r.shape),
                measured(r.tokens_per_step, "tokens", f"tokens per step, {src}")
                if r.tokens_per_step else "-",
                measured(r.step0_seconds, "s", f"step 0, {src}")
                if r.step0_seconds is not None else "-", warm,
                measured(len(r.timed_seconds), "steps", f"timed steps {idx[0]}-{idx[-1]}, {src}")
                if idx else "-"))
    return out


def startup_rows(cert: Certificate) -> list[StartupRow]:
    """Every fresh process whose start-up was timed (the medians leave contended ones out)."""
    pr = cert.probes
    s = pr.startup if pr else None
    if not isinstance(s, Startup):
        return []
    run, out = run_label(cert), []
    for r in s.runs:
        src = f"{r.role}, torch {r.torch_version}, {run}"

        def m(v, what, src=src):
            return measured(v, "s", f"{what}, {src}") if v is not None else "-"

        out.append(StartupRow(r.role, m(r.process_seconds, "spawn to ready"),
                              m(r.import_torch_seconds, "import torch, the child's clock"),
                              m(r.import_transformers_seconds, "import transformers"),
                              m(r.cuda_init_seconds, "CUDA context creation"),
                              "no: its imports ran beside another's" if r.contended else "yes"))
    return out


def protocol_rows(cert: Certificate) -> list[tuple[str, Cell]]:
    """The probes' protocol, each setting tagged as the stage's (afford.measure.probes)."""
    pr = cert.probes
    if pr is None:
        return []
    p = pr.protocol
    src = f"the probes stage's {p.precision} protocol (afford.measure.probes)"

    def s(v, unit=""):
        return module(v, unit, src)

    return [("precision", p.precision), ("clock", p.clock),
            ("GEMM m = n = k", s(p.gemm_n)), ("GEMM warm-up calls", s(p.gemm_warmup_calls)),
            ("GEMM timed calls", s(p.gemm_timed_calls)),
            ("GEMM rows checked in fp64", s(p.gemm_reference_rows)),
            ("copy buffer", s(p.copy_buffer_bytes, "B")),
            ("copy timed calls", s(p.copy_timed_calls)),
            ("batch ladder", ", ".join(f"x{k}" for k in p.ladder_multipliers)),
            ("ladder floor per rung", s(p.ladder_floor_seconds, "s")),
            ("ladder warm-up per rung", s(p.ladder_warmup_seconds, "s")),
            ("ladder timed steps (at least)", s(p.ladder_min_steps, "steps")),
            ("utilisation sampling", s(p.nvml_hz, "Hz")),
            ("utilisation window", s(p.nvml_window_seconds, "s")),
            ("samples dropped at the start", s(p.nvml_settle_seconds, "s")),
            ("idle at or under", s(p.low_utilisation, "ratio")),
            ("checkpoint writes", s(p.checkpoint_writes)),
            ("fresh start-up runs (at least)", s(p.startup_children)),
            ("stage wall time", measured(pr.wall_seconds, "s", f"the probes stage, "
                                         f"{run_label(cert)}"))]
