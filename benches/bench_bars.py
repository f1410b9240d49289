"""Benchmark of ``afford bars``: byte 5-gram BPB of 100 MB on this machine, against a plain
Python dict counter; and the accuracy of the estimate on a Markov source at 10 MB.

No downloads: the 100 MB are made here by a Zipf word generator (pseudo-words over English
letter frequencies, Zipf(1.1) ranks, spaces, punctuation and newlines), seeded, so every
run counts the same bytes. The dict counter counts only the 5-grams (less work than afford,
which derives every order's counts, continuation counts and context statistics); it is timed
on a prefix of the data and extrapolated linearly (its cost per byte is flat), and says so.
The load average (``uptime``) is printed beside each time: the machine may be shared.

    PYTHONPATH=src python3 benches/bench_bars.py [--mb 100] [--dict-mb 4] [--markov-mb 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from afford.bars import count_exact, score
from afford.bars.window import cut, parse_heldout, sha256_hex

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.bars_sources import markov  # noqa: E402  (sources with a known entropy rate)

# English letter frequencies (percent), a-z; Lewand 2000, "Cryptological Mathematics", p. 36.
LETTER_FREQ = [8.167, 1.492, 2.782, 4.253, 12.702, 2.228, 2.015, 6.094, 6.966, 0.153, 0.772,
               4.025, 2.406, 6.749, 7.507, 1.929, 0.095, 5.987, 6.327, 9.056, 2.758, 0.978,
               2.360, 0.150, 1.974, 0.074]


def zipf_text(n_bytes: int, seed: int = 0, vocab: int = 50_000, s: float = 1.1) -> np.ndarray:
    """``n_bytes`` of pseudo-English: Zipf-ranked pseudo-words and separators (uint8)."""
    rng = np.random.default_rng(seed)
    lens = np.sort(np.clip(2 + rng.poisson(4.0, vocab), 2, 14))  # frequent words are short
    p = np.array(LETTER_FREQ) / sum(LETTER_FREQ)
    letters = (rng.choice(26, size=int(lens.sum()), p=p) + ord("a")).astype(np.uint8)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    ranks = 1.0 / np.arange(1, vocab + 1) ** s
    ranks /= ranks.sum()
    m = int(n_bytes / float(ranks @ (lens + 1)) * 1.05) + 64
    ids = rng.choice(vocab, size=m, p=ranks)
    seps = rng.choice(np.frombuffer(b" ,.\n", np.uint8), size=m, p=[0.90, 0.05, 0.04, 0.01])
    wl = lens[ids]
    total = wl + 1
    pos = np.concatenate(([0], np.cumsum(total)[:-1]))
    out = np.empty(int(total.sum()), np.uint8)
    word_of = np.repeat(np.arange(m), wl)
    within = np.arange(len(word_of)) - np.repeat(np.cumsum(wl) - wl, wl)
    out[np.repeat(pos, wl) + within] = letters[starts[ids][word_of] + within]
    out[pos + wl] = seps
    if len(out) < n_bytes:
        raise RuntimeError("generator produced too few bytes")
    return out[:n_bytes]


def dict_count(data: bytes, n: int = 5) -> dict[bytes, int]:
    counts: dict[bytes, int] = {}
    for i in range(len(data) - n + 1):
        g = data[i:i + n]
        counts[g] = counts.get(g, 0) + 1
    return counts


def load() -> str:
    return os.getloadavg().__repr__() if hasattr(os, "getloadavg") else "?"


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return f"load average {load()}"


def commit() -> str:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return r.stdout.strip() + ("-dirty" if dirty else "")
    except OSError:
        return "?"


def bench_afford(data: np.ndarray, heldout: str, order: int) -> dict:
    w = cut(parse_heldout(heldout), len(data))
    window = np.array(data[w.offset:w.offset + w.length])
    segs = [data[o:o + n] for o, n in w.train_segments]
    print(f"  before: {uptime()}", flush=True)
    t0 = time.perf_counter()
    stats = count_exact(segs, order)
    t1 = time.perf_counter()
    kn = score(stats, window, [order], ["kneser-ney"])[0]
    t2 = time.perf_counter()
    print(f"  after:  {uptime()}", flush=True)
    every = score(stats, window, range(1, order + 1), ["kneser-ney", "add-k"])
    t3 = time.perf_counter()
    print("  bars: " + ", ".join(f"{s.smoothing}:{s.order} {s.bpb:.3f}" for s in every) +
          f" (all {len(every)} scored in {t3 - t2:.2f} s)", flush=True)
    return {"count_s": t1 - t0, "score_s": t2 - t1, "total_s": t2 - t0,
            "score_all_s": t3 - t2, "bars": {f"{s.smoothing}:{s.order}": s.bpb for s in every},
            "bpb": kn.bpb, "window_sha256": sha256_hex(window), "window_bytes": w.length,
            "train_bytes": w.train_bytes, "distinct_top": int(len(stats.raw[order].table.keys))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="data size for the speed test")
    ap.add_argument("--dict-mb", type=float, default=4.0, help="prefix the dict counter times")
    ap.add_argument("--markov-mb", type=float, default=10.0, help="0 skips the accuracy check")
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res: dict = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
                 "python": sys.version.split()[0], "numpy": np.__version__,
                 "commit": commit()}
    n = int(a.mb * 1e6)
    print(f"generating {n:,} bytes of Zipf text ...", flush=True)
    data = zipf_text(n)
    print(f"afford exact counter, order {a.order}, window last:100KB:", flush=True)
    res["afford"] = bench_afford(data, "last:100KB", a.order)
    res["afford"]["load_after"] = load()
    r = res["afford"]
    r["mb_per_s"] = n / 1e6 / r["total_s"]
    print(f"  count {r['count_s']:.1f} s + score {r['score_s']:.2f} s = {r['total_s']:.1f} s "
          f"({r['mb_per_s']:.1f} MB/s); {a.order}-gram KN {r['bpb']:.4f} BPB on window "
          f"{r['window_sha256'][:12]} ({r['window_bytes']:,} B); load {r['load_after']}",
          flush=True)
    m = int(a.dict_mb * 1e6)
    sample = bytes(data[:m])
    t0 = time.perf_counter()
    d = dict_count(sample, a.order)
    dt = time.perf_counter() - t0
    res["dict"] = {"sample_bytes": m, "sample_s": dt, "extrapolated_s": dt * n / m,
                   "distinct_in_sample": len(d), "load_after": load()}
    t0 = time.perf_counter()
    stats = count_exact([data[:m]], a.order)
    afford_sample = time.perf_counter() - t0
    same = len(stats.raw[a.order].table.keys) == len(d) and all(
        d[int(k).to_bytes(a.order, "big")] == v for k, v in
        zip(stats.raw[a.order].table.keys[:1000], stats.raw[a.order].table.values[:1000]))
    res["dict"]["afford_same_sample_s"] = afford_sample
    res["dict"]["counts_agree"] = bool(same)
    print(f"dict counter ({a.order}-grams only) on the first {m:,} B: {dt:.1f} s "
          f"-> {dt * n / m:.0f} s for {n:,} B extrapolated linearly; afford on the same "
          f"sample {afford_sample:.2f} s; counts agree: {same}; load {load()}", flush=True)
    if a.markov_mb > 0:
        res["markov"] = markov_accuracy(int(a.markov_mb * 1e6))
    if a.json:
        print(json.dumps(res, indent=1))


def markov_accuracy(n: int) -> list[dict]:
    """Kneser-Ney of order (source order + 1) after ``n`` training bytes, on a 1 MB window,
    against the entropy rate in closed form."""
    out = []
    for symbols, order, alpha in ((64, 1, 0.3), (16, 2, 0.5)):
        print(f"Markov source of order {order}, {symbols} symbols, Dirichlet({alpha}) rows, "
              f"{n:,} training bytes ...", flush=True)
        x, H = markov(n + 1_000_000, symbols=symbols, order=order, alpha=alpha, seed=1)
        kn = score(count_exact([x[:n]], order + 1), x[n:], [order + 1], ["kneser-ney"])[0]
        rel = kn.bpb / H - 1
        print(f"  entropy rate H = {H:.4f} bit/B; order-{order + 1} KN on the next 1,000,000 "
              f"B: {kn.bpb:.4f} BPB ({rel:+.3%})", flush=True)
        out.append({"symbols": symbols, "order": order, "bytes": n, "H": H, "bpb": kn.bpb,
                    "relative_error": rel})
    return out


if __name__ == "__main__":
    main()
