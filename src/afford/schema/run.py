"""A run file (TOML, ``afford.run/1``): the concrete run a plan and a preflight are about.

::

    schema = "afford.run/1"
    name = "tinylm-1024"
    workload = "tinylm"          # as in the certificate: built-in, hf:..., pkg.module:factory
    mode = "bf16"                # the dtype mode measured: fp32, bf16 or fp16
    value = 1024                 # the sweep value; or shape = { batch = 8, seq = 1024, ... }
    batch = 16                   # optional: the batch, where it differs from the certified one
    tokens_per_step = 8192       # optional: default the certificate's figure at that shape
    target_tokens = "2B"         # or target_steps = 250000
    checkpoints_kept = 2         # live copies on disk
    checkpoint_overhead = "1%"   # share of wall clock checkpoint writes may take (default 1 %)
    data_sources = ["fineweb-edu-sample"]   # names in a data manifest (afford pin)
    max_weeks = 4                # optional: preflight says NO-GO if the target takes longer


The shape may be any shape of the certified model: the plan reads the certificate's step-time
model (FITTED, ``*`` beyond the measured range) and memory law there; where the certificate
measured that very shape, its measurements. An ``hf:`` workload may carry its shape in the
spec (``workload = "hf:gpt2+b16s2048"``) instead of ``value`` / ``batch``.
"""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from afford.core.io import read_toml
from afford.core.provenance import Tagged, inherited
from afford.core.units import bounded, parse_count, parse_fraction
from afford.schema.envelope import validate

MIN_OVERHEAD = 1e-6  # one second of checkpoint writes in 11.6 days of training

RUN_SCHEMA = "afford.run/1"
DEFAULT_OVERHEAD = 0.01


class RunFile(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid", frozen=True,
                              populate_by_name=True)

    schema_id: Literal["afford.run/1"] = Field(RUN_SCHEMA, alias="schema")
    name: str | None = Field(None, min_length=1, description="default: the file's stem")
    workload: str = Field(min_length=1, description="as named in the certificate")
    mode: Literal["fp32", "bf16", "fp16"]
    value: int | None = Field(None, gt=0, le=2**31, description="the sweep value of the run's "
                              "shape")
    shape: dict[str, int] | None = Field(None, description="the full shape instead of value")
    batch: int | None = Field(None, gt=0, le=2**31, description="the run's batch (with value, "
                              "or with a shape that leaves the batch out)")
    tokens_per_step: int | float | str | None = None
    target_tokens: int | float | str | None = None
    target_steps: int | float | str | None = None
    checkpoints_kept: int = Field(ge=1, le=10**6, description="live checkpoint copies kept on disk")
    checkpoint_overhead: float | str = Field(DEFAULT_OVERHEAD, description="share of wall "
                                             "clock checkpoint writes may take")
    data_sources: list[str] = []
    max_weeks: float | None = Field(None, gt=0, le=5200, allow_inf_nan=False,
                                    description="the longest the run may take")

    @field_validator("tokens_per_step", "target_tokens", "target_steps")
    @classmethod
    def _count(cls, v):
        if v is None:
            return v
        n = bounded(parse_count(v), "count")
        if n != int(n):
            raise ValueError(f"{v!r} is not a positive whole count")
        return int(n)

    @field_validator("checkpoint_overhead")
    @classmethod
    def _overhead(cls, v):
        f = parse_fraction(v)
        if not MIN_OVERHEAD <= f < 1.0:  # below, the save interval leaves the floats
            raise ValueError(f"{v!r} is not a share of wall clock in [0.0001 %, 100 %)")
        return f

    @field_validator("shape")
    @classmethod
    def _shape(cls, v):
        if v is not None and any(not 0 < n <= 2**31 for n in v.values()):
            raise ValueError("every dimension of a shape must be a positive integer")
        return v

    @model_validator(mode="after")
    def _one_of(self) -> "RunFile":
        if self.value is not None and self.shape is not None:
            raise ValueError("give one of value (the sweep value) or shape (the full shape), "
                             "not both")
        if self.value is None and self.shape is None and not self.workload.startswith("hf:"):
            raise ValueError("give value (the sweep value) or shape (the full shape)")
        if (self.target_tokens is None) == (self.target_steps is None):
            raise ValueError("give exactly one of target_tokens or target_steps")
        return self

    def figure(self, field: str, unit: str, source: str) -> Tagged | None:
        """A run-file value as a figure INHERITED from the file (the user's own statement)."""
        v = getattr(self, field)
        return None if v is None else inherited(v, unit, f"run file {source}: {field}")


def load_run(path: str | Path) -> RunFile:
    p = Path(path)
    run = validate(read_toml(p, "run"), RunFile, f"run file {p}")
    return run if run.name else run.model_copy(update={"name": p.stem})
