"""L-GMML item affinity: item-to-item retrieval from content, learned on co-consumption.

:class:`~recsys_ltr.ltr.LGMML` ranks query-document rows; here the queries are items and the
documents are the other items.  The document vector of a (query ``q``, candidate ``c``) pair is
built from both items' content::

    u_i = normalize(V^T normalize(f_i))                 (reduced content, d = n_components)
    x_qc = |u_q - u_c|   ("absdiff", default),  u_q * u_c  ("product"),  or both ("both")

with ``V`` the top ``d`` right singular vectors of the L2-normalised content of the *warm* items
(randomized SVD, as scikit-learn's ``TruncatedSVD``); GMML solves ``d x d`` systems, so ``d`` must
stay in the low hundreds.  All three pair vectors are symmetric in ``q`` and ``c``.

Fitting.  Relevance is the co-consumption supervision of FRML's cold-start model
(:func:`~recsys_ltr.neighbors.content.coconsumption_relevance`: each warm item's top fraction of
warm items by cosine of their user columns), or a given relevance matrix.  Each warm query's
documents are its ``n_candidates`` nearest warm items by content (the pre-selection, below):
relevant = co-consumed neighbours, irrelevant = the query's other pre-selected warm items, so
L-GMML learns to re-rank exactly the lists it re-ranks at prediction time.  Training runs through
:class:`~recsys_ltr.ltr.LGMML`'s ``fit`` (GMML local metrics, then Φ by the shared WARP engine).

Affinity.  For every item ``i`` (warm or cold: content only) the ``n_candidates`` nearest items
by Euclidean distance on the L2-normalised content (the cosine neighbourhood of
:class:`~recsys_ltr.neighbors.ContentAffinity`) are re-ranked by the cost
``e_ic = (1 - w) (-f_i(c)) + w s D_ic`` (:func:`rerank_costs`: L-GMML's Eq. 13 score
``f_i(c) <= 0`` blended with the squared content distance ``D`` on L-GMML's scale,
``w = content_weight``); the ``k`` cheapest form ``KNN(i)`` (ties keep the
pre-selection order) with::

    A_ic = exp(-e_ic / sigma^2),   sigma^2 = median of e_ic over the stored pairs

(``bandwidth`` overrides ``sigma^2``), the Gaussian form of ContentAffinity with ``e`` in place
of the squared distance.  ``distance_feature`` also gives L-GMML ``D`` as an input.  Memory is ``O(n * n_candidates)`` rows of pair vectors per block of
queries, never ``n x n``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone
from sklearn.preprocessing import normalize
from sklearn.utils import metadata_routing
from sklearn.utils.extmath import randomized_svd
from sklearn.utils.validation import check_is_fitted

from .._io import Persistable
from .._memory import rows_per_block
from .._progress import progress_enabled
from .._threads import check_num_threads, numba_threads
from .._validation import INDEX_DTYPE, check_positive_int, check_random_state, check_real, check_sparse
from ..neighbors.affinity import Affinity
from ..neighbors.content import _check_content, _nearest, coconsumption_relevance, gaussian_in_place
from ..neighbors.knn import check_k
from .lgmml import LGMML

__all__ = ["PAIRS", "SCOPES", "LGMMLAffinity", "candidate_relevance", "pair_vectors", "rerank_costs"]

#: Pair vectors of :func:`pair_vectors`.
PAIRS = ("absdiff", "product", "both")
#: Where :class:`LGMMLAffinity` takes the co-consumption relevance from.
SCOPES = ("all", "candidates")


def pair_vectors(U, queries, candidates, pair="absdiff") -> np.ndarray:
    """Document vectors of the pairs ``(queries[t], candidates[t])`` from the item vectors ``U``.

    ``"absdiff"``: ``|u_q - u_c|``; ``"product"``: ``u_q * u_c``; ``"both"``: the two side by side
    (``2 d`` columns).  Each is symmetric: swapping query and candidate gives the same row.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr.content import pair_vectors
    >>> U = np.array([[1.0, 0.0], [0.5, 2.0], [0.0, 1.0]])  # item vectors
    >>> pair_vectors(U, queries=[0, 0], candidates=[1, 2])
    array([[0.5, 2. ],
           [1. , 1. ]])
    """
    if pair not in PAIRS:
        raise ValueError(f"pair must be one of {PAIRS}, got {pair!r}")
    A, B = U[queries], U[candidates]
    if pair == "absdiff":
        return np.abs(A - B)
    if pair == "product":
        return A * B
    return np.hstack((A * B, np.abs(A - B)))


class LGMMLAffinity(Persistable, BaseEstimator):
    """Top-``k`` item neighbours by L-GMML re-ranking of content neighbours, as an :class:`Affinity`.

    Parameters
    ----------
    k : int, default=100
        Neighbourhood size ``k_max`` of the affinity, ``1 <= k <= n_candidates``.
    n_candidates : int, default=300
        Pre-selection size: content neighbours re-ranked per item (``< n_items``); at training,
        per warm query, capped at the number of other warm items.
    n_components : int, default=128
        Dimension ``d`` of the reduced content (capped at the warm items' content rank bound
        ``min(n_warm, n_features)``).
    pair : {"absdiff", "product", "both"}, default="absdiff"
        Pair vector (:func:`pair_vectors`).
    distance_feature : bool, default=False
        Append the pair's squared content distance (the pre-selection's own signal) to the pair
        vector as a last column.
    content_weight : float in [0, 1], default=0.75
        Weight ``w`` of the content distance in the re-ranking cost (:func:`rerank_costs`):
        0 is L-GMML alone, 1 the pre-selection's order (the ContentAffinity neighbours).  The
        default won on the cold-start benchmark's lastfm-2k validation (ADG .310 against .294
        for L-GMML alone and .309 for the content order); choose it on validation.
    relevance_fraction : float in (0, 1], default=0.05
        Fraction of the other warm items marked relevant per warm item when ``fit`` gets the
        feedback ``X`` (:func:`~recsys_ltr.neighbors.content.coconsumption_relevance`); with
        ``relevance_scope="candidates"``, fraction of each query's pre-selected candidates.
    relevance_scope : {"all", "candidates"}, default="all"
        With ``X``: relevance among all the warm items (``"all"``, so a query may have no
        relevant candidate) or within each query's pre-selected candidates
        (:func:`candidate_relevance`).  Ignored when ``fit`` gets a ``relevance`` matrix.
    lgmml : LGMML or None, default=None
        Settings of the ranker (``None``: ``LGMML()``); cloned at ``fit``, with its
        ``random_state``, ``num_threads`` and ``show_progress`` replaced by this estimator's.
    bandwidth : float > 0, optional
        ``sigma^2`` of the affinity; default: the median cost of the stored pairs (1 if 0).
    random_state : int, Generator or None
        Seed of the SVD and of L-GMML.
    num_threads : int, default=1
        Threads of the numba kernels (0: all); 1 is bit-for-bit reproducible (see LGMML).
    show_progress : bool or None
        Progress bars (``None``: on when standard error is a terminal).

    Attributes
    ----------
    affinity_ : Affinity
        ``n_items x n_items``, kind ``"custom"``, side ``"item"``, ``k_max = k``.
    components_ : ndarray (d, n_features)
        ``V^T``, the reduction fitted on the warm items.
    lgmml_ : LGMML
        The fitted ranker (its features: the pair vectors).
    bandwidth_ : float
        The ``sigma^2`` used.
    warm_ : ndarray or None
        Items the supervision covered (training queries and documents); not saved (``None``
        after ``load``).
    n_items_, n_features_in_ : int

    ``save(path)`` / ``LGMMLAffinity.load(path)`` persist a fitted model (``.npz`` + JSON header).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.ltr import LGMML, LGMMLAffinity
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> F = np.random.default_rng(0).random((100, 12))  # item content
    >>> model = LGMMLAffinity(k=10, n_candidates=30, n_components=8, lgmml=LGMML(n_metrics=5), random_state=0)
    >>> model.fit(F, X).affinity_.matrix.shape  # usable by ContentItemKNN for cold items
    (100, 100)
    """

    # F and X are data, not metadata to route: no set_fit_request
    __metadata_request__fit = dict.fromkeys(("F", "X", "relevance"), metadata_routing.UNUSED)

    def __init__(
        self,
        k=100,
        n_candidates=300,
        n_components=128,
        pair="absdiff",
        distance_feature=False,
        content_weight=0.75,
        relevance_fraction=0.05,
        relevance_scope="all",
        lgmml=None,
        bandwidth=None,
        random_state=0,
        num_threads=1,
        show_progress=None,
    ):
        self.k = k
        self.n_candidates = n_candidates
        self.n_components = n_components
        self.pair = pair
        self.distance_feature = distance_feature
        self.content_weight = content_weight
        self.relevance_fraction = relevance_fraction
        self.relevance_scope = relevance_scope
        self.lgmml = lgmml
        self.bandwidth = bandwidth
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    # ------------------------------------------------------------------ validation
    def _check_params(self):
        check_positive_int(self.k, "k")
        check_positive_int(self.n_candidates, "n_candidates")
        check_positive_int(self.n_components, "n_components")
        if self.pair not in PAIRS:
            raise ValueError(f"pair must be one of {PAIRS}, got {self.pair!r}")
        if not isinstance(self.distance_feature, (bool, np.bool_)):
            raise TypeError(f"distance_feature must be a bool, got {self.distance_feature!r}")
        check_real(self.content_weight, "content_weight", low=0.0, high=1.0)
        check_real(self.relevance_fraction, "relevance_fraction", low=0.0, high=1.0, low_open=True)
        if self.relevance_scope not in SCOPES:
            raise ValueError(f"relevance_scope must be one of {SCOPES}, got {self.relevance_scope!r}")
        if self.lgmml is not None and not isinstance(self.lgmml, LGMML):
            raise TypeError(f"lgmml must be None or an LGMML, got {type(self.lgmml).__name__}")
        if self.bandwidth is not None:
            check_real(self.bandwidth, "bandwidth", low=0.0, low_open=True)
        check_random_state(self.random_state)
        check_num_threads(self.num_threads)
        progress_enabled(self.show_progress)

    # ------------------------------------------------------------------ fitting
    def fit(self, F, X=None, *, relevance=None):
        """Learn the ranker on the warm items and compute every item's neighbourhood.

        Parameters
        ----------
        F : array or sparse matrix (n_items, n_features)
            Content of every item (e.g. tf-idf tag counts); every item needs some.
        X : sparse matrix (n_users, n_items), optional
            Training feedback: warm items = items with an interaction, relevance =
            :func:`~recsys_ltr.neighbors.content.coconsumption_relevance` with
            ``relevance_fraction``.
        relevance : sparse matrix (n_items, n_items), optional
            Instead of ``X``: row ``q`` marks the items relevant to ``q``; warm items = items in
            a non-empty row or column.

        Returns
        -------
        self
        """
        self._check_params()
        F = _every_item_content(F)
        n = F.shape[0]
        k = check_k(self.k, n, "items")
        n_candidates = check_k(self.n_candidates, n, "items", "n_candidates")
        if k > n_candidates:
            raise ValueError(f"k={k} exceeds n_candidates={n_candidates}: L-GMML re-ranks the pre-selection")
        warm, R = _supervision(X, relevance, n, self.relevance_fraction, self.relevance_scope)
        self.params_ = self.get_params(deep=False)
        rng = check_random_state(self.random_state)
        threads = check_num_threads(self.num_threads)
        self.n_features_in_ = F.shape[1]
        Fn = normalize(F)
        Vt = _reduction(Fn[warm], self.n_components, int(rng.integers(2**31)))
        U = normalize(np.asarray(Fn @ Vt.T))
        ranker = clone(self._ranker_template()).set_params(
            random_state=int(rng.integers(2**63)), num_threads=threads, show_progress=self.show_progress
        )
        with numba_threads(threads):
            self.lgmml_ = _train(
                ranker, Fn[warm], U[warm], R, min(n_candidates, warm.size - 1), self.pair, self.distance_feature
            )
            S = self._rerank(Fn, U, n_candidates, k)
        self.bandwidth_ = gaussian_in_place(S, self.bandwidth)
        self.affinity_ = Affinity.trusted(S, k, "custom", "item")
        self.components_, self.warm_ = Vt, warm
        self.n_items_ = n
        return self

    def candidate_scores(self, F):
        """Every item's pre-selected candidates with their L-GMML scores and content distances.

        Parameters
        ----------
        F : array or sparse matrix (n_items, n_features)
            The content given to ``fit``.

        Returns
        -------
        cand, f, d2 : ndarray (n_items, n_candidates)
            Candidates (nearest first), Eq. 13 scores and squared content distances: the inputs
            of :func:`rerank_costs`, e.g. to try other ``content_weight`` values without refitting.
        """
        check_is_fitted(self, "lgmml_")
        F = _every_item_content(F)
        if F.shape[1] != self.n_features_in_:
            raise ValueError(f"F has {F.shape[1]} features, the model was fitted on {self.n_features_in_}")
        Fn = normalize(F)
        with numba_threads(check_num_threads(self.num_threads)):
            return self._candidate_scores(Fn, normalize(np.asarray(Fn @ self.components_.T)), self.n_candidates)

    def _rerank(self, Fn, U, n_candidates, k) -> sp.csr_matrix:
        """CSR of each item's ``k`` best pre-selected candidates by the blended cost, best first."""
        cand, f, d2 = self._candidate_scores(Fn, U, n_candidates)
        return rerank_costs(cand, f, d2, k, self.content_weight)

    def _candidate_scores(self, Fn, U, n_candidates):
        """``(cand, f, d2)``, each ``(n, n_candidates)``: every item's pre-selected candidates
        (nearest first), their L-GMML scores and squared content distances."""
        n = Fn.shape[0]
        C = _nearest(Fn, n_candidates, np.ones(n, bool), progress_enabled(self.show_progress))
        cand = C.indices.reshape(n, n_candidates).astype(np.int64)
        d2 = C.data.reshape(n, n_candidates)
        width = self._pair_width(U.shape[1])
        step = rows_per_block(8 * n_candidates * width)
        f = np.empty((n, n_candidates))
        for lo in range(0, n, step):
            block = cand[lo : lo + step]
            q = np.repeat(np.arange(lo, lo + block.shape[0]), n_candidates)
            extra = d2[lo : lo + step].ravel() if self.distance_feature else None
            f[lo : lo + step] = self.lgmml_.predict(_pairs(U, q, block.ravel(), self.pair, extra), q).reshape(
                block.shape
            )
        return cand, f, d2

    def transform(self, F=None):
        """The fitted affinity's CSR matrix (``F`` is ignored; scikit-learn pipeline habit)."""
        check_is_fitted(self, "affinity_")
        return self.affinity_.matrix.copy()

    # ------------------------------------------------------------------ persistence
    _state_attributes = ("affinity_", "components_", "bandwidth_")
    _nested = ("lgmml", "lgmml_", "lgmml", LGMML)  # the ranker, saved by the persistence layer

    def _pair_width(self, d):
        """Columns of the pair vectors of ``d``-dimensional reduced content."""
        return d * (2 if self.pair == "both" else 1) + bool(self.distance_feature)

    def _ranker_template(self):
        return self.lgmml if self.lgmml is not None else LGMML()

    def _nested_templates(self):
        return self._ranker_template()

    def _saved_state(self):
        return {**super()._saved_state(), "bandwidth_": np.array([self.bandwidth_])}

    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        A, Vt = self.affinity_, self.components_
        if not isinstance(A, Affinity) or A.side != "item" or A.k_max != self.k or A.kind != "custom":
            raise ValueError(f"affinity_ must be a custom item affinity with k_max={self.k}")
        if Vt.ndim != 2 or not 1 <= Vt.shape[0] <= self.n_components:
            raise ValueError(f"components_ must be (d, n_features) with 1 <= d <= {self.n_components}")
        if self.bandwidth_.shape != (1,) or not self.bandwidth_[0] > 0:
            raise ValueError("bandwidth_ must hold one positive number")
        self.bandwidth_ = float(self.bandwidth_[0])
        self._load_nested(state, specs)
        ranker = self.lgmml_.set_params(num_threads=self.num_threads)
        width = self._pair_width(Vt.shape[0])
        if ranker.n_features_in_ != width:
            raise ValueError(f"the ranker has {ranker.n_features_in_} features, the pair vectors {width}")
        self.lgmml_ = ranker
        self.n_items_, self.n_features_in_, self.warm_ = A.n, Vt.shape[1], None


