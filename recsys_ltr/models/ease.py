"""EASE, the closed-form linear item-item autoencoder (Steck 2019), an anchor of the evaluation."""

from __future__ import annotations

import os

import numpy as np
from scipy.linalg import cho_factor, get_lapack_funcs
from threadpoolctl import threadpool_limits

from .._validation import check_positive_int, check_real
from .base import Recommender

__all__ = ["EASE"]

_SYMMETRISE_BLOCK = 1024
#: Largest order factorised by multi-threaded LAPACK: OpenBLAS's threaded ``dpotrf`` segfaults on
#: large orders (OpenMathLib/OpenBLAS#1413, #2821; here OpenBLAS 0.3.30, 2 threads, from n ~ 16000),
#: so larger catalogues are factorised on one thread.
_THREADED_LAPACK_MAX = 10_000


class EASE(Recommender):
    """EASE^R: ``score(u, .) = X_u B`` with the closed-form item weights of Steck (2019).

    ``B = argmin ||X - X B||_F^2 + lam ||B||_F^2`` subject to ``diag(B) = 0`` has the closed
    form (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW 2019)::

        P = (X^T X + lam I)^{-1},    B_ij = -P_ij / P_jj  (i != j),    B_ii = 0.

    ``P`` comes from a float64 Cholesky factorisation (LAPACK ``potrf``/``potri``, in place), so
    fitting holds one dense ``n_items x n_items`` float64 matrix (``8 n_items^2`` bytes) besides
    the sparse Gram matrix.  Scores depend only on the user's row (``item_based``): new users
    are scored from ``user_items`` without refitting.

    ``similar_items(i)`` ranks the row ``B_i.``: the weight item ``i`` adds to every other item's
    score (implicit's convention for item-item models, whose scores are ``user_items @ W``).

    Parameters
    ----------
    lam : float > 0
        L2 regularisation ``lambda`` (Steck uses a few hundred to a few thousand).
    num_threads : int
        BLAS/LAPACK threads while fitting (one above 10,000 items, see ``_THREADED_LAPACK_MAX``) and
        numba threads in ``recommend`` (0 = library default).
    show_progress : bool
        Unused (one closed-form solve); kept for a uniform API.
    max_items : int
        Refuse catalogues larger than this (``ValueError`` with the memory the fit would need).

    Attributes
    ----------
    B_ : ndarray of shape (n_items, n_items)
        The item weights, zero diagonal.
    """

    def __init__(self, lam=500.0, num_threads=0, show_progress=False, max_items=20_000):
        self.lam = lam
        self.num_threads = num_threads
        self.show_progress = show_progress
        self.max_items = max_items

    _model_state = ("B_",)

    def _check_params(self):
        super()._check_params()
        check_real(self.lam, "lam", low=0.0, low_open=True)
        check_positive_int(self.max_items, "max_items")

    def _check_data_params(self, X):
        max_items = self.max_items
        n = X.shape[1]
        if n > max_items:
            raise ValueError(
                f"EASE refuses {n} items (more than max_items={max_items}): the dense {n} x {n} float64 "
                f"inverse needs {8 * n * n / 1e9:.3g} GB; pass EASE(max_items={n}) if the memory is available"
            )

    def _fit(self, X):
        n = X.shape[1]
        G = (X.T @ X).toarray()
        G[np.diag_indices(n)] += self.lam
        # at most one thread per core: a larger count would overflow the C int of the BLAS library
        threads = 1 if n > _THREADED_LAPACK_MAX else (min(self.num_threads, os.cpu_count() or 1) or None)
        with threadpool_limits(threads, user_api="blas"):
            c, _ = cho_factor(G, lower=False, overwrite_a=True, check_finite=False)
            potri = get_lapack_funcs("potri", (c,))
            P, info = potri(c, lower=False, overwrite_c=True)
        if info != 0:
            raise np.linalg.LinAlgError(f"LAPACK potri failed with info={info}")
        _symmetrise_upper(P)
        P /= -np.diag(P).copy()[None, :]
        np.fill_diagonal(P, 0.0)
        self.B_ = P

    def _score_rows(self, rows, ids, recalculate):
        return np.asarray(rows @ self.B_)

    def _item_similarity_rows(self, items):
        return self.B_[items]

    def _check_state(self):
        self._check_dense_state({"B_": (self.n_items_, self.n_items_)})


def _symmetrise_upper(P):
    """Copy the upper triangle of the square ``P`` onto its lower one, in place, block by block."""
    n = P.shape[0]
    for lo in range(0, n, _SYMMETRISE_BLOCK):
        hi = min(n, lo + _SYMMETRISE_BLOCK)
        P[lo:hi, :lo] = P[:lo, lo:hi].T
        diag = P[lo:hi, lo:hi]
        diag[...] = np.triu(diag) + np.triu(diag, 1).T
