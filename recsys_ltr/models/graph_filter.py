"""Graph filters for collaborative filtering, in closed form on a CPU: GF-CF (Shen et al., "How
Powerful is Graph Convolution for Recommendation?", CIKM 2021), BSPM (Choi et al.,
"Blurring-Sharpening Process Models for Collaborative Filtering", SIGIR 2023) and ChebyCF (Kim et
al., "Graph Spectral Filtering with Chebyshev Interpolation for Recommendation", SIGIR 2025).

With ``X`` the binary users x items matrix and ``R = D_U^{-1/2} X D_I^{-1/2}`` its degree-normalised
form, a user's scores are the row ``r_u`` of ``X`` passed through two filters of the item-item graph
``P = R^T R``::

    score(u, .) = r_u P  +  alpha r_u D_I^{-1/2} V_k^T V_k D_I^{1/2}

a linear filter (``P`` itself) and an ideal low-pass filter built from ``V_k``, the ``k`` leading right
singular vectors of ``R`` (a truncated SVD by seeded subspace iteration on ``P``,
``leading_right_singular``).  The paper's setting is ``alpha = 0.3`` and ``k = 256``.  The low-pass
term goes through the ``k x n_items`` factors.  The linear term of a binary row is one sparse product by ``P``, formed as a sparse matrix
when it takes at most ``max_graph_bytes`` (its entries are the item pairs some user shares, counted
before it is formed: ``O(sum_u n_u^2)``); it costs the entries of ``P``'s rows of the user's items.
Above that budget ``P`` is never formed and a block of users is scored as ``(r_u R^T) R`` by two
sparse products, through every user who shares an item with ``u``: with popular items that is about
``nnz(X)`` per user.  100,000 users x 10,000 items of ``make_tastes`` (2.4M positives): ranking 10,000
users took 39 CPU s by two products, 7.1 s with ``P`` (57M entries, formed in 2 s), the same
top-20 lists.

BSPM reads the same filters as the solutions of differential equations over a user's row ``x(t)``:
blurring, the heat equation ``dx/dt = x (P - I)`` for ``T_b``, and sharpening, its reverse ``dx/dt =
-x P`` for ``T_s``, started from the blurred row plus ``beta`` times the ideal low-pass filter ``x
D_I^{-1/2} V_k^T V_k D_I^{1/2}``.  As in the authors' code, blurring and the ideal filter take Euler
steps (one step of ``T = 1`` is the filter itself: GF-CF is BSPM without sharpening) and sharpening
takes ``K_s`` steps of Euler or Runge-Kutta 4.  The equations are linear with a constant matrix, so
every 4-stage RK4 (the classic rule, torchdiffeq's 3/8 rule) takes the same step, ``y sum_{j<=4}
(-tau P)^j / j!``, computed here with four products by ``P`` (each ``(y R^T) R``, never forming
``P``).

ChebyCF passes a row through a non-linear function of the graph's spectrum: with the Laplacian ``L =
I - P`` scaled to ``[-1, 1]`` as ``L~ = 2L - I = I - 2P`` (``P``'s spectrum is in ``[0, 1]``), the
filter is ``h(L~)`` for the "plateau" transfer function ``h(x) = (1 - sign(x) |x|^phi) / 2`` (1 where
``P`` has eigenvalue 1, the smoothest signals, 0 where it has 0; linear -- ``h(L~) = P`` -- at flatness
``phi = 1``, flatter in the middle above it), applied as its Chebyshev interpolant of order ``K`` at the ``K + 1`` Chebyshev
nodes ``x_k = cos((k + 1/2) pi / (K + 1))``: ``sum_n c_n T_n(L~)``, ``c_n = 2/(K + 1) sum_k h(x_k)
T_n(x_k)`` (``c_0`` halved), each ``T_n(L~) s`` by the three-term recurrence -- ``K`` products by ``P``,
no eigendecomposition.  Around it a degree normalisation (the row divided by the item degrees to the
power ``beta`` before, multiplied after) and the ideal low-pass filter of ``eta`` singular vectors
with weight ``alpha``, on the same normalised row.  The authors' code evaluates ``h`` at ``cos(j pi /
K)``, ``j = 0..K``, and interpolates those values at the nodes above, a filter a little steeper at
both ends than the ``h`` it describes; this module interpolates ``h`` itself.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from scipy.fft import dct
from scipy.linalg import solve_triangular

from .._memory import readable_bytes
from .._parallel import strided_chunks
from .._threads import limit_threads, numba_threads
from .._topk import rows_times_dense, sparse_dense_product
from .._validation import check_positive_int, check_random_state, check_real
from ..neighbors.knn import inverse_sqrt
from .base import Recommender

__all__ = ["BSPM", "GFCF", "ChebyCF"]

_log = logging.getLogger(__name__)

#: ``max_graph_bytes``'s default (8 GiB): ``P`` of ``make_tastes``' 100,000 users x 10,000 items
#: takes 0.5 GB, of 300,000 x 30,000 1.8 GB, of 1,000,000 x 100,000 6.9 GB (8.6e8 entries).  Without
#: it that last one's users are scored at 44 ms each (12 hours for all of them on two cores).
GRAPH_BYTES = 2**33
#: Bytes of one stored entry of ``P`` (a float32 value, accumulated in float64, and an int32 index).
GRAPH_ENTRY_BYTES = 8
_INDEX_MAX = np.iinfo(np.int32).max  # P's indptr is int32, as every canonical CSR's


class GFCF(Recommender):
    """GF-CF: the linear and ideal low-pass graph filters of Shen et al., (2021) (module docstring).

    Parameters
    ----------
    factors : int
        ``k``, the number of leading singular vectors of the normalised matrix in the low-pass
        filter (the paper's 256); at most ``min(n_users, n_items)``.
    alpha : float >= 0
        Weight of the low-pass filter (the paper's 0.3; 0: the linear filter alone).
    iterations : int
        Power iterations of the truncated SVD (more: closer to the exact singular vectors).
    random_state : int or None
        Seed of the truncated SVD's Gaussian start.
    max_graph_bytes : int >= 0
        Largest size of ``P = R^T R`` formed as a sparse matrix (8 bytes per entry: its values in
        float32) to score binary rows by one product (module docstring); above it, or at 0, each such
        product is two sparse products through the users.  The scores are the same up to float32's
        rounding of ``P`` (a relative 6e-8).
    num_threads : int
        BLAS and numba threads (0 = all).
    show_progress : bool or None
        Unused (the fit is one SVD; kept for the common interface).

    Attributes
    ----------
    normalized_ : scipy.sparse.csr_matrix, shape (n_users, n_items)
        ``R = D_U^{-1/2} X D_I^{-1/2}`` (derived from ``user_items_``, not saved).
    graph_ : scipy.sparse.csr_matrix of shape (n_items, n_items) or None
        ``P = R^T R`` when it fits ``max_graph_bytes`` (derived, not saved).
    components_ : ndarray, shape (factors, n_items)
        ``V_k``: the leading right singular vectors of ``R``, one per row.
    singular_values_ : ndarray, shape (factors,)

    Scores depend only on the user's row (``item_based``): new users are scored from ``user_items``
    (``recalculate_user=True``) without refitting.  ``similar_items(i)`` ranks row ``i`` of the filter
    ``P + alpha D_I^{-1/2} V_k^T V_k D_I^{1/2}``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.models import GFCF
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = GFCF(factors=16, alpha=0.3, random_state=0).fit(X)
    >>> model.components_.shape
    (16, 100)
    >>> new_user = sp.csr_matrix(X[:1])  # scored from its row: no refit
    >>> ids, scores = model.recommend(X.shape[0], new_user, N=3, recalculate_user=True)
    >>> ids.shape
    (3,)
    """

    _log_fit = True  # start and end of each fit logged at INFO (size, setting, seconds)

    _model_state = ("components_", "singular_values_")
    _similar_drop_zero = False

    def __init__(
        self,
        factors=256,
        alpha=0.3,
        iterations=7,
        random_state=0,
        max_graph_bytes=GRAPH_BYTES,
        num_threads=0,
        show_progress=None,
    ):
        self.factors = factors
        self.alpha = alpha
        self.iterations = iterations
        self.random_state = random_state
        self.max_graph_bytes = max_graph_bytes
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_params(self):
        super()._check_params()
        check_positive_int(self.factors, "factors")
        self._check_filter_params()
        check_positive_int(self.iterations, "iterations", minimum=0)
        check_random_state(self.random_state)
        check_positive_int(self.max_graph_bytes, "max_graph_bytes", minimum=0)

    def _check_filter_params(self):
        check_real(self.alpha, "alpha", low=0.0)

    def _check_data_params(self, X):
        if self._param("factors") > min(X.shape):
            raise ValueError(f"factors={self._param('factors')} exceeds min(n_users, n_items) = {min(X.shape)}")
        self._check_finite_scores(np.bincount(X.indices, minlength=X.shape[1]), self._param("factors"))

    def _check_finite_scores(self, degree, frobenius):
        """Refuse, before any score is computed, settings whose scores could leave float64's range.

        ``P = R^T R`` has its spectrum in ``[0, 1]`` (``R`` is degree-normalised), so a product by
        ``P`` never grows a row; the ideal filter grows one by at most ``2 w c F``, ``w`` its weight,
        ``c = sqrt(max degree / min degree)`` over the items with a positive, ``F = ||V_k||_F^2`` (``k``
        for orthonormal rows); blurring and sharpening by their steps' largest factor on ``[0, 1]``
        (:meth:`_log_growth`).  A binary row has norm at most ``sqrt(n_items)``."""
        used = degree[degree > 0]
        log_ratio = float(np.log(used.max() / used.min())) if used.size else 0.0
        with np.errstate(divide="ignore"):  # a weight 0: log 0 = -inf, nothing added
            outer, inner, (name, log_weight) = self._log_growth(log_ratio)
            ideal = (name, np.log(2.0) + log_weight + np.log(float(frobenius)))
        log_bound = 0.5 * np.log(max(degree.size, 1)) + outer[1] + np.logaddexp(inner[1], ideal[1])
        if not log_bound < _LOG_SCORE_LIMIT:
            worst = max(outer, inner, ideal, key=lambda t: t[1])
            raise ValueError(
                f"{type(self).__name__}'s scores could reach e^{log_bound:.4g}, beyond float64's range: "
                f"{worst[0]}={getattr(self, worst[0])!r} grows them by up to e^{worst[1]:.4g}; lower it"
            )

    def _log_growth(self, log_ratio):
        """``(name, log)`` of the largest growth of a row by each part of the filter: the one applied
        last (sharpening), the one beside the ideal filter (blurring), and the ideal filter's weight
        with its degree normalisation (``log_ratio``: log of max / min item degree)."""
        return ("sharpen_time", 0.0), ("blur_time", 0.0), ("alpha", np.log(float(self.alpha)) + 0.5 * log_ratio)

    def _fit(self, X):
        R = _normalized(X)
        with limit_threads(self.num_threads), numba_threads(self.num_threads):
            rng = check_random_state(self.random_state)
            s, Vt = leading_right_singular(R, R.T.tocsr(), self.factors, self.iterations, rng)
        self.components_, self.singular_values_ = Vt, s

    def _prepare(self):
        super()._prepare()
        self.normalized_ = _normalized(self.user_items_)
        self.normalized_t_ = self.normalized_.T.tocsr()
        self.graph_ = self._graph()
        pre, post = self._degree_scaling(self.item_popularity_)  # the binary training matrix's item degrees
        # D_I^{-1/2} V_k^T (n_items, k), C-ordered: scipy's sparse @ dense copies any other layout per call
        self.left_ = np.ascontiguousarray(self.components_.T * pre[:, None])
        self.right_ = self.components_ * post[None, :]  # V_k D_I^{1/2}  (k, n_items)

    def _degree_scaling(self, degree):
        """The item weights around the ideal filter: ``D_I^{-1/2}`` before, ``D_I^{1/2}`` after."""
        return inverse_sqrt(degree), np.sqrt(degree)

    def _score_rows(self, rows, ids, recalculate):
        with limit_threads(self.num_threads):
            scores = self._linear(rows)
            if self.alpha:
                scores += float(self.alpha) * self._low_pass(rows)
        return scores

    def _graph(self) -> sp.csr_matrix | None:
        """``P = R^T R`` (sparse) when its entries, counted first, fit ``max_graph_bytes``; else ``None``."""
        R, Rt, n = self.normalized_, self.normalized_t_, self.n_items_
        with numba_threads(self.num_threads):
            chunks = strided_chunks(n)
            counts = _graph_row_entries(Rt.indptr, Rt.indices, R.indptr, R.indices, chunks)
            indptr = np.concatenate(([0], np.cumsum(counts)))
            need = GRAPH_ENTRY_BYTES * indptr[-1]
            if need > self._param("max_graph_bytes") or indptr[-1] > _INDEX_MAX:
                _log.warning(
                    "%s: P = R^T R would take %s (%d entries), past max_graph_bytes=%d: every block of users is "
                    "scored by two sparse products through its co-users, about nnz(X) multiply-adds per user; "
                    "raise max_graph_bytes (up to the memory you can spare) to form it",
                    type(self).__name__, readable_bytes(need), indptr[-1], self._param("max_graph_bytes"),
                )  # fmt: skip
                return None
            indices, data = np.empty(indptr[-1], np.int32), np.empty(indptr[-1], np.float32)
            _graph_rows(Rt.indptr, Rt.indices, Rt.data, R.indptr, R.indices, R.data, chunks, indptr, indices, data)
        return sp.csr_matrix((data, indices, indptr.astype(np.int32)), shape=(n, n))

    def _linear(self, rows) -> np.ndarray:
        """``x P`` of sparse rows ``x``: one sparse product by ``P`` when it is formed, else two, ``(x R^T) R``."""
        if self.graph_ is not None:
            return sparse_dense_product(rows, self.graph_)
        return sparse_dense_product((rows @ self.normalized_t_).tocsr(), self.normalized_)

    def _low_pass(self, rows) -> np.ndarray:
        """``x D_I^{-1/2} V_k^T V_k D_I^{1/2}`` of sparse rows ``x``: the ideal low-pass filter."""
        return (rows @ self.left_) @ self.right_

    def _item_similarity_rows(self, items):
        unit = sp.csr_matrix(
            (np.ones(len(items)), np.asarray(items, np.int32), np.arange(len(items) + 1, dtype=np.int32)),
            shape=(len(items), self.n_items_),
        )
        return self._score_rows(unit, np.asarray(items), False)

    def _check_state(self):
        super()._check_state()
        n, k = self.n_items_, self._param("factors")
        self._check_dense_state({"components_": (k, n), "singular_values_": (k,)})
        self._check_finite_scores(np.bincount(self.user_items_.indices, minlength=n), np.sum(self.components_**2))


class _DenseFilter(GFCF):
    """A graph filter that carries dense rows through repeated products by ``P``: scored
    :data:`_SUBBLOCK` users at a time by :meth:`_process`."""

    def _score_rows(self, rows, ids, recalculate):
        out = np.empty((rows.shape[0], self.n_items_))
        with limit_threads(self.num_threads), numba_threads(self.num_threads):
            for lo in range(0, rows.shape[0], _SUBBLOCK):  # small temporaries: a few rows of each
                out[lo : lo + _SUBBLOCK] = self._process(rows[lo : lo + _SUBBLOCK])
        return out

    def _process(self, rows) -> np.ndarray:
        raise NotImplementedError

    def _times_p(self, Y) -> np.ndarray:
        """``Y P = (Y R^T) R`` for a dense block ``Y``."""
        R = self.normalized_
        out = np.empty_like(Y)
        _gram_product(Y, R.indptr, R.indices, R.data, out)
        return out


class BSPM(_DenseFilter):
    """BSPM, the blurring-sharpening process model (Choi et al., SIGIR 2023; module docstring).

    ``score(u, .)`` is the reference implementation's ``getUsersRating``: the blurred row ``x_b``
    (``blur_steps`` Euler steps of ``dx/dt = x (P - I)`` over ``blur_time``), the ideal low-pass
    filter ``x_i = x D_I^{-1/2} V_k^T V_k D_I^{1/2}``, then sharpening (``sharpen_steps`` steps of
    ``dy/dt = -y P`` over ``sharpen_time``) from ``x_b + beta x_i`` (``final_sharpening``) or from
    ``x_b``, the ideal filter added after.  The defaults are the authors' gowalla setting.

    Parameters
    ----------
    factors : int
        ``k`` of the ideal low-pass filter (the authors' 448 on gowalla, 256 elsewhere).
    beta : float >= 0
        Weight of the ideal low-pass filter (``idl_beta``).
    blur_time : float > 0
        ``T_b``; with ``blur_steps=1`` and ``blur_time=1`` the blurred row is ``x P``.
    blur_steps : int >= 1
        Euler steps of blurring (``K_b``).
    sharpen_time : float >= 0
        ``T_s``.
    sharpen_steps : int >= 0
        Sharpening steps (``K_s``); ``0``: no sharpening (``sharpening_off``), the scores are
        ``x_b + beta x_i`` -- GF-CF's with ``alpha = beta`` at the default blurring.
    solver : {"rk4", "euler"}
        Sharpening's step.
    final_sharpening : bool
        Sharpen ``x_b + beta x_i`` (True) or ``x_b``, then add ``beta x_i`` (False).
    point_combination : bool
        Average the rows at every step end of blurring and sharpening (``t_point_combination``)
        instead of taking the last.
    iterations, random_state, max_graph_bytes, num_threads, show_progress :
        As :class:`GFCF`'s.

    Attributes
    ----------
    normalized_, components_, singular_values_ :
        As :class:`GFCF`'s.

    Scoring a block of users holds a few dense rows per user of the block and costs
    ``2 nnz(X)`` multiply-adds per user per product of a dense row by ``P`` (``blur_steps - 1`` plus
    one per Euler step or four per RK4 step of sharpening); the first blur, of the binary row, is
    GF-CF's linear term (``max_graph_bytes``).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.models import BSPM, GFCF
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = BSPM(factors=16, random_state=0).fit(X)
    >>> ids, scores = model.recommend(0, N=3)
    >>> ids.shape
    (3,)
    >>> no_sharpening = BSPM(factors=16, beta=0.3, sharpen_steps=0, random_state=0).fit(X)
    >>> bool(np.allclose(no_sharpening.score([0]), GFCF(factors=16, alpha=0.3, random_state=0).fit(X).score([0])))
    True
    """

    _SOLVERS = ("rk4", "euler")

    def __init__(
        self,
        factors=448,
        beta=0.2,
        blur_time=1.0,
        blur_steps=1,
        sharpen_time=2.5,
        sharpen_steps=1,
        solver="rk4",
        final_sharpening=True,
        point_combination=False,
        iterations=7,
        random_state=0,
        max_graph_bytes=GRAPH_BYTES,
        num_threads=0,
        show_progress=None,
    ):
        self.factors = factors
        self.beta = beta
        self.blur_time = blur_time
        self.blur_steps = blur_steps
        self.sharpen_time = sharpen_time
        self.sharpen_steps = sharpen_steps
        self.solver = solver
        self.final_sharpening = final_sharpening
        self.point_combination = point_combination
        self.iterations = iterations
        self.random_state = random_state
        self.max_graph_bytes = max_graph_bytes
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_filter_params(self):
        check_real(self.beta, "beta", low=0.0)
        check_real(self.blur_time, "blur_time", low=0.0, low_open=True)
        check_positive_int(self.blur_steps, "blur_steps")
        check_real(self.sharpen_time, "sharpen_time", low=0.0)
        check_positive_int(self.sharpen_steps, "sharpen_steps", minimum=0)
        if self.solver not in self._SOLVERS:
            raise ValueError(f"solver must be one of {self._SOLVERS}, got {self.solver!r}")
        for name in ("final_sharpening", "point_combination"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def _log_growth(self, log_ratio):
        ideal = ("beta", np.log(float(self.beta)) + 0.5 * log_ratio)
        tau_b = float(self.blur_time) / self.blur_steps
        log_blur = self.blur_steps * np.log(max(1.0, tau_b - 1.0))  # Euler factors 1 - tau + tau l, l in [0, 1]
        if not self.sharpen_steps:
            return ("sharpen_time", 0.0), ("blur_time", log_blur), ideal
        tau = float(self.sharpen_time) / self.sharpen_steps
        if self.solver == "euler":  # factors 1 - tau l
            per_step = np.log(max(1.0, tau - 1.0))
        elif tau > 0:  # RK4 factors sum_{j <= 4} (-tau l)^j / j!, at most sum_j tau^j / j! <= e^tau
            per_step = min(
                tau, float(np.logaddexp.reduce([j * np.log(tau) - np.log(math.factorial(j)) for j in range(5)]))
            )
        else:
            per_step = 0.0
        return ("sharpen_time", self.sharpen_steps * per_step), ("blur_time", log_blur), ideal

    def _process(self, rows):
        """The scores of ``rows``: blurring, the ideal filter, sharpening (class docstring)."""
        ideal = float(self.beta) * self._low_pass(rows) if self.beta else 0.0
        blurred, total, count = self._blur(rows)
        sharpen = self.sharpen_steps > 0
        if sharpen:
            last, points = self._sharpen(blurred + ideal if self.final_sharpening else blurred)
            total, count = total + points, count + self.sharpen_steps
        else:
            last = blurred
        scores = total / count if self.point_combination else last
        return scores if self.final_sharpening and sharpen else scores + ideal

    def _blur(self, rows):
        """``(last, sum, count)`` of the rows at each Euler step end of ``dx/dt = x (P - I)``."""
        tau = float(self.blur_time) / self.blur_steps
        step = self._linear(rows)  # the first step's x P, from the sparse rows
        y = rows.toarray()
        total = 0.0
        for j in range(self.blur_steps):
            y = y + tau * ((self._times_p(y) if j else step) - y)
            total = total + y if self.point_combination else y
        return y, total, self.blur_steps

    def _sharpen(self, y):
        """``(last, sum)`` of the rows at each step end of ``dy/dt = -y P`` from ``y``."""
        tau = float(self.sharpen_time) / self.sharpen_steps
        total = 0.0
        for _ in range(self.sharpen_steps):
            if self.solver == "euler":
                y = y - tau * self._times_p(y)
            else:  # RK4 on a linear equation: y sum_{j <= 4} (-tau P)^j / j!
                term, y = y, y.copy()
                for j in range(1, 5):
                    term = self._times_p(term) * (-tau / j)
                    y += term
            total = total + y if self.point_combination else y
        return y, total


class ChebyCF(_DenseFilter):
    """ChebyCF, graph spectral filtering with Chebyshev interpolation (Kim et al., SIGIR 2025;
    module docstring).

    ``score(u, .) = (sum_n c_n T_n(I - 2P) s_u + alpha s_u V_eta^T V_eta) D_I^beta`` with ``s_u = x_u
    D_I^-beta``: the order-``K`` Chebyshev interpolant of the plateau function ``h`` of flatness
    ``phi``, the ideal low-pass filter of ``eta`` singular vectors, both on the row divided by the
    item degrees to the power ``beta``, the sum multiplied by them.  The defaults are the authors'
    gowalla setting (``K = 8, phi = 1.5, eta = 512, alpha = 0.2, beta = 0.4``).

    Parameters
    ----------
    order : int >= 0
        ``K``, the degree of the Chebyshev interpolant: ``K`` products by ``P`` per user.
    flatness : float > 0
        ``phi`` of ``h(x) = (1 - sign(x) |x|^phi) / 2``; 1 gives the linear filter ``P`` exactly.
    factors : int
        ``eta``, the singular vectors of the ideal low-pass filter.
    alpha : float >= 0
        Weight of the ideal low-pass filter (0: the Chebyshev filter alone).
    beta : float >= 0
        Power of the item degrees in the normalisation around both filters (0: none).
    iterations, random_state, max_graph_bytes, num_threads, show_progress :
        As :class:`GFCF`'s.

    Attributes
    ----------
    normalized_, components_, singular_values_ :
        As :class:`GFCF`'s.
    coefficients_ : ndarray, shape (order + 1,)
        ``c_0 .. c_K`` (derived from ``order`` and ``flatness``, not saved).
    degree_scaling_ : tuple of two ndarrays, shape (n_items,)
        The item weights before and after the filters, ``D_I^-beta`` and ``D_I^beta`` of the degrees
        over the largest (derived, not saved).

    Scoring a block of users holds three dense rows per user of the block and costs ``2 nnz(X)``
    multiply-adds per user for each of the ``K - 1`` products of a dense row by ``P``; the first, of
    the sparse row, is GF-CF's linear term (``max_graph_bytes``).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.models import ChebyCF, GFCF
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = ChebyCF(factors=16, random_state=0).fit(X)
    >>> ids, scores = model.recommend(0, N=3)
    >>> ids.shape
    (3,)
    >>> linear = ChebyCF(order=1, flatness=1.0, factors=16, alpha=0.0, beta=0.0).fit(X)  # h linear: P
    >>> bool(np.allclose(linear.score([0]), GFCF(factors=16, alpha=0.0).fit(X).score([0])))
    True
    """

    def __init__(
        self,
        order=8,
        flatness=1.5,
        factors=512,
        alpha=0.2,
        beta=0.4,
        iterations=7,
        random_state=0,
        max_graph_bytes=GRAPH_BYTES,
        num_threads=0,
        show_progress=None,
    ):
        self.order = order
        self.flatness = flatness
        self.factors = factors
        self.alpha = alpha
        self.beta = beta
        self.iterations = iterations
        self.random_state = random_state
        self.max_graph_bytes = max_graph_bytes
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_filter_params(self):
        check_positive_int(self.order, "order", minimum=0)
        check_real(self.flatness, "flatness", low=0.0, low_open=True)
        check_real(self.alpha, "alpha", low=0.0)
        check_real(self.beta, "beta", low=0.0)

    def _log_growth(self, log_ratio):
        # |sum_n c_n T_n| <= sum_n |c_n| on [-1, 1]; the degree scaling grows a row by (max / min)^beta
        log_filter = np.log(np.abs(chebyshev_coefficients(self._param("order"), self._param("flatness"))).sum())
        return ("beta", float(self.beta) * log_ratio), ("order", log_filter), ("alpha", np.log(float(self.alpha)))

    def _prepare(self):
        super()._prepare()
        self.coefficients_ = chebyshev_coefficients(self.order, self.flatness)
        self.degree_scaling_ = self._degree_scaling(self.item_popularity_)

    def _degree_scaling(self, degree):
        """``D_I^-beta`` before the filters and ``D_I^beta`` after, of the degrees over the largest
        (the same scores; neither overflows when the bound of :meth:`_check_finite_scores` holds)."""
        used = degree > 0
        scaled = np.where(used, degree / max(degree.max(), 1.0), 1.0)
        beta = float(self.beta)
        return np.where(used, scaled**-beta, 0.0), np.where(used, scaled**beta, 0.0)

    def _process(self, rows):
        """The scores of ``rows``: the three-term recurrence ``T_{n+1} = 2 L~ T_n - T_{n-1}``
        (``L~ s = s - 2 s P``) summed with the coefficients, then the ideal filter (class docstring)."""
        pre, post = self.degree_scaling_
        signal = rows.copy()  # s = x D^-beta, sparse and canonical as the rows
        signal.data = signal.data * pre[signal.indices]
        previous = signal.toarray()
        total = self.coefficients_[0] * previous
        if self.order:
            current = previous - 2.0 * self._linear(signal)
            total += self.coefficients_[1] * current
            for c in self.coefficients_[2:]:
                previous, current = current, 2.0 * (current - 2.0 * self._times_p(current)) - previous
                total += c * current
        total *= post
        if self.alpha:
            total += float(self.alpha) * self._low_pass(rows)
        return total


def chebyshev_coefficients(order, flatness) -> np.ndarray:
    """``c_0 .. c_K`` of the Chebyshev interpolant of ChebyCF's plateau ``h(x) = (1 - sign(x)
    |x|^phi) / 2`` at the ``K + 1`` nodes ``x_k = cos((k + 1/2) pi / (K + 1))`` (module docstring):
    ``c_n = 2/(K + 1) sum_k h(x_k) cos(n (k + 1/2) pi / (K + 1))``, ``c_0`` halved -- a DCT-II."""
    nodes = np.sin(0.5 * np.pi * (order - 2 * np.arange(order + 1)) / (order + 1))  # the cosines, exactly odd
    h = 0.5 - 0.5 * np.sign(nodes) * np.abs(nodes) ** float(flatness)
    c = dct(h, type=2) / (order + 1)  # scipy's DCT-II is 2 sum_k h_k cos(pi n (2k + 1) / (2N))
    c[0] /= 2.0
    return c


#: Natural log of the largest score :meth:`GFCF._check_finite_scores` admits, with room below float64's
#: maximum (e^709.78) for the sums of a product by ``P``.
_LOG_SCORE_LIMIT = 690.0

#: Users that :class:`BSPM` scores at a time inside a block: its temporaries (a few dense rows per
#: user) stay small and are reused instead of faulting in fresh pages (gowalla: 40,981 items).
_SUBBLOCK = 64

#: Rows of ``Y`` that :func:`_gram_product` carries through ``R`` together: each entry of ``R`` then
#: reads one cache line of ``Y^T`` (gowalla, 40,981 items: twice as fast as a row at a time).
_GROUP = 8


@njit(parallel=True, cache=True)
def _gram_product(Y, indptr, indices, data, out):
    """``out = Y R^T R`` for dense rows ``Y`` and canonical CSR ``R (indptr, indices, data)``: per
    group of :data:`_GROUP` rows of ``Y`` (transposed, item-major), each row ``u`` of ``R`` gathers
    ``<Y_r, R_u>`` and scatters it back along ``R_u``."""
    n_rows, n = Y.shape
    for g in prange((n_rows + _GROUP - 1) // _GROUP):
        lo = g * _GROUP
        width = min(n_rows, lo + _GROUP) - lo
        Z = np.empty((n, width))
        for r in range(width):
            for i in range(n):
                Z[i, r] = Y[lo + r, i]
        O = np.zeros((n, width))
        t = np.empty(width)
        for u in range(indptr.shape[0] - 1):
            t[:] = 0.0
            for p in range(indptr[u], indptr[u + 1]):
                j, d = indices[p], data[p]
                for r in range(width):
                    t[r] += d * Z[j, r]
            for p in range(indptr[u], indptr[u + 1]):
                j, d = indices[p], data[p]
                for r in range(width):
                    O[j, r] += d * t[r]
        for r in range(width):
            for i in range(n):
                out[lo + r, i] = O[i, r]


@njit(parallel=True, cache=True)
def _graph_row_entries(t_indptr, t_indices, indptr, indices, n_chunks):
    """Stored entries of each row of ``X^T X`` for CSR ``X`` (``indptr, indices``) and its transpose
    (``t_indptr, t_indices``): the distinct items of each item's users (a marker array per chunk)."""
    n = t_indptr.shape[0] - 1
    counts = np.zeros(n, np.int64)
    for c in prange(n_chunks):
        last = np.full(n, -1, np.int64)  # the last row that counted each item
        for i in range(c, n, n_chunks):
            for p in range(t_indptr[i], t_indptr[i + 1]):
                u = t_indices[p]
                for q in range(indptr[u], indptr[u + 1]):
                    j = indices[q]
                    if last[j] != i:
                        last[j] = i
                        counts[i] += 1
    return counts


@njit(parallel=True, cache=True)
def _graph_rows(t_indptr, t_indices, t_data, indptr, indices, data, n_chunks, out_indptr, out_indices, out_data):
    """The rows of ``R^T R`` into ``out_*`` (``out_indptr`` from :func:`_graph_row_entries`): row ``i``
    sums ``R_ui R_u.`` in float64 over the users ``u`` of item ``i`` in their order, stored rounded to
    ``out_data``'s type, columns in order of first
    reach (unsorted), so each entry's sum is the same on any number of threads."""
    n = t_indptr.shape[0] - 1
    for c in prange(n_chunks):
        acc = np.zeros(n)
        last = np.full(n, -1, np.int64)
        for i in range(c, n, n_chunks):
            start = fill = out_indptr[i]
            for p in range(t_indptr[i], t_indptr[i + 1]):
                u, w = t_indices[p], t_data[p]
                for q in range(indptr[u], indptr[u + 1]):
                    j = indices[q]
                    if last[j] != i:
                        last[j] = i
                        acc[j] = 0.0
                        out_indices[fill] = j
                        fill += 1
                    acc[j] += w * data[q]
            for f in range(start, fill):
                out_data[f] = acc[out_indices[f]]


#: Columns of the subspace iteration beyond the ``k`` singular vectors sought (Halko et al.'s
#: oversampling, scikit-learn's ``n_oversamples``).
_OVERSAMPLES = 10


def leading_right_singular(R, Rt, k, iterations, rng) -> tuple[np.ndarray, np.ndarray]:
    """``(s, V_k)``: the ``k`` largest singular values of the sparse ``R`` and their right singular
    vectors (rows of ``V_k``), by subspace iteration on ``P = R^T R`` in the item space (Halko,
    Martinsson and Tropp, 2011, Alg. 4.4 applied to ``P``): a Gaussian block of ``k + 10`` columns
    (``rng``), ``iterations + 1`` products by ``P`` -- each two sparse products, ``R`` then ``R^T``
    (``Rt``, CSR), in parallel over rows -- each followed by a QR, then the Rayleigh-Ritz step on the
    Gram matrix of ``R Q``.  The subspace is ``P^(iterations + 1)`` of the Gaussian block, as
    scikit-learn's ``randomized_svd(R, k, n_iter=iterations)`` finds it, but every orthonormalisation
    is of ``n_items`` rows, not ``n_users``."""
    n = R.shape[1]
    Q = _orthonormal(rng.standard_normal((n, min(n, k + _OVERSAMPLES))), passes=1)
    for step in range(iterations + 1):  # a well-conditioned basis in between, orthonormal at the end
        Q = _orthonormal(_csr_times(Rt, _csr_times(R, Q)), passes=2 if step == iterations else 1)
    B = _csr_times(R, Q)
    w, W = np.linalg.eigh(B.T @ B)  # B^T B = Q^T P Q, ascending
    top = np.argsort(w)[::-1][:k]
    return np.sqrt(np.maximum(w[top], 0.0)), np.ascontiguousarray((Q @ W[:, top]).T)


#: Largest ratio of the diagonal of a Cholesky factor of ``Y^T Y`` (an estimate of ``Y``'s condition
#: number) at which :func:`_orthonormal` trusts Cholesky QR: twice applied, its loss of orthogonality
#: is then of the order of the unit roundoff (Yamamoto et al., 2015).
_CHOLESKY_CONDITION = 1e5


def _orthonormal(Y, passes=2) -> np.ndarray:
    """A basis of the columns of the tall ``Y`` by Cholesky QR (each pass two BLAS-3 products of ``Y``:
    twice applied, half of Householder QR's time on 30,000 x 266 and orthonormal; once, a basis
    orthonormal to about ``1e-6``), or by Householder QR when ``Y`` is too ill-conditioned for it
    (:data:`_CHOLESKY_CONDITION`)."""
    Q = Y
    for _ in range(passes):
        try:
            L = np.linalg.cholesky(Q.T @ Q)
        except np.linalg.LinAlgError:
            return np.linalg.qr(Y)[0]
        diagonal = np.abs(np.diag(L))
        if not diagonal.min() * _CHOLESKY_CONDITION > diagonal.max():
            return np.linalg.qr(Y)[0]
        Q = Q @ solve_triangular(L, np.eye(L.shape[0]), lower=True, check_finite=False).T  # Q L^-T: one GEMM
    return np.ascontiguousarray(Q)


def _csr_times(A, Y) -> np.ndarray:
    """Dense ``A @ Y`` of a CSR ``A`` and a dense ``Y`` (C-ordered), in parallel over ``A``'s rows."""
    out = np.zeros((A.shape[0], Y.shape[1]))
    rows_times_dense(A.indptr, A.indices, A.data, np.ascontiguousarray(Y), out)
    return out


def _normalized(X) -> sp.csr_matrix:
    """``D_U^{-1/2} X D_I^{-1/2}`` of a canonical binary CSR ``X`` (empty rows and columns stay 0)."""
    rows = inverse_sqrt(np.diff(X.indptr))
    cols = inverse_sqrt(np.bincount(X.indices, minlength=X.shape[1]))
    R = X.copy()
    R.data = R.data * np.repeat(rows, np.diff(X.indptr)) * cols[X.indices]
    return R
