"""The allocator replay's model: from the traced shapes' histories to a validated predictor
of reserved memory, kept beside the law (the memory stage builds it at certify time; a
command reading an older certificate rebuilds it here, :mod:`afford.figures.replay_figures`).

1. Validation: every traced history is replayed through the model of the caching allocator
   (:mod:`afford.fit.memory.allocator`) from the state its process had when it began; the replay
   is *trusted* only when each gives the measured peak allocated and reserved bytes within
   :data:`VALIDATION_TOLERANCE`, the histories are whole, and the allocator runs no option
   the model does not follow.
2. Learning: each allocation's size as a law in (B, s) (:mod:`afford.fit.memory.trace_scaling`),
   the base shape's history as the reference (the held-out shapes run after it, from the
   same process state). The learned laws must write each traced shape's history back: the
   history synthesised there, replayed, gives the recorded history's peaks within
   :data:`SYNTHESIS_TOLERANCE`, or the replay is not trusted (an alignment that left part
   of the reference unmatched keeps the reference's sizes there, and predicts every smaller
   shape too large and every larger one too small).
3. Held out: the history synthesised at each held-out shape and replayed, native and with
   expandable segments; its error beside the law's. Which predicts reserved better (worst
   |error|) is recorded; ``afford size`` uses the replay when it is trusted and not worse.
4. Where the memory goes at the base shape's peak (:mod:`afford.fit.memory.breakdown`).

Rebuilt from the raw records on a refit, as the law is. Pure: no torch, no I/O.
"""

from __future__ import annotations

from afford.fit.memory import replay_fit as mr
from afford.fit.memory.allocator import parse_alloc_conf
from afford.fit.memory.replay_fit import Learned, learn_shapes, traced_shapes, usable, use_replay
from afford.fit.memory.trace_scaling import pack
from afford.schema.memory_section import (
    HELDOUT_ROLES,
    REPLAY_VERSION,
    MemoryLaw,
    MemoryShape,
    ReplayCheck,
    ReplayModel,
)

__all__ = ["Learned", "build_replay", "learn_shapes", "traced_shapes", "use_replay",
           "with_replay"]

# The recorded histories of a warm process replay to the measured peaks to the byte for most
# shapes, but in the memory child some shapes' steps 1 and 2 peak a few per cent off an
# op-for-op identical history: the replay is trusted within 5 %, and budgets add its worst
# under-prediction.
VALIDATION_TOLERANCE = 0.05
# The synthesised history at a traced shape is the recorded one with learned sizes, replayed
# from the reference's starting state instead of its own: within 0.03 % of the recorded
# replay where every slot is learned (two models of 16 and 24 layers, bf16 and fp32); 6-11 %
# off where 4,794 of 12,599 slots were left unmatched.
SYNTHESIS_TOLERANCE = 0.01


def _ident(s: MemoryShape) -> tuple:
    return (s.key, s.trace.n_ops, s.trace.ops[:64])


def _err(pred: float, meas: float) -> float:
    return pred / meas - 1.0


