"""afford: what can this box afford to train, and may this run start?

Measure a machine honestly, write a device certificate, and turn certificates into plans.
The commands are functions too, returning the typed results the CLI renders::

    import afford

    cert = afford.certify(["tinylm"], precision="quick", out="cert.json")  # Certificate
    plan = afford.plan(cert, "kaggle-p100", "run.toml")                    # PlanResult
    verdict = afford.preflight(cert, "kaggle-p100", "run.toml")            # Verdict (.go)
    afford.predict(cert, batch=8, seq=2048)                                # PredictResult
    afford.size(cert, seq=2048)                                            # SizeReport

Each name is a plain function, bound here on first use: ``certify`` is
:func:`afford.certification.run` (it measures, and imports torch), the others are
:mod:`afford.api`'s. ``import afford`` loads none of them, and no torch. The loop guard is
:mod:`afford.track`.
"""

from importlib import import_module

from afford.core.version import __version__

API = {"certify": "afford.certification:run", "plan": "afford.api:plan",
       "preflight": "afford.api:preflight", "predict": "afford.api:predict",
       "size": "afford.api:size"}  # name -> where the function lives ("module:function")
__all__ = ["__version__", *API]


def __getattr__(name: str):
    """The API's functions, imported on first use and bound here (PEP 562)."""
    if name not in API:
        raise AttributeError(f"module 'afford' has no attribute {name!r}")
    module, _, function = API[name].partition(":")
    globals()[name] = found = getattr(import_module(module), function)
    return found


def __dir__() -> list[str]:
    return sorted({*globals(), *API})
