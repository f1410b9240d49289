"""A small mutation tester for the pure modules (issue 18): fit/, plan/, units.py, provenance.py.

Each mutant is one AST edit: an arithmetic operator flipped (+ <-> -, * <-> /, // -> /), a
comparison flipped (< <-> <=, > <-> >=, == <-> !=), an int/float constant 0 <-> 1, and <-> or,
or a returned value replaced by None. Mutants are sampled with a fixed seed; each runs the test
files that import its module (``-x``, not slow, not cuda) against a temporary copy of src/,
so nothing in the tree changes. A mutant is killed when those tests fail, survives when they
pass, and times out past ``--timeout`` seconds (counted as killed: the mutant hung the tests,
which the suite would notice).

    PYTHONPATH=src python3 benches/mutation.py --sample 120 --seed 18 --jobs 2 --out s18.tsv

``--out`` lists every mutant with its outcome (``grep survived``); ``--again`` re-runs only the
survivors of such a list (valid while the source is unchanged: a changed file draws another
sample, since the sample is taken from the list of every site). The figures measured, and the
survivors judged equivalent, are in benches/mutation.md.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
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
    if isinstance(node, ast.Constant) and id(node) not in skip and type(node.value) in (int, float) \
            and node.value in (0, 1):
        return "const", f"{node.value!r} -> {1 - node.value!r}"
    if isinstance(node, ast.BoolOp):
        return "boolop", f"{type(node.op).__name__} -> {BOOLOPS[type(node.op)].__name__}"
    if isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        return "return", "return X -> return None"
    return None


def _owners(tree: ast.AST) -> dict[int, str]:
    """id(node) -> the qualified name of the innermost function or class around it."""
    out: dict[int, str] = {}

    def visit(node: ast.AST, owner: str) -> None:
        out[id(node)] = owner
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            owner = f"{owner}.{node.name}" if owner else node.name
        for child in ast.iter_child_nodes(node):
            visit(child, owner)

    visit(tree, "")
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
            base = f"{rel}|{owners.get(id(node), '')}|{k[0]}|{k[1]}|{ast.unparse(node)[:200]}"
            seen[base] = seen.get(base, 0) + 1
            out.append(Site(rel, i, k[0], getattr(node, "lineno", 0), k[1],
                            f"{base}|{seen[base]}"))
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


def mutate(site: Site) -> str:
    tree = ast.parse((PKG / site.path).read_text())
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
    pat = rf"{re.escape(dotted)}\b|from {p} import [^(\n]*\b{leaf}\b|from {p} import \([^)]*\b{leaf}\b"
    return re.search(pat, text) is not None


def tests_for(rel: Path, hop: bool = True) -> list[str]:
    """Test files that import the module, or (``hop``) import a pure module that imports it;
    test_layers (imports only) and the GPU and browser tests are left out."""
    dotted = module_name(rel)
    names = {dotted} | ({module_name(r) for r in targets()
                         if r != rel and _imports((PKG / r).read_text(), dotted)} if hop else set())
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                   if any(_imports(p.read_text(), n) for n in names))
    return [f for f in files if not any(x in f for x in ("cuda", "browser", "test_layers"))]


def _pytest(tests: list[str], src: Path, timeout: float) -> bool:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                        "-m", "not slow and not cuda", "-o", "addopts=", *tests],
                       cwd=ROOT, env=env, capture_output=True, timeout=timeout)
    return r.returncode == 0


def run_one(site: Site, src: Path, timeout: float) -> str:
    """The module's own test files first (cheap: most mutants die there), then the files of
    the modules that import it."""
    direct, everything = tests_for(site.path, hop=False), tests_for(site.path)
    if not everything:
        return "untested"
    target = src / "afford" / site.path
    original = target.read_text()
    target.write_text(mutate(site))
    try:
        if direct and not _pytest(direct, src, timeout):
            return "killed"
        rest = [f for f in everything if f not in direct]
        return "survived" if not rest or _pytest(rest, src, timeout) else "killed"
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        target.write_text(original)


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
    args = ap.parse_args()
    pool = [s for rel in targets() for s in sites(rel) if args.only in str(rel)]
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
    copies = []
    for _ in range(args.jobs):
        d = Path(tempfile.mkdtemp(prefix="afford-mut-"))
        shutil.copytree(ROOT / "src", d / "src", ignore=shutil.ignore_patterns("__pycache__"))
        copies.append(d)
    free = list(copies)
    t0 = time.monotonic()

    def work(site: Site) -> tuple[Site, str]:
        d = free.pop()
        try:
            return site, run_one(site, d / "src", args.timeout)
        finally:
            free.append(d)

    results = list(kept)
    try:
        with ThreadPoolExecutor(args.jobs) as ex:
            for site, outcome in ex.map(work, chosen):
                results.append((site, outcome))
                print(f"{outcome:9s} {site.path}:{site.line} {site.kind} {site.what}", flush=True)
    finally:
        for d in copies:
            shutil.rmtree(d, ignore_errors=True)
    if args.out:
        args.out.write_text("".join(f"{o}\t{s.path}\t{s.line}\t{s.kind}\t{s.what}\n"
                                    for s, o in results))
    counts = {k: sum(1 for _, o in results if o == k)
              for k in ("killed", "timeout", "survived", "untested")}
    dead = counts["killed"] + counts["timeout"]
    print(f"\n{len(pool)} sites, {len(results)} mutants sampled (seed {args.seed}), "
          f"{time.monotonic() - t0:.0f} s")
    for k, v in counts.items():
        print(f"  {k:9s} {v}")
    print(f"  score     {dead / len(results):.1%} (killed + timeout) / mutants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
