"""A small mutation tester for the pure modules (issue 18): fit/, plan/, units.py, provenance.py.

Each mutant is one AST edit: an arithmetic operator flipped (+ <-> -, * <-> /, // -> /), a
comparison flipped (< <-> <=, > <-> >=, == <-> !=), an int/float constant 0 <-> 1, and <-> or,
or a returned value replaced by None. Mutants are sampled with a fixed seed (``--stable``: by
each site's identity, so a sample survives source changes elsewhere).

Which tests judge a mutant (``--select``):
- ``calls`` (the default): the fast tests that call the mutated function. The whole fast suite
  runs once under ``mutation_calls`` (a profiler plugin) to record which functions of the pure
  modules each test calls, directly, through its fixtures or when its file was imported; the
  map is kept in ``--calls`` and remade when a test file is newer. A site outside every
  function (a constant, a default read at import) is judged by every test that calls into its
  file. Tests from the module's own test files run first: most mutants die there.
- ``files``: the test files that import the module, then those importing a pure module that
  imports it (the selection of the earlier rows in mutation.md). It misses the tests
  that reach a module through the schema, figure, report or CLI layers.

A mutant is killed when its tests fail (``-x``, not slow, not cuda), survives when they pass, is
``uncovered`` when no test calls its function (counted against, like a survivor), and times out
past ``--timeout`` seconds or 60 s + 10x its tests' recorded seconds, whichever is longer
(counted as killed: the mutant hung the tests, which the suite would notice; a fixed 120 s limit
had counted a slow run of an equivalent mutant on a loaded machine as a hang). Each job works in
its own copy of src/ and tests/ (tools/, docs/ and the README linked), made when the run starts,
so edits made while it runs do not leak in; a fork server per copy (``mutation_worker``) runs
pytest without a fresh interpreter.

    PYTHONPATH=src python3 tools/mutation.py --sample 120 --seed 18 --stable --jobs 2 \
        --out s18.tsv

``--out`` lists every mutant with its outcome (``grep survived``); ``--again`` re-runs only the
survivors of such a list (the same sample while the source is unchanged, or with
``--stable`` while each drawn site's function and expression are). The figures measured, and
the survivors judged equivalent, are in lab/mutation.md.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "afford"
TARGETS = ["fit", "plan", "units.py", "provenance.py"]
SKIP_TESTS = ("cuda", "browser", "test_layers")  # GPU, browser, imports-only test files

BINOPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
          ast.FloorDiv: ast.Div}
CMPOPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
          ast.NotEq: ast.Eq}
BOOLOPS = {ast.And: ast.Or, ast.Or: ast.And}


@dataclass(frozen=True)
class Site:
    path: Path       # relative to src/afford
    index: int       # position of the node in ast.walk order
    kind: str        # binop, cmp, const, boolop, return
    line: int
    what: str
    identity: str = ""  # file, enclosing function, kind, edit, the node's source, occurrence
    scope: str = ""     # the top-level name whose calls run it ("" outside any function)


def targets() -> list[Path]:
    out = []
    for t in TARGETS:
        p = PKG / t
        out += sorted(p.glob("*.py")) if p.is_dir() else [p]
    return [p.relative_to(PKG) for p in out if p.name != "__init__.py"]


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            ids.add(id(body[0].value))
    return ids


def _kind(node: ast.AST, skip: set[int]) -> tuple[str, str] | None:
    if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
        return "binop", f"{type(node.op).__name__} -> {BINOPS[type(node.op)].__name__}"
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in CMPOPS:
        return "cmp", f"{type(node.ops[0]).__name__} -> {CMPOPS[type(node.ops[0])].__name__}"
    if isinstance(node, ast.Constant) and id(node) not in skip \
            and type(node.value) in (int, float) \
            and node.value in (0, 1):
        return "const", f"{node.value!r} -> {1 - node.value!r}"
    if isinstance(node, ast.BoolOp):
        return "boolop", f"{type(node.op).__name__} -> {BOOLOPS[type(node.op)].__name__}"
    if isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        return "return", "return X -> return None"
    return None


def _owners(tree: ast.AST) -> dict[int, tuple[str, str]]:
    """id(node) -> (the qualified name of the innermost function or class around it, the
    top-level name of the outermost function or class around it when the node is inside a
    function: what ``mutation_calls`` records a call of; else "")."""
    out: dict[int, tuple[str, str]] = {}

    def visit(node: ast.AST, owner: str, in_def: bool) -> None:
        out[id(node)] = (owner, owner.split(".")[0] if in_def else "")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            in_def = in_def or not isinstance(node, ast.ClassDef)
            if not isinstance(node, ast.Lambda):
                owner = f"{owner}.{node.name}" if owner else node.name
        for child in ast.iter_child_nodes(node):
            visit(child, owner, in_def)

    visit(tree, "", False)
    return out


def sites(rel: Path) -> list[Site]:
    tree = ast.parse((PKG / rel).read_text())
    skip = _docstrings(tree)
    owners = _owners(tree)
    out = []
    seen: dict[str, int] = {}
    for i, node in enumerate(ast.walk(tree)):
        k = _kind(node, skip)
        if k is not None:
            owner, scope = owners.get(id(node), ("", ""))
            base = f"{rel}|{owner}|{k[0]}|{k[1]}|{ast.unparse(node)[:200]}"
            seen[base] = seen.get(base, 0) + 1
            out.append(Site(rel, i, k[0], getattr(node, "lineno", 0), k[1],
                            f"{base}|{seen[base]}", scope))
    return out


def draw(pool: list[Site], n: int, seed: int, stable: bool) -> list[Site]:
    """``n`` sites: by position in the pool (``random.sample``: any source change draws other
    sites), or (``stable``) the ``n`` whose identity hashes lowest with the seed, so a site
    stays drawn while its function and its own expression are unchanged, and a figure can be
    measured again on the same mutants after tests or other code change."""
    if not stable:
        return random.Random(seed).sample(pool, min(n, len(pool)))
    rank = lambda s: hashlib.sha256(f"{seed}|{s.identity}".encode()).hexdigest()  # noqa: E731
    return sorted(pool, key=rank)[:n]


def mutate(site: Site, source: str) -> str:
    tree = ast.parse(source)
    node = list(ast.walk(tree))[site.index]
    if site.kind == "binop":
        node.op = BINOPS[type(node.op)]()
    elif site.kind == "cmp":
        node.ops = [CMPOPS[type(node.ops[0])]()]
    elif site.kind == "const":
        node.value = 1 - node.value
    elif site.kind == "boolop":
        node.op = BOOLOPS[type(node.op)]()
    elif site.kind == "return":
        node.value = ast.Constant(value=None)
    return ast.unparse(ast.fix_missing_locations(tree))


def module_name(rel: Path) -> str:
    return "afford." + ".".join(rel.with_suffix("").parts)


def _imports(text: str, dotted: str) -> bool:
    pkg, _, leaf = dotted.rpartition(".")
    p = re.escape(pkg)
    pat = (rf"{re.escape(dotted)}\b|from {p} import [^(\n]*\b{leaf}\b"
           rf"|from {p} import \([^)]*\b{leaf}\b")
    return re.search(pat, text) is not None


def tests_for(rel: Path, hop: bool = True) -> list[str]:
    """Test files that import the module, or (``hop``) import a pure module that imports it;
    test_layers (imports only) and the GPU and browser tests are left out."""
    dotted = module_name(rel)
    names = {dotted} | ({module_name(r) for r in targets()
                         if r != rel and _imports((PKG / r).read_text(), dotted)} if hop else set())
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                   if any(_imports(p.read_text(), n) for n in names))
    return [f for f in files if not any(x in f for x in SKIP_TESTS)]


class Workspace:
    """A copy of src/, tests/ and the pytest configuration (tools/, docs/ and the README
    linked, for the tests that read them), so a run is blind to edits made while it goes, and
    a fork server (``mutation_worker``) that runs pytest there without a fresh interpreter."""

    PYTEST = ["-q", "-p", "no:cacheprovider", "-m", "not slow and not cuda", "-o", "addopts="]

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="afford-mut-"))
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(ROOT / "src", self.root / "src", ignore=ignore)
        shutil.copytree(ROOT / "tests", self.root / "tests", ignore=ignore)
        shutil.copy2(ROOT / "pyproject.toml", self.root / "pyproject.toml")
        for name in ("tools", "docs", "README.md"):
            (self.root / name).symlink_to(ROOT / name)
        self.worker = subprocess.Popen(
            [sys.executable, str(ROOT / "tools" / "mutation_worker.py"), str(self.root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.worker.stdout.readline().strip() == "ready"

    def pytest(self, tests: list[str], timeout: float) -> bool:
        """Whether ``tests`` pass (``-x``: stop at the first failure) in a forked child."""
        self.worker.stdin.write(json.dumps([timeout, "-x", *self.PYTEST, *tests]) + "\n")
        self.worker.stdin.flush()
        answer = self.worker.stdout.readline().strip()
        if answer == "timeout":
            raise subprocess.TimeoutExpired("pytest", timeout)
        return answer == "0"

    def record_calls(self, path: Path) -> None:
        """The whole fast suite once in a fresh interpreter, with ``mutation_calls``."""
        skip = [f"--ignore=tests/{p.name}" for p in (self.root / "tests").glob("test_*.py")
                if any(x in p.name for x in SKIP_TESTS)]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": f"{self.root / 'src'}{os.pathsep}{ROOT / 'tools'}",
               "AFFORD_MUT_PKG": str(self.root / "src" / "afford"),
               "AFFORD_MUT_CALLS": str(path.resolve())}
        subprocess.run([sys.executable, "-m", "pytest", *self.PYTEST, *skip,
                        "-p", "mutation_calls", "tests"],
                       cwd=self.root, env=env, capture_output=True, check=False)

    def close(self) -> None:
        self.worker.stdin.close()
        self.worker.wait()
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass(frozen=True)
class Calls:
    """What ``mutation_calls`` recorded: per passing fast test, the (file, top-level name)
    pairs it called, and each test's seconds in that run (under the profiler)."""

    tests: dict[str, set[tuple[str, str]]]
    seconds: dict[str, float]


