"""EASE, the closed-form linear item-item autoencoder (Steck 2019), an anchor of the evaluation,
with a sparse approximate inverse for catalogues too large for the dense solve."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import _memory
from .._fsai import elimination_order, fsai_factor
from .._gram import gram
from .._memory import readable_bytes
from .._progress import progress
from .._spd_inverse import inverse_flops, spd_inverse_inplace, symmetrise_upper
from .._threads import limit_threads
from .._topk import rows_times_dense, sparse_dense_product
from .._validation import check_positive_int, check_real
from .base import Recommender

__all__ = ["EASE"]

SOLVERS = ("auto", "dense", "sparse")
#: Bytes per stored entry of the sparse path's factor while fitting and scoring: the factor, its
#: transpose and the temporaries of their construction (measured peak about 30).
_SPARSE_BYTES_PER_ENTRY = 40


class EASE(Recommender):
    """EASE^R: ``score(u, .) = X_u B`` with the closed-form item weights of Steck (2019).

    ``B = argmin ||X - X B||_F^2 + λ ||B||_F^2`` (``λ = regularization``) subject to ``diag(B) = 0`` has the closed
    form (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW 2019)::

        P = (X^T X + λ I)^{-1},    B = I - P diag(P)^{-1}    (B_ij = -P_ij / P_jj, B_ii = 0).

    EASE reads weights (``uses_weights``): ``X`` may hold counts or weights (the closed form holds for
    any ``X``; Steck uses binary data), and a user is scored from their weighted row.

    Two solvers compute ``P``:

    * ``"dense"`` -- the exact inverse, in place in one dense ``n_items x n_items`` float64 matrix
      (``8 n_items^2`` bytes besides the sparse Gram matrix), by a blocked Cholesky factorisation
      and inversion whose panel steps drive the progress bar (:mod:`recsys_ltr._spd_inverse`);
    * ``"sparse"`` -- a factorized sparse approximate inverse ``P ~ Z^T Z`` (FSAI, Kolotilina &
      Yeremin 1993; the approach of SANSA, Spišák et al., RecSys 2023, see :mod:`recsys_ltr._fsai`): ``Z``
      is lower triangular in the order of increasing popularity and row ``i`` holds ``i`` and
      the ``k`` items before it that co-occur most with it.  ``B = I - Z^T Z diag(Z^T Z)^{-1}``
      keeps a zero diagonal and is applied in factored form, so memory is ``O(n_items k)``.
      It is exact when, for every item ``i``, the items before ``i`` that a chain of
      co-occurrences through items before ``i`` links to ``i`` all co-occur with ``i`` itself
      and number at most ``k`` (the fill of the Cholesky factor, not only ``i``'s co-occurring
      items: e.g. a Gram matrix block diagonal with dense blocks of at most ``k + 1`` items).
      Few co-occurrences per item are not enough: a chain 0-1, 1-2, ... makes the exact inverse
      dense.

    ``"auto"`` takes the dense solve when ``n_items <= dense_max_items`` (and its matrix fits in
    ``memory_limit`` when one is given), the sparse one otherwise: the data and the parameters
    decide, never the memory free at fit time.  A chosen solver that needs more than
    ``memory_limit`` or than the memory available raises ``MemoryError`` naming the bytes needed and
    available and what the other solver needs.  Scores depend only on the user's row (``item_based``): new users are
    scored from ``user_items`` (``recalculate_user=True``) without refitting.  ``similar_items(i)`` ranks the row ``B_i.``:
    the weight item ``i`` adds to every other item's score (implicit's convention for item-item
    models, whose scores are ``user_items @ W``).

    Parameters
    ----------
    regularization : float > 0
        L2 regularisation ``lambda`` (Steck uses a few hundred to a few thousand).
    solver : {"auto", "dense", "sparse"}
        How ``P`` is computed (see above).
    k : int >= 1
        Sparse solver: earlier items in each row of ``Z`` (the fit costs ``O(n_items k^3)`` at most).
    dense_max_items : int >= 1
        ``"auto"`` solves catalogues up to this size densely (the dense fit time grows as ``n_items^3``
        and its model as ``8 n_items^2`` bytes: at the default 4,096, 7e10 flops, a few seconds on two
        cores, and 134 MB; at lastfm-2k's 17,632 items about 5 minutes and 2.5 GB, where the sparse
        solve takes 4 s for a test ADG of .2121 against .2128); the sparse solve above, as ``FEBR()``
        and the command line solve it.
    memory_limit : int, optional
        Bytes a fit may allocate: ``"auto"`` solves densely only within it, and a solver that needs
        more raises ``MemoryError`` (as one that needs more than the memory available does).
    num_threads : int
        BLAS threads of the dense solve and numba threads of the sparse solve and of scoring
        (0 = all).
    show_progress : bool or None
        Progress bar over the solve's steps; ``None`` (default): when stderr is a terminal.

    Attributes
    ----------
    solver_ : str
        The solver used, ``"dense"`` or ``"sparse"``.
    B_ : ndarray of shape (n_items, n_items)
        Dense solver: the item weights, zero diagonal (``None`` after a sparse solve).
    factor_ : scipy.sparse.csr_matrix of shape (n_items, n_items)
        Sparse solver: ``Z`` (``P ~ Z^T Z``; ``None`` after a dense solve).

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> from recsys_ltr.models import EASE
    >>> model = EASE(regularization=50.0).fit(X)
    >>> model.solver_
    'dense'
    >>> ids, scores = model.recommend(0, N=3)  # user 0's best unseen items, best first
    >>> ids
    array([52, 29, 61], dtype=int32)
    """

    _log_fit = True  # start and end of each fit logged at INFO (size, setting, seconds)
    uses_weights = True

    def __init__(
        self,
        regularization=500.0,
        solver="auto",
        k=200,
        dense_max_items=4096,
        memory_limit=None,
        num_threads=0,
        show_progress=None,
    ):
        self.regularization = regularization
        self.solver = solver
        self.k = k
        self.dense_max_items = dense_max_items
        self.memory_limit = memory_limit
        self.num_threads = num_threads
        self.show_progress = show_progress

    #: one of the two is set by a fit (the other is ``None``, not saved)
    _model_state = ("B_", "factor_")

    def _check_params(self):
        super()._check_params()
        check_real(self.regularization, "regularization", low=0.0, low_open=True)
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        check_positive_int(self.k, "k")
        check_positive_int(self.dense_max_items, "dense_max_items")
        if self.memory_limit is not None:
            check_positive_int(self.memory_limit, "memory_limit")

    # ------------------------------------------------------------------ fitting
    def _fit(self, X):
        G = gram(X, "EASE")  # its diagonal stored: the squared column norms
        self.solver_ = self._choose_solver(X.shape[1])  # the memory left beside the Gram matrix
        threads, shown = self.num_threads, self.show_progress
        if self.solver_ == "dense":
            P = G.toarray().T  # Fortran-ordered and, the Gram matrix being symmetric, equal to it
            del G
            P[np.diag_indices_from(P)] += self.regularization
            self.B_, self.factor_ = _dense_weights(P, threads, shown), None
        else:
            G.setdiag(G.diagonal() + self.regularization)  # in place: every diagonal entry is stored
            self.B_, self.factor_ = None, _sparse_factor(G, self.k, threads, shown)

    def _fit_outcome(self) -> str:
        return f" ({self.solver_} solve)"

    def _choose_solver(self, n):
        """``"dense"`` or ``"sparse"`` from ``solver``, the catalogue size and ``memory_limit`` only (never
        from the memory free at fit time, so one script always fits one model); a chosen solver that
        does not fit in ``memory_limit`` or in the memory available raises ``MemoryError``."""
        need = {"dense": 8.0 * n * n, "sparse": _SPARSE_BYTES_PER_ENTRY * n * (min(self.k, n - 1) + 1.0)}
        solver = self.solver
        if solver == "auto":
            small = n <= self.dense_max_items and (self.memory_limit is None or need["dense"] <= self.memory_limit)
            solver = "dense" if small else "sparse"
        for room, what in ((self.memory_limit, "memory_limit"), (_memory.available_bytes(), "the memory available")):
            if room is not None and need[solver] > room:
                other = "sparse" if solver == "dense" else "dense"
                hint = f"solver='{other}' needs about {readable_bytes(need[other])}" + (
                    "; a lower k shrinks the sparse solve" if solver == "sparse" else ""
                )
                raise MemoryError(
                    f"EASE's {solver} solve of {n} items{f' with k={self.k}' if solver == 'sparse' else ''} needs "
                    f"about {readable_bytes(need[solver])} but {what} is {readable_bytes(room)}: {hint}"
                )
        return solver

    def _prepare(self):
        super()._prepare()
        self._weights = _DenseWeights(self.B_) if self.solver_ == "dense" else _SparseWeights(self.factor_)

    # ------------------------------------------------------------------ scoring
    def _score_rows(self, rows, ids, recalculate):
        return self._weights.scores(rows)

    def _item_similarity_rows(self, items):
        """Rows ``B[items]``, dense."""
        return self._weights.rows(items)

    # ------------------------------------------------------------------ persistence
    def _required_state(self):
        return ("user_items_",)  # and one of B_ / factor_, checked below

    def _check_state(self):
        n = self.n_items_
        if (self.B_ is None) == (self.factor_ is None):
            raise ValueError("an EASE file holds exactly one of B_ (dense solver) and factor_ (sparse solver)")
        self.solver_ = "dense" if self.factor_ is None else "sparse"
        if self.solver_ == "dense":
            self._check_dense_state({"B_": (n, n)})
            self.B_ = np.ascontiguousarray(self.B_)
            return
        Z = self.factor_
        if Z.shape != (n, n):
            raise ValueError(f"factor_ must be {n} x {n}, got {Z.shape[0]} x {Z.shape[1]}")
        if not np.all(np.isfinite(Z.data)) or not np.all(Z.diagonal() > 0):
            raise ValueError("factor_ must be finite with a positive diagonal")


def _dense_weights(P, num_threads, show_progress) -> np.ndarray:
    """EASE's ``B`` from the Fortran-ordered ``G + λ I``, inverted in place (one dense matrix in all)."""
    gflops = sum(flops / 1e9 for flops in inverse_flops(P.shape[0]))  # summed as the bar sums them
    fmt = "{l_bar}{bar}| {n:.0f}/{total:.0f} GFlop [{elapsed}<{remaining}, {rate_fmt}]"
    with (
        limit_threads(num_threads),
        progress(show_progress, total=gflops, desc="EASE dense inverse", unit="GFlop", bar_format=fmt) as bar,
    ):
        spd_inverse_inplace(P, step=lambda flops: bar.update(flops / 1e9))
    symmetrise_upper(P)
    B = P.T  # C-ordered view of the symmetric P: scoring reads rows of B
    B /= -np.diag(B).copy()
    np.fill_diagonal(B, 0.0)
    return B


