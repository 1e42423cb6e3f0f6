"""L-GMML: learning to rank with localized geometric mean metrics (Su, King & Lyu, SIGIR 2017).

Model (su2017 sec. 3).  ``m`` local metrics ``M_r`` with anchor documents ``p_r`` describe an
*ideal candidate document* of a query; a document ``p`` is scored by (Eq. 13)::

    f_q(p; Φ_q) = - sum_r Φ_q[r] * exp(-d_r(p)) * d_r(p),      Φ_q >= 0,

with ``d_r(p) = ||p - p_r||_{M_r}``; higher is more relevant.  Eq. 12 defines the norm by
``||x||^2_M = tr(M x x^T M) = ||M x||^2`` (``distance="eq12"``, the default); the usual
Mahalanobis norm ``x^T M x`` (``distance="mahalanobis"``) is offered too.  The factor
``exp(-d_r)`` is the smooth RBF weight of Eq. 11 (``w_r(p) = exp(-ρ/2 d_r(p))`` with ρ = 2), see
:meth:`LGMML.local_weights`.

Fitting (Algorithm 2).

1. Local metrics: metric ``r`` samples ``queries_per_metric`` training queries (with at least one
   relevant, label > 0, and one irrelevant, label 0, document) and solves GMML (Algorithm 1) with
   ``S`` = scatter of relevant-relevant pairs and ``D`` = scatter of relevant-irrelevant pairs,
   pairs taken *within* each sampled query (labels are query-relative), plus ``λI`` where
   ``λ = regularization * (tr S + tr D) / (2 d)`` so the ridge does not depend on feature scale.
2. Anchor: among the sampled relevant documents, the one that ranks the sampled queries' documents
   best (mean NDCG@``anchor_k``, the document itself left out of its own list) when sorted by
   ascending ``d_r`` (ties, within 1e-9, go to the lowest row index).
3. Φ: the WARP loss with su2017's ``L(k) = sum_{i<=k} 1/log2(i+1)`` (Eq. 14-19) minimised by
   projected SGD (Eq. 20-21, Φ projected to ``>= 0``), through the shared sampler
   :mod:`recsys_ltr.warp`.  ``∂f/∂Φ[r] = -exp(-d_r) d_r`` (Eq. 22 prints it without the minus
   sign, which would make Eq. 21 ascend the loss; we use the derivative of Eq. 13).

Unseen queries.  The paper learns one Φ_q per training query but must rank test queries, which
have no Φ.  ``phi_mode="shared"`` (default) learns a single Φ shared by all training queries: the
WARP sampler still draws queries uniformly, and the scorer is query-independent, as the paper's
query-independent setting requires.  ``phi_mode="per_query"`` follows Algorithm 2 literally and
scores unseen queries with the mean of the learned Φ_q.  Independently, ``test_anchors="train"``
scores with the training anchors, while ``test_anchors="candidates"`` moves each anchor, per
query, to the query's own candidate document nearest to it under ``M_r`` (the ideal document is
then built from the query's own candidates).  ``benchmarks/bench_ltr.py`` compares the options.

Features are divided by their 2-norm over the training rows (``feature_scaling="l2"``, su2017
sec. 4.5), which also keeps ``d_r`` in the increasing part of ``u exp(-u)``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from sklearn.utils.validation import check_is_fitted

from .._io import Persistable
from .._progress import progress, progress_enabled
from .._threads import check_num_threads, numba_threads
from .._validation import check_positive_int, check_random_state, check_real
from ..metric_learning._base import check_dense
from ..metric_learning.gmml import cross_scatter, gmml_components, within_scatter
from ..query_metrics import _ndcg_one
from ..warp import WarpSampler, WarpStats
from ._base import QueryRanker

__all__ = ["LGMML"]

_DISTANCES = ("eq12", "mahalanobis")
_PHI_MODES = ("shared", "per_query")
_TEST_ANCHORS = ("train", "candidates")


# ----------------------------------------------------------------------------- kernels
def _eq13_terms(dist):
    """``G = exp(-d) d``, the per-metric terms of Eq. 13 (``f = -G @ Φ``) and ``-∂f/∂Φ``."""
    return dist * np.exp(-dist)


def _local_distances(X, T, anchors_t, batch=2048):
    """``out[i, r] = ||T_r x_i - T_r p_r||`` for every row and local metric (BLAS, row batches)."""
    m, d, _ = T.shape
    flat = T.reshape(m * d, d).T
    out = np.empty((X.shape[0], m))
    for s in range(0, X.shape[0], batch):
        Z = (X[s : s + batch] @ flat).reshape(-1, m, d) - anchors_t
        out[s : s + batch] = np.sqrt(np.einsum("nrd,nrd->nr", Z, Z))
    return out


@njit(cache=True, parallel=True)
def _candidate_anchor_distances(X, order, offsets, T, anchors_t):
    """Like :func:`_local_distances`, but per query the anchor of metric ``r`` is replaced by the
    query's own row nearest to ``p_r`` under ``T_r``."""
    n, d = X.shape
    m = T.shape[0]
    out = np.empty((n, m))
    for q in prange(offsets.size - 1):
        rows = order[offsets[q] : offsets[q + 1]]
        Z = np.empty((rows.size, d))
        for r in range(m):
            best, best_j = np.inf, 0
            for j in range(rows.size):
                acc = 0.0
                for a in range(d):
                    z = 0.0
                    for b in range(d):
                        z += T[r, a, b] * X[rows[j], b]
                    Z[j, a] = z
                    acc += (z - anchors_t[r, a]) ** 2
                if acc < best:
                    best, best_j = acc, j
            for j in range(rows.size):
                acc = 0.0
                for a in range(d):
                    acc += (Z[j, a] - Z[best_j, a]) ** 2
                out[rows[j], r] = np.sqrt(acc)
    return out


