"""afford: what can this box afford to train, and may this run start?

Measure a machine honestly, write a device certificate, and turn certificates into plans.
The commands are functions too, returning the typed results the CLI renders::

    import afford

    cert = afford.certify(["tinylm"], precision="quick", out="cert.json")  # Certificate
    plan = afford.plan(cert, "kaggle-p100", "run.toml")                    # PlanResult
    verdict = afford.preflight(cert, "kaggle-p100", "run.toml")            # Verdict (.go)
    afford.predict(cert, batch=8, seq=2048)                                # PredictResult
    afford.size(cert, seq=2048)                                            # SizeReport

``afford.certify`` and ``afford.plan`` are the subpackages of those names, made callable
(:mod:`afford.core.callable_package` says why); the others live in :mod:`afford.api`.
``import afford`` loads none of them, and no torch: each is imported when first used. The loop
guard is :mod:`afford.track`.
"""

from afford.core.version import __version__

API = ("certify", "plan", "preflight", "predict", "size")
__all__ = ["__version__", *API]


def __getattr__(name: str):
    """The API's functions, imported on first use (PEP 562)."""
    if name == "certify":
        import afford.certification as certify

        return certify
    if name == "plan":
        import afford.planning as plan

        return plan
    if name in ("preflight", "predict", "size"):
        from afford import api

        return getattr(api, name)
    raise AttributeError(f"module 'afford' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API])
