"""``afford.constants/1``: a user's own memory-sizing constants, to be judged against a
certificate's fitted memory law (``afford size CERT --constants FILE``), exactly as afford
judges the built-in defaults (:func:`afford.fit.memory.sizing.verdicts`): CONFIRMED or WRONG, with
the direction and the consequence for the largest resident batch.

A TOML file::

    schema = "afford.constants/1"
    name = "ceq/sizing.py"                       # shown as the default's name
    citation = "ceq/sizing.py at ab5b485"         # where the constants come from

    [[constant]]
    name = "C_RESIDUAL"        # the name in the user's code
    value = 18
    unit = "B/elem"
    multiplies = "c_res"       # bytes_per_param, c_res, c_op or fixed_bytes
    mode = "fp32"              # fp32, bf16 or fp16

What each term multiplies, in the law's own terms (:mod:`afford.fit.memory.memory_fit`)::

    peak allocated bytes = bytes_per_param * params + fixed_bytes
                           + L * (c_res * B*s*d + c_op * B*H*s^2)

``bytes_per_param`` [B/param], ``c_res`` [B/elem of B*s*d per layer], ``c_op`` [B/elem of
B*H*s^2 per layer], ``fixed_bytes`` [B]. Each constant is judged alone (it replaces the
fitted value, the rest stays fitted); the whole formula is judged only in a mode that gives
bytes_per_param, c_res and c_op (a missing term would otherwise count as zero).
"""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from afford.core.io import read_toml
from afford.core.published_constants import MODES
from afford.schema.envelope import validate

CONSTANTS_SCHEMA = "afford.constants/1"
UNITS = {"bytes_per_param": "B/param", "c_res": "B/elem", "c_op": "B/elem", "fixed_bytes": "B"}
Term = Literal["bytes_per_param", "c_res", "c_op", "fixed_bytes"]
FORMULA_TERMS = ("bytes_per_param", "c_res", "c_op")


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid",
                              populate_by_name=True)


class UserConstant(_Model):
    """One constant of the user's sizing formula."""

    name: str = Field(min_length=1, description="the constant's name in the user's code")
    value: float = Field(description="its value, in ``unit``")
    unit: str = Field(description="B/param (bytes_per_param), B/elem (c_res, c_op) or B "
                      "(fixed_bytes)")
    multiplies: Term = Field(description="the term of afford's law it stands for")
    mode: str = Field(description="dtype mode: fp32, bf16 or fp16")
    note: str = ""

    @model_validator(mode="after")
    def _unit_and_mode(self) -> "UserConstant":
        if self.mode not in MODES:
            raise ValueError(f"{self.name}: mode {self.mode!r} is not one of {', '.join(MODES)}")
        want = UNITS[self.multiplies]
        if self.unit != want:
            raise ValueError(f"{self.name}: a constant multiplying {self.multiplies} is in "
                             f"{want}, not {self.unit!r}")
        return self


class UserConstants(_Model):
    schema_id: Literal["afford.constants/1"] = Field(CONSTANTS_SCHEMA, alias="schema")
    name: str = Field(min_length=1, description="the formula's name, as the verdicts show it")
    citation: str = Field(min_length=1, description="where the constants come from")
    constants: tuple[UserConstant, ...] = Field(alias="constant", min_length=1)

    @model_validator(mode="after")
    def _one_per_term(self) -> "UserConstants":
        seen: set[tuple[str, str]] = set()
        for c in self.constants:
            key = (c.mode, c.multiplies)
            if key in seen:
                raise ValueError(f"two constants multiply {c.multiplies} in mode {c.mode}")
            seen.add(key)
        return self

    def of_mode(self, mode: str) -> dict[str, UserConstant]:
        """The mode's constants by the term they multiply."""
        return {c.multiplies: c for c in self.constants if c.mode == mode}


def load_constants(path: str | Path) -> UserConstants:
    p = Path(path)
    return validate(read_toml(p, "constants"), UserConstants, f"constants file {p}")
