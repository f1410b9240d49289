"""The Python API: the commands as functions, returning the typed results the CLI renders.

::

    import afford

    cert = afford.certify(["tinylm"], precision="quick", out="cert.json")  # Certificate
    p = afford.plan(cert, "kaggle-p100", "run.toml")                       # the plan
    v = afford.preflight(cert, "kaggle-p100", "run.toml")                  # v.go: GO?
    afford.predict(cert, batch=8, seq=2048)                                # PredictResult
    afford.size(cert, seq=2048, workload="tinylm")                         # SizeReport

Each function calls the library functions its command calls (``afford plan`` and this
:func:`plan` share :func:`load_inputs` and :func:`afford.planning.planner.plan`), takes files
by path or as the objects already loaded, and raises :class:`~afford.core.errors.InputError`
for bad input (the CLI's exit 2) instead of exiting. ``afford.certify`` is
:func:`afford.certification.run`, beside what it sequences (it measures). The package root
binds each name on first use (``import afford`` imports none of this, and no torch); the
functions here import no torch either.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afford.core.errors import InputError

if TYPE_CHECKING:
    from afford.figures.memory_figures import SizeReport
    from afford.planning.prediction import PredictResult
    from afford.planning.result import PlanResult, Verdict
    from afford.schema.cert import Certificate
    from afford.schema.platform import Platform
    from afford.schema.run import RunFile


__all__ = ["load_cert", "load_inputs", "plan", "predict", "preflight", "size", "torch_version_here"]


def load_inputs(cert: Any, platform: Any, run: Any = None, manifest: Any = None
                ) -> tuple[Certificate, Platform, RunFile | None, dict[str, bool]]:
    """The certificate, platform, run and pins a plan needs, each given as a path (a preset
    name for the platform) or as the object already loaded; InputError (exit 2) naming the
    file, field and reason. The schema modules are imported here, not with the command line:
    building their pydantic classes is most of ``afford plan --help``'s start-up otherwise."""
    from afford.schema.platform import Platform, load_platform
    from afford.schema.run import RunFile, load_run

    c = load_cert(cert)
    p = platform if isinstance(platform, Platform) else load_platform(_text(platform,
                                                                            "platform"))
    r = run if run is None or isinstance(run, RunFile) else load_run(_path(run, "run"))
    if isinstance(manifest, dict) or manifest is None:  # None: every source unpinned
        return c, p, r, manifest or {}
    from afford.schema.manifest import pinned_sources  # with its file lock: only to read one

    return c, p, r, pinned_sources(manifest)


def load_cert(cert: Any) -> Certificate:
    """The certificate, given as a path or as the object already loaded."""
    from afford.schema.cert import Certificate, load_certificate

    return cert if isinstance(cert, Certificate) else load_certificate(_path(cert, "cert"))


def torch_version_here() -> str | None:
    """The installed torch's version, read from its metadata (no import); None without it."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def plan(cert: Any, platform: Any, run: Any = None, *, manifest: Any = None) -> PlanResult:
    """``afford plan``: the chunk, steps per chunk and memory fit of every measured shape,
    the weekly quota, checkpoint cadence, failure ledger and disk (with ``run``: for it)."""
    from afford.planning import planner

    c, p, r, _ = load_inputs(cert, platform, run)
    pins, changed = _pins(manifest, r)
    result = planner.plan(c, p, r, pins=pins)
    return result.model_copy(update={"notes": result.notes + changed}) if changed else result


def preflight(cert: Any, platform: Any, run: Any, *, manifest: Any = None,
              accept_noisy: bool = False, now: datetime | None = None) -> Verdict:
    """``afford preflight``: GO (``.go``) or NO-GO with every reason; ``now``: the time the
    certificate's age is judged at (default: now)."""
    from afford.planning import planner

    c, p, r, _ = load_inputs(cert, platform, run)
    if r is None:
        raise InputError("preflight needs a run (a run file or a loaded RunFile)")
    pins, changed = _pins(manifest, r)
    v = planner.preflight(c, p, r, pins=pins, now=now or datetime.now(timezone.utc),
                          here_torch=torch_version_here(), accept_noisy=accept_noisy)
    return v.model_copy(update={"warnings": changed + v.warnings}) if changed else v


