"""FRML: fast low-rank metric learning to rank (dissertation ch. 3, Alg. 3.3-3.4).

FRML learns a Mahalanobis metric ``W = L Lᵀ`` of rank ``m`` (``L`` is ``d x m``) so that, for every
query point ``q``, its relevant points ``X+_q`` are nearer than the others under the squared
distance ``d_W(q, x) = (q - x)ᵀ W (q - x)``.  It minimises (Eq. 3.23)::

    E_{(q, x+, x-) ~ S, n_s}[ L̂(β)_WARP(n_s) [d_W(q, x+) - d_W(q, x-) + 1]_+ ]  +  λ Ω_L(W),
    Ω_L(W) = mean_q mean_{x+ in X+_q} d_W(q, x+)                                  (Eq. 3.22)

over rank-``m`` PSD matrices, where ``S`` is the β-WSS sampling scheme (Alg. 3.2) and
``L̂(β)_WARP(n_s)`` the truncated WARP estimator of an NML loss (Eq. 3.10, Def. 3.5).  Each SGD
step (Alg. 3.4, minibatch variant) draws ``b`` pairs ``(q, x+)`` with one β-WSS round each through
the shared engine :class:`recsys_ltr.warp.WarpSampler`, forms the symmetric step
``G = -η/b Σ [(w + λ) v+ v+ᵀ - w v- v-ᵀ]`` (``v± = q - x±``; ``w = 0`` and no ``v-`` when the
round found no violator) and retracts it onto the manifold with
:func:`recsys_ltr.metric_learning._riemann.symmetric_gradient_update` (Alg. 3.3, Lemmas 3.4-3.5).
FRML-AUC is ``beta=1`` (Theorem 3.6); ``kappa`` sets ``β_q = ceil(κ |X-_q|)`` (sec. 3.5).

Units: the data are divided internally by one scalar, the root mean squared distance between
random pairs of training points, so that ``learning_rate`` and the margin (1) do not depend on the
units of ``X``.  Fitted attributes are in the original units.

Threads: ``num_threads`` numba threads sample minibatches of ``batch_size >= 32``; the SGD loop
runs BLAS on one thread, since its products are small (``d x m``) and threaded OpenBLAS only adds
synchronisation (a 2-core machine under load: 243 s instead of 6 s for d = 1000, m = 64).

Retrieval quality (protocol of sec. 3.5) is measured by :func:`recsys_ltr.metrics.retrieval_metrics`:
each query ranks the whole database by increasing learned distance.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from numba import njit
from sklearn.base import BaseEstimator
from sklearn.utils.extmath import randomized_svd
from sklearn.utils.validation import check_is_fitted

from recsys_ltr._progress import progress, progress_enabled
from recsys_ltr._threads import check_num_threads, limit_threads
from recsys_ltr._topk import rank_dense_rows
from recsys_ltr._validation import check_bool, check_feedback, check_positive_int, check_random_state, check_real
from recsys_ltr.metric_learning._base import MahalanobisMixin
from recsys_ltr.metric_learning._riemann import symmetric_gradient_update
from recsys_ltr.metrics import retrieval_metrics, squared_distances
from recsys_ltr.warp import WarpSampler
from recsys_ltr.warp.estimators import _check_curve

__all__ = ["FRML", "label_relevance"]

_LOSS_KINDS = ("reciprocal", "pak", "uniform")
_SCALE_PAIRS = 2000  # random pairs used to estimate the data scale
_MAX_HALVINGS = 60  # backtracking halvings of the step size before giving up (2^-60 of it)
_PARALLEL_BATCH = 32  # smaller minibatches are sampled on one thread (a parallel launch costs more)


# ------------------------------------------------------------------------------ numba kernels


@njit(cache=True)
def _neg_sq_distance(state, q, x):
    """Score for the sampler: ``-d_W(x_q, x_x) = -||Lᵀ(x_q - x_x)||²`` on sorted CSR rows."""
    indptr, indices, data, L = state
    m = L.shape[1]
    acc = np.zeros(m)
    a, a_end = indptr[q], indptr[q + 1]
    c, c_end = indptr[x], indptr[x + 1]
    while a < a_end or c < c_end:  # merge the two sorted rows: one pass over their union
        if c == c_end or (a < a_end and indices[a] < indices[c]):
            k, v = indices[a], data[a]
            a += 1
        elif a == a_end or indices[c] < indices[a]:
            k, v = indices[c], -data[c]
            c += 1
        else:
            k, v = indices[a], data[a] - data[c]
            a += 1
            c += 1
        if v != 0.0:
            for f in range(m):
                acc[f] += v * L[k, f]
    s = 0.0
    for f in range(m):
        s += acc[f] * acc[f]
    return -s


@njit(cache=True)
def _row_differences(indptr, indices, data, rows_a, rows_b, n_features):
    """Dense ``(d, r)`` matrix whose column ``j`` is ``x[rows_a[j]] - x[rows_b[j]]``."""
    out = np.zeros((n_features, rows_a.shape[0]))
    for j in range(rows_a.shape[0]):
        for p in range(indptr[rows_a[j]], indptr[rows_a[j] + 1]):
            out[indices[p], j] += data[p]
        for p in range(indptr[rows_b[j]], indptr[rows_b[j] + 1]):
            out[indices[p], j] -= data[p]
    return out


# ------------------------------------------------------------------------------ validation


def label_relevance(y_query, y_database=None) -> sp.csr_matrix:
    """Relevance by class: entry ``(i, j)`` is 1 when ``y_query[i] == y_database[j]``.

    ``y_database=None`` uses ``y_query`` for both and leaves the diagonal out (a point is not its
    own relevant result).

    Examples
    --------
    >>> from recsys_ltr.metric_learning.frml import label_relevance
    >>> label_relevance([0, 0, 1]).toarray()
    array([[0., 1., 0.],
           [1., 0., 0.],
           [0., 0., 0.]])
    """
    same = y_database is None
    y_query = _check_labels(y_query, "y")
    y_database = y_query if same else _check_labels(y_database, "y_database")
    classes, codes = np.unique(np.concatenate((y_query, y_database)), return_inverse=True)
    cq, cd = codes[: y_query.size], codes[y_query.size :]

    def onehot(c):
        return sp.csr_matrix((np.ones(c.size), (np.arange(c.size), c)), shape=(c.size, classes.size))

    R = sp.csr_matrix(onehot(cq) @ onehot(cd).T)
    if same:
        R.setdiag(0)
        R.eliminate_zeros()
    return R


def _check_labels(y, name) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D class labels, got shape {y.shape}")
    if y.size == 0:
        raise ValueError(f"{name} is empty")
    if np.issubdtype(y.dtype, np.floating) and not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains NaN or infinite labels")
    return y


def _square_pairs(M, n, name) -> sp.csr_matrix:
    """A points x points supervision matrix without its diagonal."""
    M = check_feedback(M, name)
    if M.shape != (n, n):
        raise ValueError(f"{name} must be ({n}, {n}) (training points x training points), got {M.shape}")
    M = sp.csr_matrix(M - sp.diags(M.diagonal()))
    M.eliminate_zeros()
    return M


# ------------------------------------------------------------------------------ estimator


class FRML(MahalanobisMixin, BaseEstimator):
    """Low-rank Mahalanobis metric learned to rank with β-WSS and Riemannian SGD (Algorithm 3.4).

    Parameters
    ----------
    n_components : int, optional
        Rank ``m`` of the metric; default ``min(n_features, 30)``.
    loss : {"reciprocal", "pak", "uniform"} or array
        NML loss whose truncated WARP estimator weights a violator found after ``n_s`` draws
        (``L[floor(N_q / n_s)]``, Eq. 3.10), or a fixed estimator table ``θ`` (weight
        ``θ[n_s - 1]``, e.g. :func:`recsys_ltr.warp.opt_est`), of length ``>= max β_q``.
    k : int, optional
        Cut-off of ``loss="pak"`` (default 10).
    beta, kappa : int, float, optional
        Sampling limit (at most one): ``β_q = min(beta, |X-_q|)`` or ``ceil(kappa |X-_q|)``;
        neither = plain WARP (``β_q = |X-_q|``).  ``beta=1`` is FRML-AUC.
    regularization : float
        Weight ``λ >= 0`` of ``Ω_L`` (Eq. 3.22); the dissertation fixes 0.1.
    learning_rate : float
        Initial step size ``η`` (on the internally rescaled data, see the module docstring).  A
        step that would leave ``L`` rank deficient or not finite is retried with ``η`` halved,
        and the smaller ``η`` is kept (backtracking; ``learning_rate_`` is the final one), so the
        default converges on any data.
    batch_size : int
        Pairs ``(q, x+)`` per step, ``b`` (the dissertation uses 5); the step has rank <= 2b.
    max_iter : int
        Number of SGD steps (each draws ``batch_size`` queries).
    init : {"random", "pca"} or array (n_components, n_features)
        Start: Gaussian ``L`` scaled so that ``d_W`` is about the squared Euclidean distance
        (the dissertation's choice), the top ``m`` right singular vectors of the (uncentred)
        data, or given components.
    early_stopping : bool
        Hold out ``validation_fraction`` of the points as validation queries against the other
        points, compute their MAP every ``eval_every`` steps, keep the best metric and stop after
        ``n_iter_no_change`` evaluations without improvement.
    validation_fraction, n_iter_no_change, eval_every :
        See ``early_stopping``.
    random_state : int, numpy Generator or None
    num_threads : int
        Threads of the sampler (0 = all), used when ``batch_size >= 32``: smaller batches are
        cheaper on one thread.  The result never depends on it (each slot of a minibatch has
        its own random stream).
    show_progress : bool or None
        Progress bar over the SGD steps, with the last validation MAP when early stopping
        (``None``: on when standard error is a terminal).

    Attributes
    ----------
    components_ : array (n_components, n_features)
        ``L̃ᵀ`` with ``W = components_ᵀ components_`` (metric-learn's convention).
    embedding_ : array (n_samples, n_components)
        The training points transformed: the database of :meth:`kneighbors`.
    n_iter_ : int
        SGD steps taken (the best step when early stopping restored an earlier metric).
    n_draws_ : int
        Negative draws (distance evaluations beyond the positives) spent by the sampler.
    validation_scores_ : list of float
        Validation MAP at each evaluation (early stopping only).
    learning_rate_ : float
        The step size at the end of the fit (``learning_rate`` halved at each backtracking).
    fit_time_ : float
        Seconds spent in ``fit``.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from recsys_ltr.metric_learning import FRML
    >>> from recsys_ltr.metric_learning.frml import label_relevance
    >>> from recsys_ltr.metrics import retrieval_metrics
    >>> X, y = make_blobs(n_samples=200, n_features=10, centers=4, random_state=0)
    >>> frml = FRML(n_components=3, max_iter=200, random_state=0).fit(X, y)
    >>> Z = frml.transform(X)  # x -> L x: Euclidean distances there are the learnt metric's
    >>> Z.shape
    (200, 3)
    >>> quality = retrieval_metrics(Z, Z, label_relevance(y), exclude_self=True)
    >>> round(quality["MAP"], 2)
    1.0
    """

    def __init__(
        self,
        n_components=None,
        loss="reciprocal",
        k=None,
        beta=None,
        kappa=None,
        regularization=0.1,
        learning_rate=0.5,
        batch_size=5,
        max_iter=5000,
        init="random",
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=5,
        eval_every=500,
        random_state=0,
        num_threads=0,
        show_progress=None,
    ):
        self.n_components = n_components
        self.loss = loss
        self.k = k
        self.beta = beta
        self.kappa = kappa
        self.regularization = regularization
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.init = init
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.eval_every = eval_every
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    # -------------------------------------------------------------------------- parameters
    def _resolve(self, n_features):
        """Validated ``(n_components, sampler loss arguments)`` for data of ``n_features``."""
        self._check_params()
        m = min(n_features, 30) if self.n_components is None else self.n_components
        return check_positive_int(m, "n_components", maximum=n_features), self._loss_args()

    def _check_params(self):
        if self.n_components is not None:
            check_positive_int(self.n_components, "n_components")
        check_real(self.regularization, "regularization", low=0.0)
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        check_random_state(self.random_state)
        check_num_threads(self.num_threads)
        progress_enabled(self.show_progress)
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.max_iter, "max_iter", minimum=0)
        check_positive_int(self.eval_every, "eval_every")
        check_positive_int(self.n_iter_no_change, "n_iter_no_change")
        if not isinstance(self.early_stopping, (bool, np.bool_)):
            raise TypeError(f"early_stopping must be a bool, got {self.early_stopping!r}")
        frac = self.validation_fraction
        if self.early_stopping:
            check_real(frac, "validation_fraction", low=0.0, high=1.0, low_open=True, high_open=True)
        self._loss_args()

    def _loss_args(self) -> dict:
        if isinstance(self.loss, str):
            if self.loss not in _LOSS_KINDS:
                raise ValueError(f"loss must be one of {_LOSS_KINDS} or an estimator array, got {self.loss!r}")
            loss_args = {"loss": self.loss, "k": (10 if self.k is None else self.k) if self.loss == "pak" else None}
            if self.loss != "pak" and self.k is not None:
                raise ValueError(f"k is only used with loss='pak', got k={self.k!r}")
        else:
            loss_args = {"estimator": _check_curve(self.loss, 1, "loss")}
        return loss_args

    # -------------------------------------------------------------------------- fitting
    def fit(self, X, y=None, *, relevance=None, irrelevant=None, adjacency=None):
        """Learn the metric from exactly one kind of supervision.

        Parameters
        ----------
        X : array or sparse matrix (n_samples, n_features)
            The points; each is a query and the database is all the others.
        y : array (n_samples,), optional
            Class labels: ``X+_q`` = the other points of ``q``'s class.
        relevance : sparse matrix (n_samples, n_samples), optional
            Row ``q`` lists ``X+_q`` (asymmetric and intransitive relations are fine).
        irrelevant : sparse matrix (n_samples, n_samples), optional
            With ``relevance`` or ``adjacency``: explicit ``X-_q`` (e.g. points sharing no tag with
            ``q``); default: every point that is neither relevant nor ``q``.
        adjacency : sparse matrix (n_samples, n_samples), optional
            Graph: ``X+_q`` = the neighbours of ``q`` (edges taken as undirected).

        Returns
        -------
        self
        """
        start = time.perf_counter()
        X = sp.csr_matrix(self._validate(X, reset=True, min_samples=2))
        X.sort_indices()
        n, d = X.shape
        m, loss_args = self._resolve(d)
        R, Q = self._supervision(n, y, relevance, irrelevant, adjacency)
        rng = check_random_state(self.random_state)
        train, val = self._split(n, rng)
        Xt = X[train]
        scale = _data_scale(Xt, rng)
        Xs = Xt / scale
        Xs.sort_indices()
        sampler = WarpSampler(
            R[train][:, train], None if Q is None else Q[train][:, train], exclude_self=Q is None,
            beta=self.beta, kappa=self.kappa, random_state=int(rng.integers(2**63)),
            num_threads=check_num_threads(self.num_threads) if self.batch_size >= _PARALLEL_BATCH else 1,
            **loss_args,
        )  # fmt: skip
        L = self._initial_factor(Xs, m, scale, rng)
        with limit_threads(self.num_threads, blas=1):  # see "Threads" in the module docstring
            L, n_iter = self._sgd(sampler, Xs, L, (X[val] / scale, R[val][:, train]) if val is not None else None)
        self.components_ = np.ascontiguousarray((L / scale).T)
        self.n_features_in_ = self.components_.shape[1]
        self.train_labels_ = None if y is None else np.asarray(y)
        self.embedding_ = self.transform(X)
        self.n_iter_ = n_iter
        self.fit_time_ = time.perf_counter() - start
        return self

    def _supervision(self, n, y, relevance, irrelevant, adjacency):
        given = [name for name, v in (("y", y), ("relevance", relevance), ("adjacency", adjacency)) if v is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of y, relevance, adjacency; got {given or 'none'}")
        if y is not None:
            if irrelevant is not None:
                raise ValueError("irrelevant goes with relevance or adjacency; with y it is the other classes")
            y = _check_labels(y, "y")
            if y.size != n:
                raise ValueError(f"y has {y.size} labels but X has {n} samples")
            R = label_relevance(y)
        elif adjacency is not None:
            A = _square_pairs(adjacency, n, "adjacency")
            R = sp.csr_matrix(((A + A.T) > 0).astype(np.float64))
        else:
            R = _square_pairs(relevance, n, "relevance")
        if R.nnz == 0:
            raise ValueError("the supervision gives no relevant pair of distinct points (singleton classes?)")
        return R, None if irrelevant is None else _square_pairs(irrelevant, n, "irrelevant")

    def _split(self, n, rng):
        if not self.early_stopping:
            return np.arange(n), None
        n_val = int(round(self.validation_fraction * n))
        if not 1 <= n_val <= n - 2:
            raise ValueError(
                f"validation_fraction={self.validation_fraction} leaves no validation or training set for {n} samples"
            )
        perm = rng.permutation(n)
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])

    def _initial_factor(self, Xs, m, scale, rng):
        d = Xs.shape[1]
        if isinstance(self.init, str) and self.init == "random":
            return rng.standard_normal((d, m)) / np.sqrt(m)
        if isinstance(self.init, str) and self.init == "pca":
            if Xs.shape[0] < m:
                raise ValueError(f"init='pca' needs n_samples >= n_components ({m})")
            _, _, Vt = randomized_svd(Xs, m, random_state=int(rng.integers(2**31)))
            return np.ascontiguousarray(Vt.T)
        if isinstance(self.init, str):
            raise ValueError(f"init must be 'random', 'pca' or an array, got {self.init!r}")
        init = np.asarray(self.init, dtype=np.float64)
        if init.shape != (m, d):
            raise ValueError(f"init must have shape (n_components, n_features) = {(m, d)}, got {init.shape}")
        if not np.all(np.isfinite(init)) or np.linalg.matrix_rank(init) < m:
            raise ValueError("init must be finite and of full rank n_components")
        return np.ascontiguousarray(init.T * scale)

    def _sgd(self, sampler, Xs, L, validation):
        """Alg. 3.4 with minibatches; returns the (best) factor and the step count."""
        indptr, indices, data = Xs.indptr, Xs.indices, Xs.data
        b = self.batch_size
        eta, lam = float(self.learning_rate), float(self.regularization)
        best, best_iter, stale = -np.inf, 0, 0
        self.validation_scores_, self.n_draws_ = [], 0
        best_L = L
        with progress(self.show_progress, total=self.max_iter, desc="FRML", unit="step") as bar:
            for it in range(1, self.max_iter + 1):
                batch = sampler.minibatch(
                    (indptr, indices, data, L), _neg_sq_distance, b, require_violation=False, rows={0: "query"}
                )
                self.n_draws_ += int(batch.draws.sum())
                L, eta = _safe_step(L, batch, Xs, eta, lam)
                bar.update()
                if validation is not None and it % self.eval_every == 0:
                    Xv, Rv = validation
                    score = retrieval_metrics(Xv @ L, Xs @ L, Rv, ks=(1,))["MAP"]
                    self.validation_scores_.append(score)
                    bar.set_postfix(validation_MAP=f"{score:.4f}")
                    if score > best:
                        best, best_iter, best_L, stale = score, it, L, 0
                    else:
                        stale += 1
                        if stale >= self.n_iter_no_change:
                            break
        self.learning_rate_ = eta
        if not self.validation_scores_:
            return L, self.max_iter
        return best_L, best_iter

    # -------------------------------------------------------------------------- metric-learn API
    _state_attributes = ("components_", "embedding_", "train_labels_")
    _accepts_sparse = True  # tag counts and other sparse content stay sparse

    def _required_state(self):
        return ("components_", "embedding_")

    def _check_fitted(self):
        check_is_fitted(self)

    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        self._resolve(self.components_.shape[1])
        m = self.components_.shape[0]
        if self.embedding_.ndim != 2 or self.embedding_.shape[1] != m:
            raise ValueError(f"embedding_ {self.embedding_.shape} does not fit components_ {self.components_.shape}")
        labels = self.train_labels_
        if labels is not None and (labels.ndim != 1 or labels.shape[0] != self.embedding_.shape[0]):
            raise ValueError(f"train_labels_ must hold one label per training point ({self.embedding_.shape[0]})")

    def kneighbors(self, X=None, n_neighbors=5, return_distance=True):
        """The ``n_neighbors`` nearest training points of each query under the learned metric.

        ``X=None`` queries the training points themselves, each leaving itself out.  Ties are
        broken by the smaller training index.  Returns ``(distances, indices)`` (sorted nearest
        first) or only ``indices``, like scikit-learn's ``KNeighborsMixin``.
        """
        self._check_fitted()
        return_distance = check_bool(return_distance, "return_distance")
        n_db = self.embedding_.shape[0]
        self_query = X is None
        n_neighbors = check_positive_int(n_neighbors, "n_neighbors", maximum=n_db - int(self_query))
        Zq = self.embedding_ if self_query else self.transform(X)
        norms = (self.embedding_**2).sum(axis=1)
        ind, neg_sq = rank_dense_rows(
            lambda rows: -squared_distances(Zq[rows], self.embedding_, norms), np.arange(Zq.shape[0]), n_neighbors,
            n_db, exclude_self=self_query, drop_zero=False,
        )  # fmt: skip
        return (np.sqrt(-neg_sq), ind) if return_distance else ind

    def score(self, X, y=None, *, relevance=None) -> float:
        """MAP of the queries ``X`` against the training points (the database of ``fit``).

        Relevance comes from class labels ``y`` (compared with the training labels, so ``fit``
        must have had ``y``) or from ``relevance`` (CSR, n_queries x n_train).  Lets
        scikit-learn's model selection tune FRML on retrieval MAP.
        """
        self._check_fitted()
        if (y is None) == (relevance is None):
            raise ValueError("give exactly one of y (needs a fit with y) and relevance")
        if y is not None:
            if getattr(self, "train_labels_", None) is None:
                raise ValueError("score with y needs a model fitted with class labels y")
            relevance = label_relevance(y, self.train_labels_)
        return retrieval_metrics(self.transform(X), self.embedding_, relevance, ks=(1,))["MAP"]


def _step(L, batch, Xs, eta, lam) -> np.ndarray:
    """One step of Alg. 3.4 (minibatch) from the sampler's ``batch`` on the rows of ``Xs``.

    The ambient step is ``G = -η/b Σ_s [(w_s + λ) v+_s v+_sᵀ - w_s v-_s v-_sᵀ]`` (Eq. 3.25, 3.27),
    ``v±_s = x_q - x±``, ``w_s = 0`` and no ``v-`` when slot ``s`` found no violator.
    """
    hit = batch.negatives >= 0
    rows_a = np.concatenate((batch.queries, batch.queries[hit]))
    rows_b = np.concatenate((batch.positives, batch.negatives[hit]))
    c = (eta / batch.queries.size) * np.concatenate((-(batch.weights + lam), batch.weights[hit]))
    keep = c != 0.0
    if not keep.any():
        return L
    V = _row_differences(Xs.indptr, Xs.indices, Xs.data, rows_a[keep], rows_b[keep], Xs.shape[1])
    return np.ascontiguousarray(symmetric_gradient_update(L, V * c[keep], V))


def _safe_step(L, batch, Xs, eta, lam) -> tuple[np.ndarray, float]:
    """:func:`_step` with backtracking: ``(L', η')``, ``η`` halved until ``L'`` is finite and of full
    column rank (Alg. 3.3's retraction needs ``L'ᵀL'`` positive definite at the next step)."""
    for _ in range(_MAX_HALVINGS):
        new = _step(L, batch, Xs, eta, lam)
        if _full_rank(new):
            return new, eta
        eta /= 2.0
    raise FloatingPointError(f"FRML's step stays rank deficient with learning_rate {eta * 2:.3g} (the data?)")


def _full_rank(L) -> bool:
    if not np.all(np.isfinite(L)):
        return False
    try:
        scipy.linalg.cho_factor(L.T @ L, check_finite=False)
    except np.linalg.LinAlgError:
        return False
    return True


def _data_scale(X, rng) -> float:
    """Root mean squared distance between random pairs of rows (1 when all rows coincide)."""
    n = X.shape[0]
    a = rng.integers(n, size=_SCALE_PAIRS)
    b = rng.integers(n, size=_SCALE_PAIRS)
    diff = X[a] - X[b]
    ms = float(diff.multiply(diff).sum()) / _SCALE_PAIRS
    return float(np.sqrt(ms)) if ms > 0 else 1.0