@njit(cache=True, parallel=True)
def _anchor_ndcg(Z, labels, offsets, cand, k):
    """Mean NDCG@k over the queries of ``Z`` ranked by ascending distance to each candidate row.

    The candidate is left out of its own query's list; queries whose remaining list has no
    relevant document are skipped; ``-inf`` when no query remains.
    """
    out = np.empty(cand.size)
    for c in prange(cand.size):
        p = cand[c]
        total, cnt = 0.0, 0
        for q in range(offsets.size - 1):
            s, e = offsets[q], offsets[q + 1]
            own = s <= p < e
            size = e - s - (1 if own else 0)
            if size == 0:
                continue
            sc = np.empty(size)
            lab = np.empty(size)
            j = 0
            for i in range(s, e):
                if i == p:
                    continue
                acc = 0.0
                for a in range(Z.shape[1]):
                    acc += (Z[i, a] - Z[p, a]) ** 2
                sc[j] = -acc
                lab[j] = labels[i]
                j += 1
            v = _ndcg_one(sc, lab, k)
            if not np.isnan(v):
                total += v
                cnt += 1
        out[c] = total / cnt if cnt > 0 else -np.inf
    return out


# ----------------------------------------------------------------------------- estimator
class LGMML(Persistable, QueryRanker):
    """Learning to rank with localized geometric mean metrics (su2017, Algorithm 2).

    Parameters
    ----------
    n_metrics : int, default=50
        Number ``m`` of local metrics (and anchors).
    queries_per_metric : int, default=20
        Training queries sampled (without replacement) to learn each local metric.
    regularization : float, default=1e-3
        Relative ridge of the GMML scatter matrices: ``λ = regularization * (tr S + tr D) / (2 d)``
        (see the module docstring); 0 allows singular scatters (see ``SingularScatterWarning``).
    t : float in [0, 1], default=0.5
        GMML geodesic weight (0.5: plain GMML).
    distance : {"eq12", "mahalanobis"}, default="eq12"
        ``||x||_M = ||M x||`` as su2017 Eq. 12 writes, or the usual ``sqrt(x^T M x)``.
    anchor_k : int, default=10
        Cutoff of the NDCG that picks the anchors.
    feature_scaling : {"l2", None}, default="l2"
        Divide each feature by its 2-norm over the training rows (su2017 sec. 4.5).
    phi_mode : {"shared", "per_query"}, default="shared"
        One Φ for all queries, or Φ_q per training query with unseen queries using their mean.
    test_anchors : {"train", "candidates"}, default="train"
        Score with the training anchors, or move them into each query's candidate set.
    phi_init : float, default=1.0
        Initial value of every Φ entry.
    learning_rate : float, default=0.05
        SGD step ``μ`` of Eq. 21.
    margin : float, default=0.1
        Hinge margin ``ζ`` of Eq. 17-19.
    iterations : int, default=10
        WARP epochs; an epoch draws as many (query, positive) pairs as there are relevant
        training documents.
    max_sampled : int or None, default=None
        Cap ``β`` on negatives drawn per positive (``None``: the query's number of irrelevant
        documents, plain WARP).
    num_threads : int, default=1
        Threads of the numba kernels and the WARP sampler (0: all); 1 is bit-for-bit
        reproducible, more threads change the order of the lock-free Φ updates.
    random_state : int, Generator or None
        Seed of the query sampling and the WARP sampler.
    show_progress : bool or None, default=None
        Progress bar over the local metrics, then the Φ epochs (``None``: on when standard
        error is a terminal).

    Attributes
    ----------
    metrics_ : ndarray (m, d, d)
        Local Mahalanobis matrices ``M_r`` (on scaled features).
    transforms_ : ndarray (m, d, d)
        ``T_r`` with ``d_r(x) = ||T_r (x - p_r)||`` (``M_r`` or ``L_r``).
    anchors_ : ndarray (m, d)
        Anchor documents ``p_r`` (scaled features).
    phi_ : ndarray (n_rows, m)
        Learned Φ (one row, or one per training query).
    scale_ : ndarray (d,)
        Feature divisors.
    warp_stats_ : WarpStats or None
        Counts of the Φ fit (samples, violators, negative draws); not saved.

    ``save(path)`` / ``LGMML.load(path)`` persist a fitted model (``.npz`` + JSON header).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X, qid = rng.normal(size=(300, 5)), np.repeat(np.arange(30), 10)  # 30 queries of 10 documents
    >>> y = np.digitize(-np.linalg.norm(X[:, :2] - 1.0, axis=1), [-1.5, -0.75])  # closer to (1, 1): better
    >>> from recsys_ltr.ltr import LGMML
    >>> from recsys_ltr.query_metrics import ndcg_at_k
    >>> model = LGMML(n_metrics=5, random_state=0).fit(X[:200], y[:200], qid[:200])
    >>> round(float(np.nanmean(ndcg_at_k(y[200:], model.predict(X[200:], qid[200:]), qid[200:], k=5))), 4)
    0.9489
    """

    def __init__(
        self,
        n_metrics=50,
        queries_per_metric=20,
        regularization=1e-3,
        t=0.5,
        distance="eq12",
        anchor_k=10,
        feature_scaling="l2",
        phi_mode="shared",
        test_anchors="train",
        phi_init=1.0,
        learning_rate=0.05,
        margin=0.1,
        iterations=10,
        max_sampled=None,
        num_threads=1,
        random_state=0,
        show_progress=None,
    ):
        self.n_metrics = n_metrics
        self.queries_per_metric = queries_per_metric
        self.regularization = regularization
        self.t = t
        self.distance = distance
        self.anchor_k = anchor_k
        self.feature_scaling = feature_scaling
        self.phi_mode = phi_mode
        self.test_anchors = test_anchors
        self.phi_init = phi_init
        self.learning_rate = learning_rate
        self.margin = margin
        self.iterations = iterations
        self.max_sampled = max_sampled
        self.num_threads = num_threads
        self.random_state = random_state
        self.show_progress = show_progress

    # ------------------------------------------------------------------ validation
    def _check_params(self):
        check_random_state(self.random_state)
        check_positive_int(self.n_metrics, "n_metrics")
        check_positive_int(self.queries_per_metric, "queries_per_metric")
        check_positive_int(self.anchor_k, "anchor_k")
        check_positive_int(self.iterations, "iterations", minimum=0)
        if self.max_sampled is not None:
            check_positive_int(self.max_sampled, "max_sampled")
        for name in ("regularization", "phi_init", "learning_rate", "margin"):
            check_real(getattr(self, name), name, low=0.0)
        check_real(self.t, "t", low=0.0, high=1.0)
        check_num_threads(self.num_threads)
        progress_enabled(self.show_progress)
        for name, value, allowed in (
            ("distance", self.distance, _DISTANCES),
            ("feature_scaling", self.feature_scaling, ("l2", None)),
            ("phi_mode", self.phi_mode, _PHI_MODES),
            ("test_anchors", self.test_anchors, _TEST_ANCHORS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, qid):
        """Learn the local metrics, anchors and Φ from query-document rows.

        ``X`` (n, d) features, ``y`` (n,) graded labels (> 0 relevant, 0 irrelevant), ``qid``
        (n,) query ids.  Queries lacking a relevant or an irrelevant document are not used.
        """
        self._check_params()
        X, y, offsets = self._start_fit(X, y, qid)
        rng = check_random_state(self.random_state)
        threads = check_num_threads(self.num_threads)
        if self.feature_scaling == "l2":
            norms = np.linalg.norm(X, axis=0)
            self.scale_ = np.where(norms > 0, norms, 1.0)
        else:
            self.scale_ = np.ones(X.shape[1])
        Xs = X / self.scale_
        pos_count = np.add.reduceat((y > 0).astype(np.int64), offsets[:-1])
        neg_count = np.diff(offsets) - pos_count
        usable = np.flatnonzero((pos_count > 0) & (neg_count > 0))
        if usable.size == 0:
            raise ValueError("no query has both a relevant (label > 0) and an irrelevant (label 0) document")
        groups = [np.arange(offsets[q], offsets[q + 1]) for q in usable]
        steps = self.n_metrics + self.iterations
        with progress(self.show_progress, total=steps, desc="L-GMML", unit="step") as bar:
            bar.set_postfix_str("local metrics")
            self._fit_local_metrics(Xs, y, groups, rng, threads, bar)
            bar.set_postfix_str("Φ epochs")
            self.phi_ = self._fit_phi(_eq13_terms(self._distances(Xs)), y, groups, rng, threads, bar)
        return self

    def _fit_local_metrics(self, Xs, y, groups, rng, threads, bar):
        m, d = self.n_metrics, Xs.shape[1]
        per = min(self.queries_per_metric, len(groups))
        self.metrics_, self.transforms_, self.anchors_ = np.empty((m, d, d)), np.empty((m, d, d)), np.empty((m, d))
        for r in range(m):
            picked = [groups[i] for i in rng.choice(len(groups), per, replace=False)]
            S, D = np.zeros((d, d)), np.zeros((d, d))
            for rows in picked:
                P, N = Xs[rows[y[rows] > 0]], Xs[rows[y[rows] == 0]]
                S += within_scatter(P)
                D += cross_scatter(P, N)
            scale = (np.trace(S) + np.trace(D)) / (2 * d)
            if not np.isfinite(scale):
                raise ValueError(
                    f"local metric {r}: the scatter matrices overflow (features too large in magnitude); "
                    "use feature_scaling='l2' or rescale X"
                )
            if scale == 0.0:  # the relative ridge vanishes too: no regularization can help
                raise ValueError(
                    f"local metric {r}: the sampled queries' documents all coincide (zero scatter); check the features"
                )
            ridge = self.regularization * scale * np.eye(d)
            with np.errstate(all="ignore"):
                try:
                    L = gmml_components(S + ridge, D + ridge, float(self.t))
                except np.linalg.LinAlgError:
                    L = np.full((d, d), np.nan)
            if not np.all(np.isfinite(L)):
                raise ValueError(
                    f"local metric {r}: the GMML solve overflows with regularization={self.regularization:g} "
                    f"(scatter scale {scale:.3g}): lower regularization"
                )
            self.metrics_[r] = L.T @ L
            self.transforms_[r] = self.metrics_[r] if self.distance == "eq12" else L
            with numba_threads(threads):
                self.anchors_[r] = Xs[self._pick_anchor(Xs, y, picked, self.transforms_[r])]
            bar.update()

    def _pick_anchor(self, Xs, y, picked, T):
        """Row of the relevant document whose distance ranking (under ``T``) of the picked
        queries has the best mean NDCG@anchor_k; ties (NDCG is discrete) go to the lowest row."""
        rows = np.concatenate(picked)
        offsets = np.concatenate([[0], np.cumsum([g.size for g in picked])]).astype(np.int64)
        cand = np.flatnonzero(y[rows] > 0).astype(np.int64)
        score = _anchor_ndcg(Xs[rows] @ T.T, y[rows], offsets, cand, self.anchor_k)
        return rows[cand[score >= score.max() - 1e-9]].min()

    def _fit_phi(self, G, y, groups, rng, threads, bar):
        """Φ by WARP through :mod:`recsys_ltr.warp` (see :func:`_warp_phi`)."""
        n_rows = 1 if self.phi_mode == "shared" else len(groups)
        phi = np.full((n_rows, self.n_metrics), float(self.phi_init))
        self.warp_stats_ = None
        if self.iterations > 0:
            self.warp_stats_ = _warp_phi(phi, G, y, groups, self, rng, threads, bar)
        return phi

    # ------------------------------------------------------------------ scoring
    def _distances(self, Xs, offsets=None):
        """``d_r`` of every row; with the query ``offsets`` (rows grouped), per-query candidate
        anchors when ``test_anchors="candidates"``."""
        anchors_t = np.einsum("rab,rb->ra", self.transforms_, self.anchors_)
        if offsets is None or self.test_anchors == "train":
            return _local_distances(Xs, self.transforms_, anchors_t)
        order = np.arange(Xs.shape[0], dtype=np.int64)
        return _candidate_anchor_distances(Xs, order, offsets, self.transforms_, anchors_t)

    _state_attributes = ("metrics_", "transforms_", "anchors_", "phi_", "scale_")

    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        dims = {"metrics_": 3, "transforms_": 3, "anchors_": 2, "phi_": 2, "scale_": 1}
        for name, ndim in dims.items():
            if getattr(self, name).ndim != ndim or getattr(self, name).dtype.kind != "f":
                raise ValueError(f"{name} must be a {ndim}-D float array")
        m, d = self.anchors_.shape
        shapes = (self.metrics_.shape, self.transforms_.shape, self.phi_.shape[1:], self.scale_.shape)
        if shapes != ((m, d, d), (m, d, d), (m,), (d,)) or self.phi_.shape[0] == 0 or m != self.n_metrics:
            raise ValueError(f"inconsistent shapes {shapes} for {self.n_metrics} metrics in {d} features")
        if np.any(self.phi_ < 0) or np.any(self.scale_ <= 0):
            raise ValueError("phi_ must be >= 0 and scale_ > 0")
        if self.phi_mode == "shared" and self.phi_.shape[0] != 1:
            raise ValueError(f"phi_mode='shared' needs one row of phi_, got {self.phi_.shape[0]}")
        # d_r must be the norm the metric defines: T_r = M_r (Eq. 12) or T_r^T T_r = M_r
        T = self.transforms_
        implied = T if self.distance == "eq12" else np.einsum("rba,rbc->rac", T, T)
        tol = 1e-8 * np.abs(self.metrics_).max(axis=(1, 2), initial=0.0)[:, None, None]
        if not np.all(np.abs(implied - self.metrics_) <= tol):
            relation = "equal metrics_" if self.distance == "eq12" else "satisfy T^T T = metrics_"
            raise ValueError(f"transforms_ must {relation} (distance={self.distance!r})")
        self.n_features_in_ = d

    def local_weights(self, X, rho: float = 2.0) -> np.ndarray:
        """Smooth RBF weights ``w_r(x) = exp(-ρ/2 d_r(x))`` (Eq. 11, ``ρ >= 0``) against the
        training anchors."""
        rho = check_real(rho, "rho", low=0.0)
        check_is_fitted(self)
        X = check_dense(X, "X")
        self._check_n_features(X)
        with numba_threads(self.num_threads):
            return np.exp(-0.5 * rho * self._distances(X / self.scale_))

    def predict(self, X, qid) -> np.ndarray:
        """Eq. 13 score of each row (higher = more relevant); ``qid`` groups candidate sets (each
        query's rows contiguous)."""
        X, offsets = self._check_predict_data(X, qid)
        with numba_threads(self.num_threads):
            dist = self._distances(X / self.scale_, offsets)
        return -_eq13_terms(dist) @ self.phi_.mean(axis=0)


@njit(cache=True)
def _phi_score(state, q, doc):
    """Eq. 13 with precomputed ``G[doc, r] = exp(-d_r) d_r``: ``-Φ_row(q) · G[doc]``."""
    phi, G, row = state
    r = row[q]
    s = 0.0
    for k in range(G.shape[1]):
        s -= phi[r, k] * G[doc, k]
    return s


@njit(cache=True)
def _phi_update(state, q, pos, neg, weight, lr):
    """Eq. 21 projected on ``Φ >= 0``: ``Φ <- [Φ - μ L (∂f(p-)/∂Φ - ∂f(p+)/∂Φ)]_+`` with
    ``∂f(p)/∂Φ[r] = -G[p, r]``."""
    phi, G, row = state
    r = row[q]
    for k in range(G.shape[1]):
        v = phi[r, k] + lr * weight * (G[neg, k] - G[pos, k])
        phi[r, k] = v if v > 0.0 else 0.0


def _relevance_csr(groups, y, relevant: bool) -> sp.csr_matrix:
    """Queries x documents CSR: per usable query, its relevant (label > 0) or label-0 rows."""
    cols = [g[(y[g] > 0) == relevant] for g in groups]
    indptr = np.concatenate([[0], np.cumsum([c.size for c in cols])])
    indices = np.concatenate(cols)
    return sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(len(groups), y.size))


