"""How stacked FEBR scores: the engine's linear scorer over the training pools, every user's head
re-ordered within the tail's scores (one base's, or the mean of several bases' within-user
standardised scores), and the validation users' cached base scores.

The engine (:class:`recsys_ltr.warp.WarpSampler`) calls :func:`pool_score` and :func:`pool_update`
with the flat state ``(pool indptr, pool items, phi (pool entries x features), theta, mean,
inv_scale, hyper = [regularization], monitor = [sum of weighted hinge losses], total = the sum of
the iterates after every update, for their average)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from scipy.stats import wilcoxon

from .._memory import CACHE_BYTES, rows_per_block
from .._threads import check_num_threads
from ..ltr.trees import fit_lambdamart
from ..metrics import evaluate_trusted, ranked_last
from ..split import sample_users_trusted
from .stacking import build_pool, candidate_moments, stacked_scores, user_blocks, with_items

__all__ = [
    "LAMBDAMART_SETTINGS",
    "MIN_CONFIRMATION_USERS",
    "ValidationScores",
    "compose",
    "confirmation_scores",
    "fit_reranker",
    "linear_key",
    "paired_gain",
    "pool_score",
    "pool_update",
    "tail_scores",
]

#: The scorer's paired test runs on validation users that the early stopping never saw, the others
#: of the selection sample: when its limit would leave fewer than this many, the selection sample
#: takes half of the validation users; with fewer than twice as many validation users, the test
#: reuses the selection sample (optimistic), and the tail base must beat the first base significantly.
MIN_CONFIRMATION_USERS = 50


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


class ValidationScores:
    """The validation users of stacked FEBR's early stopping and tests: their heads and every base's
    per-user validation value, computed block by block from the bases' scores on ``X``, and the tail's
    scores of every user (one float64 row per user within :data:`recsys_ltr._memory.CACHE_BYTES`,
    kept for the tail's weights of the last call).  ``model`` gives the fitted bases, ``_head`` and
    ``_head_key``."""

    def __init__(self, model, X, validation, rng, exclude=None):
        limit = rows_per_block(8 * X.shape[1], CACHE_BYTES)
        most = model._validation_limit(X.shape[1])
        if most is not None:
            limit = min(limit, most)
        if exclude is None:  # the selection sample leaves the tests users of their own (MIN_CONFIRMATION_USERS)
            n = np.count_nonzero(np.diff(validation.indptr))
            if n - limit < MIN_CONFIRMATION_USERS <= n // 2:
                limit = n // 2
        users = sample_users_trusted(validation, limit, rng, exclude)
        self.model, self.X, self.validation, self.users = model, X, validation, users
        self.metric = model._validation_metric(X.shape[1])
        self.rows = X[users]
        self.excluded = with_items(self.rows, model.excluded_items_)  # the non-candidates of each user
        self.position = np.full(X.shape[0], -1, np.int64)
        self.position[users] = np.arange(users.size)
        self.head, self._base_values = self._heads_and_values()  # neither depends on theta
        self._tail = (None, None)  # (weights, the tail's scores of every user)

    def _heads_and_values(self):
        """The model's head of every validation user and each base's per-user validation value, from
        the bases' scores of one block of users at a time."""
        heads, values = [], []
        for block in user_blocks(self.users.size, self.X.shape[1], len(self.model.bases_)):
            S = stacked_scores(self.model.bases_, self.rows[block], self.users[block], dtype=np.float32)
            heads.append(self.model._head(S, self.rows[block], self.excluded[block]))  # float32: read exactly
            values.append(self._values_of_block(S, self.users[block]))
        counts = np.concatenate([np.diff(indptr) for indptr, _, _ in heads])
        indptr = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        head = indptr, np.concatenate([items for _, items, _ in heads]), np.concatenate([phi for _, _, phi in heads])
        return head, [np.concatenate(per_base) for per_base in zip(*values)]

    def _values_of_block(self, S, users) -> list[np.ndarray]:
        """Each base's per-user validation value of ``users``, a block of the sample, from its scores ``S``."""
        first = self.position[users[0]]
        return [
            self._evaluate(lambda ids, b=b: S[self.position[ids] - first, b, :], per_user=True, users=users)
            for b in range(S.shape[1])
        ]

    def _evaluate(self, score_fn, per_user=False, users=None):
        never = self.model.excluded_items_  # ranked last, as the model ranks them
        result = evaluate_trusted(
            ranked_last(score_fn, never) if never.size else score_fn,
            self.X,
            self.validation,
            None,
            [self.metric],
            users=self.users if users is None else users,
            batch_size=rows_per_block(8 * self.X.shape[1]),  # the scores of a block only, not the sample's
            num_threads=self.model.num_threads,
        )
        return result.per_user[self.metric] if per_user else result[self.metric]

    def tail(self, weights) -> np.ndarray:
        """The tail's scores (:func:`tail_scores`) of every validation user under ``weights``: scored
        by the bases it weighs, block by block, and kept until a call with other weights."""
        if not np.array_equal(self._tail[0], weights):  # None (no tail yet) equals no weights
            self._tail = (None, None)  # one tail held at a time
            (used,) = np.nonzero(weights)
            bases = [self.model.bases_[b] for b in used]
            T = np.empty((self.users.size, self.X.shape[1]), np.float32 if used.size == 1 else np.float64)
            for block in user_blocks(self.users.size, self.X.shape[1], used.size):
                S = stacked_scores(bases, self.rows[block], self.users[block], dtype=np.float32)
                T[block] = tail_scores(S, self.excluded[block], weights[used])
            self._tail = (np.array(weights, dtype=np.float64), T)
        return self._tail[1]

    def value(self, scorer=None, per_user=False):
        """Validation value (``validation_metric``) of ``scorer`` (``theta`` or trees; ``None``: the
        fitted one), or each user's with ``per_user``."""
        indptr, items, phi = self.head
        key = self.model._head_key(phi, scorer)
        T = self.tail(self.model.tail_weights_)

        def scores(ids):  # the tail's scores with each head re-ordered by the key, block by block
            rows = self.position[ids]
            lo, counts = indptr[rows], indptr[rows + 1] - indptr[rows]
            offsets = np.concatenate(([0], np.cumsum(counts)))
            at = np.repeat(lo - offsets[:-1], counts) + np.arange(offsets[-1])
            return compose(T[rows], (offsets, items[at]), key[at])

        return self._evaluate(scores, per_user)

    def user_values(self, weights) -> np.ndarray:
        """Each validation user's value under the tail ``weights`` alone (one base's: evaluated once)."""
        (used,) = np.nonzero(weights)
        if used.size == 1:
            return self._base_values[used[0]]
        T = self.tail(weights)
        return self._evaluate(lambda ids: T[self.position[ids]], per_user=True)


#: The LightGBM settings tried when ``lambdamart_params`` is not given, the better by validation
#: ADG: small trees with large leaves (on movielens-1m-implicit the better of the two), LightGBM's
#: default trees.
LAMBDAMART_SETTINGS = ({"num_leaves": 7, "min_data_in_leaf": 100}, {"num_leaves": 31, "min_data_in_leaf": 20})


def fit_reranker(model, pool, X, validation, val, rng):
    """``(trees, rounds)``: LambdaMART on the pools, ``model.lambdamart_params`` or the
    :data:`LAMBDAMART_SETTINGS` tried in turn and the best on validation (the first without
    validation); each try is recorded in ``model.history_``."""
    train, valid = pool.groups(), None
    if validation is not None:
        valid = build_pool(
            model.bases_, model._context, X, validation, model.candidates, users=val.users, never=model.excluded_items_
        ).groups()
    settings = (model.lambdamart_params,) if model.lambdamart_params is not None else LAMBDAMART_SETTINGS
    if val is None:
        settings = settings[:1]
    seed, threads = int(rng.integers(2**31 - 1)), check_num_threads(model.num_threads)
    best = None
    for params in settings:
        trees, rounds = fit_lambdamart(train, valid, params, seed, threads)
        value = val.value(trees) if val is not None else -np.inf
        if val is not None:
            model.history_.append(
                {"iteration": "lambdamart", "params": params, "rounds": rounds, model._val_key: value}
            )
        if best is None or value > best[0]:
            best = (value, trees, rounds)
    return best[1], best[2]


def confirmation_scores(model, X, validation, val, rng) -> ValidationScores:
    """The scorer's paired test users: validation users outside the early-stopping sample ``val``
    (up to the same limit), or ``val`` itself when fewer than :data:`MIN_CONFIRMATION_USERS` remain."""
    others = np.setdiff1d(np.flatnonzero(np.diff(validation.indptr) > 0), val.users)
    if others.size < MIN_CONFIRMATION_USERS:
        return val
    return ValidationScores(model, X, validation, rng, exclude=val.users)


def paired_gain(gain: np.ndarray) -> dict:
    """``{"users", "gain", "p_value"}`` of per-user gains (of the validation metric): their mean and
    a one-sided Wilcoxon signed-rank test that they are positive (``p = 1`` when every gain is zero)."""
    p = 1.0 if not np.any(gain) else float(wilcoxon(gain, alternative="greater", zero_method="wilcox").pvalue)
    return {"users": int(gain.size), "gain": float(gain.mean()), "p_value": p}
