"""Geometric Mean Metric Learning (GMML; Zadeh, Hosseini & Sra 2016; su2017 Algorithm 1).

With ``S`` and ``D`` the sums of outer products of the differences of similar and dissimilar pairs
(su2017 Eq. 4-5), each plus ``λI`` (Algorithm 1), GMML minimises ``tr(M S) + tr(M^{-1} D)``
(Eq. 6).  Its gradient vanishes on the Riccati equation ``M S M = D`` (Eq. 8), solved in closed form
by the matrix geometric mean (Eq. 9)::

    M = S^{-1} #_{1/2} D = S^{-1/2} (S^{1/2} D S^{1/2})^{1/2} S^{-1/2}.

The *weighted* variant takes the point at ``t`` on the geodesic from ``S^{-1}`` (t = 0) to ``D``
(t = 1): ``M_t = S^{-1/2} (S^{1/2} D S^{1/2})^t S^{-1/2}``.

Numerics: everything goes through symmetric eigendecompositions.  The geodesic is symmetric,
``S^{-1} #_t D = D #_{1-t} S^{-1} = D^{1/2} (D^{1/2} S D^{1/2})^{-(1-t)} D^{1/2}``, so the
formula used pivots on the better-conditioned of ``S`` and ``D`` and never inverts a square
root of a nearly singular ``S``.  The result is returned as ``M = L^T L`` with
``L = diag(e^{p/2}) U^T P`` (``U, e`` the eigenpairs of the inner matrix), symmetric positive
definite by construction; eigenvalues are floored at ``1e-14`` times the largest one, with a
:class:`SingularScatterWarning` whenever the floor is used.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator

from .._progress import progress, progress_enabled
from .._threads import limit_threads
from .._validation import check_positive_int, check_random_state, check_real
from ._base import MahalanobisMixin, check_dense

__all__ = [
    "GMML",
    "SingularScatterWarning",
    "cross_scatter",
    "gmml_components",
    "within_scatter",
]

_EIG_FLOOR = 1e-14


class SingularScatterWarning(RuntimeWarning):
    """A scatter matrix had to be made definite by clamping eigenvalues (no ridge to do it)."""


def within_scatter(P: np.ndarray) -> np.ndarray:
    """``sum_{i != j} (p_i - p_j)(p_i - p_j)^T`` over ordered pairs of rows of ``P``.

    Algorithm 1's matrix ``S`` in closed form ``2 n sum_i (p_i - c)(p_i - c)^T`` with ``c`` the
    mean row: centring first keeps it accurate for data far from the origin (the shortcut
    ``2 n P^T P - 2 s s^T`` cancels catastrophically there).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.metric_learning.gmml import within_scatter
    >>> within_scatter(np.array([[0.0, 0.0], [1.0, 2.0]]))
    array([[2., 4.],
           [4., 8.]])
    """
    C = P - P.mean(axis=0)
    return 2.0 * P.shape[0] * (C.T @ C)


def cross_scatter(P: np.ndarray, N: np.ndarray) -> np.ndarray:
    """``sum_{p in P, q in N} (p - q)(p - q)^T`` (Algorithm 1, matrix ``D``), in closed form.

    Both sets are first shifted by the mean of ``P ∪ N`` (the sum is shift-invariant), which
    avoids the cancellation of the closed form on uncentred data.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.metric_learning.gmml import cross_scatter
    >>> cross_scatter(np.array([[0.0, 0.0]]), np.array([[1.0, 2.0], [1.0, 0.0]]))
    array([[2., 2.],
           [2., 4.]])
    """
    shift = (P.sum(axis=0) + N.sum(axis=0)) / (P.shape[0] + N.shape[0])
    P, N = P - shift, N - shift
    sp_, sn = P.sum(axis=0), N.sum(axis=0)
    cross = np.outer(sp_, sn)
    return N.shape[0] * (P.T @ P) + P.shape[0] * (N.T @ N) - cross - cross.T


def _eigh(A: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of the symmetric ``A`` with eigenvalues floored at ``_EIG_FLOOR`` times the
    largest; warns when the floor changes any, since ``M S M = D`` then holds only approximately."""
    w, V = np.linalg.eigh(0.5 * (A + A.T))
    top = max(float(w[-1]), 0.0)
    if not np.isfinite(top) or top == 0.0:
        raise ValueError(f"{name} is zero or not finite: no metric can be learned from it")
    floor = _EIG_FLOOR * top
    if w[0] < floor:
        warnings.warn(
            f"{name} is singular to working precision (smallest eigenvalue {w[0]:.3g}, largest {top:.3g}): "
            f"its eigenvalues are clamped to {floor:.3g}, so the metric solves M S M = D only approximately; "
            f"use a positive regularization",
            SingularScatterWarning,
            stacklevel=3,
        )
    return np.maximum(w, floor), V


