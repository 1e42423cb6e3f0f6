"""How every recommender ranks: the top-``N`` answers of ``recommend``, ``similar_items`` and
``similar_users`` (:class:`~recsys_ltr.models.Recommender`), and so of ``Interactions.recommend`` and
the executors, which call ``recommend``.

A model describes its scores of a block of users by one of three values, and :func:`top_n` ranks
each by the route that never builds more than a bounded block of dense scores:

* :class:`Product` -- ``R @ B`` with ``B >= 0`` (neighbourhood models): ranked sparsely;
* :class:`Factors` -- ``U @ V.T`` (factor models): ranked in cache-sized tiles, the BLAS pool held
  to one thread so that no BLAS threads spin beside numba's (gowalla, every user, beside another job:
  4.2 s against 7.5 s by dense blocks);
* :class:`DenseRows` -- any other score function, called on blocks of users.

Every route ranks by score, then by training popularity, then by smaller item id (the evaluator's
tie rule), and pads a user with fewer candidates with id ``-1`` and score ``-inf``.  Ids come back
as ``int32``, as implicit's ``recommend`` returns them (its ``ranking_metrics_at_k`` reads them so);
scores as ``float64``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import _topk
from .._memory import rows_per_block
from .._parallel import product_work, strided_chunks
from .._threads import limit_threads
from .._topk import top_k_dense, top_k_factor_product, top_k_sparse_product
from .._validation import INDEX_DTYPE

__all__ = [
    "ID_DTYPE",
    "DenseRows",
    "Factors",
    "Product",
    "top_n",
    "top_similar",
    "top_similar_sparse",
    "unpad",
    "warn_if_short",
]

#: The dtype of the ids every answer returns: implicit's (``int32``; catalogues and user counts stay
#: below 2^31, as the CSR matrices' ``int32`` indices already require).
ID_DTYPE = np.int32


class Product(NamedTuple):
    """Scores ``R @ B`` of the block's users: canonical CSR, ``B`` non-negative (a row's unstored
    scores are then its lowest, which the sparse ranking relies on)."""

    R: sp.csr_matrix
    B: sp.csr_matrix


class Factors(NamedTuple):
    """Scores ``U @ V.T`` of the block's users (dense factors)."""

    U: np.ndarray
    V: np.ndarray


class DenseRows(NamedTuple):
    """Scores ``of(block)`` (dense, ``(len(block), n_items)``) of the users at ``block``, a slice of
    ``n_users``, called on blocks of at most :func:`recsys_ltr._memory.rows_per_block` rows."""

    of: Callable[[slice], np.ndarray]
    n_users: int


