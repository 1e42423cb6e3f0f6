"""RPC-MTL: rank-preserving clustering and multi-task listwise learning to rank (Wu, You, Mao, Xia,
Yuan & Hu, TKDE 2016, Algorithm 1).

1. Metric (sec. 2.1.1).  Within every training list, pairs at most ``kappa1`` positions apart form
   ``S_r`` and pairs at least ``kappa2`` apart form ``D_r`` (Eq. 2).  ``M`` solves Xing et al.'s
   Eq. 3, ``min Σ_S d_M² s.t. Σ_D d_M >= 1, M ⪰ 0``, through its equivalent form
   ``max Σ_D d_M s.t. Σ_S d_M² <= 1, M ⪰ 0`` (the two differ by a scale of ``M`` only, which no
   later step sees): projected gradient ascent, the ascent direction taken orthogonal to the
   constraint's gradient, the step grown by 5% after an improvement and halved otherwise
   (:func:`xing_metric`).  Xing et al. return to the feasible set by alternating projections on
   the constraint and the PSD cone, which can need thousands of rounds when the two sets meet at
   a shallow angle; since the objective grows with the scale of ``M`` the constraint is active at
   the optimum, so we clip to the PSD cone and rescale onto ``Σ_S d_M² = 1`` instead, which
   reaches the same feasible points in one step.
2. pLocalsearch (sec. 2.1.2).  Objects start in ``K`` clusters by their position in their list
   (the ``j``-th of ``n`` goes to cluster ``floor(j K / n)``, cluster 0 the most preferred).  Each
   iteration visits the lists in turn; a list's candidate set (Eq. 6) holds its objects whose
   neighbour in the ordering lies in another cluster; the move of a candidate into its
   neighbour's cluster costs (Eq. 8, ``d_M`` of Eq. 1 to the cluster means)::

       cost(x, k1 -> k2) = n(k2) / (n(k2) + 1) d_M²(x, μ_k2) - n(k1) / (n(k1) - 1) d_M²(x, μ_k1),

   which is the exact change of the k-means cost Ω_M (Eq. 4, Eq. 9); the cheapest move is made if
   its cost is negative, and the means are updated at once.  Moving into a neighbour's cluster
   keeps the cluster index non-decreasing along every list (the constraint of Eq. 5).  A move that
   would empty a cluster is not allowed (Eq. 8 divides by ``n(k1) - 1``).  Iterations stop when
   no list has a negative move or after ``max_iter`` (MaxT) iterations.
3. f_odr (step 3).  A proportional-odds (cumulative logit) ordinal regression of the relevance
   degree ``K - 1 - cluster`` on the features, ``P(t <= j | x) = σ(θ_j - v · x)``, with an L2
   penalty ``odr_regularization ||v||²`` (the paper leaves the ordinal regression open).  It predicts the
   degree ``t(x) = #{j : v · x > θ_j}``.
4. Multi-task ListMLE (Eq. 10-11).  Every (list, cluster) part with two different labels is a
   list of task ``cluster``; the ``K`` linear rankers are trained by the SGD of
   :mod:`recsys_ltr.ltr.listwise` (see there how Eq. 11 is run).

Ranking (Fig. 3): f_odr assigns each test object a degree; objects are ordered by degree, and
within a degree by the linear ranker of that degree's cluster.  :meth:`RPCMTL.predict` returns
``t(x) * span + w_{K-1-t(x)} · x`` with ``span = 2 max |w · x| + 1`` over the rows scored, which
produces exactly this order (the order within a query does not depend on the other rows, the
values do).

With ``K = 1`` there is one cluster, every list is a list of task 0 and the regulariser
vanishes: the fit runs ListMLE's very SGD steps (same seed, same result).

Orderings come from graded labels (decreasing label, ties in row order for steps 1-2 and in a
fresh random order per SGD epoch); wu2016 used the MQ2008-list permutations, which are not
available offline.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from .._rng import seed_state
from .._threads import check_num_threads, limit_threads
from .._validation import check_positive_int, check_real
from .listwise import (
    LISTMLE,
    SGD_SALT,
    LinearListwise,
    _query_rows,
    _ranked_stable,
    check_top_k,
    fit_listwise,
)

__all__ = ["RPCMTL", "fit_ordinal_logit", "plocalsearch", "rank_pairs", "xing_metric"]

_METRICS = ("xing", "identity")


# ----------------------------------------------------------------------------- step 1: metric
def rank_pairs(offsets, kappa1, kappa2):
    """Eq. 2: index pairs ``(a, b)`` within each list (rows ``offsets[l]:offsets[l+1]`` in ranked
    order) at most ``kappa1`` positions apart (``S_r``) and at least ``kappa2`` apart (``D_r``).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr.rpcmtl import rank_pairs
    >>> similar, dissimilar = rank_pairs(np.array([0, 4]), kappa1=1, kappa2=3)  # one list of 4 ranked rows
    >>> similar.tolist(), dissimilar.tolist()
    ([[0, 1], [1, 2], [2, 3]], [[0, 3]])
    """
    sizes = np.diff(offsets)
    starts = offsets[:-1]
    S, D = [], []
    for gap in range(1, int(sizes.max())):
        if kappa1 < gap < kappa2:
            continue
        lists = np.flatnonzero(sizes > gap)
        counts = sizes[lists] - gap
        a = np.repeat(starts[lists], counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
        (S if gap <= kappa1 else D).append(np.stack([a, a + gap], axis=1))
    empty = np.empty((0, 2), dtype=np.int64)
    return (np.concatenate(S) if S else empty), (np.concatenate(D) if D else empty)


def _feasible(M, A):
    """``M`` clipped to the PSD cone, then scaled onto ``tr(M A) = 1`` (None if the clipped
    matrix vanishes)."""
    vals, vecs = np.linalg.eigh((M + M.T) / 2)
    M = (vecs * np.maximum(vals, 0.0)) @ vecs.T
    scale = np.sum(M * A)
    return M / scale if scale > 0 else None


def _sum_distances(M, Delta):
    return np.sqrt(np.maximum(np.einsum("na,ab,nb->n", Delta, M, Delta, optimize=True), 0.0))


def xing_metric(A_S, Delta_D, max_iter=100, tol=1e-5):
    """Eq. 3 (Xing et al. 2003): ``M`` maximising ``Σ_D ||δ||_M`` subject to
    ``Σ_S ||δ||²_M = tr(M A_S) <= 1`` and ``M ⪰ 0``.

    ``A_S`` (d, d) is the scatter ``Σ_S δ δᵀ`` of the similar pairs' differences, ``Delta_D``
    (n, d) the dissimilar pairs' differences.  Returns ``M`` (d, d).  See the module docstring.
    ``A_S`` gets a ridge ``1e-6 tr(A_S) / d``: without it a direction along which similar pairs
    never differ but dissimilar ones do would make the problem unbounded.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr.rpcmtl import xing_metric
    >>> rng = np.random.default_rng(0)
    >>> similar = rng.normal(size=(50, 2)) * [1.0, 0.1]  # similar pairs differ along the first axis
    >>> M = xing_metric(similar.T @ similar, Delta_D=rng.normal(size=(50, 2)))
    >>> bool(M[1, 1] > M[0, 0])  # the metric stretches the axis that separates dissimilar pairs
    True
    """
    A_S = A_S + (1e-6 * max(np.trace(A_S), np.finfo(float).tiny) / A_S.shape[0]) * np.eye(A_S.shape[0])
    A_norm2 = float(np.sum(A_S * A_S))
    M = _feasible(np.eye(A_S.shape[0]), A_S)
    value = _sum_distances(M, Delta_D).sum()
    step = None
    for _ in range(max_iter):
        dist = _sum_distances(M, Delta_D)
        inv = np.where(dist > 0, 0.5 / np.where(dist > 0, dist, 1.0), 0.0)
        grad = (Delta_D * inv[:, None]).T @ Delta_D
        grad -= (np.sum(grad * A_S) / A_norm2) * A_S  # orthogonal to the constraint's gradient
        g_norm = np.linalg.norm(grad)
        if g_norm == 0.0:
            break
        if step is None:
            step = 0.1 * np.linalg.norm(M) / g_norm
        while step * g_norm > 1e-12 * np.linalg.norm(M):
            cand = _feasible(M + step * grad, A_S)
            cand_value = -np.inf if cand is None else _sum_distances(cand, Delta_D).sum()
            if cand_value > value:
                break
            step /= 2
        else:
            break
        gain = (cand_value - value) / value
        M, value, step = cand, cand_value, step * 1.05
        if gain < tol:
            break
    return M


# ----------------------------------------------------------------------------- step 2: pLocalsearch
@njit(cache=True)
def _cluster_sums(Z, labels, K):
    sums = np.zeros((K, Z.shape[1]))
    counts = np.zeros(K)
    for i in range(Z.shape[0]):
        counts[labels[i]] += 1.0
        for a in range(Z.shape[1]):
            sums[labels[i], a] += Z[i, a]
    return sums, counts


@njit(cache=True)
def _kmeans_cost(Z, labels, sums, counts):
    """Ω_M of Eq. 4 (in the metric's coordinates ``Z``)."""
    total = 0.0
    for i in range(Z.shape[0]):
        k = labels[i]
        for a in range(Z.shape[1]):
            diff = Z[i, a] - sums[k, a] / counts[k]
            total += diff * diff
    return total


@njit(cache=True)
def _sq_dist_to_mean(Z, i, sums, counts, k):
    acc = 0.0
    for a in range(Z.shape[1]):
        diff = Z[i, a] - sums[k, a] / counts[k]
        acc += diff * diff
    return acc


@njit(cache=True)
def _plocalsearch_kernel(Z, offsets, labels, K, max_iter, tol):
    sums, counts = _cluster_sums(Z, labels, K)
    history = np.empty(max_iter + 1)
    history[0] = _kmeans_cost(Z, labels, sums, counts)
    n_iter = 0
    for it in range(max_iter):
        moved = 0
        for l in range(offsets.size - 1):
            best_cost, best_i, best_to = -tol, -1, -1
            for i in range(offsets[l], offsets[l + 1]):
                k1 = labels[i]
                if counts[k1] <= 1.0:
                    continue
                for nb in (i - 1, i + 1):  # candidate (Eq. 6): a neighbour in another cluster
                    if nb < offsets[l] or nb >= offsets[l + 1] or labels[nb] == k1:
                        continue
                    k2 = labels[nb]
                    cost = counts[k2] / (counts[k2] + 1.0) * _sq_dist_to_mean(Z, i, sums, counts, k2) - counts[k1] / (
                        counts[k1] - 1.0
                    ) * _sq_dist_to_mean(Z, i, sums, counts, k1)
                    if cost < best_cost:
                        best_cost, best_i, best_to = cost, i, k2
            if best_i >= 0:
                k1 = labels[best_i]
                for a in range(Z.shape[1]):
                    sums[k1, a] -= Z[best_i, a]
                    sums[best_to, a] += Z[best_i, a]
                counts[k1] -= 1.0
                counts[best_to] += 1.0
                labels[best_i] = best_to
                moved += 1
        sums, counts = _cluster_sums(Z, labels, K)  # no drift from the incremental updates
        n_iter = it + 1
        history[n_iter] = _kmeans_cost(Z, labels, sums, counts)
        if moved == 0:
            break
    return n_iter, history[: n_iter + 1]


def initial_clusters(offsets, K):
    """Algorithm 1's start: the ``j``-th object (0-based) of a list of ``n`` in cluster
    ``floor(j K / n)``."""
    sizes = np.diff(offsets)
    pos = np.arange(offsets[-1]) - np.repeat(offsets[:-1], sizes)
    return (pos * K // np.repeat(sizes, sizes)).astype(np.int64)


def plocalsearch(Z, offsets, labels, n_clusters, max_iter=1000):
    """pLocalsearch (sec. 2.1.2) on rows ``Z`` (metric coordinates, each list's rows in ranked
    order, list ``l`` owning ``offsets[l]:offsets[l+1]``) from the clustering ``labels``.

    Returns ``(labels, n_iter, cost)``: the final clusters (a new array), the iterations run and
    Ω_M (Eq. 4) before the first and after every iteration.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr.rpcmtl import plocalsearch
    >>> Z = np.array([[0.0], [1.0], [0.0], [1.0], [1.0], [0.0], [1.0], [0.0]])  # 4 lists of 2 ranked rows
    >>> labels, n_iter, cost = plocalsearch(Z, offsets=[0, 2, 4, 6, 8], labels=[0, 0, 1, 1, 0, 0, 1, 1], n_clusters=2)
    >>> labels.tolist(), bool(cost[-1] <= cost[0])
    ([0, 0, 1, 1, 0, 0, 1, 1], True)
    """
    labels = np.array(labels, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    if Z.ndim != 2 or labels.shape != (Z.shape[0],) or offsets[0] != 0 or offsets[-1] != Z.shape[0]:
        raise ValueError("Z, labels and offsets must describe the same rows")
    if np.any(np.diff(offsets) < 0) or np.any(labels < 0) or np.any(labels >= n_clusters):
        raise ValueError(f"offsets must be non-decreasing and labels in [0, {n_clusters})")
    scale = float(np.mean(np.sum(Z * Z, axis=1))) or 1.0
    n_iter, cost = _plocalsearch_kernel(
        np.ascontiguousarray(Z, dtype=np.float64), offsets, labels, int(n_clusters), int(max_iter), 1e-12 * scale
    )
    return labels, n_iter, cost


# ----------------------------------------------------------------------------- step 3: f_odr
def _ordinal_nll(params, X, t, n_classes, alpha):
    """Proportional-odds negative log-likelihood (+ ``alpha ||v||²``) and its gradient.

    ``params = (v, θ_0, log(θ_1 - θ_0), ..., log(θ_{K-2} - θ_{K-3}))``."""
    d = X.shape[1]
    v, raw = params[:d], params[d:]
    theta = np.cumsum(np.concatenate([raw[:1], np.exp(raw[1:])]))
    u = X @ v
    upper = np.where(t < n_classes - 1, theta[np.minimum(t, n_classes - 2)] - u, np.inf)
    lower = np.where(t > 0, theta[np.maximum(t - 1, 0)] - u, -np.inf)
    # p = σ(upper) - σ(lower) = σ(upper) (1 - exp(logσ(lower) - logσ(upper)))
    log_p = log_expit(upper) + np.log(-np.expm1(log_expit(lower) - log_expit(upper)))
    p = np.exp(log_p)
    f_up = np.where(np.isfinite(upper), expit(upper) * expit(-upper), 0.0)
    f_lo = np.where(np.isfinite(lower), expit(lower) * expit(-lower), 0.0)
    value = -log_p.sum() + alpha * v @ v
    g_u = (f_up - f_lo) / p  # ∂(-log p)/∂u
    g_v = X.T @ g_u + 2 * alpha * v
    g_theta = np.zeros(n_classes - 1)
    np.add.at(g_theta, np.minimum(t, n_classes - 2)[t < n_classes - 1], -(f_up / p)[t < n_classes - 1])
    np.add.at(g_theta, np.maximum(t - 1, 0)[t > 0], (f_lo / p)[t > 0])
    # θ_j = raw_0 + Σ_{1 <= i <= j} exp(raw_i): ∂/∂raw_0 = Σ_j g_θj, ∂/∂raw_i = exp(raw_i) Σ_{j >= i} g_θj
    tail = np.cumsum(g_theta[::-1])[::-1]
    g_raw = np.concatenate([tail[:1], np.exp(raw[1:]) * tail[1:]])
    return value, np.concatenate([g_v, g_raw])


def fit_ordinal_logit(X, t, n_classes, alpha=1.0, max_iter=500):
    """Proportional-odds ordinal regression of ``t`` in ``{0..n_classes-1}`` (higher = better) on
    ``X``; returns ``(v, θ)`` with ``P(t <= j | x) = σ(θ_j - v · x)``, ``θ`` increasing.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr.rpcmtl import fit_ordinal_logit
    >>> X = np.linspace(-2, 2, 40)[:, None]
    >>> v, theta = fit_ordinal_logit(X, t=np.digitize(X[:, 0], [-0.5, 0.5]), n_classes=3)
    >>> bool(v[0] > 0), bool(theta[0] < theta[1])  # higher x: higher class
    (True, True)
    """
    d = X.shape[1]
    prior = np.cumsum(np.bincount(t, minlength=n_classes))[:-1] / t.size
    theta0 = np.log(np.clip(prior, 1e-6, 1 - 1e-6) / np.clip(1 - prior, 1e-6, 1))
    theta0 = np.maximum.accumulate(theta0 + 1e-3 * np.arange(n_classes - 1))
    gaps = np.log(np.maximum(np.diff(theta0), 1e-3))
    x0 = np.concatenate([np.zeros(d), theta0[:1], gaps])
    res = minimize(
        _ordinal_nll, x0, args=(X, t, n_classes, alpha), jac=True, method="L-BFGS-B", options={"maxiter": max_iter}
    )
    raw = res.x[d:]
    return res.x[:d], np.cumsum(np.concatenate([raw[:1], np.exp(raw[1:])]))


# ----------------------------------------------------------------------------- estimator
class RPCMTL(LinearListwise):
    """RPC-MTL (wu2016, Algorithm 1): rank-preserving clustering, ordinal regression onto the
    clusters and one linear ListMLE ranker per cluster trained jointly (see the module docstring).

    Parameters
    ----------
    n_clusters : int >= 1, default=3
        ``K``, the number of clusters (preference degrees); 1 gives ListMLE.
    mtl_regularization : float >= 0, default=0.1
        ``λ`` of Eq. 10, pulling every cluster's ranker towards their mean.
    kappa1, kappa2 : int, default=2, 5
        Position gaps defining the similar (``<= kappa1``) and dissimilar (``>= kappa2``) pairs
        of Eq. 2 (the paper's values).
    metric : {"xing", "identity"}, default="xing"
        The metric of step 1 (Eq. 3), or the Euclidean one (the paper's ablation, Fig. 5/7).
    max_pairs : int, default=20000
        Dissimilar pairs used by the metric (a uniform sample when ``D_r`` is larger).
    max_iter : int, default=1000
        MaxT, the cap on pLocalsearch iterations.
    odr_regularization : float >= 0, default=1.0
        L2 penalty of the ordinal regression f_odr.
    top_k, learning_rate, iterations, regularization, average, feature_scaling, num_threads,
    show_progress, random_state
        As in :class:`~recsys_ltr.ltr.ListMLE` (the SGD of step 4, run over the (list, cluster)
        parts).  ``random_state`` also seeds the sample of dissimilar pairs.

    Attributes
    ----------
    metric_ : ndarray (d, d)  ``M`` of Eq. 3 (scaled features; identity for ``metric="identity"``)
    clusters_ : ndarray (n_train,)  cluster of each training row after pLocalsearch (0 = most
        preferred; -1 for the rows of queries without two different labels; not saved)
    cost_curve_ : ndarray  Ω_M (Eq. 4) before pLocalsearch and after each of its iterations
        (not saved)
    n_iter_ : int  pLocalsearch iterations run (not saved)
    odr_coef_ : ndarray (d,)  ``v`` of f_odr
    odr_thresholds_ : ndarray (K-1,)  ``θ`` of f_odr (increasing)
    coef_ : ndarray (K, d)  the clusters' linear rankers (scaled features)
    feature_mean_, feature_scale_ : ndarray (d,)  standardisation of the features
    loss_curve_ : ndarray (iterations,)  Eq. 10 after each SGD epoch (not saved)
    n_features_in_ : int

    ``save(path)`` / ``RPCMTL.load(path)`` persist a fitted model (``.npz`` + JSON header).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X, qid = rng.normal(size=(300, 5)), np.repeat(np.arange(30), 10)  # 30 queries of 10 documents
    >>> y = np.digitize(X @ [1.0, 0.5, 0.0, 0.0, 0.0], [0.5, 1.5])  # graded labels 0, 1, 2
    >>> from recsys_ltr.ltr import RPCMTL
    >>> model = RPCMTL(n_clusters=2, random_state=0).fit(X[:200], y[:200], qid[:200])
    >>> model.predict_cluster(X[200:], qid[200:]).shape, model.predict(X[200:], qid[200:]).shape
    ((100,), (100,))
    """

    def __init__(
        self,
        n_clusters=3,
        mtl_regularization=0.1,
        kappa1=2,
        kappa2=5,
        metric="xing",
        max_pairs=20_000,
        max_iter=1000,
        odr_regularization=1.0,
        top_k="labels",
        learning_rate=0.001,
        iterations=30,
        regularization=0.0,
        average=True,
        feature_scaling="standard",
        num_threads=1,
        show_progress=None,
        random_state=0,
    ):
        self.n_clusters = n_clusters
        self.mtl_regularization = mtl_regularization
        self.kappa1 = kappa1
        self.kappa2 = kappa2
        self.metric = metric
        self.max_pairs = max_pairs
        self.max_iter = max_iter
        self.odr_regularization = odr_regularization
        self.top_k = top_k
        super().__init__(
            learning_rate,
            iterations,
            regularization,
            average,
            feature_scaling,
            num_threads,
            show_progress,
            random_state,
        )

    _state_attributes = (*LinearListwise._state_attributes, "metric_", "odr_coef_", "odr_thresholds_")

    def _check_params(self):
        super()._check_params()
        check_top_k(self.top_k)
        check_positive_int(self.n_clusters, "n_clusters")
        check_positive_int(self.kappa1, "kappa1")
        check_positive_int(self.kappa2, "kappa2", minimum=int(self.kappa1) + 1)
        check_positive_int(self.max_pairs, "max_pairs")
        check_positive_int(self.max_iter, "max_iter", minimum=0)
        check_real(self.mtl_regularization, "mtl_regularization", low=0.0)
        check_real(self.odr_regularization, "odr_regularization", low=0.0)
        if self.metric not in _METRICS:
            raise ValueError(f"metric must be one of {_METRICS}, got {self.metric!r}")

    def fit(self, X, y, qid):
        """Algorithm 1 on the informative queries of ``(X, y, qid)``; returns ``self``."""
        self._check_params()
        X, y, offsets, queries = self._check_fit_data(X, y, qid)
        K = int(self.n_clusters)
        rows, list_offsets = _query_rows(offsets, queries)
        longest = int(np.diff(list_offsets).max())
        if K > longest:
            raise ValueError(f"n_clusters={K} exceeds the longest training list ({longest} documents)")
        state = seed_state(self.random_state, 2, salt=SGD_SALT)  # row 0: SGD (as ListMLE), row 1: pairs
        Xs = self._fit_scaling(X, offsets)
        ranked = _ranked_stable(rows, list_offsets, y)
        threads = check_num_threads(self.num_threads)
        with limit_threads(threads):
            clusters = self._cluster(Xs[ranked], list_offsets, K, state)
        self.clusters_ = np.full(X.shape[0], -1, dtype=np.int64)
        self.clusters_[ranked] = clusters
        degree = K - 1 - clusters
        if K > 1:
            self.odr_coef_, self.odr_thresholds_ = fit_ordinal_logit(
                Xs[ranked], degree, K, float(self.odr_regularization)
            )
        else:
            self.odr_coef_, self.odr_thresholds_ = np.zeros(X.shape[1]), np.zeros(0)
        parts, part_offsets, task = _cluster_parts(ranked, list_offsets, clusters, y)
        self.coef_ = fit_listwise(
            self, state, Xs, y, parts, part_offsets, task, K, LISTMLE, float(self.mtl_regularization)
        )
        return self

    def _coef_shape(self, d):
        return (int(self.n_clusters), d)

    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        d, K = self.n_features_in_, int(self.n_clusters)
        if self.metric_.shape != (d, d) or self.odr_coef_.shape != (d,) or self.odr_thresholds_.shape != (K - 1,):
            raise ValueError(f"metric_, odr_coef_ or odr_thresholds_ do not fit {K} clusters in {d} features")
        if np.any(np.diff(self.odr_thresholds_) <= 0):
            raise ValueError("odr_thresholds_ must be increasing")

    def _cluster(self, Z, offsets, K, state):
        """Steps 1-2: the metric and pLocalsearch; returns the cluster of each ranked row."""
        labels = initial_clusters(offsets, K)
        d = Z.shape[1]
        if K == 1 or self.metric == "identity":
            self.metric_ = np.eye(d)
        else:
            S, D = rank_pairs(offsets, int(self.kappa1), int(self.kappa2))
            if S.shape[0] == 0 or D.shape[0] == 0:
                raise ValueError(
                    f"no training list is long enough for dissimilar pairs (kappa2={self.kappa2}); "
                    "lower kappa2 or use metric='identity'"
                )
            if D.shape[0] > self.max_pairs:
                rng = np.random.default_rng(state[1, :2])
                D = D[np.sort(rng.choice(D.shape[0], int(self.max_pairs), replace=False))]
            dS = Z[S[:, 0]] - Z[S[:, 1]]
            self.metric_ = xing_metric(dS.T @ dS, Z[D[:, 0]] - Z[D[:, 1]])
        vals, vecs = np.linalg.eigh(self.metric_)
        L = vecs * np.sqrt(np.maximum(vals, 0.0))  # M = L Lᵀ, d_M(a, b) = ||(a - b) L||
        labels, self.n_iter_, self.cost_curve_ = plocalsearch(Z @ L, offsets, labels, K, int(self.max_iter))
        return labels

    def predict_cluster(self, X, qid) -> np.ndarray:
        """f_odr's cluster of each row (0 = the most preferred degree)."""
        return int(self.n_clusters) - 1 - self._degree(self._scaled(X, qid))

    def _degree(self, Xs):
        return np.sum((Xs @ self.odr_coef_)[:, None] > self.odr_thresholds_[None, :], axis=1)

    def predict(self, X, qid) -> np.ndarray:
        """Scores ordering each query by f_odr's degree, then by the degree's ranker (Fig. 3)."""
        Xs = self._scaled(X, qid)
        degree = self._degree(Xs)
        cluster = int(self.n_clusters) - 1 - degree  # an int: a numpy uint64 would make the clusters floats
        s = np.empty(Xs.shape[0])
        for k in np.unique(cluster):  # one matrix-vector product per cluster (K = 1: ListMLE's)
            rows = cluster == k
            s[rows] = Xs @ self.coef_[k] if rows.all() else Xs[rows] @ self.coef_[k]
        span = 2.0 * np.abs(s).max() + 1.0
        return degree * span + s


def _cluster_parts(ranked, offsets, clusters, y):
    """Rows, offsets and task of every (list, cluster) part with two different labels."""
    list_id = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    key = list_id * (clusters.max() + 1) + clusters  # clusters are non-decreasing within a list
    starts = np.concatenate([[0], np.flatnonzero(np.diff(key)) + 1])
    sizes = np.diff(np.concatenate([starts, [key.size]]))
    lab = y[ranked]
    varied = np.maximum.reduceat(lab, starts) > np.minimum.reduceat(lab, starts)
    part_offsets = np.concatenate([[0], np.cumsum(sizes[varied])]).astype(np.int64)
    return ranked[np.repeat(varied, sizes)].astype(np.int64), part_offsets, clusters[starts[varied]].astype(np.int64)