def _power(w: np.ndarray, V: np.ndarray, p: float) -> np.ndarray:
    return (V * w**p) @ V.T


def gmml_components(S: np.ndarray, D: np.ndarray, t: float = 0.5) -> np.ndarray:
    """Return ``L`` with ``L^T L = S^{-1} #_t D`` (the GMML metric, Eq. 9 for ``t = 1/2``).

    ``S`` and ``D`` must be symmetric positive semi-definite ``d x d`` matrices (add ``λI`` first
    to make them definite).  See the module docstring for the numerics.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.metric_learning.gmml import gmml_components
    >>> L = gmml_components(np.diag([4.0, 1.0]), np.diag([1.0, 4.0]))
    >>> np.round(L.T @ L, 6)  # S^-1 # D: the geometric mean of diag(1/4, 1) and diag(1, 4)
    array([[0.5, 0. ],
           [0. , 2. ]])
    """
    ws, Vs = _eigh(S, "S")
    wd, Vd = _eigh(D, "D")
    if ws[-1] / ws[0] <= wd[-1] / wd[0]:
        # S better conditioned: M = S^{-1/2} (S^{1/2} D S^{1/2})^t S^{-1/2}
        outer = _power(ws, Vs, -0.5)
        root = _power(ws, Vs, 0.5)
        inner_mat, p = root @ D @ root, t
    else:
        # D better conditioned: M = D^{1/2} (D^{1/2} S D^{1/2})^{-(1-t)} D^{1/2}
        outer = _power(wd, Vd, 0.5)
        inner_mat, p = outer @ S @ outer, -(1.0 - t)
    e, U = _eigh(inner_mat, "the inner matrix of the geometric mean")
    return (e ** (0.5 * p))[:, None] * (U.T @ outer)