def top_n(scores, popularity, liked, excluded, n_out, num_threads=0) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, scores)``, ``(n_users, n_out)``: each user's best ``n_out`` items of ``scores``
    (:class:`Product`, :class:`Factors` or :class:`DenseRows`) outside its ``liked`` items (CSR rows)
    and the ``excluded`` ones (a boolean mask over the items); ties by ``popularity``, then id."""
    n_items = popularity.shape[0]
    n_users = scores.n_users if isinstance(scores, DenseRows) else scores[0].shape[0]
    out_ids, out_scores = np.empty((n_users, n_out), np.int64), np.empty((n_users, n_out))
    if isinstance(scores, Product):
        R, B = scores
        fill = np.lexsort((np.arange(n_items), -popularity))
        top_k_sparse_product(
            R.indptr, R.indices, R.data, B.indptr, B.indices, B.data,
            liked.indptr, liked.indices,
            excluded, popularity, fill, strided_chunks(R.shape[0]), out_ids, out_scores,
            work=product_work(R.indices, B.indptr, R.shape[0], B.shape[1]),
        )  # fmt: skip
    elif isinstance(scores, Factors):
        tile = max(1, _topk.TILE_FLOATS // n_items)
        U, V = (np.ascontiguousarray(F, dtype=np.float64) for F in scores)
        with limit_threads(num_threads, blas=1):
            top_k_factor_product(
                U, V.T, popularity,
                liked.indptr, liked.indices,
                excluded, tile, strided_chunks(-(-U.shape[0] // tile)), out_ids, out_scores,
            )  # fmt: skip
    else:
        step = rows_per_block(8 * n_items)
        for lo in range(0, n_users, step):
            block = slice(lo, lo + step)
            S = np.ascontiguousarray(scores.of(block), dtype=np.float64)
            part = liked[block]
            top_k_dense(
                S, popularity, part.indptr, part.indices, excluded, False, False, out_ids[block], out_scores[block]
            )
    return out_ids.astype(ID_DTYPE), out_scores


def top_similar(rows_of, positions, self_ids, N, excluded, n, drop_zero) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, scores)`` of the ``N`` most similar of ``n`` items (or users) to each of ``self_ids``:
    their dense similarity rows ``rows_of(positions[block])``, the id itself left out (a new id
    ``>= n`` has no column of its own), ties by smaller id, similarity 0 left out with ``drop_zero``."""
    n_out = min(N, max(1, n - 1))
    out_ids, out_scores = np.empty((len(positions), n_out), np.int64), np.empty((len(positions), n_out))
    secondary = np.zeros(n)
    step = rows_per_block(8 * n)
    for lo in range(0, len(positions), step):
        chunk = slice(lo, lo + step)
        block = np.ascontiguousarray(rows_of(positions[chunk]), dtype=np.float64)
        own = self_ids[chunk]
        inside = own < n
        ex_indptr = np.concatenate(([0], np.cumsum(inside))).astype(INDEX_DTYPE)
        own = own[inside].astype(INDEX_DTYPE)
        top_k_dense(block, secondary, ex_indptr, own, excluded, drop_zero, True, out_ids[chunk], out_scores[chunk])
    return out_ids.astype(ID_DTYPE), out_scores


def top_similar_sparse(S, ids, N, excluded) -> tuple[np.ndarray, np.ndarray]:
    """:func:`top_similar` over the CSR similarity rows ``S`` (non-negative, zeros left out), ranked
    without dense rows: the product of a row selector with ``S``, the item itself excluded."""
    n = S.shape[1]
    n_out = min(N, max(1, n - 1))
    out_ids, out_scores = np.empty((len(ids), n_out), np.int64), np.empty((len(ids), n_out))
    ptr = np.arange(len(ids) + 1, dtype=INDEX_DTYPE)
    own = ids.astype(INDEX_DTYPE)
    top_k_sparse_product(
        ptr, own, np.ones(len(ids)), S.indptr, S.indices, S.data, ptr, own, excluded, np.zeros(n),
        np.empty(0, np.int64), strided_chunks(len(ids)), out_ids, out_scores,
        work=product_work(own, S.indptr, len(ids), n),
    )  # fmt: skip
    return out_ids.astype(ID_DTYPE), out_scores


def warn_if_short(found, N, excluded, side, model, kept="") -> tuple[np.ndarray, np.ndarray]:
    """``found`` as it is, with a ``UserWarning`` when an id got fewer than ``N`` answers although
    more candidates exist: the others have similarity 0 in ``model`` (a name; ``kept``: why, e.g.
    its neighbourhood size) and are left out."""
    ids = np.atleast_2d(found[0])
    if ids.shape[0] and np.count_nonzero(ids >= 0, axis=1).min() < min(N, len(excluded) - 1 - excluded.sum()):
        warnings.warn(
            f"{model}.similar_{side}s found fewer than N={N} {side}s for some ids: the other "
            f"{side}s have similarity 0 in this model{kept} and are left out",
            UserWarning,
            stacklevel=3,
        )
    return found


def unpad(ids, scores) -> tuple[np.ndarray, np.ndarray]:
    """The one row of a scalar query without its padding (id ``-1``)."""
    valid = ids[0] >= 0
    return ids[0][valid], scores[0][valid]