def build_replay(law: MemoryLaw, learned: Learned | None = None) -> ReplayModel | None:
    """The replay model of a law's shapes (``learned``: its size laws, when learned
    already); ``None`` when the shapes carry no traced histories."""
    traced = traced_shapes(law.shapes)
    if not traced:
        return None
    conf = traced[0].trace.alloc_conf
    expandable, unmodelled = parse_alloc_conf(conf)
    warnings = []
    if any(s.trace is not None and s.trace.truncated for s in law.shapes):
        warnings.append("a traced history filled its buffer and was left out")
    if unmodelled:
        warnings.append(f"PYTORCH_CUDA_ALLOC_CONF sets {', '.join(unmodelled)}, which the "
                        "allocator model does not follow")
    tokens0 = max(s.dims["B"] * s.dims["s"] for s in traced)
    validation = []
    for s in traced:
        res = mr.replay_recorded(s.trace, s.dims["B"], s.dims["s"], expandable)
        validation.append(_check(s, tokens0, res.peak_allocated_bytes, res.peak_reserved_bytes))
    ok = all(abs(c.allocated_error) <= VALIDATION_TOLERANCE and
             abs(c.reserved_error) <= VALIDATION_TOLERANCE for c in validation)
    if not ok:
        worst = max(validation, key=lambda c: abs(c.reserved_error))
        warnings.append(f"the replay of the traced history at {worst.B}x{worst.s} gives "
                        f"reserved {worst.reserved_error:+.2%} off the measured: not trusted")
    if learned is None or [_ident(s) for s in learned.traced] != [_ident(s) for s in traced]:
        learned = learn_shapes(law.shapes)
    out = ReplayModel(traced=[(s.dims["B"], s.dims["s"]) for s in traced], alloc_conf=conf,
                      expandable=expandable, validation=validation, version=REPLAY_VERSION,
                      tolerance=VALIDATION_TOLERANCE,
                      trusted=ok and not unmodelled and learned is not None, warnings=warnings)
    if learned is None:
        return out.model_copy(update={"warnings": warnings + [
            "fewer than two traced shapes (with the base): nothing to learn sizes from"]})
    base = traced[0]
    seed = base.trace.seed
    synthesised = []
    for s in traced:
        res = mr.predict(learned.model, seed, s.dims["B"], s.dims["s"], expandable)
        synthesised.append(_check(s, tokens0, res.peak_allocated_bytes,
                                  res.peak_reserved_bytes))
    off = [(c, max(abs(_err(c.replay_allocated_bytes, r.replay_allocated_bytes)),
                   abs(_err(c.replay_reserved_bytes, r.replay_reserved_bytes))))
           for c, r in zip(synthesised, validation)]
    worst, gap = max(off, key=lambda x: x[1])
    if gap > SYNTHESIS_TOLERANCE:
        out = out.model_copy(update={"trusted": False})
        warnings.append(f"the learned sizes do not write the traced history at {worst.B}x"
                        f"{worst.s} back ({gap:.2%} off its recorded replay; tolerance "
                        f"{SYNTHESIS_TOLERANCE:.0%}): not trusted")
    held = []
    law_by_role = {h.role: h for h in law.heldout}
    for s in law.shapes:
        if s.role not in HELDOUT_ROLES or not usable(s):
            continue
        B, S = s.dims["B"], s.dims["s"]
        res = mr.predict(learned.model, seed, B, S, expandable)
        exp = res if expandable else mr.predict(learned.model, seed, B, S, True)
        c = _check(s, tokens0, res.peak_allocated_bytes, res.peak_reserved_bytes)
        h = law_by_role.get(s.role)
        upd = {"expandable_allocated_bytes": float(exp.peak_allocated_bytes),
               "expandable_reserved_bytes": float(exp.peak_reserved_bytes)}
        if h is not None:
            upd.update(law_allocated_bytes=h.predicted_bytes, law_allocated_error=h.error,
                       law_reserved_bytes=h.predicted_reserved_bytes,
                       law_reserved_error=h.reserved_error)
        held.append(c.model_copy(update=upd))
    better, rw, lw = None, None, None
    if held:
        rw = max(abs(c.reserved_error) for c in held)
        lws = [abs(c.law_reserved_error) for c in held if c.law_reserved_error is not None]
        lw = max(lws) if lws else None
        better = "replay" if lw is None or rw <= lw else "law"
    try:
        brk = mr.breakdown_at(mr.op_trace(base.trace, base.dims["B"], base.dims["s"]), seed,
                              expandable, source="recorded")
    except ValueError as exc:
        brk = None
        warnings.append(f"no breakdown at the base shape: {exc}")
    margin = max([0.0] + [-c.reserved_error for c in validation + synthesised + held])
    return out.model_copy(update={
        "synthesised": synthesised, "heldout": held, "better": better,
        "replay_worst_reserved_error": rw,
        "safety_margin": margin,
        "law_worst_reserved_error": lw, "breakdown": brk,
        "size_laws": learned.model.summary(), "fit_seconds": learned.seconds,
        "warnings": warnings + list(learned.model.warnings), "version": REPLAY_VERSION,
        "learned": pack(learned.model)})


def _check(s: MemoryShape, tokens0: int, alloc: float, res: float) -> ReplayCheck:
    ma, mres = s.peak("allocated"), s.peak("reserved")
    return ReplayCheck(role=s.role, B=s.dims["B"], s=s.dims["s"],
                       tokens_over_traced=s.dims["B"] * s.dims["s"] / tokens0,
                       measured_allocated_bytes=ma, measured_reserved_bytes=mres,
                       replay_allocated_bytes=float(alloc), replay_reserved_bytes=float(res),
                       allocated_error=_err(alloc, ma), reserved_error=_err(res, mres))


def with_replay(law: MemoryLaw, replay) -> MemoryLaw:
    """The law with its allocator replay; where the replay is trusted and predicts reserved
    better at the held-out shapes, the law's held-out misses say that the replay answers
    there (it is what `afford size` and plans read), with its worst held-out error."""
    if replay is None or not replay.trusted or replay.better != "replay" or \
            replay.replay_worst_reserved_error is None:
        return law.model_copy(update={"replay": replay})
    note = (f" (the law's; the allocator replay answers, held-out reserved worst "
            f"{replay.replay_worst_reserved_error:.2%})")
    warnings = [w + note if w.startswith("held-out ") and " off (target " in w else w
                for w in law.warnings]
    return law.model_copy(update={"replay": replay, "warnings": warnings})