def _every_item_content(F):
    """:func:`_check_content`, and every row of ``F`` must hold some content."""
    F = _check_content(F)
    empty = np.flatnonzero(np.diff(F.indptr) == 0 if sp.issparse(F) else ~np.any(F != 0, axis=1))
    if empty.size:
        raise ValueError(
            f"{empty.size} items have no content (all-zero rows of F, e.g. item {empty[0]}): "
            "LGMMLAffinity ranks pairs by content, so every item needs some"
        )
    return F


def _supervision(X, relevance, n, frac, scope="all"):
    """``(warm, R)``: the warm item ids and their relevance matrix (warm x warm, CSR)."""
    if (X is None) == (relevance is None):
        raise ValueError("give either the training feedback X or a relevance matrix (not both, not neither)")
    if X is not None:
        X = _without_zeros(check_sparse(X, "X"), "X")  # weights kept (coconsumption_relevance's cosines read them)
        if X.shape[1] != n:
            raise ValueError(f"X has {X.shape[1]} items (columns), the content F {n}")
        warm = np.flatnonzero(np.diff(X.tocsc().indptr) > 0)
        if warm.size < 2:
            raise ValueError(f"X has {warm.size} item(s) with interactions: at least 2 warm items are needed")
        return warm, (
            (sp.csc_matrix(X)[:, warm], frac) if scope == "candidates" else coconsumption_relevance(X, frac, warm)
        )
    R = _without_zeros(check_sparse(relevance, "relevance"), "relevance")
    if R.shape != (n, n):
        raise ValueError(f"relevance must be ({n}, {n}) (items x items), got {R.shape}")
    warm = np.flatnonzero((np.diff(R.indptr) > 0) | (np.diff(R.tocsc().indptr) > 0))
    if warm.size < 2:
        raise ValueError("relevance covers fewer than 2 items")
    return warm, sp.csr_matrix(R[warm][:, warm] > 0, dtype=np.float64)


