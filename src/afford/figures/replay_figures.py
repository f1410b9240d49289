"""A certificate's allocator replay read for ``afford size`` and plans: reserved memory at a
shape by replaying the step's allocations, native and with expandable segments, the largest
batch that fits each way, and where the memory goes at the peak.

The replay answers only where the certificate trusts it (validated at the traced shapes)
and it predicted the held-out shapes no worse than the law
(:attr:`afford.schema.memory_section.ReplayModel.answers`); budgets add its safety margin (its worst
under-prediction measured). ``PYTORCH_CUDA_ALLOC_CONF`` is an input: the configuration the
user's run will have decides which prediction is budgeted; when the other one changes
whether the shape fits, that is a lever.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from afford.core import cache
from afford.core.provenance import Tagged, fitted
from afford.fit.memory.allocator import parse_alloc_conf
from afford.fit.memory.memory_fit import largest_true
from afford.schema.memory_section import (
    REPLAY_VERSION,
    MemoryBreakdownRecord,
    MemoryLaw,
    ReplayModel,
    SeedSegment,
)

if TYPE_CHECKING:
    from afford.fit.memory.trace_scaling import TraceModel

# The replay's own modules (replay_fit, replay_model, trace_scaling, breakdown) are imported
# where a replay runs or is rebuilt: a command whose shapes are in the cache needs none.

EXPANDABLE = "expandable_segments:True"
CACHE_KIND = "replay"
_CURRENT: dict[int, tuple[MemoryLaw, MemoryLaw]] = {}  # id(law) -> (law, its upgrade)
_UNPACKED: dict[int, tuple[object, TraceModel]] = {}   # id(stored) -> (stored, model)


def current(law: MemoryLaw) -> MemoryLaw:
    """``law`` with an allocator replay of this afford's version (REPLAY_VERSION): the
    stored one where it is current, else rebuilt from the law's raw traces
    (:func:`afford.fit.memory.replay_model.build_replay`: seconds) and kept in the cache
    (:mod:`afford.core.cache`), keyed by everything it is derived from, so an older
    certificate is learned once per machine, not once per command."""
    rp = law.replay
    if rp is None or (rp.version >= REPLAY_VERSION and rp.learned is not None):
        return law
    hit = _CURRENT.get(id(law))
    if hit is not None and hit[0] is law:
        return hit[1]
    name = cache.key(CACHE_KIND, str(REPLAY_VERSION), law.model_dump_json(exclude={"replay"}))
    text = cache.read(CACHE_KIND, name)
    replay = None
    if text is not None:
        try:
            replay = ReplayModel.model_validate_json(text)
        except ValueError:  # a corrupt entry: rebuilt below
            replay = None
    from afford.fit.memory.replay_model import build_replay, with_replay

    if replay is None:
        replay = build_replay(law)
        if replay is not None:
            cache.write(CACHE_KIND, name, replay.model_dump_json())
    up = with_replay(law, replay)
    _CURRENT[id(law)] = (law, up)
    return up


_PEAKS: dict[tuple, tuple[int, int]] = {}  # (model key, B, s, expandable) -> peaks


def _model_key(law: MemoryLaw) -> str:
    """Names the replay's inputs: the learned laws and the segments it starts from."""
    hit = _KEYS.get(id(law.replay))
    if hit is not None and hit[0] is law.replay:
        return hit[1]
    base = _base(law)
    key = cache.key("replayed", str(REPLAY_VERSION), law.replay.learned.model_dump_json(),
                    json.dumps([g.model_dump(mode="json") for g in base.trace.seed]))
    _KEYS[id(law.replay)] = (law.replay, key)
    return key


_KEYS: dict[int, tuple[object, str]] = {}


def peaks(law: MemoryLaw, B: int, s: int, expandable: bool) -> tuple[int, int] | None:
    """(peak allocated, peak reserved) of the replay at (B, s): replayed once per machine
    (a replay of a step's ten thousand allocations takes about a tenth of a second, and a
    user asks the same shapes of every command), then read from the cache
    (:mod:`afford.core.cache`); ``None`` without a learned model."""
    law = current(law)
    if not has_learned(law):
        return None
    key = _model_key(law)
    slot = (key, int(B), int(s), bool(expandable))
    if slot in _PEAKS:
        return _PEAKS[slot]
    name = cache.key(key, str(B), str(s), str(expandable))
    text = cache.read("replayed", name)
    try:
        pair = tuple(json.loads(text)) if text is not None else None
    except ValueError:
        pair = None
    if pair is None or len(pair) != 2:
        from afford.fit.memory import replay_fit as mr

        got = learned(law)
        res = mr.predict(got[0], got[1], B, s, expandable)
        pair = (int(res.peak_allocated_bytes), int(res.peak_reserved_bytes))
        cache.write("replayed", name, json.dumps(pair))
    _PEAKS[slot] = pair
    return pair


