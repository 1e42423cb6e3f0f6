"""How stacked FEBR scores: the engine's linear scorer over the training pools, the scorer's key of
the head features (linear or trees), and every user's head re-ordered within the tail's scores (one
base's, or the mean of several bases' within-user standardised scores).

The engine (:class:`recsys_ltr.warp.WarpSampler`) calls :func:`pool_score` and :func:`pool_update`
with the flat state ``(pool indptr, pool items, phi (pool entries x features), theta, mean,
inv_scale, hyper = [regularization], monitor = [sum of weighted hinge losses], total = the sum of
the iterates after every update, for their average)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..ltr.trees import Trees, predict_trees
from ..warp import WarpSampler
from .stacking import candidate_moments, pool_relevance

__all__ = [
    "Linear",
    "compose",
    "head_key",
    "linear_key",
    "pool_problem",
    "pool_score",
    "pool_update",
    "tail_scores",
]


@njit(cache=True, inline="always")
def _pool_entry(indptr, items, u, i):
    lo = indptr[u]
    return lo + np.searchsorted(items[lo : indptr[u + 1]], i)  # the engine draws pool items only


@njit(cache=True)
def pool_score(state, u, i):
    """``theta . (phi(u, i) - mean) / scale`` of a pool pair."""
    phi, theta, mean, inv = state[2], state[3], state[4], state[5]
    p = _pool_entry(state[0], state[1], u, i)
    s = 0.0
    for f in range(theta.shape[0]):
        s += theta[f] * (phi[p, f] - mean[f]) * inv[f]
    return s


@njit(cache=True)
def pool_update(state, u, pos, neg, weight, lr):
    """One OPT-ADG step on the violating pair ``(pos, neg)`` of query ``u``, summing the iterates."""
    phi, theta, inv, lam, monitor = state[2], state[3], state[5], state[6][0], state[7]
    p = _pool_entry(state[0], state[1], u, pos)
    q = _pool_entry(state[0], state[1], u, neg)
    hinge = 1.0
    for f in range(theta.shape[0]):
        hinge += theta[f] * (phi[q, f] - phi[p, f]) * inv[f]
    monitor[0] += weight * hinge
    total = state[8]
    for f in range(theta.shape[0]):
        theta[f] -= lr * (weight * (phi[q, f] - phi[p, f]) * inv[f] + 2.0 * lam * theta[f])
        total[f] += theta[f]


def pool_problem(pool, theta, mean, scale, n_items, regularization, random_state, num_threads, limit):
    """OPT-ADG over the training ``pool``: the engine's sampler (its rank truncation ``limit``,
    ``{"gamma": ...}`` or ``{"beta": ...}``), its flat state (module docstring; ``theta`` a view the
    steps update), :func:`pool_score` and :func:`pool_update`, then ``theta``, the state's monitor
    and the sum of the iterates."""
    relevant, irrelevant = pool_relevance(pool, n_items)
    state = (pool.indptr, pool.items, pool.phi, theta, mean, 1.0 / scale)
    state += (np.array([float(regularization)]), np.zeros(1), np.zeros_like(theta))
    sampler = WarpSampler.trusted(
        relevant,
        irrelevant,
        loss="adg",
        normalize=False,
        min_beta=1,
        random_state=random_state,
        num_threads=num_threads,
        **limit,
    )
    return sampler, state, (pool_score, pool_update, {0: "query"}), theta, state[7], state[8]


@njit(cache=True, parallel=True)
def _compose_kernel(T, offsets, items, key):
    """The tail scores ``T`` (a copy) with each row's head (``items[offsets[r]:offsets[r + 1]]``)
    re-ordered by ``key``: the head items take the head's places (their tail scores) in the order
    of ``key`` (ties: better place, then head order); places are assigned best first (ties: lower
    item id).  Head items given tied places are spread, in ``key`` order (equal keys stay tied), over
    the interval down to the row's next lower tail score, so that the key orders them where the tail
    has no order."""
    n_rows, n = T.shape
    out = np.empty((n_rows, n))
    for r in prange(n_rows):
        for i in range(n):
            out[r, i] = T[r, i]
        lo, hi = offsets[r], offsets[r + 1]
        its = items[lo:hi]
        m = hi - lo
        neg_places = np.empty(m)
        for j in range(m):
            neg_places[j] = -out[r, its[j]]
        by_place = np.argsort(its, kind="mergesort")
        by_place = by_place[np.argsort(neg_places[by_place], kind="mergesort")]
        by_key = np.argsort(neg_places, kind="mergesort")
        by_key = by_key[np.argsort(-key[lo:hi][by_key], kind="mergesort")]
        for j in range(m):
            out[r, its[by_key[j]]] = -neg_places[by_place[j]]
        start = 0
        while start < m:  # runs of tied places, best first
            v = -neg_places[by_place[start]]
            end = start + 1
            while end < m and -neg_places[by_place[end]] == v:
                end += 1
            groups = 1  # distinct keys in the run: equal keys keep equal scores (the usual tie rule)
            for j in range(start + 1, end):
                groups += key[lo + by_key[j]] != key[lo + by_key[j - 1]]
            if groups > 1 and np.isfinite(v):
                lower = -np.inf
                for i in range(n):
                    t = T[r, i]
                    if t < v and t > lower:
                        lower = t
                step = (v - lower) / groups if np.isfinite(lower) else 1.0
                g = 0
                for j in range(start + 1, end):
                    g += key[lo + by_key[j]] != key[lo + by_key[j - 1]]
                    out[r, its[by_key[j]]] = v - g * step
            start = end
    return out


@njit(cache=True, parallel=True)
def linear_key(phi, mean, weights):
    """``(phi - mean) @ weights``, each entry summed in feature order by itself: a user's key never
    depends on the other users of the block, as BLAS's blocked products do in the last bit (a bit
    that decides ties of the head, :func:`compose`)."""
    out = np.empty(phi.shape[0])
    for e in prange(phi.shape[0]):
        total = 0.0
        for f in range(phi.shape[1]):
            total += (phi[e, f] - mean[f]) * weights[f]
        out[e] = total
    return out


class Linear(NamedTuple):
    """The linear scorer ``theta . (phi - mean) / scale`` (module :mod:`recsys_ltr.febr.training`)."""

    theta: np.ndarray
    mean: np.ndarray
    scale: np.ndarray


def head_key(scorer: Linear | Trees, phi) -> np.ndarray:
    """The value of the head features ``phi`` (one row per head entry) under ``scorer``."""
    if isinstance(scorer, Trees):
        return predict_trees(scorer, phi)
    return linear_key(phi, scorer.mean, scorer.theta / scorer.scale)


def compose(T, head, key) -> np.ndarray:
    """The tail scores ``T`` (:func:`tail_scores`) with each user's head ``(indptr, items)`` re-ordered
    by ``key`` (one value per head entry): within each user the head items swap the places (scores)
    that the tail gives them, so nothing outside the head moves and a key that ranks like the tail
    gives exactly its ranking."""
    indptr, items = head
    return _compose_kernel(T, indptr, items, np.asarray(key, dtype=np.float64))


def tail_scores(S, excluded, weights) -> np.ndarray:
    """The tail's scores of a block (``S`` ``(B, n_bases, n)``): with one weighted base its scores
    (a view), else ``sum_b weights[b] z_b`` (float64), each base's score standardised within the user
    over the candidates (the items outside the CSR rows ``excluded``), as the features' ``z`` column is."""
    (used,) = np.nonzero(weights)
    if used.size == 1:
        return S[:, used[0], :]
    T = np.zeros((S.shape[0], S.shape[2]))
    for b in used:
        Sb = np.array(S[:, b, :], dtype=np.float64, order="C")  # a copy, standardised in place
        mu, sigma = candidate_moments(Sb, excluded.indptr, excluded.indices)
        Sb -= mu[:, None]
        Sb *= weights[b]
        Sb /= sigma[:, None]
        T += Sb
    return T
