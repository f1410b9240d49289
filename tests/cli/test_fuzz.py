"""The fuzz campaign of issues 14 and 33: every input file kind and number flag, broken by
hypothesis, through the command line in-process. Whatever the input: exit 0, 1, 2 or 3,
never a traceback, a one-line reason on stderr with exit 2, and no NaN, infinite or negative
quantity printed by a command that succeeded (a NaN or inf that is the user's own string
shown back, a name or a reason, is no number).

The families (issue 33, item 7): certificates (the synthetic P100 with a memory law, and
the H200 one with its probes and step-time model; mutated, and one number at a time set to
an edge the readers let through: 0, 1e-9, 1e18, ...), platforms, runs, ledgers, manifests,
constants (``size --constants``), bars files, milestones eval logs (JSON, JSON lines, TSV),
ladders and plans (``report --plan``, ``milestones --plan``), and every numeric flag of every
command (certify, gate and levers given an input refused after their flags are read, so
that a valid value measures nothing) and ``AFFORD_CHILD_TIMEOUT``.

Three sizes of run:

- the default run (``-m "not slow"``): 30 examples per family, 390 in all;
- the slow run (``-m slow``, as CI runs it): 100 per family, 1,300 in all;
- the long campaign: ``AFFORD_FUZZ_TOTAL=10000 pytest -m slow tests/cli/test_fuzz.py`` (or
  ``AFFORD_FUZZ_EXAMPLES=N`` per family); with ``AFFORD_FUZZ_LOG=FILE`` (census mode) each
  failure is recorded (command, exception, the deepest afford frame) with its input kept
  beside FILE, every input's exit code in ``FILE.codes``, the figures in
  ``FILE.summary.json``, and the campaign goes on.

The campaign of issue 33, 2026-12-04 (2 shared CPU cores, load 1-14):

- first passes (census, 200 and 834 per family) after the bounded readers: 4 crash
  sites, each fixed at its root: a milestones TSV log cell past csv's field limit; a plan
  JSON with a run but no run row (``report --plan`` took ``next()`` of nothing); ``bars
  --heldout batches:`` with a 5000-digit number (``int()`` refused it; the same ``int()``
  of a regex's digits, found by reading for it, in ``ladder --params N:dXLY``, tinylm and
  hf sizes, a ledger eval reading's tokens); a ladder whose bars path holds a NUL byte;
  and one output, ``history show`` printing ``-0 B`` (a ledger reading in bytes, seconds
  or a rate is now never negative).
- a directed sweep beside it: every numeric leaf of both certificates (150 and 346 paths,
  list entries past the first left out) at 0, 1e-9, 1, 1e18, 1e59 and -1e-9, through all
  seven commands that read a certificate: 20,832 invocations, 2 sites: a device memory of
  1 byte (its budget of 0 bytes divided by; a device's memory is now at least a MiB) and
  the checker's own false positive (``R^2 -0.0000, params``).
- two campaigns after every fix, 12 families x 834 (10,008 inputs each): 0 tracebacks, 0
  failing inputs; exit codes 0: 934 / 998, 1: 490 / 409, 2: 8,584 / 8,601.
- the last, with the edges family, at 13096f9: ``AFFORD_FUZZ_TOTAL=10000``, 13 families x
  770, 10,010 inputs in 2 min 36 s at load 1-2: 0 tracebacks, 0 failing inputs; exit codes
  0: 1,344, 1: 448, 2: 8,218, none outside 0-3 (by command: plan 513 / 0 / 1,277,
  milestones 9 / 347 / 2,472, report 222 / 0 / 873, certify, gate and levers 0 / 0 / 215).

The campaign of issue 14, 2026-12-03 (2 shared CPU cores, load 4-5), 25,000 examples in all
(7 kinds then):

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
import random
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
KINDS = ["certs", "probe_certs", "edges", "platforms", "runs", "manifests", "plans",
         "ledgers", "constants", "bars", "logs", "ladders", "flags"]
# per kind: AFFORD_FUZZ_EXAMPLES, else AFFORD_FUZZ_TOTAL (inputs in all) shared out, else 100
SLOW = int(os.environ.get("AFFORD_FUZZ_EXAMPLES") or
           -(-int(os.environ.get("AFFORD_FUZZ_TOTAL", 100 * len(KINDS))) // len(KINDS)))
_BAD_NUMBER = re.compile(r"(?<![\w.])(nan|inf|infinity)(?![\w])", re.IGNORECASE)
_NEGATIVE_QUANTITY = re.compile(r"(?<![\w.\-+])-(\d{1,3}(,\d{3})+|\d+)(\.\d+)?(e[+-]?\d+)?\s?"
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


def _tally(args, outcome) -> None:
    """Census mode: one line per input, the command and how it ended (an exit code, or
    ``traceback``), for the campaign's figures."""
    with open(LOG + ".codes", "a", encoding="utf-8") as fh:
        fh.write(f"{args[0]}\t{outcome}\n")


