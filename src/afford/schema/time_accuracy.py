"""How accurate a stored step-time model is, in words, for a figure's source: its held-out
error (shapes measured and never fitted), the error measured in the asked shape's own regime,
and how far the shape lies beyond what the held-out shapes tested.

Reads :mod:`afford.schema.time_law` (the model and :func:`~afford.schema.time_law.predict_at`);
computes no prediction of its own.
"""

from statistics import median

from afford.schema.time_law import StepTimeModel, predict_at


def held_out_accuracy(model: StepTimeModel) -> tuple[int, float | None, float | None]:
    """(held-out shapes, median |error|, worst |error|) of the model; the errors are
    ``predicted / measured - 1`` at shapes measured and never fitted."""
    errs = [abs(p.rel_error) for p in model.held_out]
    if not errs:
        return 0, None, None
    return len(errs), float(median(errs)), float(max(errs))


def accuracy_text(model: StepTimeModel) -> str:
    """The model's form and held-out error in words, for a figure's source."""
    n, med, worst = held_out_accuracy(model)
    if n == 0:
        loo = model.chosen.loo_max
        return f"{model.form} form; no held-out shape measured" + \
            (f" (leave-one-out worst {loo:.1%})" if loo is not None else "")
    return f"{model.form} form, held-out error median {med:.1%}, worst {worst:.1%} over {n} " \
        "shapes never fitted"


def _factor(model: StepTimeModel, tokens: float | None, seq: float | None, n: float | None
            ) -> tuple[float, float, str]:
    """(the asked shape's factor beyond the fitted range, the factor the held-out shapes
    tested, on which axis): tokens and sequence (or n), the larger factor. A model refitted
    over its held-out shapes was fitted up to them: beyond, nothing tested it."""
    pts = [*model.points, *model.held_out] if model.fitted_with_held_out else model.points
    fitted = {a: max(v for v in (getattr(p, a) for p in pts) if v is not None)
              for a in ("tokens", "seq", "n") if any(getattr(p, a) is not None for p in pts)}
    tested = [] if model.fitted_with_held_out else model.held_out
    held = {a: max([v for v in (getattr(p, a) for p in tested) if v is not None],
                   default=0.0) for a in fitted}
    best = (1.0, 1.0, "tokens")
    for axis, value in (("tokens", tokens), ("seq", seq), ("n", n)):
        if value is None or axis not in fitted or fitted[axis] <= 0:
            continue
        f, tested = value / fitted[axis], max(1.0, held[axis] / fitted[axis])
        if f / tested > best[0] / best[1]:
            best = (f, tested, axis)
    return best


def _errors_text(errors: list[float], what: str) -> str:
    errs = [abs(e) for e in errors]
    return (f"{what} held-out error median {float(median(errs)):.1%}, worst {max(errs):.1%} "
            f"over {len(errs)} shape(s)")


def accuracy_at(model: StepTimeModel, *, batch: float | None = None, seq: float | None = None,
                n: float | None = None) -> str:
    """The error that applies at an asked shape, in words: the held-out error measured in
    the shape's own regime (device-bound or host-bound for a two-sided model; the work
    regime or the floor for a one-sided one), and how far the shape lies beyond the fitted
    range against how far the held-out shapes tested it. Past the tested factor it says so
    instead of quoting a smaller error."""
    tokens = batch * seq if batch is not None and seq is not None else None
    f, tested, axis = _factor(model, tokens, seq, n)
    beyond = ""
    if f > tested * (1 + 1e-9):
        beyond = (f"; {f:.3g}x the fitted {axis}, past the {tested:.3g}x its held-out shapes "
                  "tested: the error there is not measured")
    if model.sides is None:
        judged = [p.rel_error for p in model.held_out]
        text = (_errors_text(judged, f"{model.form} form,") if judged
                else f"{model.form} form; no held-out shape measured")
        return text + beyond
    pred = predict_at(model, batch=batch, seq=seq, n=n)
    return "; ".join(_sides_parts(model, pred)) + beyond


def _sides_parts(model: StepTimeModel, pred) -> list[str]:
    same = [p for p in model.held_out if p.regime == pred.regime]
    device = [p.device_rel_error for p in model.held_out if p.device_rel_error is not None]
    parts = [f"two-sided, {pred.regime}-bound here"]
    if pred.band is not None:
        banded = [p for p in model.held_out if p.band is not None]
        inside = sum(1 for p in banded if p.band[0] <= p.measured_seconds <= p.band[1])
        parts.append(f"a band of {pred.low * 1e3:.4g}-{pred.high * 1e3:.4g} ms (the host "
                     f"floor: {model.sides.host.band_words()}; the device side within its "
                     "leave-one-out error); "
                     f"{inside} of {len(banded)} held-out shape(s) with a band inside theirs")
    elif same:
        parts.append(_errors_text([p.rel_error for p in same], "device-bound"))
    else:
        parts.append("no device-bound held-out shape measured")
    if device:
        parts.append(_errors_text(device, "device busy time"))
    return parts