def breakdown(law: MemoryLaw, B: int, s: int, expandable: bool
              ) -> MemoryBreakdownRecord | None:
    """Where the memory goes at the replay's peak at (B, s), cached as :func:`peaks` is;
    ``None`` without a learned model or where the peak cannot be classed (cached too, as
    :data:`NO_BREAKDOWN`: a history whose steps do not repeat is replayed once, not on every
    command)."""
    law = current(law)
    if not has_learned(law):
        return None
    name = cache.key(_model_key(law), "breakdown", str(B), str(s), str(expandable))
    text = cache.read("replayed", name)
    if text == NO_BREAKDOWN:
        return None
    if text is not None:
        try:
            return MemoryBreakdownRecord.model_validate_json(text)
        except ValueError:
            pass
    from afford.fit.memory import replay_fit as mr

    got = learned(law)
    try:
        brk = mr.breakdown_at(got[0].trace(B, s), got[1], expandable)
    except ValueError:
        cache.write("replayed", name, NO_BREAKDOWN)
        return None
    cache.write("replayed", name, brk.model_dump_json())
    return brk


NO_BREAKDOWN = "null"  # the cache's entry for a shape whose peak cannot be classed


def _base(law: MemoryLaw):
    """The traced base shape: the reference history, whose starting segments every
    prediction replays from."""
    return next((s for s in law.shapes if s.role == "base" and s.trace is not None), None)


def has_learned(law: MemoryLaw) -> bool:
    """Whether ``law`` (current) has learned size laws and a traced base to replay from;
    read without unpacking them (a command whose replays are in the cache never does)."""
    return law.replay is not None and law.replay.learned is not None and \
        _base(law) is not None


def learned(law: MemoryLaw) -> tuple[TraceModel, list[SeedSegment]] | None:
    """The replay's learned size laws and the reference history's starting segments (what
    every prediction replays from); ``None`` without a learned model."""
    law = current(law)
    if not has_learned(law):
        return None
    from afford.fit.memory.trace_scaling import unpack

    stored, base = law.replay.learned, _base(law)
    hit = _UNPACKED.get(id(stored))
    if hit is None or hit[0] is not stored:
        hit = (stored, unpack(stored))
        _UNPACKED[id(stored)] = hit
    return hit[1], base.trace.seed


class ReplayAnswer(BaseModel):
    """What the replay says at one (B, s), both allocator configurations."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    used: bool                       # the replay answers (else the law; see ``why``)
    why: str
    expandable: bool                 # the configuration asked about
    alloc_conf: str
    allocated: Tagged
    reserved_native: Tagged
    reserved_expandable: Tagged
    budgeted_native: float           # reserved x (1 + safety margin)
    budgeted_expandable: float
    fits_native: bool | None
    fits_expandable: bool | None
    max_batch_native: Tagged | None
    max_batch_expandable: Tagged | None
    breakdown: MemoryBreakdownRecord | None
    lever: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def reserved(self) -> Tagged:
        return self.reserved_expandable if self.expandable else self.reserved_native

    @property
    def budgeted(self) -> float:
        return self.budgeted_expandable if self.expandable else self.budgeted_native

    @property
    def fits(self) -> bool | None:
        return self.fits_expandable if self.expandable else self.fits_native

    @property
    def max_batch(self) -> Tagged | None:
        return self.max_batch_expandable if self.expandable else self.max_batch_native


def source(law: MemoryLaw, conf: str, run: str) -> str:
    rp = law.replay
    traced = ", ".join(f"{b}x{s}" for b, s in rp.traced)
    return (f"{law.workload} {law.mode}: allocator replay ({conf}) of the history learned at "
            f"{traced}; validated within {rp.tolerance:.0%} at the traced shapes, held-out "
            f"worst reserved error {rp.replay_worst_reserved_error or 0:+.2%} (law "
            f"{rp.law_worst_reserved_error or 0:+.2%}); {run}")


def usable(law: MemoryLaw) -> tuple[bool, str]:
    """Whether this law's replay answers, and why (not)."""
    rp = current(law).replay
    if rp is None:
        return False, "no allocator replay in the certificate (not traced, or a CPU)"
    if not rp.trusted:
        return False, "the allocator replay is not trusted: " + "; ".join(rp.warnings[:2])
    if not rp.answers:
        return False, (f"the law predicted the held-out shapes better (reserved worst "
                       f"{rp.law_worst_reserved_error:.2%} against the replay's "
                       f"{rp.replay_worst_reserved_error:.2%})")
    return True, "trusted, and no worse than the law at the held-out shapes"


