"""Certificate sections of the determinism audit and the gates (docs/DESIGN.md section 3, rule 9).

``DeterminismSection``: what this box and this torch version do when one training step is
repeated K times from the same seed and the same inputs, with
``torch.use_deterministic_algorithms`` off and on. Raw comparisons (bitwise, max |delta|)
and the raw step times of each flag are kept; the cost of deterministic mode is derived.

``GatesSection``: the readings the built-in gates were computed from (init losses, CPU/CUDA
parity deltas, noise-floor loss curves, parameter counts), the gates themselves (rows of
delta against tolerance) and the verdict: any FAIL means HALT.

A delta can be non-finite (a NaN loss is a reading, and a failing one), so these models
write NaN and infinities as the strings ``"NaN"`` and ``"Infinity"``, which load back.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from afford.core.provenance import NotExecutable

Status = Literal["PASS", "FAIL", "NOT EXECUTABLE"]
QUANTITIES = ("forward output", "loss", "gradients", "parameters after step")


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", ser_json_inf_nan="strings")


# --- the determinism audit -------------------------------------------------------------

class Comparison(_Model):
    """Repeats 1..K-1 of one quantity against repeat 0."""

    quantity: Literal["forward output", "loss", "gradients", "parameters after step"]
    bitwise_equal: bool = Field(description="every repeat equal to repeat 0, bit for bit "
                                "(torch.equal)")
    repeats_differing: int = Field(description="repeats (of K-1) not bitwise equal to repeat 0")
    max_abs_delta: float = Field(description="max over repeats and elements of |x_k - x_0|")
    first_differing: str | None = Field(None, description="the tensor (parameter or module "
                                        "output) where a repeat first differed")


class StepTiming(_Model):
    """A few warm steps of one flag setting: raw samples with their step indices."""

    step0_seconds: float
    timed_seconds: list[float]
    timed_step_indices: list[int]
    median_seconds: float
    clock: str


class AuditRun(_Model):
    """One workload, one flag setting, K repeats of one whole training step."""

    workload: str
    value: int = Field(description="sweep value (the reduction length) audited")
    shape: dict[str, int] = {}
    mode: Literal["fp32", "bf16", "fp16"]
    deterministic: bool = Field(description="torch.use_deterministic_algorithms(True) in the "
                                "child, CUBLAS_WORKSPACE_CONFIG set before CUDA started")
    repeats: int
    forward_output_of: str | None = Field(None, description="the module whose output was "
                                          "compared as the forward output")
    comparisons: list[Comparison] = []
    not_executable: NotExecutable | None = None
    op: str | None = Field(None, description="the op named in a missing-deterministic-kernel "
                           "error, parsed from torch's message")
    stage: str | None = Field(None, description="where it raised: build, forward, backward, "
                              "optimizer step, timing")
    timing: StepTiming | None = None
    cublas_workspace_config: str | None = None
    fill_uninitialized_memory: bool | None = Field(
        None, description="torch.utils.deterministic.fill_uninitialized_memory in the child")


class DeterminismSection(_Model):
    device: str
    device_name: str
    torch_version: str
    repeats: int
    seed: int
    runs: list[AuditRun]
    warnings: list[str] = []


# --- the gates -------------------------------------------------------------------------

class InitLossReading(_Model):
    """Loss of an untrained model (step 0, no gradient) at one shape and seed."""

    workload: str
    value: int
    seed: int
    mode: str
    vocab: int | None = Field(None, description="classes of the cross-entropy; None: the "
                              "workload's loss is not one, so the gate does not apply")
    loss: float | None = None
    error: str | None = None


class ParityReading(_Model):
    """One quantity of one workload, CPU against CUDA, same weights and same inputs."""

    workload: str
    value: int
    mode: str
    quantity: Literal["forward output", "loss", "gradients"]
    max_abs_delta: float | None = None
    rel_delta: float | None = Field(None, description="max |cpu - cuda| / max |cpu| "
                                    "(worst tensor for gradients)")
    worst_tensor: str | None = None
    error: str | None = None


class NoiseFloorReading(_Model):
    """Three runs of k steps: seed a twice, then seed b; every step's loss kept."""

    workload: str
    value: int
    mode: str
    steps: int
    seed_a: int
    seed_b: int
    losses_a: list[float] = []
    losses_a_again: list[float] = []
    losses_b: list[float] = []
    params_bitwise_equal: bool | None = Field(None, description="the two seed-a runs end "
                                              "with bit-identical parameters")
    error: str | None = None


class ParamCountReading(_Model):
    workload: str
    value: int
    params: int | None = None
    error: str | None = None


class GateReadings(_Model):
    init_loss: list[InitLossReading] = []
    parity: list[ParityReading] = []
    parity_not_executable: NotExecutable | None = None
    noise_floor: list[NoiseFloorReading] = []
    params: list[ParamCountReading] = []


class GateRow(_Model):
    """One checked case: PASS when delta <= tolerance (a NaN delta fails)."""

    label: str
    delta: float | None = Field(None, description="None only when NOT EXECUTABLE")
    tolerance: float = Field(ge=0.0)
    status: Status
    detail: str = ""
    not_executable: NotExecutable | None = None
    margin: float | None = Field(None, description="how far the row sits inside its pass "
                                 "line, in the gate's unit, where that is not tolerance - "
                                 "delta (init-loss: loss / ln V - (1 - tol), COSTS 1.5)")

    @model_validator(mode="after")
    def _status_follows_delta(self) -> "GateRow":
        if self.delta is None and self.not_executable is None:
            raise ValueError(f"row {self.label!r}: no delta and no NOT EXECUTABLE reason")
        if self.not_executable is not None:
            expected = "NOT EXECUTABLE"
        else:
            expected = "PASS" if self.delta <= self.tolerance else "FAIL"
        if self.status != expected:
            raise ValueError(f"row {self.label!r}: status {self.status} but delta "
                             f"{self.delta} against tolerance {self.tolerance} gives {expected}")
        return self


class Gate(_Model):
    name: str
    description: str
    source: str = Field(description="'builtin' or the entry point of a user gate")
    unit: str = ""
    tolerance_source: str = Field(description="why the tolerance is what it is")
    rows: list[GateRow]
    status: Status
    notes: list[str] = []
    line: float = Field(0.5, gt=0.0, le=1.0, description="the share of its tolerance the "
                        "worst row's delta must clear (COSTS 1.4: 50 %); headroom = line / "
                        "worst delta-over-tolerance")
    line_source: str = Field("", description="why the line is what it is; empty: afford's "
                             "default")

    @model_validator(mode="after")
    def _status_follows_rows(self) -> "Gate":
        statuses = {r.status for r in self.rows}
        expected = ("FAIL" if "FAIL" in statuses else
                    "PASS" if "PASS" in statuses else "NOT EXECUTABLE")
        if self.status != expected:
            raise ValueError(f"gate {self.name!r}: status {self.status} but its rows give "
                             f"{expected}")
        return self


class GatesSection(_Model):
    device: str
    device_name: str
    torch_version: str
    deterministic_algorithms: bool = Field(description="torch.are_deterministic_algorithms_"
                                           "enabled() where the gate runs were made")
    readings: GateReadings
    gates: list[Gate]
    verdict: Literal["GO", "HALT"] = Field(description="HALT when any gate failed")

    @model_validator(mode="after")
    def _verdict_follows_gates(self) -> "GatesSection":
        expected = "HALT" if any(g.status == "FAIL" for g in self.gates) else "GO"
        if self.verdict != expected:
            raise ValueError(f"verdict {self.verdict} but the gates give {expected}")
        return self
