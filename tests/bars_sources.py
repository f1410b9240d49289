"""Sources with a known entropy rate, for checking n-gram estimates converge to it.

- :func:`iid`: bytes drawn independently from a distribution p; H = -sum p log2 p.
- :func:`markov`: a Markov chain of order 1 or 2 over ``symbols`` byte values, each row of
  its transition matrix Dirichlet(alpha); entropy rate H = sum_s pi_s H(P_s), with pi the
  stationary distribution over states (Cover & Thomas, "Elements of Information Theory",
  theorem 4.2.4). An order-m chain is an order-1 chain on m-tuples.

Sampling a chain is sequential, but the next symbol from a state is an independent draw from
that state's row every time the state is visited, so each state's draws are made up front
(vectorised) and the walk only reads them off in order.
"""

from __future__ import annotations

import numpy as np

OFFSET = 32  # symbols are bytes OFFSET, OFFSET+1, ... (printable)


def entropy_bits(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def iid(n: int, p: np.ndarray, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.choice(len(p), size=n, p=p) + OFFSET).astype(np.uint8)


def stationary(P: np.ndarray) -> np.ndarray:
    """pi with pi P = pi, sum 1 (the eigenvector of P^T for eigenvalue 1)."""
    w, v = np.linalg.eig(P.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1))])
    return pi / pi.sum()


def markov(n: int, symbols: int = 16, order: int = 1, alpha: float = 0.5,
           seed: int = 0) -> tuple[np.ndarray, float]:
    """(n bytes from the chain, its entropy rate in bits per byte)."""
    rng = np.random.default_rng(seed)
    states = symbols ** order
    rows = rng.dirichlet(np.full(symbols, alpha), size=states)     # (states, symbols)
    P = np.zeros((states, states))                                  # on order-tuples
    for s in range(states):
        for w in range(symbols):
            P[s, (s * symbols + w) % states] += rows[s, w]
    pi = stationary(P)
    H = float(sum(pi[s] * entropy_bits(rows[s]) for s in range(states)))
    visits = np.maximum((pi * n * 1.2).astype(int) + 64, 64)
    draws = [rng.choice(symbols, size=int(v), p=rows[s]).tolist() for s, v in enumerate(visits)]
    at = [0] * states
    s = int(rng.choice(states, p=pi))
    out = np.empty(n, np.uint8)
    buf = []
    for _ in range(n):
        i = at[s]
        if i == len(draws[s]):
            draws[s] = rng.choice(symbols, size=len(draws[s]), p=rows[s]).tolist()
            i = 0
        w = draws[s][i]
        at[s] = i + 1
        buf.append(w)
        s = (s * symbols + w) % states
    out[:] = np.array(buf, np.uint8) + OFFSET
    return out, H
