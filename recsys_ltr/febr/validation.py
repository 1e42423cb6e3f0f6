"""Stacked FEBR's validation decisions, as functions of values: the validation samples, the tail, the
LambdaMART setting and whether the trained scorer is kept.

Every decision judges by one metric (``validation_metric``) on validation users of ``X``:

* :func:`draw_samples` -- the *selection* sample (early stopping, the tail, the LambdaMART setting)
  and the *test* users of the paired tests, validation users the early stopping never saw;
* :func:`choose_tail` -- the best base on every validation user, or the mean of the bases tied with
  it when that mean beats it there significantly;
* :func:`best_reranker` -- LambdaMART's settings tried in turn, the best on the selection sample;
* :func:`keep_scorer` -- the scorer is kept when it beats the tail on the test users: a positive mean
  per-user gain that a one-sided paired t-test finds at ``p < fallback_p`` (:func:`paired_gain`).

Every decision compares means (of the per-user values), so every test is of the mean: a signed-rank
test answers whether most users gain, and can call a scorer that lifts most users a little and loses
more on a few a significant gain.

:class:`ValidationScores` holds a sample's heads and its bases' per-user values, computed once from
the bases' scores block by block, so that the early stopping's evaluations cost one composition each.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.stats import t as student_t

from .._memory import CACHE_BYTES, rows_per_block
from ..ltr.trees import fit_lambdamart
from ..metrics import evaluate_trusted, ranked_last
from ..split import sample_users_trusted
from .scoring import compose, head_key, tail_scores
from .stacking import Stack, build_pool, stacked_scores, user_blocks

__all__ = [
    "LAMBDAMART_SETTINGS",
    "MIN_CONFIRMATION_USERS",
    "Samples",
    "Tail",
    "ValidationScores",
    "best_reranker",
    "choose_tail",
    "draw_samples",
    "keep_scorer",
    "paired_gain",
    "significant",
]

#: The scorer's paired test runs on validation users that the early stopping never saw, the others
#: of the selection sample: when its limit would leave fewer than this many, the selection sample
#: takes half of the validation users; with fewer than twice as many validation users, the test
#: reuses the selection sample (optimistic), and the tail base must beat the first base significantly.
MIN_CONFIRMATION_USERS = 50

#: The LightGBM settings tried when ``lambdamart_params`` is not given, the better by the validation
#: metric: small trees with large leaves (on movielens-1m-implicit the better of the two), LightGBM's
#: default trees.
LAMBDAMART_SETTINGS = ({"num_leaves": 7, "min_data_in_leaf": 100}, {"num_leaves": 31, "min_data_in_leaf": 20})


class ValidationScores:
    """One sample of validation ``users``: their heads under ``stack`` and every base's per-user
    validation value, computed block by block from the bases' scores on ``X``, and the tail's scores
    of every user (one float64 row per user within :data:`recsys_ltr._memory.CACHE_BYTES`, kept for the
    tail's weights of the last call)."""

    def __init__(self, stack: Stack, X, validation, users, metric, num_threads):
        self.stack, self.X, self.validation, self.users = stack, X, validation, users
        self.metric, self.num_threads = metric, num_threads
        self.rows = X[users]
        self.excluded = stack.excluded(self.rows)  # the non-candidates of each user
        self.position = np.full(X.shape[0], -1, np.int64)
        self.position[users] = np.arange(users.size)
        self.head, self._base_values = self._heads_and_values()  # neither depends on the scorer
        self._tail = (None, None)  # (weights, the tail's scores of every user)

    def _heads_and_values(self):
        """The head of every user and each base's per-user validation value, from the bases'
        scores of one block of users at a time."""
        heads, values = [], []
        for block in user_blocks(self.users.size, self.X.shape[1], len(self.stack.bases)):
            S = self.stack.scores(self.rows[block], self.users[block], dtype=np.float32)
            heads.append(self.stack.head(S, self.rows[block], self.excluded[block]))  # float32: read exactly
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
        never = self.stack.never  # ranked last, as the model ranks them
        result = evaluate_trusted(
            ranked_last(score_fn, never) if never.size else score_fn,
            self.X,
            self.validation,
            None,
            [self.metric],
            users=self.users if users is None else users,
            batch_size=rows_per_block(8 * self.X.shape[1]),  # the scores of a block only, not the sample's
            num_threads=self.num_threads,
        )
        return result.per_user[self.metric] if per_user else result[self.metric]

    def tail(self, weights) -> np.ndarray:
        """The tail's scores (:func:`~recsys_ltr.febr.scoring.tail_scores`) of every user under
        ``weights``: scored by the bases it weighs, block by block, and kept until a call with other
        weights."""
        if not np.array_equal(self._tail[0], weights):  # None (no tail yet) equals no weights
            self._tail = (None, None)  # one tail held at a time
            (used,) = np.nonzero(weights)
            bases = [self.stack.bases[b] for b in used]
            T = np.empty((self.users.size, self.X.shape[1]), np.float32 if used.size == 1 else np.float64)
            for block in user_blocks(self.users.size, self.X.shape[1], used.size):
                S = stacked_scores(bases, self.rows[block], self.users[block], dtype=np.float32)
                T[block] = tail_scores(S, self.excluded[block], weights[used])
            self._tail = (np.array(weights, dtype=np.float64), T)
        return self._tail[1]

    def value(self, scorer, tail_weights, per_user=False):
        """Validation value of ``scorer`` (:class:`~recsys_ltr.febr.scoring.Linear` or trees) re-ordering
        each head within the tail of ``tail_weights``, or each user's with ``per_user``."""
        indptr, items, phi = self.head
        key = head_key(scorer, phi)
        T = self.tail(tail_weights)

        def scores(ids):  # the tail's scores with each head re-ordered by the key, block by block
            rows = self.position[ids]
            lo, counts = indptr[rows], indptr[rows + 1] - indptr[rows]
            offsets = np.concatenate(([0], np.cumsum(counts)))
            at = np.repeat(lo - offsets[:-1], counts) + np.arange(offsets[-1])
            return compose(T[rows], (offsets, items[at]), key[at])

        return self._evaluate(scores, per_user)

    def user_values(self, weights) -> np.ndarray:
        """Each user's value under the tail ``weights`` alone (one base's: evaluated once)."""
        (used,) = np.nonzero(weights)
        if used.size == 1:
            return self._base_values[used[0]]
        T = self.tail(weights)
        return self._evaluate(lambda ids: T[self.position[ids]], per_user=True)


class Samples(NamedTuple):
    """The validation samples: ``selection`` (early stopping, the tail, LambdaMART's setting) and the
    paired tests' users, ``tests`` (``None``: no tests), ``shared`` when too few validation users
    left the tests a sample of their own and they reuse ``selection``."""

    selection: ValidationScores
    tests: ValidationScores | None
    shared: bool

    @property
    def every(self) -> list[ValidationScores]:
        """The distinct samples: every validation user the decisions see."""
        return [self.selection] if self.tests is None or self.shared else [self.selection, self.tests]


def draw_samples(stack: Stack, X, validation, most, metric, rng, num_threads, tests=True) -> Samples:
    """The selection sample, at most ``most`` validation users (``None``: all) and a user's float64
    row each within :data:`~recsys_ltr._memory.CACHE_BYTES`, and with ``tests`` the test users: up to
    as many of the others.  When that limit would leave the tests fewer than
    :data:`MIN_CONFIRMATION_USERS`, the selection takes half of the validation users; with fewer
    than twice as many validation users the tests reuse the selection sample (``shared``)."""
    limit = rows_per_block(8 * X.shape[1], CACHE_BYTES)
    if most is not None:
        limit = min(limit, most)
    with_validation = np.flatnonzero(np.diff(validation.indptr))
    n = with_validation.size
    size = n // 2 if n - limit < MIN_CONFIRMATION_USERS <= n // 2 else limit

    def sample(size, exclude=None):
        users = sample_users_trusted(validation, size, rng, exclude)
        return ValidationScores(stack, X, validation, users, metric, num_threads)

    selection = sample(size)
    if not tests:
        return Samples(selection, None, False)
    others = np.setdiff1d(with_validation, selection.users)
    if others.size < MIN_CONFIRMATION_USERS:
        return Samples(selection, selection, True)
    return Samples(selection, sample(limit, exclude=selection.users), False)


def paired_gain(gain: np.ndarray) -> dict:
    """``{"users", "gain", "p_value"}`` of per-user gains (of the validation metric): their mean and
    the one-sided paired t-test that it is positive, ``p = P(T_{n-1} >= mean / (sd / sqrt(n)))``
    (the users' values are bounded, so the mean of 50 and more is close to normal); ``p = 1`` when
    every gain is zero, and a constant gain is its own sign (``p`` 0 or 1)."""
    n, mean = gain.size, float(gain.mean()) if gain.size else 0.0
    sd = float(gain.std(ddof=1)) if n > 1 else 0.0
    if sd <= 1e-12 * abs(mean) or sd == 0.0:  # constant: no spread to test against
        p = 0.0 if mean > 0 else 1.0
    else:
        p = float(student_t.sf(mean / (sd / np.sqrt(n)), n - 1))
    return {"users": int(n), "gain": mean, "p_value": p}


def significant(gain: dict, p: float) -> bool:
    """A positive mean gain at a one-sided ``p_value`` below ``p``."""
    return gain["gain"] > 0 and gain["p_value"] < p


class Tail(NamedTuple):
    """The tail: its ``weights`` on the bases, the test against the first base (``gain``, when the
    tests share the selection sample) and the validation values it was chosen by (``record``)."""

    weights: np.ndarray
    gain: dict | None
    record: dict


def choose_tail(samples: Samples, names, fallback_p, val_key) -> Tail:
    """The tail of bases ``names`` (FEBR's ``tail_weights_``): the best base by the validation value
    of every validation user, or the mean of the bases tied with it (not beaten by it at
    ``fallback_p``) when that mean beats it there at ``fallback_p`` (:func:`significant`: a mean
    better by noise alone is not taken; on msweb a mean of three bases better on validation ranked
    below the best of them on test).  When the tests share the selection sample, a
    choice among several bases is noise (msweb's novelty protocol: 16 users): the first base stays
    unless the best beats it significantly.  ``record``: the values, under ``base_<val_key>``."""
    nb = len(names)
    users = [np.concatenate([s.user_values(w) for s in samples.every]) for w in np.eye(nb)]
    values = np.array([u.mean() for u in users])
    record = {"iteration": 0, "base_" + val_key: dict(zip(names, values))}
    best = int(np.argmax(values))
    if samples.tests is None:  # fallback_p=None: no tests
        return Tail(np.eye(nb)[best], None, record)
    if samples.shared:
        gain = paired_gain(users[best] - users[0])
        return Tail(np.eye(nb)[best if significant(gain, fallback_p) else 0], gain, record)
    tied = [b for b in range(nb) if b == best or not significant(paired_gain(users[best] - users[b]), fallback_p)]
    if len(tied) < 2:
        return Tail(np.eye(nb)[best], None, record)
    mean = np.zeros(nb)
    mean[tied] = 1.0 / len(tied)
    mixed = np.concatenate([s.user_values(mean) for s in samples.every])
    gain = paired_gain(mixed - users[best])
    record["tail_mean_" + val_key] = {"bases": [names[b] for b in tied], "value": float(mixed.mean()), **gain}
    return Tail(mean if significant(gain, fallback_p) else np.eye(nb)[best], None, record)


def best_reranker(pool, validation, selection, tail_weights, params, seed, threads, val_key):
    """``(trees, rounds, records)``: LambdaMART on the training ``pool``, early-stopped on the
    selection sample's pools, with ``params`` or each of :data:`LAMBDAMART_SETTINGS` (``None``) in
    turn and the best on the selection sample (the first without validation, ``selection=None``);
    ``records``: one ``history_`` record per setting tried."""
    train, valid = pool.groups(), None
    if selection is not None:
        stack = selection.stack
        valid = build_pool(
            stack.bases,
            stack.context,
            selection.X,
            validation,
            stack.candidates,
            users=selection.users,
            never=stack.never,
        ).groups()
    settings = (params,) if params is not None else LAMBDAMART_SETTINGS
    if selection is None:
        settings = settings[:1]
    best, records = None, []
    for setting in settings:
        trees, rounds = fit_lambdamart(train, valid, setting, seed, threads)
        value = selection.value(trees, tail_weights) if selection is not None else -np.inf
        if selection is not None:
            records.append({"iteration": "lambdamart", "params": setting, "rounds": rounds, val_key: value})
        if best is None or value > best[0]:
            best = (value, trees, rounds)
    return best[1], best[2], records


def keep_scorer(tests: ValidationScores, scorer, tail_weights, fallback_p) -> tuple[bool, dict]:
    """Whether ``scorer`` beats the tail alone on the test users significantly (:func:`significant`),
    and the paired test (FEBR's ``stacked_gain_``)."""
    gain = paired_gain(tests.value(scorer, tail_weights, per_user=True) - tests.user_values(tail_weights))
    return significant(gain, fallback_p), gain
