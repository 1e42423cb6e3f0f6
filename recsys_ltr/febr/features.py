"""FEBR features of (user, item) pairs extracted from the feedback matrix (dissertation sec. 4.5.2-4.5.6).

Item side.  For a pair ``(u, i)`` the active items are ``ActiveItems(u, i) = O+_u & KNN_k(i)`` and
the affinity vector is ``phi_item(u, i) = {A_ij : j in ActiveItems(u, i)}`` (``A`` an item affinity:
cosine, KUNN Eq. 4.5, SLIM, ...).  Six aggregators turn it into features (sec. 4.5.2)::

    mean, std (population, ddof=0), min, max, len = |ActiveItems(u, i)| / k, sum

User side, likewise over ``ActiveUsers(u, i) = O+_i & KNN_k(u)`` with a user affinity (sec. 4.5.3).
When the active set is empty the six aggregators are 0 and the missing-feature indicator ``b`` is 1
(sec. 4.5.4; ``b = 0`` otherwise).  Each side therefore gives 7 features, in the order of
:data:`AGGREGATORS`; with both sides (FEBRiu) the item block comes first (14 features, one ``b``
per side, since either side can be missing on its own).  By Theorem 4.3 the item ``sum`` is
``[ktrunc(A)]_i . u``, item-p's score.

Two computations of the same features:

* **all items of a user** (scoring, :meth:`FeatureExtractor.transform`): scatter over the reverse
  neighbourhood ``T = ktrunc(A)^T`` -- for every ``j in O+_u`` and every ``i`` with
  ``j in KNN_k(i)``, push ``A_ij`` into ``i``'s running aggregates (count, Welford mean and M2,
  min, max, sum).  Cost ``O(|O+_u| k + n)`` per user (user side: ``O(sum_{v in KNN_k(u)} |O+_v| + n)``),
  parallel over the users of a batch, one ``n``-sized scratch per thread chunk;
* **one pair** (training, inside the sampler's ``score_fn``): iterate ``KNN_k(i)`` and test
  each neighbour's membership in ``O+_u`` (user side: iterate ``KNN_k(u)`` and test ``i in O+_v``),
  ``O(k)`` per pair with a bitset of ``X`` (``m ceil(n/64)`` words, used up to
  :data:`recsys_ltr._memory.MATRIX_BYTES`), else
  ``O(k log |O+|)`` by binary search in the sorted rows.

The two paths agree up to floating-point rounding (they add in different orders).

Standardisation (z-scoring).  :meth:`FeatureExtractor.statistics` returns the mean and standard
deviation of every feature over the ``n`` items of the given users (training positives included;
default every user), computed exactly: pairs with an empty active set all have the features
``(0, ..., 0, b=1)``, so only the ``O(nnz k)`` non-missing pairs are visited.  A feature with zero
variance gets scale 1.  :class:`~recsys_ltr.febr.AffinityFEBR` takes them over a fixed sample of
evenly spaced users (:data:`~recsys_ltr.febr.training.STAT_USERS`): scaling is only a preconditioner.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from .. import _memory
from .._threads import check_num_threads, numba_threads
from .._validation import INDEX_DTYPE, check_feedback, check_ids, check_sparse
from ..neighbors.affinity import (
    Affinity,
    cosine_affinity_trusted,
    kunn_affinity_trusted,
    rp3beta_affinity_trusted,
    slim_affinity_trusted,
)
from ..neighbors.knn import check_k
from ..neighbors.rp3beta import check_rp3beta_params
from ..neighbors.slim import check_slim_params

__all__ = [
    "AFFINITIES",
    "AGGREGATORS",
    "SIDES",
    "FeatureExtractor",
    "build_affinities",
    "feature_names",
    "finish",
    "pair_aggregates",
    "pair_features",
]

#: Features of one side, in order (sec. 4.5.2 and the indicator ``b`` of sec. 4.5.4).
AGGREGATORS = ("mean", "std", "min", "max", "len", "sum", "b")
#: FEBRi, FEBRu, FEBRiu.
SIDES = ("item", "user", "both")
#: Affinity kinds built from the feedback matrix by :func:`build_affinities`.
AFFINITIES = ("cosine", "kunn", "slim", "rp3beta")

_ITEM_ONLY = {"slim": "SLIM", "rp3beta": "RP3β"}  # kinds without a user-side affinity
_W = len(AGGREGATORS)  # features per side
_STAT_CHUNKS = 64  # fixed chunking: statistics do not depend on the thread count


# ------------------------------------------------------------------------------------------
# numba primitives: running aggregates of one affinity vector
# ------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _welford(c, mean, m2, lo, hi, s, a):
    """Add the value ``a`` to the aggregates (count, mean, M2, min, max, sum)."""
    c += 1.0
    delta = a - mean
    mean += delta / c
    m2 += delta * (a - mean)
    return c, mean, m2, min(lo, a), max(hi, a), s + a


@njit(cache=True, inline="always")
def _push(acc, i, a):
    """Add ``a`` to row ``i`` of the scatter accumulator (``acc[i, 0] == 0``: row unused)."""
    if acc[i, 0] == 0.0:
        acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5] = 1.0, a, 0.0, a, a, a
    else:
        acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5] = _welford(
            acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5], a
        )


@njit(cache=True, inline="always")
def finish(c, mean, m2, lo, hi, s, k):
    """The six aggregators (mean, std, min, max, len, sum) of ``c > 0`` values."""
    return mean, np.sqrt(max(m2 / c, 0.0)), lo, hi, c / k, s


@njit(cache=True, inline="always")
def _has(bits, x_indptr, x_indices, u, j):
    """Whether item ``j`` is in ``O+_u``: one bit of the bitset, or a binary search in the row."""
    if bits.shape[0] > 0:
        return (bits[u, j >> 6] >> np.uint64(j & 63)) & np.uint64(1) != 0
    lo, hi = x_indptr[u], x_indptr[u + 1]
    p = lo + np.searchsorted(x_indices[lo:hi], j)
    return p < hi and x_indices[p] == j


@njit(cache=True)
def pair_aggregates(state, side, u, i):
    """Running aggregates (count, mean, M2, min, max, sum) of one side's affinity vector of the
    pair ``(u, i)`` (``side`` 0: items, 1: users) from :attr:`FeatureExtractor.state`.

    Item side: iterate ``KNN_k(i)`` (row ``i`` of ``ktrunc(A)``) and test each ``j in O+_u``;
    user side: iterate ``KNN_k(u)`` and test ``i in O+_v``.
    """
    # arrays taken out of the tuple once: no reference counting inside the loop
    x_indptr, x_indices, bits = state[0], state[1], state[9]
    if side == 0:
        row, a_indptr, a_indices, a_data = i, state[2], state[3], state[4]
    else:
        row, a_indptr, a_indices, a_data = u, state[5], state[6], state[7]
    c, mean, m2, lo, hi, s = 0.0, 0.0, 0.0, np.inf, -np.inf, 0.0
    for p in range(a_indptr[row], a_indptr[row + 1]):
        j = a_indices[p]
        if side == 0:
            member = _has(bits, x_indptr, x_indices, u, j)
        else:
            member = _has(bits, x_indptr, x_indices, j, i)
        if member:
            c, mean, m2, lo, hi, s = _welford(c, mean, m2, lo, hi, s, a_data[p])
    return c, mean, m2, lo, hi, s


@njit(cache=True)
def pair_features(state, u, i, out):
    """Raw features of the pair ``(u, i)`` written into ``out`` (length ``7 * n_sides``).

    ``state`` is :attr:`FeatureExtractor.state`: ``(x_indptr, x_indices, item_indptr,
    item_indices, item_data, user_indptr, user_indices, user_data, sides, bits)`` with
    ``sides = [use_item, use_user, k]`` and ``bits`` the bitset of ``X`` (or an empty array).
    """
    sides = state[8]
    o = 0
    for side in range(2):
        if sides[side] == 0.0:
            continue
        c, mean, m2, lo, hi, s = pair_aggregates(state, side, u, i)
        if c == 0.0:
            out[o : o + _W - 1] = 0.0
            out[o + _W - 1] = 1.0
        else:
            out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = finish(
                c, mean, m2, lo, hi, s, sides[2]
            )
            out[o + _W - 1] = 0.0
        o += _W


@njit(cache=True)
def _fill_bits(indptr, indices, bits):
    for u in range(indptr.shape[0] - 1):
        for p in range(indptr[u], indptr[u + 1]):
            j = indices[p]
            bits[u, j >> 6] |= np.uint64(1) << np.uint64(j & 63)


# ------------------------------------------------------------------------------------------
# scatter kernels: all items of a batch of users
# ------------------------------------------------------------------------------------------
@njit(cache=True)
def _scatter(
    r,
    side,
    r_indptr,
    r_indices,
    nb_indptr,
    nb_indices,
    nb_data,
    t_indptr,
    t_indices,
    t_data,
    x_indptr,
    x_indices,
    acc,
    touched,
):
    """Accumulate one side's affinity vectors of every item for batch row ``r``; returns the number
    of items touched (listed in ``touched``).

    Item side: for ``j`` in the row ``r_*[r]`` (the user's items) and ``(i, A_ij)`` in row ``j`` of
    ``T = ktrunc(A)^T``.  User side: for ``(v, A_uv)`` in ``nb_*[r]`` (``KNN_k(u)``) and ``i`` in
    ``O+_v`` (training row ``v`` of ``x_*``).
    """
    n = 0
    if side == 0:
        for p in range(r_indptr[r], r_indptr[r + 1]):
            j = r_indices[p]
            for q in range(t_indptr[j], t_indptr[j + 1]):
                i = t_indices[q]
                touched[n] = i
                n += acc[i, 0] == 0.0
                _push(acc, i, t_data[q])
    else:
        for p in range(nb_indptr[r], nb_indptr[r + 1]):
            v = nb_indices[p]
            a = nb_data[p]
            for q in range(x_indptr[v], x_indptr[v + 1]):
                i = x_indices[q]
                touched[n] = i
                n += acc[i, 0] == 0.0
                _push(acc, i, a)
    return n


@njit(parallel=True, cache=True)
def _batch_kernel(
    mode,
    r_indptr,
    r_indices,
    nb_indptr,
    nb_indices,
    nb_data,
    t_indptr,
    t_indices,
    t_data,
    x_indptr,
    x_indices,
    sides,
    n_items,
    n_chunks,
    weights,
    base,
    out,
):
    """One scatter pass over the batch rows, three outputs (``mode``):

    * 0 -- scores: ``out[r, i, 0] = base + sum_side w_side . phi_side(r, i)`` with the missing
      indicator folded into ``base`` (``weights`` shape ``(2, _W)``, ``out`` ``(B, n, 1)``);
    * 1 -- features: ``out[r, i, :]`` raw features (``out`` ``(B, n, d)``);
    * 2 -- statistics: ``out[chunk, 0]`` = [sum per feature, sum of squares per feature,
      non-missing count per side] over the rows of each chunk (``out`` ``(n_chunks, 1, 2 d + 2)``).

    (One 3-D ``out`` for all modes keeps a single compiled kernel.)
    """
    n_rows = r_indptr.shape[0] - 1
    k = sides[2]
    d = _W * int(sides[0] + sides[1])
    for c in prange(n_chunks):
        acc = np.zeros((n_items, 6))
        touched = np.empty(n_items + 1, np.int64)  # +1: the branch-free append writes one ahead
        for r in range(c, n_rows, n_chunks):
            if mode == 0:
                out[r, :, 0] = base
            elif mode == 1:
                out[r, :, :] = 0.0
            o = 0
            for side in range(2):
                if sides[side] == 0.0:
                    continue
                if mode == 1:
                    out[r, :, o + _W - 1] = 1.0
                n_t = _scatter(
                    r,
                    side,
                    r_indptr,
                    r_indices,
                    nb_indptr,
                    nb_indices,
                    nb_data,
                    t_indptr,
                    t_indices,
                    t_data,
                    x_indptr,
                    x_indices,
                    acc,
                    touched,
                )
                for t in range(n_t):
                    i = touched[t]
                    f = finish(acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5], k)
                    acc[i, 0] = 0.0
                    if mode == 0:
                        s = -weights[side, _W - 1]  # no longer missing
                        for g in range(_W - 1):
                            s += weights[side, g] * f[g]
                        out[r, i, 0] += s
                    elif mode == 1:
                        for g in range(_W - 1):
                            out[r, i, o + g] = f[g]
                        out[r, i, o + _W - 1] = 0.0
                    else:
                        for g in range(_W - 1):
                            out[c, 0, o + g] += f[g]
                            out[c, 0, d + o + g] += f[g] * f[g]
                        out[c, 0, 2 * d + side] += 1.0
                o += _W


# ------------------------------------------------------------------------------------------
# Python side
# ------------------------------------------------------------------------------------------
def feature_names(side: str) -> list[str]:
    """Names of the features of ``side`` in order, for example ``["item_mean", ..., "item_b"]``.

    Examples
    --------
    >>> from recsys_ltr.febr import feature_names
    >>> feature_names("item")
    ['item_mean', 'item_std', 'item_min', 'item_max', 'item_len', 'item_sum', 'item_b']
    """
    _check_side(side)
    sides = ("item", "user") if side == "both" else (side,)
    return [f"{s}_{a}" for s in sides for a in AGGREGATORS]


def _affinity_params(params, defaults, kind) -> dict:
    unknown = set(params) - set(defaults)
    if unknown:
        raise TypeError(f"affinity_params of {kind} take {sorted(defaults)}; got {sorted(unknown)}")
    return {**defaults, **params}


def _check_side(side):
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")


def build_affinities(X, affinity, side, k, affinity_params=None, num_threads=0):
    """The ``(item_affinity, user_affinity)`` FEBR needs for ``side`` (``None`` for an unused side).

    Parameters
    ----------
    X : canonical feedback matrix (users x items)
    affinity : {"cosine", "kunn", "slim", "rp3beta"}, Affinity, or tuple (item Affinity, user Affinity)
        A kind to compute from ``X`` with ``k_max = k`` ("slim": fsSLIM with ``k`` cosine
        neighbours; "rp3beta": ``A = W^T`` of RP3β with ``k`` targets per source item, whose
        ``KNN_k(i)`` are then ``i``'s ``k`` strongest reverse neighbours; both item side only), or
        fitted affinities (for ``side="both"`` a pair ``(item, user)``; a single Affinity serves
        the side it was built for).
    side : {"item", "user", "both"}
    k : int
        Neighbourhood size.
    affinity_params : dict, optional
        Keyword arguments of the builder (e.g. ``{"l1": 0.1, "l2": 1.0}`` for SLIM).

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.febr import build_affinities
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, random_state=0).matrix
    >>> item, user = build_affinities(X, "cosine", side="item", k=20)
    >>> item.matrix.shape, user is None
    ((100, 100), True)
    """
    _check_side(side)
    wanted = ("item", "user") if side == "both" else (side,)
    params = dict(affinity_params or {})
    out = {"item": None, "user": None}
    if isinstance(affinity, str):
        if affinity not in AFFINITIES:
            raise ValueError(f"affinity must be one of {AFFINITIES} or an Affinity object, got {affinity!r}")
        if affinity in _ITEM_ONLY and "user" in wanted:
            raise ValueError(
                f"the {_ITEM_ONLY[affinity]} affinity exists for items only: use side='item' with affinity={affinity!r}"
            )
        for s in wanted:
            if affinity == "slim":
                full = _affinity_params(params, {"l1": 1.0, "l2": 1.0, "max_iter": 100, "tol": 1e-4}, affinity)
                l1, l2, max_iter, tol = check_slim_params(full["l1"], full["l2"], full["max_iter"], full["tol"])
                out[s] = slim_affinity_trusted(X, k, l1=l1, l2=l2, max_iter=max_iter, tol=tol, num_threads=num_threads)
            elif affinity == "rp3beta":
                full = _affinity_params(params, {"alpha": 1.0, "beta": 0.5}, affinity)
                alpha, beta = check_rp3beta_params(full["alpha"], full["beta"])
                out[s] = rp3beta_affinity_trusted(X, k, alpha, beta, num_threads)
            else:
                if params:
                    raise TypeError(f"the {affinity} affinity takes no affinity_params, got {sorted(params)}")
                build = cosine_affinity_trusted if affinity == "cosine" else kunn_affinity_trusted
                out[s] = build(X, k, s, num_threads)
        return out["item"], out["user"]
    given = affinity if isinstance(affinity, (tuple, list)) else (affinity,)
    for a in given:
        if not isinstance(a, Affinity):
            raise TypeError(f"affinity must be a kind name or Affinity object(s), got {type(a).__name__}")
        out[a.side] = a
    for s in wanted:
        if out[s] is None:
            raise ValueError(f"side={side!r} needs a {s} affinity, none was given")
    return tuple(out[s] if s in wanted else None for s in ("item", "user"))


class FeatureExtractor:
    """FEBR features of a training matrix over k-truncated affinities (module docstring).

    Parameters
    ----------
    X : feedback matrix, users x items
        Training interactions (``O+_u`` are rows, ``O+_i`` columns).
    k : int
        Neighbourhood size; ``<= k_max`` of the affinities given.
    item_affinity, user_affinity : Affinity or None
        Item affinity (``n_items x n_items``) for the item side, user affinity for the user side;
        at least one.
    num_threads : int
        numba threads (0 = all).  Results do not depend on it.

    Attributes
    ----------
    side : {"item", "user", "both"}
    n_features : int
        ``7`` per side.
    feature_names : list of str
    state : tuple
        Arrays read by :func:`pair_features` (and by models' numba scoring functions).

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.febr import FeatureExtractor, build_affinities
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, random_state=0).matrix
    >>> item, _ = build_affinities(X, "cosine", side="item", k=20)
    >>> extractor = FeatureExtractor(X, k=20, item_affinity=item)
    >>> extractor.side, extractor.n_features
    ('item', 7)
    >>> extractor.transform([0, 1]).shape  # every item of users 0 and 1
    (2, 100, 7)
    """

    def __init__(self, X, k, item_affinity=None, user_affinity=None, num_threads=0):
        self._build(check_feedback(X), k, item_affinity, user_affinity, check_num_threads(num_threads))

    @classmethod
    def trusted(cls, X, k, item_affinity=None, user_affinity=None, num_threads=0) -> FeatureExtractor:
        """The extractor of a canonical feedback matrix ``X`` (no validation pass over it)."""
        self = cls.__new__(cls)
        self._build(X, k, item_affinity, user_affinity, check_num_threads(num_threads))
        return self

    def _build(self, X, k, item_affinity, user_affinity, num_threads):
        self.X = X
        m, n = self.X.shape
        if item_affinity is None and user_affinity is None:
            raise ValueError("give an item affinity, a user affinity or both")
        self.num_threads = num_threads
        self.side = (
            "both"
            if item_affinity is not None and user_affinity is not None
            else ("item" if item_affinity is not None else "user")
        )
        if item_affinity is not None:
            check_k(k, n, "items")
        if user_affinity is not None:
            check_k(k, m, "users")
        self.k = int(k)
        empty = _empty_rows(0, 0)
        self._item = self._truncated(item_affinity, "item", n) if item_affinity is not None else empty
        self._user = self._truncated(user_affinity, "user", m) if user_affinity is not None else empty
        # reverse item neighbourhoods: row j lists (i, A_ij) for the i with j in KNN_k(i)
        self._item_T = sp.csr_matrix(self._item.T) if item_affinity is not None else empty
        self.feature_names = feature_names(self.side)
        self.n_features = len(self.feature_names)
        self._sides = np.array([item_affinity is not None, user_affinity is not None, self.k], np.float64)
        words = -(-n // 64)
        bits = np.zeros((m, words) if m * words * 8 <= _memory.MATRIX_BYTES else (0, 0), np.uint64)
        if bits.size:
            _fill_bits(self.X.indptr, self.X.indices, bits)
        self.state = (self.X.indptr, self.X.indices, *_parts(self._item), *_parts(self._user), self._sides, bits)

    def _truncated(self, affinity, side, n):
        if not isinstance(affinity, Affinity):
            raise TypeError(f"{side}_affinity must be an Affinity, got {type(affinity).__name__}")
        if affinity.side != side:
            raise ValueError(f"{side}_affinity was built for {affinity.side}s")
        if affinity.n != n:
            raise ValueError(f"{side}_affinity is {affinity.n} x {affinity.n} but the data have {n} {side}s")
        return affinity.truncate(self.k)

    # -------------------------------------------------------------------------- batches
    def neighbors(self, user_ids) -> sp.csr_matrix:
        """Rows of ``ktrunc(A_user)`` (``KNN_k(u)`` with affinities) of training users."""
        return self.neighbors_of(check_ids(user_ids, self.X.shape[0], "user_ids"))

    def _run(self, mode, rows, nbrs, out, weights=None, base=0.0, n_chunks=None):
        """Run the scatter kernel on a checked batch (rows: users' items; nbrs: their user
        neighbours; both canonical CSR of matching shapes)."""
        B = rows.shape[0]
        if n_chunks is None:
            n_chunks = max(1, min(B, 4 * self.num_threads))
        weights = np.zeros((2, _W)) if weights is None else weights
        T = self._item_T
        with numba_threads(self.num_threads):
            _batch_kernel(
                mode,
                rows.indptr,
                rows.indices,
                nbrs.indptr,
                nbrs.indices,
                nbrs.data,
                T.indptr,
                T.indices,
                T.data,
                *self.state[:2],
                self._sides,
                self.X.shape[1],
                n_chunks,
                weights,
                float(base),
                out,
            )
        return out

    def _batch(self, user_ids, user_items, neighbors):
        """Check the batch arguments of :meth:`transform` / :meth:`scores`."""
        m, n = self.X.shape
        ids = None if user_ids is None else check_ids(user_ids, m, "user_ids")
        if user_items is None:
            if ids is None:
                raise ValueError("give user_ids, user_items or both")
            rows = self.X[ids]
        else:
            rows = check_feedback(user_items, "user_items", allow_empty=True)
            if rows.shape[1] != n or (ids is not None and rows.shape[0] != len(ids)):
                raise ValueError(f"user_items must have one row per user id and {n} item columns, got {rows.shape}")
        if neighbors is not None:
            nbrs = check_sparse(neighbors, "neighbors", allow_empty=True, nonnegative=False)
            if nbrs.shape != (rows.shape[0], m):
                raise ValueError(f"neighbors must have shape {(rows.shape[0], m)}, got {nbrs.shape}")
        elif self._sides[1] != 0.0:
            if ids is None:
                raise ValueError("the user side needs user_ids (their KNN_k(u)) or neighbors")
            nbrs = self._user[ids]
        else:
            nbrs = _empty_rows(rows.shape[0], m)
        return rows, nbrs

    def neighbors_of(self, ids) -> sp.csr_matrix:
        """Rows of ``ktrunc(A_user)`` of checked training user ids (empty without a user side)."""
        return self._user[ids] if self._sides[1] != 0.0 else _empty_rows(len(ids), self.X.shape[0])

    def transform(self, user_ids, user_items=None, neighbors=None) -> np.ndarray:
        """Raw features of every item for a batch of users: array ``(B, n_items, n_features)``.

        Memory is ``8 B n_items n_features`` bytes: pass bounded batches.

        Parameters
        ----------
        user_ids : array of int
            Training users (their rows of ``X`` and, for the user side, their ``KNN_k(u)``).
        user_items : sparse matrix (B, n_items), optional
            Item side from these histories instead of the training rows (fold-in of new users).
        neighbors : sparse matrix (B, n_users), optional
            User side from these ``KNN_k(u)`` rows (e.g. recomputed for new users).
        """
        rows, nbrs = self._batch(user_ids, user_items, neighbors)
        out = np.empty((rows.shape[0], self.X.shape[1], self.n_features))
        return self._run(1, rows, nbrs, out)

    def scores(self, theta, mean, scale, user_ids=None, user_items=None, neighbors=None) -> np.ndarray:
        """Dense ``(B, n_items)`` linear scores ``theta . (phi - mean) / scale`` of a batch.

        Same batch arguments as :meth:`transform`; features are never materialised.
        """
        theta, mean, scale = (np.asarray(a, np.float64) for a in (theta, mean, scale))
        d = self.n_features
        if theta.shape != (d,) or mean.shape != (d,) or scale.shape != (d,):
            raise ValueError(f"theta, mean and scale must have shape ({d},)")
        if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(mean)) and np.all(np.isfinite(scale))):
            raise ValueError("theta, mean and scale must be finite")
        if np.any(scale <= 0):
            raise ValueError("scale must be > 0")
        rows, nbrs = self._batch(user_ids, user_items, neighbors)
        return self.linear_scores(theta, mean, scale, rows, nbrs)

    def linear_scores(self, theta, mean, scale, rows, nbrs) -> np.ndarray:
        """:meth:`scores` of checked float64 ``theta``/``mean``/``scale`` and a checked batch."""
        w = theta / scale
        weights = np.zeros((2, _W))
        weights[self._sides[:2] != 0.0] = w.reshape(-1, _W)
        # every item starts missing on every side: z-scored constant plus the indicators' weights
        base = -float(w @ mean) + float(weights[:, _W - 1].sum())
        out = np.empty((rows.shape[0], self.X.shape[1], 1))
        return self._run(0, rows, nbrs, out, weights, base)[:, :, 0]

    def pair_features(self, user_ids, item_ids) -> np.ndarray:
        """Raw features ``(P, n_features)`` of the training pairs ``(user_ids[p], item_ids[p])`` by
        the per-pair path (the one used in training)."""
        users = check_ids(user_ids, self.X.shape[0], "user_ids")
        items = check_ids(item_ids, self.X.shape[1], "item_ids")
        if users.shape != items.shape:
            raise ValueError(f"user_ids and item_ids must have the same length, got {len(users)} and {len(items)}")
        out = np.empty((len(users), self.n_features))
        _pairs_kernel(self.state, users, items, out)
        return out

    def statistics(self, user_ids=None):
        """``(mean, scale)`` of every feature over all ``m x n`` training pairs (module docstring),
        or over the ``len(user_ids) x n`` pairs of the given training users."""
        m, n = self.X.shape
        ids = np.arange(m) if user_ids is None else check_ids(user_ids, m, "user_ids")
        if len(ids) == 0:
            raise ValueError("statistics need at least one user")
        d = self.n_features
        sums = np.zeros((min(_STAT_CHUNKS, len(ids)), 1, 2 * d + 2))
        self._run(2, self.X[ids], self.neighbors_of(ids), sums, n_chunks=sums.shape[0])
        total = sums[:, 0].sum(axis=0)  # fixed chunks, summed in order: independent of the threads
        pairs = float(len(ids)) * float(n)
        mean = total[:d] / pairs
        var = total[d : 2 * d] / pairs - mean**2
        present = total[2 * d :][self._sides[:2] != 0.0]
        for s, count in enumerate(present):  # the indicator b: a Bernoulli feature
            p_missing = 1.0 - count / pairs
            mean[s * _W + _W - 1] = p_missing
            var[s * _W + _W - 1] = p_missing * (1.0 - p_missing)
        var = np.maximum(var, 0.0)
        scale = np.sqrt(var)
        scale[scale <= 1e-12 * np.maximum(1.0, np.abs(mean))] = 1.0
        return mean, scale


@njit(parallel=True, cache=True)
def _pairs_kernel(state, users, items, out):
    for p in prange(users.shape[0]):
        pair_features(state, users[p], items[p], out[p])


def _parts(A):
    return A.indptr, A.indices, A.data


def _empty_rows(n_rows, n_cols) -> sp.csr_matrix:
    return sp.csr_matrix(
        (np.zeros(0), np.zeros(0, INDEX_DTYPE), np.zeros(n_rows + 1, INDEX_DTYPE)), shape=(n_rows, n_cols)
    )
