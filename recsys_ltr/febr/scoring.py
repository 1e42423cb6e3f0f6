"""How stacked FEBR scores: the engine's linear scorer over the training pools, every user's head
re-ordered within the tail base's scores, and the validation users' cached base scores.

The engine (:class:`recsys_ltr.warp.WarpSampler`) calls :func:`pool_score` and :func:`pool_update`
with the flat state ``(pool indptr, pool items, phi (pool entries x features), theta, mean,
inv_scale, hyper = [regularization], monitor = [sum of weighted hinge losses], total = the sum of
the iterates after every update, for their average)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._memory import CACHE_BYTES, rows_per_block
from ..metrics import evaluate_trusted
from ..split import sample_users
from .stacking import base_scores, user_blocks

__all__ = ["ValidationScores", "compose", "pool_score", "pool_update"]


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


@njit(cache=True, parallel=True)
def _compose_kernel(S, tail, offsets, items, key):
    """``S[:, tail, :]`` (float64) with each row's head (``items[offsets[r]:offsets[r + 1]]``)
    re-ordered by ``key``: the head items take the head's places (their tail scores) in the order
    of ``key`` (ties: better place, then head order); places are assigned best first (ties: lower
    item id)."""
    n_rows, n = S.shape[0], S.shape[2]
    out = np.empty((n_rows, n))
    for r in prange(n_rows):
        for i in range(n):
            out[r, i] = S[r, tail, i]
        lo, hi = offsets[r], offsets[r + 1]
        its = items[lo:hi]
        neg_places = np.empty(hi - lo)
        for j in range(hi - lo):
            neg_places[j] = -out[r, its[j]]
        by_place = np.argsort(its, kind="mergesort")
        by_place = by_place[np.argsort(neg_places[by_place], kind="mergesort")]
        by_key = np.argsort(neg_places, kind="mergesort")
        by_key = by_key[np.argsort(-key[lo:hi][by_key], kind="mergesort")]
        for j in range(hi - lo):
            out[r, its[by_key[j]]] = -neg_places[by_place[j]]
    return out


def compose(S, tail, head, key) -> np.ndarray:
    """The tail base's scores ``S[:, tail, :]`` with each user's head ``(indptr, items)`` re-ordered
    by ``key`` (one value per head entry): within each user the head items swap the places (scores)
    that the tail base gives them, so nothing outside the head moves and a key that ranks like the
    tail base gives exactly its ranking."""
    indptr, items = head
    return _compose_kernel(S, tail, indptr, items, np.asarray(key, dtype=np.float64))


class ValidationScores:
    """The validation users' base scores on ``X`` (float32, cached within
    :data:`recsys_ltr._memory.CACHE_BYTES`) and their heads, for the early-stopping evaluations of
    stacked FEBR: ``model`` gives the fitted bases, ``_head`` and ``_head_key``."""

    def __init__(self, model, X, validation, rng):
        limit = rows_per_block(4 * len(model.bases_) * X.shape[1], CACHE_BYTES)
        if model.validation_users is not None:
            limit = min(limit, model.validation_users)
        users = sample_users(validation, limit, rng)
        self.model, self.X, self.validation, self.users = model, X, validation, users
        self.rows = X[users]
        self.S = np.stack([base_scores(b, self.rows, users).astype(np.float32) for b in model.bases_], axis=1)
        self.head = self._heads()  # the head does not depend on theta
        self.position = np.full(X.shape[0], -1, np.int64)
        self.position[users] = np.arange(users.size)

    def _heads(self):
        """The model's head of every validation user, in blocks of float64 scores (no float64 copy of
        the whole cache)."""
        parts = [
            self.model._head(self.S[block].astype(np.float64), self.rows[block])
            for block in user_blocks(self.users.size, self.X.shape[1], self.S.shape[1])
        ]
        counts = np.concatenate([np.diff(indptr) for indptr, _, _ in parts])
        indptr = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        return indptr, np.concatenate([items for _, items, _ in parts]), np.concatenate([phi for _, _, phi in parts])

    def _evaluate(self, score_fn) -> float:
        return evaluate_trusted(
            score_fn, self.X, self.validation, None, ["ADG"], users=self.users, num_threads=self.model.num_threads
        )["ADG"]

    def base_adg(self) -> np.ndarray:
        """Validation ADG of every base alone."""
        return np.array(
            [self._evaluate(lambda ids, b=b: self.S[self.position[ids], b, :]) for b in range(self.S.shape[1])]
        )

    def adg(self, scorer=None) -> float:
        """Validation ADG of ``scorer`` (``theta`` or trees; ``None``: the fitted one)."""
        indptr, items, phi = self.head
        key = self.model._head_key(phi, scorer)
        scores = compose(self.S, self.model.tail_base_, (indptr, items), key)  # one block: the sample is bounded
        return self._evaluate(lambda ids: scores[self.position[ids]])