def invoke(args, env=None):
    r = runner.invoke(app, [str(a) for a in args], catch_exceptions=True, env=env)
    text = (r.stdout or "") + (r.stderr if r.stderr_bytes is not None else "")
    exc = r.exception
    crashed = exc is not None and not isinstance(exc, SystemExit)
    detail = "".join(traceback.format_exception(exc)) if crashed else text
    if LOG:
        _tally([str(a) for a in args], "traceback" if crashed else r.exit_code)
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
        if r.exit_code == 2:  # bad input: one paragraph on stderr naming it
            assert (r.stderr or "").strip(), text[-2000:]
    except AssertionError as exc:
        if not LOG:
            raise
        _census(args, exc)
    return r


_WHO = ["--device", "P100", "--command", "afford fuzz", "--commit", "abc", "--torch", "2.11.0"]


def _ok(args) -> None:
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in (0, 1), r.output


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The valid inputs every family mutates, each checked to be read as it is: the
    synthetic P100 certificate and the H200 one with probes, a platform, runs, a manifest,
    a plan, a ledger, constants, a corpus with its bars, a milestones ladder and two runs'
    eval logs."""
    d = tmp_path_factory.mktemp("fuzz")
    cert = fz.write(d, "cert.json", fz.to_json(fz.cert_doc()))
    probe_cert = fz.write(d, "probe-cert.json", fz.to_json(fz.probe_cert_doc()))
    platform = fz.write(d, "platform.toml", fz.to_toml(fz.platform_doc()))
    run = fz.write(d, "run.toml", fz.to_toml(fz.run_doc()))
    probe_run = fz.write(d, "probe-run.toml", fz.to_toml(fz.probe_run_doc()))
    manifest = fz.write(d, "manifest.json", fz.to_json(fz.manifest_doc()))
    constants = fz.write(d, "constants.toml", fz.to_toml(fz.constants_doc()))
    r = runner.invoke(app, ["plan", str(cert), "-p", str(platform), "--run", str(run),
                            "--json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    fz.write(d, "plan.json", r.stdout)
    _ok(["plan", probe_cert, "-p", platform, "--run", probe_run])
    _ok(["ladder", probe_cert, "--params", "1M,10M"])
    _ok(["size", cert, "--seq", "1024", "--batch", "8", "--constants", constants])
    ledger = d / "ledger.tsv"
    for q, v, u, steps in [("tinylm/fp32/seq=512/warm_step_seconds", "1.0", "s", "3-14"),
                           ("tinylm/fp32/seq=512/step0_seconds", "10", "s", "0"),
                           ("tinylm/fp32/seq=512/peak_reserved_bytes", "12884901888", "B", "")]:
        r = runner.invoke(app, ["history", "add", "-f", str(ledger), "--quantity", q,
                                "--value", v, "--unit", u, "--steps", steps, *_WHO])
        assert r.exit_code == 0, r.output
    corpus = d / "corpus.bin"
    corpus.write_bytes(bytes(random.Random(3).choice(b"abcdefgh \n") for _ in range(20_000)))
    r = runner.invoke(app, ["bars", str(corpus), "--heldout", "last:2KB", "--order", "1,2",
                            "--manifest", str(manifest), "-o", str(d / "bars.json"), "--json"])
    assert r.exit_code == 0, r.output
    bars = json.loads((d / "bars.json").read_text())
    window = bars["window"]["sha256"]
    ladder = fz.write(d, "ladder.toml", fz.to_toml(fz.ladder_doc()))
    logs = {run_: fz.write(d, f"log-{run_}.json", fz.to_json(fz.eval_log(window, run_, b0)))
            for run_, b0 in (("a", 3.0), ("b", 3.2))}
    base = {"dir": d, "cert": cert, "probe_cert": probe_cert, "platform": platform, "run": run,
            "probe_run": probe_run, "manifest": manifest, "constants": constants,
            "plan": plan, "plan_path": d / "plan.json", "ledger": ledger.read_text(),
            "corpus": corpus, "bars": bars, "window": window, "ladder": ladder, "logs": logs}
    _ok(_milestones(base))
    yield base
    if LOG:
        _summary()


def _summary() -> None:
    """Census mode: the campaign's figures beside the log (``LOG.summary.json``): inputs,
    tracebacks, exit codes in all and by command, and the failures recorded."""
    from collections import Counter

    with open(LOG + ".codes", encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh if line.strip()]
    failures = []
    if os.path.exists(LOG):
        with open(LOG, encoding="utf-8") as fh:
            failures = [line.rstrip("\n") for line in fh]
    codes = Counter(code for _, code in rows)
    by_command: dict[str, Counter] = {}
    for command, code in rows:
        by_command.setdefault(command, Counter())[code] += 1
    with open(LOG + ".summary.json", "w", encoding="utf-8") as fh:
        json.dump({"inputs": len(rows), "tracebacks": codes.pop("traceback", 0),
                   "exit_codes": dict(sorted(codes.items())),
                   "by_command": {k: dict(sorted(v.items())) for k, v in sorted(
                       by_command.items())},
                   "failures": len(failures), "failing_inputs": failures}, fh, indent=1)


def _milestones(b, ladder=None, logs=None, *extra):
    logs = {**b["logs"], **(logs or {})}
    return ["milestones", ladder or b["ladder"], *[x for run_, path in logs.items()
                                                   for x in ("--log", f"{run_}={path}")],
            *extra]


def _commands_reading_cert(c, b):
    return [["plan", c, "-p", b["platform"], "--run", b["run"]],
            ["preflight", c, "-p", b["platform"], "--run", b["run"], "--json"],
            ["ladder", c, "--params", "1M,10M"], ["size", c, "--seq", "1024"],
            ["compare", b["cert"], c, "--tol", "5%"],
            ["report", c, "-o", b["dir"] / "out.md", "--force"],
            ["history", "add", "-f", b["dir"] / "l2.tsv", "--cert", c]]


def _cert_case(b, doc, k):
    c = fz.write(b["dir"], "mut-cert.json", fz.to_json(doc))
    invoke(_commands_reading_cert(c, b)[k])


def _probe_cert_case(b, doc, k):
    """The H200 certificate with probes: the checkpoint write, GEMM ceilings and the
    step-time model reach plan, preflight, ladder, predict, report, compare, history."""
    c = fz.write(b["dir"], "mut-probe-cert.json", fz.to_json(doc))
    args = [["plan", c, "-p", b["platform"], "--run", b["probe_run"]],
            ["preflight", c, "-p", b["platform"], "--run", b["probe_run"]],
            ["ladder", c, "--params", "1M,10M,124M"],
            ["predict", c, "--batch", "8", "--seq", "1024", "-p", b["platform"]],
            ["report", c, "-o", b["dir"] / "probe.md", "--force"],
            ["compare", b["probe_cert"], c, "--tol", "5%"],
            ["history", "add", "-f", b["dir"] / "l3.tsv", "--cert", c]][k]
    invoke(args)


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
        args = [["report", "--plan", f, "-o", b["dir"] / "p.md", "--force"],
                _milestones(b, None, None, "--plan", f)][k]
    invoke(args)


def _ledger_case(b, row, col, value, k):
    lines = b["ledger"].splitlines()
    row = 1 + row % (len(lines) - 1)
    cells = lines[row].split("\t")
    cells[col % len(cells)] = value
    lines[row] = "\t".join(cells)
    f = fz.write(b["dir"], "mut-ledger.tsv", "\n".join(lines) + "\n")
    args = [["history", "show", "-f", f],
            ["report", b["cert"], "--history", f, "-o", b["dir"] / "h.md", "--force"],
            _milestones(b, None, None, "--history", f)][k % 3]
    invoke(args)


def _constants_case(b, doc):
    f = fz.write(b["dir"], "mut-constants.toml", fz.to_toml(doc))
    invoke(["size", b["cert"], "--seq", "1024", "--batch", "8", "--constants", f])


def _bars_case(b, doc):
    fz.write(b["dir"], "mut-bars.json", fz.to_json(doc))
    ladder = fz.write(b["dir"], "mut-bars-ladder.toml",
                      fz.to_toml({**fz.ladder_doc(), "bars": "mut-bars.json"}))
    invoke(_milestones(b, ladder))


def _log_case(b, doc, form):
    """An eval log as a JSON list, JSON lines or TSV (a TSV of the mutated rows' cells)."""
    if form == "json":
        text = fz.to_json(doc)
    elif form == "lines" and isinstance(doc, list):
        text = "\n".join(fz.to_json(x) for x in doc) + "\n"
    else:
        rows = doc if isinstance(doc, list) else [doc]
        keys = list(dict.fromkeys(k for r in rows if isinstance(r, dict) for k in r))
        text = "\t".join(map(str, keys)) + "\n" + "".join(
            "\t".join(str(r.get(k, "")) if isinstance(r, dict) else str(r) for k in keys)
            .replace("\n", " ") + "\n" for r in rows)
    f = fz.write(b["dir"], "mut-log.txt", text)
    invoke(_milestones(b, None, {"a": f}))


def _ladder_case(b, doc):
    f = fz.write(b["dir"], "mut-ladder.toml", fz.to_toml(doc))
    invoke(_milestones(b, f))


CELL = st.one_of(st.sampled_from([str(x) for x in fz.NASTY_NUMBERS if not isinstance(x, fz.Raw)]
                                 + fz.NASTY_STRINGS + [fz.HUGE_INT, "[" * 1000]),
                 st.text(max_size=10).map(lambda s: s.replace("\t", "").replace("\n", "")))
FLAG_VALUE = st.one_of(st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e308", "1e999",
                                        "-0", fz.HUGE_INT, "[/]", "", "1e-320", "5%",
                                        "1e999h", "0h", "-5h", "-1M", "1e30", "1.5", "2^0",
                                        "2^99", "99999999999999999999", "3", "1KB", "0.5",
                                        "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00",
                                        "1e-300", "7", "1000"]),
                       st.floats().map(str), st.integers().map(str), st.text(max_size=6))