def _sparse_factor(A, k, num_threads, show_progress) -> sp.csr_matrix:
    """The sparse approximate inverse factor ``Z`` of ``A = G + λ I`` (``Z^T Z ≈ A^{-1}``, FSAI)."""
    rank = elimination_order(A.diagonal())  # the diagonal is popularity + λ
    with (
        limit_threads(num_threads, blas=1),  # the rows' small solves run in parallel
        progress(show_progress, total=A.shape[0], desc="EASE sparse inverse", unit="item") as bar,
    ):
        return fsai_factor(A, rank, k, step=bar.update)


class _DenseWeights:
    """The dense solve's weights: ``score(u, .) = x_u B``."""

    def __init__(self, B):
        self.B = B

    def scores(self, rows) -> np.ndarray:
        out = np.zeros((rows.shape[0], self.B.shape[1]))
        rows_times_dense(rows.indptr, rows.indices, rows.data, self.B, out)
        return out

    def rows(self, items) -> np.ndarray:
        return self.B[items]


class _SparseWeights:
    """The sparse solve's weights, never formed: ``B = I - P diag(P)^{-1}`` with ``P = Z^T Z``, so
    ``x B = x - (x Z^T Z) diag(P)^{-1}``."""

    def __init__(self, Z):
        self.Z, self.Zt = Z, Z.T.tocsr()
        self.pdiag = np.asarray(Z.multiply(Z).sum(axis=0)).ravel()  # diag(Z^T Z) > 0

    def scores(self, rows) -> np.ndarray:
        out = sparse_dense_product(rows @ self.Zt, self.Z)
        out /= -self.pdiag
        out[np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr)), rows.indices] += rows.data
        return out

    def rows(self, items) -> np.ndarray:
        out = (self.Zt[items] @ self.Z).toarray()
        out /= -self.pdiag
        out[np.arange(items.size), items] = 0.0  # B_ii = 1 - P_ii / P_ii, exactly
        return out
