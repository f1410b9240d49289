"""The fuzz campaign of issue 14: every input file kind and number flag, broken by hypothesis,
through the command line in-process. Whatever the input: exit 0, 1, 2 or 3, never a
traceback, and no NaN, infinite or negative quantity printed by a command that succeeded
(a NaN or inf that is the user's own string shown back, a name or a reason, is no number).

Three sizes of run:

- the default run (``-m "not slow"``): 30 examples per input kind, 210 in all;
- the slow run (``-m slow``, as CI runs it): 100 per kind, 700 in all, 39 s on a
  CPU box at load 1 (2026-12-03);
- the long campaign: ``AFFORD_FUZZ_EXAMPLES=N pytest -m slow tests/test_fuzz.py`` (N per
  kind); with ``AFFORD_FUZZ_LOG=FILE`` each failure is recorded (command, exception, the
  deepest afford frame) with its input kept beside FILE, and the campaign goes on.

The long campaign, 2026-12-03 (2 shared CPU cores, load 4-5), 25,000 examples in all:

- 7 kinds x 2000 (14,000 examples, 26 min) at 26a354d, before the range fixes: 35 failing
  inputs at 7 sites, each fixed at its root: Daly's failure model overflowing e^x (8: an
  MTBF of 2e-308 s, a 68-year startup, a 3e16 s step, a checkpoint overhead of 1e-196:
  the model is now left out beyond e^700, and the run file's overhead is at least 1e-6);
  a divisor <= 0 and a NaN integer in the plan (5: tokens per step 0 or negative, a
  device memory of -1, an overhead of 1e-320); a division by zero in the chunk's budget
  share (2: device memory -1); a power law without its ``a`` (2); 18 outputs with NaN,
  inf or a negative quantity (-29058 TiB from a negative device memory; inf tokens from
  ``ladder --params 1e308``; the rest the user's own strings "nan"/"-inf" shown back, which
  the check now tells apart); and, in an earlier aborted pass, exp(a) overflowing in the
  report (a law's ``a`` of 1e6). The schemas now range-check at load: the environment's
  counts positive, step times in (0 s, a century], tokens per step positive, byte counts
  not negative, each law form's parameters present and in their fit's range, memory
  coefficients not negative; ``ladder --params`` at most 1e18 and ``--budget`` a century.
- certs (now with a memory law) and flags (history add now reaching its flags), 2 x 2000:
  one site, ``size --memory-fraction 1e-320`` printing an infinite budget share; the
  fraction is now at least 1e-6 (size and ladder).
- every kind, 7 x 1000 (7,000 examples, 19 min) after the fixes: one more site, Daly's
  exponents adding up (an MTBF of 0.5 s beside a 210 s restart: each e^x in range, the
  product infinite), fixed by bounding their sum; and 5 ledger strings shown back (a
  quantity named "inf"), which the check now tells apart from the value column.

In all: 25,000 examples, 43 failing inputs, 9 crash or output sites, each fixed (the
checker's own false positives aside); the last run after every fix: exit 0/1/2/3 only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import traceback

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from afford.cli import app
from tests import fuzz_inputs as fz

runner = CliRunner()
FAST = 30
SLOW = int(os.environ.get("AFFORD_FUZZ_EXAMPLES", "100"))
_BAD_NUMBER = re.compile(r"(?<![\w.])(nan|inf|infinity)(?![\w])", re.IGNORECASE)
_NEGATIVE_QUANTITY = re.compile(r"(?<![\w.\-+])-\d[\d.,]*(e[+-]?\d+)?\s?"
                                r"(TiB|GiB|MiB|KiB|TB|GB|MB|B|FLOPs?|params|tokens)\b")


def _echoed(token: str, args) -> bool:
    """Whether ``token`` (``nan``, ``inf``) is part of a string the mutated input holds (a
    reason, a name): a command that shows the user's string back prints no number."""
    quoted = re.compile(r"[\"'][^\"'\n]*" + re.escape(token) + r"[^\"'\n]*[\"']", re.I)
    for a in map(str, args):
        if os.path.basename(a).startswith("mut-") and os.path.exists(a):
            with open(a, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            if a.endswith(".tsv"):  # a ledger: any cell but the value is a string
                rows = [line.split("\t") for line in text.splitlines()]
                col = rows[0].index("value") if rows and "value" in rows[0] else -1
                if any(token.lower() in c.lower() for row in rows[1:]
                       for i, c in enumerate(row) if i != col):
                    return True
            elif quoted.search(text):
                return True
    return False


LOG = os.environ.get("AFFORD_FUZZ_LOG")  # census mode: record each crash site, do not fail


def _census(args, exc):
    """One line per crash: the command, the exception type and the deepest afford frame."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/afford/" in f.filename]
    site = f"{frames[-1].filename.split('/afford/')[-1]}:{frames[-1].lineno}" if frames else "?"
    if isinstance(exc, AssertionError):  # a bad exit code or a NaN/negative quantity shown
        site = "output"
    kept = os.path.join(os.path.dirname(os.path.abspath(LOG)), "inputs")
    os.makedirs(kept, exist_ok=True)
    n = len(os.listdir(kept))
    for a in map(str, args):  # the mutated input, for reproduction (the name is reused)
        if os.path.basename(a).startswith("mut-") and os.path.exists(a):
            shutil.copy(a, os.path.join(kept, f"{n:05d}-{os.path.basename(a)}"))
    with open(LOG, "a", encoding="utf-8") as fh:
        fh.write(f"{n:05d}\t{' '.join(map(str, args))[:200]!r}\t{type(exc).__name__}\t"
                 f"{site}\t{str(exc)[:200]!r}\n")


def _settings(n):
    return settings(max_examples=n, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def invoke(args):
    r = runner.invoke(app, [str(a) for a in args], catch_exceptions=True)
    text = (r.stdout or "") + (r.stderr if r.stderr_bytes is not None else "")
    exc = r.exception
    crashed = exc is not None and not isinstance(exc, SystemExit)
    detail = "".join(traceback.format_exception(exc)) if crashed else text
    if crashed and LOG:
        _census(args, exc)
        return r
    assert not crashed, f"afford {' '.join(map(str, args))[:300]} crashed:\n{detail[-3000:]}"
    try:
        assert r.exit_code in (0, 1, 2, 3), (r.exit_code, text[-2000:])
        assert "Traceback" not in text, text[-3000:]
        if r.exit_code in (0, 1):
            shown = r.stdout or ""
            bad = [m for m in _BAD_NUMBER.finditer(shown) if not _echoed(m.group(0), args)]
            bad += list(_NEGATIVE_QUANTITY.finditer(shown))
            assert not bad, f"{bad[0].group(0)!r} printed: {shown[-3000:]}"
    except AssertionError as exc:
        if not LOG:
            raise
        _census(args, exc)
    return r


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    cert = fz.write(d, "cert.json", fz.to_json(fz.cert_doc()))
    platform = fz.write(d, "platform.toml", fz.to_toml(fz.platform_doc()))
    run = fz.write(d, "run.toml", fz.to_toml(fz.run_doc()))
    manifest = fz.write(d, "manifest.json", fz.to_json(fz.manifest_doc()))
    r = runner.invoke(app, ["plan", str(cert), "-p", str(platform), "--run", str(run),
                            "--json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    ledger = d / "ledger.tsv"
    for q, v, u, steps in [("tinylm/fp32/seq=512/warm_step_seconds", "1.0", "s", "3-14"),
                           ("tinylm/fp32/seq=512/step0_seconds", "10", "s", "0"),
                           ("tinylm/fp32/seq=512/peak_reserved_bytes", "12884901888", "B", "")]:
        r = runner.invoke(app, ["history", "add", "-f", str(ledger), "--quantity", q,
                                "--value", v, "--unit", u, "--steps", steps, *_WHO])
        assert r.exit_code == 0, r.output
    return {"dir": d, "cert": cert, "platform": platform, "run": run, "manifest": manifest,
            "plan": plan, "ledger": ledger.read_text()}


def _commands_reading_cert(c, b):
    return [["plan", c, "-p", b["platform"], "--run", b["run"]],
            ["preflight", c, "-p", b["platform"], "--run", b["run"], "--json"],
            ["ladder", c, "--params", "1M,10M"], ["size", c, "--seq", "1024"],
            ["compare", b["cert"], c], ["report", c, "-o", b["dir"] / "out.md", "--force"],
            ["history", "add", "-f", b["dir"] / "l2.tsv", "--cert", c]]


def _cert_case(b, doc, k):
    c = fz.write(b["dir"], "mut-cert.json", fz.to_json(doc))
    invoke(_commands_reading_cert(c, b)[k])


def _toml_case(b, which, doc, k):
    f = fz.write(b["dir"], f"mut-{which}.toml", fz.to_toml(doc))
    p = f if which == "platform" else b["platform"]
    r = f if which == "run" else b["run"]
    args = [["plan", b["cert"], "-p", p, "--run", r, "--manifest", b["manifest"]],
            ["preflight", b["cert"], "-p", p, "--run", r]][k]
    invoke(args)


def _json_case(b, which, doc, k):
    f = fz.write(b["dir"], f"mut-{which}.json", fz.to_json(doc))
    if which == "manifest":
        args = [["plan", b["cert"], "-p", b["platform"], "--run", b["run"], "--manifest", f],
                ["report", b["cert"], "--manifest", f, "-o", b["dir"] / "m.md", "--force"]][k]
    else:
        args = ["report", "--plan", f, "-o", b["dir"] / "p.md", "--force"]
    invoke(args)


def _ledger_case(b, row, col, value, k):
    lines = b["ledger"].splitlines()
    row = 1 + row % (len(lines) - 1)
    cells = lines[row].split("\t")
    cells[col % len(cells)] = value
    lines[row] = "\t".join(cells)
    f = fz.write(b["dir"], "mut-ledger.tsv", "\n".join(lines) + "\n")
    args = [["history", "show", "-f", f], ["report", b["cert"], "--history", f, "-o",
                                          b["dir"] / "h.md", "--force"]][k % 2]
    invoke(args)


CELL = st.one_of(st.sampled_from([str(x) for x in fz.NASTY_NUMBERS if not isinstance(x, fz.Raw)]
                                 + fz.NASTY_STRINGS + [fz.HUGE_INT, "[" * 1000]),
                 st.text(max_size=10).map(lambda s: s.replace("\t", "").replace("\n", "")))
FLAG_VALUE = st.one_of(st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e308", "1e999",
                                        "-0", fz.HUGE_INT, "[/]", "", "1e-320", "5%",
                                        "1e999h", "0h", "-5h", "-1M", "1e30"]),
                       st.floats().map(str), st.text(max_size=6))
_WHO = ["--device", "P100", "--command", "afford fuzz", "--commit", "abc", "--torch", "2.11.0"]
FLAGS = [["ladder", "{cert}", "--params", "1M", "--ratio", "{v}"],
         ["ladder", "{cert}", "--params", "{v}"],
         ["ladder", "{cert}", "--params", "1M", "--budget", "{v}"],
         ["ladder", "{cert}", "--params", "1M", "--memory-fraction", "{v}"],
         ["size", "{cert}", "--seq", "{v}"],
         ["size", "{cert}", "--seq", "1024", "--batch", "{v}"],
         ["size", "{cert}", "--seq", "1024", "--memory-fraction", "{v}"],
         ["size", "{cert}", "--seq", "1024", "--budget", "{v}"],
         ["compare", "{cert}", "{cert}", "--tol", "{v}"],
         ["history", "add", "-f", "{dir}/flags.tsv", "--quantity", "x/loss", "--value", "{v}",
          *_WHO],
         ["history", "add", "-f", "{dir}/flags.tsv", "--quantity", "m/step0_seconds",
          "--value", "1", "--unit", "s", "--steps", "{v}", *_WHO]]


def _flag_case(b, k, v):
    args = [a.format(cert=b["cert"], dir=b["dir"], v=v) for a in FLAGS[k]]
    invoke(args)


def _campaign(n):
    cert = st.tuples(fz.mutated(fz.cert_doc()), st.integers(0, 6))
    platform = st.tuples(fz.mutated(fz.platform_doc()), st.integers(0, 1))
    run = st.tuples(fz.mutated(fz.run_doc()), st.integers(0, 1))
    manifest = st.tuples(fz.mutated(fz.manifest_doc()), st.integers(0, 1))

    @_settings(n)
    @given(case=cert)
    def certs(base, case):
        _cert_case(base, *case)

    @_settings(n)
    @given(case=platform)
    def platforms(base, case):
        _toml_case(base, "platform", *case)

    @_settings(n)
    @given(case=run)
    def runs(base, case):
        _toml_case(base, "run", *case)

    @_settings(n)
    @given(case=manifest)
    def manifests(base, case):
        _json_case(base, "manifest", *case)

    @_settings(n)
    @given(data=st.data())
    def plans(base, data):
        doc = data.draw(st.one_of(fz.mutated(base["plan"]),
                                  st.sampled_from([None, [], fz.cert_doc(), {"schema": 1}])))
        _json_case(base, "plan", doc, 0)

    @_settings(n)
    @given(row=st.integers(0, 50), col=st.integers(0, 20), value=CELL, k=st.integers(0, 1))
    def ledgers(base, row, col, value, k):
        _ledger_case(base, row, col, value, k)

    @_settings(n)
    @given(k=st.integers(0, len(FLAGS) - 1), v=FLAG_VALUE)
    def flags(base, k, v):
        _flag_case(base, k, v)

    return {"certs": certs, "platforms": platforms, "runs": runs, "manifests": manifests,
            "plans": plans, "ledgers": ledgers, "flags": flags}


KINDS = ["certs", "platforms", "runs", "manifests", "plans", "ledgers", "flags"]
_fast = _campaign(FAST)
_slow = _campaign(SLOW)


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz(base, kind):
    _fast[kind](base)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_campaign(base, kind):
    _slow[kind](base)


@pytest.mark.parametrize("text", ["[" * fz.DEEP + "]" * fz.DEEP, "{\"schema\": " * 5000,
                                  "9" * 5000, "NaN", '{"schema": "afford.cert/1"' + " " * 10],
                         ids=["deep-list", "deep-object", "5000-digits", "nan", "torn"])
def test_hostile_whole_files(base, text):
    f = fz.write(base["dir"], "whole.json", text)
    for args in _commands_reading_cert(f, base)[:4]:
        invoke(args)
    t = fz.write(base["dir"], "whole.toml", "x = " + text.replace("{", "[") + "\n")
    invoke(["plan", base["cert"], "-p", t, "--run", base["run"]])