# Every numeric flag (and AFFORD_CHILD_TIMEOUT). Flags of commands that measure are given
# with an input that is refused after the flags are read (an output folder that does not
# exist, a workload that is not there), so a valid value measures nothing.
NOWHERE = "{dir}/no/such/folder/c.json"
FLAGS = [["ladder", "{cert}", "--params", "1M", "--ratio", "{v}"],
         ["ladder", "{cert}", "--params", "{v}"],
         ["ladder", "{cert}", "--params", "1M", "--budget", "{v}"],
         ["ladder", "{cert}", "--params", "1M", "--memory-fraction", "{v}"],
         ["size", "{cert}", "--seq", "{v}"],
         ["size", "{cert}", "--seq", "1024", "--batch", "{v}"],
         ["size", "{cert}", "--seq", "1024", "--memory-fraction", "{v}"],
         ["size", "{cert}", "--seq", "1024", "--budget", "{v}"],
         ["predict", "{cert}", "--batch", "{v}", "--seq", "512"],
         ["predict", "{cert}", "--batch", "8", "--seq", "{v}"],
         ["predict", "{cert}", "--batch", "8", "--seq", "512", "--memory-fraction", "{v}"],
         ["compare", "{cert}", "{cert}", "--tol", "{v}"],
         ["history", "add", "-f", "{dir}/flags.tsv", "--quantity", "x/loss", "--value", "{v}",
          *_WHO],
         ["history", "add", "-f", "{dir}/flags.tsv", "--quantity", "m/step0_seconds",
          "--value", "1", "--unit", "s", "--steps", "{v}", *_WHO],
         ["history", "add", "-f", "{dir}/flags.tsv", "--quantity", "x/loss", "--value", "2",
          "--date", "{v}", *_WHO],
         ["bars", "{corpus}", "--heldout", "last:2KB", "--order", "1", "--add-k", "{v}"],
         ["bars", "{corpus}", "--heldout", "last:2KB", "--order", "1", "--discount", "{v}"],
         ["bars", "{corpus}", "--heldout", "last:2KB", "--order", "1", "--method",
          "streaming", "--buckets", "{v}"],
         ["bars", "{corpus}", "--heldout", "last:2KB", "--order", "1", "--memory", "{v}"],
         ["bars", "{corpus}", "--heldout", "last:{v}", "--order", "1"],
         ["bars", "{corpus}", "--heldout", "batches:{v}x2x64", "--order", "1"],
         ["bars", "{corpus}", "--heldout", "last:2KB", "--order", "{v}"],
         ["certify", "--children", "{v}", "--out", NOWHERE],
         ["certify", "--sweep", "s={v}", "--out", NOWHERE],
         ["certify", "--dist-timeout", "{v}", "--out", NOWHERE],
         ["levers", "{dir}/no-such-cert.json", "--children", "{v}"],
         ["gate", "-w", "no_such_module_xyz:f", "--repeats", "{v}"],
         ["gate", "-w", "no_such_module_xyz:f", "--steps", "{v}"],
         ["gate", "-w", "no_such_module_xyz:f", "--seed", "{v}"],
         ["gate", "-w", "no_such_module_xyz:f", "--line", "{v}"],
         ["gate", "-w", "no_such_module_xyz:f", "--tol", "init-loss={v}"],
         ["pin", "--generator", "no_such_module_xyz:f", "--param", "n={v}", "-o",
          "{dir}/pinned.json", "--force"],
         ["env:AFFORD_CHILD_TIMEOUT", "certify", "--out", NOWHERE]]