def _without_zeros(M, name) -> sp.csr_matrix:
    """``M`` unless it stores a zero, which would make its item warm (missing or negative feedback?)."""
    zeros = int(np.count_nonzero(M.data == 0))
    if zeros:
        raise ValueError(
            f"{name} stores {zeros} explicit zero(s); call {name}.eliminate_zeros() first (an explicit zero is "
            "ambiguous: missing or negative feedback?)"
        )
    return M


def _reduction(Fw, n_components, seed) -> np.ndarray:
    """``V^T`` (d, n_features): top right singular vectors of the warm content ``Fw`` (randomized SVD)."""
    d = min(n_components, *Fw.shape)
    _, _, Vt = randomized_svd(Fw, d, random_state=seed)
    return np.ascontiguousarray(Vt)


def _train(ranker, Fw, Uw, R, n_candidates, pair, distance_feature):
    """Fit ``ranker`` on the warm queries' pre-selected warm candidates; labels from ``R`` (warm x
    warm relevance) or, if ``R`` is a ``(users, fraction)`` pair, :func:`candidate_relevance`."""
    m = Fw.shape[0]
    C = _nearest(Fw, n_candidates, np.ones(m, bool))
    q = np.repeat(np.arange(m), n_candidates)
    if isinstance(R, tuple):
        y = candidate_relevance(R[0], C.indices.reshape(m, n_candidates), R[1]).ravel()
    else:
        y = np.asarray(R[q, C.indices]).ravel()
    return ranker.fit(_pairs(Uw, q, C.indices, pair, C.data if distance_feature else None), y, q)


