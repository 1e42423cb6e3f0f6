"""The reference model of the WARP engine: a dot product of query and item factors.

The smallest model that plugs into :class:`~recsys_ltr.warp.WarpSampler` (its ``score_fn`` and
``update_fn``); used by the engine's tests, ``benchmarks/bench_warp.py`` and the documentation, and
the template for a new model.
"""

from __future__ import annotations

from numba import njit

__all__ = ["DOT_ROWS", "dot_score", "dot_update"]


#: ``rows`` of the dot-product model for :meth:`WarpSampler.sgd`: ``U`` per query, ``V`` per item.
DOT_ROWS = {0: "query", 1: "item"}


@njit(cache=True)
def dot_score(state, q, i):
    """``U[q] · V[i]`` with ``state = (U, V)``."""
    U, V = state
    s = 0.0
    for f in range(U.shape[1]):
        s += U[q, f] * V[i, f]
    return s


@njit(cache=True)
def dot_update(state, q, pos, neg, weight, lr):
    """SGD step on ``weight * (margin - U[q]·V[pos] + U[q]·V[neg])`` (no regulariser)."""
    U, V = state
    step = lr * weight
    for f in range(U.shape[1]):
        u = U[q, f]
        U[q, f] -= step * (V[neg, f] - V[pos, f])
        V[pos, f] += step * u
        V[neg, f] -= step * u