def calls_map(path: Path, space: Workspace) -> Calls:
    """Which functions of the pure modules each fast test calls (``mutation_calls``), made
    once over the whole fast suite and kept in ``path`` while no test file is newer."""
    newest = max(p.stat().st_mtime for p in (ROOT / "tests").rglob("*.py"))
    fresh = not path.exists() or path.stat().st_mtime < newest
    t0 = time.monotonic()
    if fresh:
        space.record_calls(path)
    raw = json.loads(path.read_text())
    failed, seconds = raw.pop("", []), raw.pop("#seconds", {})
    if fresh:
        print(f"calls of {len(raw)} tests recorded in {time.monotonic() - t0:.0f} s -> {path}",
              flush=True)
    if failed:
        print(f"{len(failed)} test(s) fail on the unmutated tree and judge no mutant: "
              + ", ".join(failed[:5]), flush=True)
    return Calls({k: {tuple(c) for c in v} for k, v in raw.items()}, seconds)


def time_limit(tests: list[str], floor: float, seconds: dict[str, float]) -> float:
    """A mutant's tests time out past ``floor`` or 60 s + 10x their recorded seconds, whichever
    is longer: a time-out then means a hang, not a slow machine or a slower start."""
    return max(floor, 60.0 + 10.0 * sum(seconds.get(t, 0.0) for t in tests))