def max_batch(law: MemoryLaw, seq: int, budget_bytes: float, expandable: bool,
              run: str = "", guess: int = 1) -> Tagged | None:
    """The largest batch whose replayed reserved peak, plus the safety margin, fits
    ``budget_bytes`` at ``seq``; ``None`` without a replay to learn from. Galloping from
    ``guess`` (the memory answer's largest batch: a few replays, each cached)."""
    law = current(law)
    if not has_learned(law):
        return None
    margin = 1.0 + (law.replay.safety_margin if law.replay else 0.0)

    def ok(b: int) -> bool:
        return peaks(law, b, seq, expandable)[1] * margin <= budget_bytes

    n = largest_true(ok, guess)
    conf = EXPANDABLE if expandable else "native"
    return fitted(n, "sequences", f"largest B with replayed reserved x {margin:.3f} <= "
                  f"{budget_bytes:.0f} B at s={seq}; " + source(law, conf, run),
                  extrapolated=n > 4 * max(b for b, _ in law.replay.traced))


def answer(law: MemoryLaw, seq: int, batch: int | None, budget_bytes: float | None,
           alloc_conf: str = "", run: str = "", guess: int = 1) -> ReplayAnswer | None:
    """The replay's answer at (batch, seq) (``batch`` None: the largest that fits under
    the configuration asked about); ``None`` when the certificate has no replay."""
    if law.replay is None:
        return None
    law = current(law)
    if not has_learned(law):
        return None
    used, why = usable(law)
    expandable, unmodelled = parse_alloc_conf(alloc_conf)
    notes = [f"PYTORCH_CUDA_ALLOC_CONF {alloc_conf!r}: {', '.join(unmodelled)} not modelled "
             "(predicted as if unset)"] if unmodelled else []
    mb = {e: (max_batch(law, seq, budget_bytes, e, run, guess) if budget_bytes else None)
          for e in (False, True)}
    b = batch if batch is not None else max(int(mb[expandable].value) if mb[expandable]
                                            else 1, 1)
    res = {e: peaks(law, b, seq, e) for e in (False, True)}  # (allocated, reserved)
    margin = 1.0 + law.replay.safety_margin
    budgeted = {e: res[e][1] * margin for e in (False, True)}
    fits = {e: (budgeted[e] <= budget_bytes if budget_bytes else None) for e in (False, True)}
    src = {e: source(law, EXPANDABLE if e else "native", run) for e in (False, True)}
    extra = b * seq > 4 * max(x * y for x, y in law.replay.traced)
    brk = breakdown(law, b, seq, expandable)
    lever = None
    if fits[False] is not None and fits[False] != fits[True]:
        lever = (f"PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE}: batch {b} x seq {seq} "
                 + ("fits" if fits[True] else "does not fit")
                 + " with expandable segments (reserved "
                 f"{res[True][1] / 2**30:.2f} GiB) and "
                 + ("fits" if fits[False] else "does not fit")
                 + f" with the native allocator ({res[False][1] / 2**30:.2f} GiB)")
    elif mb[False] is not None and mb[True] is not None and \
            int(mb[False].value) != int(mb[True].value):
        lever = (f"PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE}: largest batch at seq {seq} "
                 f"{int(mb[True].value)} (native: {int(mb[False].value)})")
    return ReplayAnswer(
        used=used, why=why, expandable=expandable, alloc_conf=alloc_conf,
        allocated=fitted(res[expandable][0], "B", src[expandable], extrapolated=extra),
        reserved_native=fitted(res[False][1], "B", src[False], extrapolated=extra),
        reserved_expandable=fitted(res[True][1], "B", src[True], extrapolated=extra),
        budgeted_native=budgeted[False], budgeted_expandable=budgeted[True],
        fits_native=fits[False], fits_expandable=fits[True],
        max_batch_native=mb[False], max_batch_expandable=mb[True], breakdown=brk,
        lever=lever, notes=tuple(notes))