def _flag_case(b, k, v):
    args = [a.format(cert=b["cert"], dir=b["dir"], corpus=b["corpus"], v=v) for a in FLAGS[k]]
    if args[0].startswith("env:"):  # an environment holds no NUL byte: no user can set one
        invoke(args[1:], env={args[0][4:]: v.replace("\x00", "")})
    else:
        invoke(args)


def _campaign(n):
    cert = st.tuples(fz.mutated(fz.cert_doc()), st.integers(0, 6))
    probe_cert = st.tuples(fz.mutated(fz.probe_cert_doc()), st.integers(0, 6))
    cert0, probe0 = fz.cert_doc(), fz.probe_cert_doc()
    edge = st.one_of(
        st.tuples(st.just(False), fz.edged(cert0, fz.numeric_paths(cert0)), st.integers(0, 6)),
        st.tuples(st.just(True), fz.edged(probe0, fz.numeric_paths(probe0)),
                  st.integers(0, 6)))
    platform = st.tuples(fz.mutated(fz.platform_doc()), st.integers(0, 1))
    run = st.tuples(fz.mutated(fz.run_doc()), st.integers(0, 1))
    manifest = st.tuples(fz.mutated(fz.manifest_doc()), st.integers(0, 1))
    constants = fz.mutated(fz.constants_doc())
    ladder = fz.mutated(fz.ladder_doc())

    @_settings(n)
    @given(case=cert)
    def certs(base, case):
        _cert_case(base, *case)

    @_settings(n)
    @given(case=probe_cert)
    def probe_certs(base, case):
        _probe_cert_case(base, *case)

    @_settings(n)
    @given(case=edge)
    def edges(base, case):
        probes, doc, k = case
        (_probe_cert_case if probes else _cert_case)(base, doc, k)

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
        _json_case(base, "plan", doc, data.draw(st.integers(0, 1)))

    @_settings(n)
    @given(row=st.integers(0, 50), col=st.integers(0, 20), value=CELL, k=st.integers(0, 2))
    def ledgers(base, row, col, value, k):
        _ledger_case(base, row, col, value, k)

    @_settings(n)
    @given(doc=constants)
    def constants_files(base, doc):
        _constants_case(base, doc)

    @_settings(n)
    @given(data=st.data())
    def bars(base, data):
        _bars_case(base, data.draw(fz.mutated(base["bars"])))

    @_settings(n)
    @given(data=st.data(), form=st.sampled_from(["json", "lines", "tsv"]))
    def logs(base, data, form):
        _log_case(base, data.draw(fz.mutated(fz.eval_log(base["window"], "a"))), form)

    @_settings(n)
    @given(doc=ladder)
    def ladders(base, doc):
        _ladder_case(base, doc)

    @_settings(n)
    @given(k=st.integers(0, len(FLAGS) - 1), v=FLAG_VALUE)
    def flags(base, k, v):
        _flag_case(base, k, v)

    return {"certs": certs, "probe_certs": probe_certs, "edges": edges,
            "platforms": platforms, "runs": runs,
            "manifests": manifests, "plans": plans, "ledgers": ledgers,
            "constants": constants_files, "bars": bars, "logs": logs, "ladders": ladders,
            "flags": flags}


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
    invoke(["report", "--plan", f, "-o", base["dir"] / "w.md", "--force"])
    invoke(_milestones(base, None, {"a": f}))
    invoke(_milestones(base, None, None, "--plan", f))
    fz.write(base["dir"], "whole-bars.json", text)
    invoke(_milestones(base, fz.write(base["dir"], "whole-ladder.toml", fz.to_toml(
        {**fz.ladder_doc(), "bars": "whole-bars.json"}))))
    t = fz.write(base["dir"], "whole.toml", "x = " + text.replace("{", "[") + "\n")
    invoke(["plan", base["cert"], "-p", t, "--run", base["run"]])
    invoke(_milestones(base, t))
    invoke(["size", base["cert"], "--seq", "1024", "--constants", t])