def tests_calling(site: Site, calls: Calls) -> list[str]:
    """The fast tests that call the site's top-level function (any function of its file,
    for a site outside every function: a constant or default read at import)."""
    rel = str(site.path)
    if site.scope:
        return [t for t, c in calls.tests.items() if (rel, site.scope) in c]
    return [t for t, c in calls.tests.items() if any(p == rel for p, _ in c)]


def run_one(site: Site, source: str, space: Workspace, timeout: float,
            calls: Calls | None) -> str:
    """With ``calls``: the tests that call the mutated function, those in the module's own
    test files first. Without: the module's own test files, then the files of the modules
    that import it (the selection of the earlier rows in mutation.md)."""
    if calls is not None:
        calling = tests_calling(site, calls)
        if not calling:
            return "uncovered"
        own = set(tests_for(site.path, hop=False))  # their tests first: most mutants die there
        first = [t for t in calling if t.split("::")[0] in own]
        rest = [t for t in calling if t.split("::")[0] not in own]
        groups = [g for g in (first, rest) if g]
    else:
        direct, everything = tests_for(site.path, hop=False), tests_for(site.path)
        if not everything:
            return "untested"
        groups = [g for g in (direct, [f for f in everything if f not in direct]) if g]
    target = space.root / "src" / "afford" / site.path
    target.write_text(mutate(site, source))
    try:
        seconds = calls.seconds if calls is not None else {}
        return "killed" if any(not space.pytest(g, time_limit(g, timeout, seconds))
                               for g in groups) else "survived"
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        target.write_text(source)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=120)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--stable", action="store_true",
                    help="draw by each site's identity (stays drawn across source changes "
                         "elsewhere), not by its position in the list of sites")
    ap.add_argument("--only", default="", help="restrict to paths containing this text")
    ap.add_argument("--out", type=Path, help="write outcome, path, line, kind, what (TSV)")
    ap.add_argument("--again", type=Path, help="a previous --out: rerun only its survivors "
                    "(same sample), keep its other outcomes")
    ap.add_argument("--select", choices=("calls", "files"), default="calls",
                    help="which tests judge a mutant: those that call its function (default), "
                         "or the test files that import its module (the older selection)")
    ap.add_argument("--calls", type=Path, default=Path(tempfile.gettempdir()) / "afford-calls.json",
                    help="where the map of test -> called functions is kept (remade when a "
                         "test file is newer)")
    args = ap.parse_args()
    pool = [s for rel in targets() for s in sites(rel) if args.only in str(rel)]
    sources = {rel: (PKG / rel).read_text() for rel in {s.path for s in pool}}
    chosen = sorted(draw(pool, args.sample, args.seed, args.stable),
                    key=lambda s: (str(s.path), s.line))
    kept = []
    if args.again:
        before = {tuple(r.split("\t")[1:]): r.split("\t")[0]
                  for r in args.again.read_text().splitlines()}
        key = lambda s: (str(s.path), str(s.line), s.kind, s.what)  # noqa: E731
        done = ("killed", "timeout", "untested")
        kept = [(s, before[key(s)]) for s in chosen if before.get(key(s)) in done]
        chosen = [s for s in chosen if before.get(key(s)) not in done]
    copies = [Workspace() for _ in range(args.jobs)]
    free = list(copies)
    t0 = time.monotonic()
    results = list(kept)
    try:
        calls = None if args.select == "files" else calls_map(args.calls, copies[0])

        def work(site: Site) -> tuple[Site, str, float]:
            d = free.pop()
            t = time.monotonic()
            try:
                return site, run_one(site, sources[site.path], d, args.timeout, calls), \
                    time.monotonic() - t
            finally:
                free.append(d)

        with ThreadPoolExecutor(args.jobs) as ex:
            for site, outcome, took in ex.map(work, chosen):
                results.append((site, outcome))
                print(f"{outcome:9s} {site.path}:{site.line} {site.kind} {site.what} "
                      f"({took:.1f} s)", flush=True)
    finally:
        for d in copies:
            d.close()
    if args.out:
        args.out.write_text("".join(f"{o}\t{s.path}\t{s.line}\t{s.kind}\t{s.what}\n"
                                    for s, o in results))
    counts = {k: sum(1 for _, o in results if o == k)
              for k in ("killed", "timeout", "survived", "uncovered", "untested")}
    dead = counts["killed"] + counts["timeout"]
    print(f"\n{len(pool)} sites, {len(results)} mutants sampled (seed {args.seed}), "
          f"{time.monotonic() - t0:.0f} s")
    for k, v in counts.items():
        print(f"  {k:9s} {v}")
    print(f"  score     {dead / len(results):.1%} (killed + timeout) / mutants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
