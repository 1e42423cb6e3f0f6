"""FEBR's stacked features: the scores of base recommenders as features of (user, item) pairs.

The dissertation's FEBR admits any feature extracted from the feedback matrix (sec. 4.5); the score
that a fitted recommender (EASE, ALS, RP3β, SLIM, KUNN, ...) gives a pair is one.  FEBR re-ranks
every user's *head*: the union of each base's ``M`` best candidates (the items outside the user's
training positives ``C_u``; ties by popularity, then id).  For base ``b`` with scores ``s_b(u, .)``
and a head item ``i`` the features are::

    raw_b(u, i) = (s_b(u, i) - m_b) / d_b              m_b, d_b: mean and standard deviation of
                                                       s_b over the candidates of every user
    z_b(u, i)   = (s_b(u, i) - mu_ub) / sigma_ub       mu_ub, sigma_ub: over C_u (per user,
                                                       computed once per user, O(1) per pair)
    rr_b(u, i)  = 1 / log2(2 + r_b(u, i))              r_b: number of head items that b scores
                                                       above i (0 first; ties share a rank)

and, for every base together, ``pop(i)``, the standardised ``log(1 + c(i))`` of the item's training
interactions, ``act(u)``, the same for the user, and ``votes(u, i)``, the fraction of bases whose
``M`` best hold ``i`` (``d = 1`` and ``sigma = 1`` where a spread is 0).  Ranks and votes do not
depend on a base's score scale, the others are standardised: the statistics are those of the
context the bases were fitted in -- the feature part ``F`` of the training matrix when features are
built for training labels, the whole training matrix at prediction -- so that a scale that changes
with the amount of data (a neighbourhood sum over 80% of a user's items is smaller than over all of
them) does not shift what the scorer has learnt.

Training needs the features of the heads of the users with labels (:func:`build_pool`), prediction
those of a block of users (:func:`heads`): ``O(users M n_bases)`` memory, never ``users x items``;
scoring a user costs the bases' own scoring plus ``O(n_bases n)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from .. import _topk
from .._memory import rows_per_block
from .._validation import INDEX_DTYPE

__all__ = [
    "BaseFeatures",
    "Pool",
    "Stack",
    "base_scores",
    "build_pool",
    "candidate_moments",
    "concatenate_pools",
    "context_statistics",
    "feature_names",
    "heads",
    "kept_columns",
    "moments",
    "n_features",
    "pool_relevance",
    "stacked_scores",
    "user_blocks",
    "z_column",
]

_PER_BASE = 3  # raw, z and head-rank features of a base, in this order
_GLOBAL = 3  # then popularity, activity and votes


class BaseFeatures(NamedTuple):
    """Context statistics of the base features (see the module docstring)."""

    mean: np.ndarray  #: (n_bases,) mean ``m_b`` of each base's scores over all candidates
    scale: np.ndarray  #: (n_bases,) standard deviation ``d_b``
    pop: np.ndarray  #: (n_items,) standardised ``pop(i)``
    act: np.ndarray  #: (2,) mean and standard deviation of ``log(1 + c(u))`` over the users

    def activity(self, counts) -> np.ndarray:
        """Standardised ``act(u)`` of users with ``counts`` training interactions."""
        return (np.log1p(np.asarray(counts, dtype=np.float64)) - self.act[0]) / self.act[1]


class Pool(NamedTuple):
    """The training pairs: row ``u`` lists the pool items of user ``u`` (sorted) with their
    features (one row of ``phi`` per pool entry) and whether the item is a label."""

    indptr: np.ndarray
    items: np.ndarray
    phi: np.ndarray  #: (nnz, n_features) float32: the largest array of a fit (the scorer reads float64)
    label: np.ndarray  #: (nnz,) bool

    def groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(phi, label, sizes)`` for LightGBM: the rows grouped per query (empty ones left out)."""
        sizes = np.diff(self.indptr)
        return self.phi, self.label, sizes[sizes > 0]

    def statistics(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of every feature over the pool (a spread of 0 gives 1)."""
        mean = self.phi.mean(axis=0, dtype=np.float64)
        squares = np.zeros_like(mean)
        step = rows_per_block(self.phi[:1].nbytes)
        for start in range(0, len(self.phi), step):  # in blocks: no temporary the size of the pool
            deviation = self.phi[start : start + step] - mean
            squares += np.einsum("ij,ij->j", deviation, deviation)
        scale = np.sqrt(squares / max(len(self.phi), 1))
        scale[scale <= 1e-12 * np.maximum(1.0, np.abs(mean))] = 1.0
        return mean, scale


class Stack(NamedTuple):
    """Fitted bases and what their features need: the context statistics, the head size
    ``candidates`` (each base's ``M`` best) and the items that are no one's candidate (``never``)."""

    bases: list
    context: BaseFeatures
    candidates: int
    never: np.ndarray

    def scores(self, rows, ids, recalculate=False, dtype=np.float64) -> np.ndarray:
        """The bases' scores of a block of users (:func:`stacked_scores`)."""
        return stacked_scores(self.bases, rows, ids, recalculate, dtype)

    def excluded(self, rows) -> sp.csr_matrix:
        """The non-candidates of each of ``rows``: its items and ``never``."""
        return with_items(rows, self.never)

    def head(self, S, rows, excluded=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The heads of a block of users (scores ``S``, training ``rows``, their non-candidates
        ``excluded`` when the caller has them): ``(indptr, items, phi)``, row ``r``'s head items and
        their features at ``indptr[r]:indptr[r + 1]``; ties by the context's popularity order."""
        excluded = self.excluded(rows) if excluded is None else excluded
        items, phi, _, counts = heads(S, rows, None, self.context, self.context.pop, self.candidates, excluded)
        valid = np.arange(items.shape[1])[None, :] < counts[:, None]
        indptr = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        return indptr, items[valid], phi[valid]


def n_features(n_bases: int) -> int:
    """Number of stacked features of ``n_bases`` bases."""
    return _PER_BASE * n_bases + _GLOBAL


def z_column(b: int) -> int:
    """Column of base ``b``'s within-user standardised score."""
    return _PER_BASE * b + 1


def kept_columns(kept, n_bases: int) -> np.ndarray:
    """The feature columns of the bases ``kept`` (increasing indices of ``n_bases``) and the global ones."""
    per_base = _PER_BASE * np.asarray(kept, dtype=np.int64)[:, None] + np.arange(_PER_BASE)
    return np.concatenate([per_base.ravel(), np.arange(_PER_BASE * n_bases, n_features(n_bases))])


def feature_names(base_names) -> list[str]:
    """Names of the stacked features, e.g. ``["EASE_raw", "EASE_z", "EASE_rr", ..., "pop", "act", "votes"]``."""
    return [f"{b}_{kind}" for b in base_names for kind in ("raw", "z", "rr")] + ["pop", "act", "votes"]


def user_blocks(n_users: int, n_items: int, n_bases: int):
    """Slices of users whose dense score blocks (``n_bases`` of ``B x n_items`` floats) stay under
    :data:`recsys_ltr._memory.BLOCK_BYTES`."""
    step = rows_per_block(8 * n_items * n_bases)
    return [slice(lo, min(n_users, lo + step)) for lo in range(0, n_users, step)]


# ------------------------------------------------------------------------------ numba kernels
@njit(parallel=True, cache=True)
def candidate_moments(S, tr_indptr, tr_indices):
    """Mean and standard deviation of every row of ``S`` over its candidates (the columns outside
    the row's training items); a spread of 0 gives 1."""
    n_rows, n = S.shape
    mu = np.empty(n_rows)
    sigma = np.empty(n_rows)
    for r in prange(n_rows):
        known = tr_indices[tr_indptr[r] : tr_indptr[r + 1]]  # sorted: skipped by a merge walk
        m = n - known.shape[0]
        total = 0.0
        p = 0
        for i in range(n):
            if p < known.shape[0] and known[p] == i:
                p += 1
            else:
                total += S[r, i]
        mean = total / max(m, 1)
        sq = 0.0
        p = 0
        for i in range(n):
            if p < known.shape[0] and known[p] == i:
                p += 1
            else:
                sq += (S[r, i] - mean) ** 2
        sd = np.sqrt(sq / max(m, 1))
        mu[r] = mean
        sigma[r] = sd if sd > 1e-12 * max(1.0, abs(mean)) else 1.0
    return mu, sigma


@njit(cache=True)
def _is_in(sorted_row, x):
    p = np.searchsorted(sorted_row, x)
    return p < sorted_row.shape[0] and sorted_row[p] == x


@njit(parallel=True, cache=True)
def _block_heads(tops, lab_indptr, lab_indices, S, mu, sigma, mean, scale, pop, act, items, phi, label, counts):
    """Head of every user of a block -- the sorted union of the bases' top lists (``tops``, padded
    with -1) -- with the features of each pair (module docstring) and whether it is a label.
    Row ``r`` writes ``counts[r]`` entries."""
    nb = tops.shape[1]
    for r in prange(tops.shape[0]):
        labels = lab_indices[lab_indptr[r] : lab_indptr[r + 1]]
        srt = np.sort(tops[r].ravel())
        size = 0
        for t in range(srt.shape[0]):
            i = srt[t]
            if i < 0 or (t > 0 and i == srt[t - 1]):
                continue
            items[r, size] = i
            label[r, size] = _is_in(labels, i)
            votes = 0.0
            for b in range(nb):
                v = S[r, b, i]
                phi[r, size, _PER_BASE * b] = (v - mean[b]) / scale[b]
                phi[r, size, _PER_BASE * b + 1] = (v - mu[r, b]) / sigma[r, b]
                votes += _is_listed(tops[r, b], i)
            phi[r, size, _PER_BASE * nb] = pop[i]
            phi[r, size, _PER_BASE * nb + 1] = act[r]
            phi[r, size, _PER_BASE * nb + 2] = votes / nb
            size += 1
        head = items[r, :size]
        for b in range(nb):  # rank in the head by each base; tied items share the best rank
            values = S[r, b][head]
            order = np.argsort(-values)
            rank = 0
            for t in range(size):
                if t > 0 and values[order[t]] != values[order[t - 1]]:
                    rank = t
                phi[r, order[t], _PER_BASE * b + 2] = 1.0 / np.log2(2.0 + rank)
        counts[r] = size


@njit(cache=True, inline="always")
def _is_listed(top, i):
    for t in range(top.shape[0]):
        if top[t] == i:
            return 1.0
    return 0.0


# ------------------------------------------------------------------------------ statistics
def context_statistics(bases, X, users) -> BaseFeatures:
    """:class:`BaseFeatures` of fitted ``bases`` in the context of their training matrix ``X``
    (moments of each base over the candidates of ``users``, e.g. :func:`recsys_ltr.split.sample_users`)."""
    nb = len(bases)
    n_items = X.shape[1]
    sums, sq, count = np.zeros(nb), np.zeros(nb), 0.0
    for block in user_blocks(users.size, n_items, 1):
        ids = users[block]
        rows = X[ids]
        n_cand = n_items - np.diff(rows.indptr)
        count += float(n_cand.sum())
        for b, base in enumerate(bases):
            S = base_scores(base, rows, ids)
            mu, sigma = candidate_moments(S, rows.indptr, rows.indices)
            sums[b] += float(np.sum(mu * n_cand))
            sq[b] += float(np.sum((sigma**2 + mu**2) * n_cand))
    mean = sums / max(count, 1.0)
    scale = np.sqrt(np.maximum(sq / max(count, 1.0) - mean**2, 0.0))
    scale[scale <= 1e-12 * np.maximum(1.0, np.abs(mean))] = 1.0
    pop = np.log1p(np.bincount(X.indices, minlength=n_items).astype(np.float64))
    act = np.log1p(np.diff(X.indptr).astype(np.float64))
    return BaseFeatures(mean, scale, (pop - pop.mean()) / _spread(pop), np.array([act.mean(), _spread(act)]))


def _spread(v) -> float:
    sd = float(v.std())
    return sd if sd > 0 else 1.0


def base_scores(base, rows, ids, recalculate=False) -> np.ndarray:
    """Dense float64 scores of a fitted base for the users ``ids`` whose interactions are the
    canonical CSR ``rows``: the one route by which FEBR scores a base, in training and prediction
    (trusted inputs: nothing is checked again)."""
    return np.ascontiguousarray(base._score_rows(rows, ids, recalculate), dtype=np.float64)


def stacked_scores(bases, rows, ids, recalculate=False, dtype=np.float64) -> np.ndarray:
    """``(B, n_bases, n_items)`` scores of every base for a block of users (:func:`base_scores`),
    written into one array of ``dtype`` (no stacked copy)."""
    out = np.empty((rows.shape[0], len(bases), rows.shape[1]), dtype)
    for b, base in enumerate(bases):
        out[:, b, :] = base_scores(base, rows, ids, recalculate)
    return out


# ------------------------------------------------------------------------------ pools
def build_pool(bases, context: BaseFeatures, known, labels, n_top, users=None, excluded=None, never=()) -> Pool:
    """The training pairs of the users with labels: per user its *head*, the union of every base's
    ``n_top`` best candidates (score, then popularity, then id), with the features of each pair and
    whether it is a label (a row of ``labels``, disjoint from ``known``).

    The pool is the head that FEBR re-ranks at prediction, so training sees the pairs it will rank;
    a label outside the head is dropped, as a re-ranker cannot bring it in.  ``bases`` are fitted on
    ``known``, whose rows they score; ``context`` holds their statistics there; ``users`` restricts
    the pools to these users (default: every user with a label).  The candidates are the items
    outside the rows of ``excluded`` (default ``known``; an empty matrix keeps the items of ``known``:
    training on ``known`` itself, ``labels = known``, the leaky setting) and outside ``never``, items
    that are no one's candidate (``label_exclude_top``'s).
    """
    n_users, n_items = known.shape
    nb = len(bases)
    excluded = known if excluded is None else excluded
    has_labels = np.diff(labels.indptr) > 0
    users = np.flatnonzero(has_labels) if users is None else users[has_labels[users]]
    popularity = np.bincount(known.indices, minlength=n_items).astype(np.float64)
    counts = np.zeros(n_users, np.int64)
    parts = ([], [], [])  # items, phi, label of each block
    for block in user_blocks(users.size, n_items, nb):
        ids = users[block]
        rows = known[ids]
        S = stacked_scores(bases, rows, ids)  # (B, nb, n)
        block_excluded = with_items(excluded[ids], never)
        items, phi, label, block_counts = heads(S, rows, labels[ids], context, popularity, n_top, block_excluded)
        keep = np.arange(items.shape[1])[None, :] < block_counts[:, None]
        for part, values, dtype in zip(parts, (items, phi, label), (INDEX_DTYPE, np.float32, bool)):
            part.append(values[keep].astype(dtype, copy=False))
        counts[ids] = block_counts
    indptr = np.zeros(n_users + 1, INDEX_DTYPE)
    np.cumsum(counts, out=indptr[1:])
    if not parts[0]:
        return Pool(indptr, np.zeros(0, INDEX_DTYPE), np.zeros((0, n_features(nb)), np.float32), np.zeros(0, bool))
    return Pool(indptr, *(concatenate_releasing(part) for part in parts))


def with_items(rows, items) -> sp.csr_matrix:
    """The canonical binary CSR ``rows`` with ``items`` added to every row: the excluded candidates
    of a block of users when ``items`` are no one's candidate."""
    if len(items) == 0:
        return rows
    B, k = rows.shape[0], len(items)
    every = sp.csr_matrix((np.ones(B * k), np.tile(np.sort(items), B), np.arange(0, B * k + 1, k)), shape=rows.shape)
    out = (rows + every).tocsr()
    out.data[:] = 1.0
    out.sort_indices()
    return out


def concatenate_releasing(chunks: list) -> np.ndarray:
    """``np.concatenate(chunks)``, emptying the list as it copies: memory peaks at the result and one
    chunk, not twice the result (a pool's features are the largest array of a FEBR fit)."""
    out = np.empty((sum(len(c) for c in chunks), *chunks[0].shape[1:]), chunks[0].dtype)
    at = 0
    chunks.reverse()
    while chunks:
        chunk = chunks.pop()
        out[at : at + len(chunk)] = chunk
        at += len(chunk)
    return out


def moments(S, rows) -> tuple[np.ndarray, np.ndarray]:
    """Candidate moments ``(mu, sigma)``, ``(B, n_bases)``, of the score blocks ``S`` ``(B, n_bases,
    n)`` of users whose training interactions are the CSR ``rows``."""
    B, nb = S.shape[:2]
    mu, sigma = np.empty((B, nb)), np.empty((B, nb))
    for b in range(nb):
        mu[:, b], sigma[:, b] = candidate_moments(S[:, b, :], rows.indptr, rows.indices)  # a view: rows contiguous
    return mu, sigma


def heads(S, rows, labels, context: BaseFeatures, popularity, n_top, excluded=None):
    """The heads of a block of users (score blocks ``S`` ``(B, n_bases, n)``, training rows
    ``rows``, label rows ``labels`` or ``None``): ``(items, phi, label, counts)`` padded per user.
    The candidates are the items outside ``excluded`` (default ``rows``)."""
    B, nb, n = S.shape
    n_top = min(n_top, n)  # a head of more candidates than items: all of them
    excluded = rows if excluded is None else excluded
    mu, sigma = moments(S, excluded)
    tops = np.full((B, nb, n_top), -1, np.int64)
    no_items = np.zeros(n, dtype=np.bool_)
    for b in range(nb):
        _topk.top_k_dense(
            S[:, b, :],
            popularity,
            excluded.indptr,
            excluded.indices,
            no_items,
            False,
            False,
            tops[:, b, :],
            np.empty((B, n_top)),
        )
    if labels is None:
        labels = sp.csr_matrix((B, n), dtype=np.float64)
    width = nb * n_top
    items, phi = np.empty((B, width), np.int64), np.empty((B, width, n_features(nb)))
    label, counts = np.zeros((B, width), np.bool_), np.zeros(B, np.int64)
    _block_heads(
        tops,
        labels.indptr,
        labels.indices,
        S,
        mu,
        sigma,
        context.mean,
        context.scale,
        context.pop,
        context.activity(np.diff(rows.indptr)),
        items,
        phi,
        label,
        counts,
    )
    return items, phi, label, counts


def concatenate_pools(pools) -> Pool:
    """One pool whose queries are those of ``pools`` in turn (out-of-fold parts: the same user
    with the features of another fit is another query)."""
    if len(pools) == 1:
        return pools[0]
    offsets = np.cumsum([0] + [p.items.size for p in pools[:-1]])
    indptr = np.concatenate([pools[0].indptr[:1]] + [p.indptr[1:] + o for p, o in zip(pools, offsets)])
    items, phi, label = (concatenate_releasing([p[j] for p in pools]) for j in (1, 2, 3))
    return Pool(indptr.astype(INDEX_DTYPE), items, phi, label)


def pool_relevance(pool: Pool, n_items) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``(relevant, irrelevant)`` CSR (queries x ``n_items``) of the pool: labels vs the other pool
    items, for the engine."""
    n_queries = pool.indptr.size - 1
    rows = np.repeat(np.arange(n_queries), np.diff(pool.indptr))

    def part(mask):
        indptr = np.zeros(n_queries + 1, INDEX_DTYPE)
        np.cumsum(np.bincount(rows[mask], minlength=n_queries), out=indptr[1:])
        return sp.csr_matrix((np.ones(int(mask.sum())), pool.items[mask], indptr), shape=(n_queries, n_items))

    return part(pool.label), part(~pool.label)