def _pins(manifest: Any, run: RunFile | None) -> tuple[dict[str, bool], tuple[str, ...]]:
    """(source -> pinned, one line per source of the run whose data changed since it was
    pinned): a manifest's pins are re-checked where they are used; a dict of pins is taken
    as given."""
    if isinstance(manifest, dict) or manifest is None:  # None: every source unpinned
        return manifest or {}, ()
    from afford.schema.manifest import check_pins

    check = check_pins(manifest)
    used = run.data_sources if run is not None else []
    return check.pinned, tuple(f"data source {n!r} {check.changed[n]}"
                               for n in used if n in check.changed)


def predict(cert: Any, batch: int | str, seq: int | str, *, workloads: list[str] | None = None,
            mode: str | None = None, platform: Any = None,
            memory_fraction: float | str | None = None) -> PredictResult:
    """``afford predict``: step time, tokens/s, steps per chunk (with a platform) and memory
    at (batch, seq) for each workload of the certificate."""
    from afford.planning.prediction import predict as predict_at
    from afford.schema.platform import Platform, load_platform

    b, s = _dim(batch, "batch"), _dim(seq, "seq")
    c = load_cert(cert)
    p = None if platform is None else platform if isinstance(platform, Platform) else \
        load_platform(_text(platform, "platform"))
    frac = None if memory_fraction is None else _share(memory_fraction, "memory_fraction")
    return predict_at(c, batch=b, seq=s, workloads=workloads, mode=_mode(mode), platform=p,
                      memory_fraction=frac)


def size(cert: Any, seq: int | str, batch: int | str | None = None, *,
         workload: str | None = None, mode: str | None = None,
         memory_fraction: float | str | None = None, constants: Any = None,
         alloc_conf: str | None = None) -> SizeReport:
    """``afford size``: predicted peak allocated and reserved memory at (batch, seq), whether
    it fits the budget (device memory x ``memory_fraction``, default afford's 0.90), and the
    largest batch that does; ``workload`` default: the certificate's one (of several,
    tinylm where it is one of them); ``alloc_conf`` default: this process's
    ``PYTORCH_CUDA_ALLOC_CONF`` (as the command)."""
    from afford.core.provenance import run_label
    from afford.core.published_constants import MEMORY_FRACTION
    from afford.figures.memory_figures import size as size_at
    from afford.schema.user_constants import UserConstants, load_constants

    s = _dim(seq, "seq")
    b = None if batch is None else _dim(batch, "batch")
    c = load_cert(cert)
    mine = constants if constants is None or isinstance(constants, UserConstants) else \
        load_constants(_path(constants, "constants"))
    frac = MEMORY_FRACTION if memory_fraction is None else \
        _share(memory_fraction, "memory_fraction")
    conf = alloc_conf if alloc_conf is not None else (
        os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") or "")
    return size_at(c, workload, s, b, _mode(mode), frac, run_label(c), mine, alloc_conf=conf)


# ---------------------------------------------------------------- arguments


def _path(v: Any, what: str) -> Path:
    if isinstance(v, (str, os.PathLike)):
        return Path(v)
    raise InputError(f"{what}: give a path or the loaded object, not {type(v).__name__}")


def _text(v: Any, what: str) -> str:
    if isinstance(v, (str, os.PathLike)):
        return os.fspath(v)
    raise InputError(f"{what}: give a preset name, a path or the loaded object, not "
                     f"{type(v).__name__}")


def _parsed(v: Any, parse, what: str) -> Any:
    """``v``, or the number its text says (``4Ki``, ``90%``); InputError naming ``what``."""
    from afford.core.units import UnitError

    if not isinstance(v, str):
        return v
    try:
        return parse(v)
    except UnitError as exc:
        raise InputError(f"{what} {v!r}: {exc}") from None


def _dim(v: Any, what: str) -> int:
    """A batch or sequence length: a whole number (or text such as ``4Ki``) in 1..2^40."""
    from afford.core.units import MAX_DIM, UnitError, whole

    try:
        return whole(v, f"{what} {v!r}", high=MAX_DIM)
    except UnitError as exc:
        raise InputError(f"{exc} (give a whole number from 1 to {MAX_DIM})") from None


def _share(v: Any, what: str) -> float:
    """A share of device memory: a fraction (or text such as ``90%``) above 0, at most 1."""
    from afford.core.units import MIN_FRACTION, UnitError, bounded, parse_fraction

    given = _parsed(v, parse_fraction, what)
    try:
        return bounded(given, f"{what} {v!r}", low=MIN_FRACTION, high=1.0, low_open=False)
    except UnitError as exc:
        raise InputError(f"{exc} (a fraction from {MIN_FRACTION:g} to 1)") from None


def _mode(mode: str | None) -> str | None:
    from afford.core.published_constants import MODES

    if mode is not None and mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    return mode