def candidate_relevance(Xw, cand, frac) -> np.ndarray:
    """Relevance within each query's candidates: ``(m, c)`` 0/1 marking, per row ``q`` of ``cand``,
    the ``ceil(frac * c)`` candidates whose user columns in ``Xw`` (users x m) have the largest
    positive cosine with ``q``'s (ties: candidate order; fewer if fewer cosines are positive).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from recsys_ltr.ltr.content import candidate_relevance
    >>> Xw = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]]))  # users x 3 warm items
    >>> candidate_relevance(Xw, cand=np.array([[1, 2], [0, 2]]), frac=0.5)  # items 0 and 1 co-occur
    array([[1., 0.],
           [1., 0.]])
    """
    m, c = cand.shape
    V = normalize(sp.csc_matrix(Xw, dtype=np.float64).T.tocsr())
    q = np.repeat(np.arange(m), c)
    cos = np.asarray(V[q].multiply(V[cand.ravel()]).sum(axis=1)).reshape(m, c)
    top = np.argsort(-cos, axis=1, kind="stable")[:, : int(np.ceil(frac * c))]
    y = np.zeros((m, c))
    np.put_along_axis(y, top, 1.0, axis=1)
    return y * (cos > 0)


def _pairs(U, queries, candidates, pair, distance=None):
    """:func:`pair_vectors`, with the pairs' squared content ``distance`` as a last column if given."""
    P = pair_vectors(U, queries, candidates, pair)
    return P if distance is None else np.hstack((P, np.asarray(distance, dtype=P.dtype)[:, None]))