def _warp_phi(phi, G, y, groups, est, rng, threads, bar):
    """Learn Φ (in place) with the shared WARP sampler: relevant = label > 0, irrelevant = label 0
    of the same query, weight ``L(floor(|D_q^-| / N_q))`` with su2017's L (Eq. 16, unnormalised).
    One sampler call per epoch (the random streams continue, so the draws are those of one call);
    returns the summed :class:`~recsys_ltr.warp.WarpStats`."""
    relevant = _relevance_csr(groups, y, True)
    sampler = WarpSampler(
        relevant,
        irrelevant=_relevance_csr(groups, y, False),
        beta=est.max_sampled,
        loss="lgmml",
        normalize=False,
        margin=float(est.margin),
        random_state=rng,
        num_threads=threads,
    )
    row = np.zeros(len(groups), dtype=np.int64) if phi.shape[0] == 1 else np.arange(len(groups), dtype=np.int64)
    total = WarpStats(0, 0, 0)
    for _ in range(int(est.iterations)):
        stats = sampler.sgd(
            (phi, G, row), _phi_score, _phi_update, relevant.nnz, float(est.learning_rate), rows={1: "item", 2: "query"}
        )
        total = WarpStats(*(a + b for a, b in zip(total, stats)))
        bar.update()
    return total