class GMML(MahalanobisMixin, BaseEstimator):
    """Geometric Mean Metric Learning, a Mahalanobis metric in closed form (su2017 Algorithm 1).

    Parameters
    ----------
    regularization : float, default=1.0
        ``λ`` added to both scatter matrices (``S + λI``, ``D + λI``); > 0 makes the problem
        strictly convex and the metric unique.  It is Zadeh et al.'s prior ``M_0 = I``.  With 0
        and a singular ``S`` or ``D``, eigenvalues are clamped and a
        :class:`SingularScatterWarning` says the Riccati equation then holds only approximately.
    t : float in [0, 1], default=0.5
        Point on the geodesic from ``S^{-1}`` (0) to ``D`` (1); 0.5 is plain GMML (Eq. 9).
    num_constraints : int or None, default=None
        Number of similar and of dissimilar pairs that :meth:`fit` samples from the classes
        (``None``: ``20 * n_classes**2``, metric-learn's habit).
    random_state : int, Generator or None
        Seed of the pair sampling in :meth:`fit`.
    num_threads : int
        BLAS threads of the scatter products and eigendecompositions (0 = the library's default).
    show_progress : bool or None
        Progress bar over the two stages (scatter matrices, geometric mean), which take seconds
        for thousands of features (``None``: on when standard error is a terminal).

    Attributes
    ----------
    components_ : ndarray (d, d)
        ``L`` with ``M = L^T L``; :meth:`transform` maps ``x -> L x``.
    metric_ : ndarray (d, d)
        The symmetric positive definite Mahalanobis matrix ``M``.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from recsys_ltr.metric_learning import GMML
    >>> X, y = make_blobs(n_samples=200, n_features=5, centers=3, random_state=0)
    >>> gmml = GMML(regularization=1.0, random_state=0).fit(X, y)
    >>> gmml.components_.shape, gmml.transform(X[:2]).shape
    ((5, 5), (2, 5))
    >>> gmml.pair_distance([[X[0], X[1]]]).shape
    (1,)
    """

    def __init__(
        self, regularization=1.0, t=0.5, num_constraints=None, random_state=0, num_threads=0, show_progress=None
    ):
        self.regularization = regularization
        self.t = t
        self.num_constraints = num_constraints
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    _state_attributes = ("components_",)

    def _check_params(self):
        check_real(self.regularization, "regularization", low=0.0)
        check_real(self.t, "t", low=0.0, high=1.0)
        if self.num_constraints is not None:
            check_positive_int(self.num_constraints, "num_constraints")
        check_random_state(self.random_state)
        check_positive_int(self.num_threads, "num_threads", minimum=0)
        progress_enabled(self.show_progress)

    def fit(self, X, y):
        """Sample similar (same class) and dissimilar pairs from ``(X, y)`` and fit on them."""
        self._check_params()
        X, y = self._validate(X, y, reset=True, min_samples=2)
        _, cls, counts = np.unique(y, return_inverse=True, return_counts=True)
        if counts.size < 2:
            raise ValueError("y has 1 class: dissimilar pairs need two classes")
        if counts.max() < 2:
            raise ValueError("no class has two samples: cannot form similar pairs")
        n = self.num_constraints
        n = 20 * counts.size**2 if n is None else check_positive_int(n, "num_constraints")
        a_sim, b_sim, a_dis, b_dis = _sample_pairs(cls, counts, n, check_random_state(self.random_state))
        a = np.concatenate([a_sim, a_dis])
        b = np.concatenate([b_sim, b_dis])
        similar = np.arange(a.size) < a_sim.size
        return self.fit_pairs(X[a], X[b], similar)

    def fit_pairs(self, pairs_a, pairs_b, similar):
        """Fit on explicit pairs: rows ``pairs_a[i], pairs_b[i]`` are similar iff ``similar[i]``."""
        self._check_params()
        A = check_dense(pairs_a, "pairs_a")
        B = check_dense(pairs_b, "pairs_b")
        similar = np.asarray(similar)
        if A.shape != B.shape:
            raise ValueError(f"shape mismatch: pairs_a {A.shape} but pairs_b {B.shape}")
        if similar.shape != (A.shape[0],) or similar.dtype != bool:
            raise ValueError(f"similar must be a boolean array of shape ({A.shape[0]},)")
        if similar.all() or not similar.any():
            raise ValueError("need at least one similar and one dissimilar pair")
        diff = A - B
        ds, dd = diff[similar], diff[~similar]
        with (
            limit_threads(self.num_threads),
            progress(self.show_progress, total=2, desc="GMML", unit="stage") as bar,
        ):
            bar.set_postfix_str("scatter matrices")
            S, D = ds.T @ ds, dd.T @ dd
            if not (np.all(np.isfinite(S)) and np.all(np.isfinite(D))):
                raise ValueError(
                    "the scatter matrices overflow: the data are too large in magnitude "
                    f"(max |x| = {np.abs(diff).max():.3g}); rescale X (e.g. StandardScaler)"
                )
            bar.update()
            bar.set_postfix_str("geometric mean")
            reg = self.regularization * np.eye(A.shape[1])
            self.components_ = gmml_components(S + reg, D + reg, float(self.t))
            bar.update()
        self.n_features_in_ = A.shape[1]
        return self

    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        if self.components_.shape[0] != self.components_.shape[1]:
            raise ValueError(f"components_ of GMML is square (a full-rank metric), got shape {self.components_.shape}")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    @property
    def metric_(self) -> np.ndarray:
        """The symmetric positive definite Mahalanobis matrix ``M`` (= :meth:`get_mahalanobis_matrix`)."""
        return self.get_mahalanobis_matrix()


def _sample_pairs(cls, counts, n, rng):
    """``n`` similar and ``n`` dissimilar index pairs, uniform over the first point.

    Rows sorted by class occupy blocks ``[start_c, start_c + count_c)``; the partner is drawn
    uniformly inside the block (similar, skipping the first point) or outside it (dissimilar).
    """
    order = np.argsort(cls, kind="stable")
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    eligible = np.flatnonzero(counts[cls] >= 2)
    a_sim = eligible[rng.integers(0, eligible.size, n)]
    c = cls[a_sim]
    j = rng.integers(0, counts[c] - 1)
    own = pos[a_sim] - start[c]
    b_sim = order[start[c] + j + (j >= own)]
    a_dis = rng.integers(0, cls.size, n)
    c = cls[a_dis]
    j = rng.integers(0, cls.size - counts[c])
    b_dis = order[np.where(j < start[c], j, j + counts[c])]
    return a_sim, b_sim, a_dis, b_dis