def rerank_costs(cand, f, d2, k, content_weight) -> sp.csr_matrix:
    """CSR of each row's ``k`` lowest-cost candidates, lowest first (ties: candidate order).

    The cost of candidate ``c`` of item ``i`` is ``(1 - w) (-f_ic) + w s d2_ic``, ``w`` the
    ``content_weight``, ``d2`` the squared content distance and ``s = median(-f) / median(d2)``
    over all the candidates (so both terms share L-GMML's scale; ``s = 1`` when a median is 0).
    ``cand``, ``f``, ``d2`` are ``(n, n_candidates)``; the stored values are the costs (``>= 0``).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr.content import rerank_costs
    >>> cand, f, d2 = np.array([[1, 2]]), np.array([[0.2, 0.9]]), np.array([[1.0, 1.0]])
    >>> rerank_costs(cand, f, d2, k=2, content_weight=0.0).indices  # L-GMML's score alone decides
    array([1, 2], dtype=int32)
    """
    n = cand.shape[0]
    content_weight = float(content_weight)  # a float32 weight made w * s a float32 product
    neg_f = np.maximum(-f, 0.0)
    scale_f, scale_d = float(np.median(neg_f)), float(np.median(d2))
    s = scale_f / scale_d if scale_f > 0 and scale_d > 0 else 1.0
    cost = (1.0 - content_weight) * neg_f + content_weight * s * d2
    top = np.argsort(cost, axis=1, kind="stable")[:, :k]
    ids = np.take_along_axis(cand, top, axis=1).ravel().astype(INDEX_DTYPE)
    indptr = np.arange(0, n * k + 1, k, dtype=INDEX_DTYPE)
    return sp.csr_matrix((np.take_along_axis(cost, top, axis=1).ravel(), ids, indptr), shape=(n, n))
