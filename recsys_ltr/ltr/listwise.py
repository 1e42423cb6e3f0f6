"""Linear listwise learning to rank: ListMLE (Xia et al., ICML 2008) and ListNet (Cao et al., ICML
2007), the baselines of wu2016 (sec. 3), and the multi-task SGD engine RPC-MTL shares with them.

Scores are linear, ``s = w · x``.  For one list with scores ``s``:

* ListMLE: the Plackett-Luce negative log-likelihood of the list's ordering ``π`` (best first),
  ``L = Σ_j [log Σ_{l >= j} exp s_π(l) - s_π(j)]``, with gradient
  ``∂L/∂s_π(i) = Σ_{j <= i} exp(s_π(i) - lse_j) - 1`` (``lse_j`` the log-sum-exp of the suffix
  starting at ``j``), evaluated in O(n) with suffix log-sum-exps and ratios ``<= 1``.
* ListNet (top-one probabilities): the cross-entropy between ``softmax(y)`` and ``softmax(s)``,
  ``L = -Σ_i softmax(y)_i log softmax(s)_i``, gradient ``softmax(s) - softmax(y)``.

Orderings from graded labels.  wu2016 trains on full orderings (the MQ2008-list permutations of
LETOR 4.0, which are not available offline); we derive them from graded labels: documents sorted
by decreasing label, documents with equal labels in a fresh random order every epoch (stream of
``random_state``), so no arbitrary tie order is learned.  By default ListMLE keeps only the
Plackett-Luce factors of the documents above the list's lowest label (top-k ListMLE, Xia et al.,
NeurIPS 2009, with ``k`` set per list): graded labels say nothing about the order among the
lowest-labelled documents (four in five on MQ2008), whose factors would only add noise; the
likelihood of the top part is exact, the rest marginalised out.  ListNet uses the labels
themselves.  Queries with a single document or with all labels equal carry no ordering and are
skipped (an error when no query remains).

Multi-task objective (wu2016 Eq. 10), over lists ``l`` assigned to tasks ``k(l)``::

    Σ_l L_l(w_k(l)) + λ Σ_k ||w_k - w̄||² + α Σ_k ||w_k||²,      w̄ = (1/K) Σ_k w_k,

minimised by SGD over lists in a random order per epoch with a constant step ``η``: each step
takes one list's gradient plus ``1/n_lists`` of the regulariser's.  Eq. 11 alternates the mean
``w̄`` and a minimisation with ``w̄`` frozen; we refresh ``w̄`` after every SGD step (Eq. 11 with
its inner minimisation cut to one stochastic step), which makes each step an unbiased step on
Eq. 10 itself: since ``Σ_l (w_l - w̄) = 0``, the gradient of Eq. 10's regulariser with respect to
``w_k`` is exactly ``2λ (w_k - w̄)``.  With one task that term is zero, so RPC-MTL with ``K = 1``
runs ListMLE's very steps.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._io import Persistable
from .._progress import progress, progress_enabled
from .._rng import randint, seed_state
from .._threads import check_num_threads, limit_threads
from .._validation import check_positive_int, check_random_state, check_real
from ._base import QueryRanker

__all__ = ["ListMLE", "ListNet", "listwise_objective", "query_level_norm"]

LISTMLE, LISTNET = 0, 1
_SCALINGS = ("standard", "query", None)


# ----------------------------------------------------------------------------- per-list losses
@njit(cache=True)
def _listmle_list(s, k, grad):
    """Top-``k`` ListMLE loss of scores ``s`` given in ranked order (best first): the first ``k``
    Plackett-Luce factors (``k = n``: the whole ordering).  ``grad`` receives ``∂L/∂s`` in the
    same order."""
    n = s.size
    lse = np.empty(n)
    lse[n - 1] = s[n - 1]
    for j in range(n - 2, -1, -1):  # lse[j] = log(exp(s[j]) + exp(lse[j + 1]))
        hi, lo = (s[j], lse[j + 1]) if s[j] > lse[j + 1] else (lse[j + 1], s[j])
        lse[j] = hi + np.log1p(np.exp(lo - hi))
    loss = 0.0
    c = 0.0  # c_i = Σ_{j <= min(i, k - 1)} exp(lse_i - lse_j); lse is non-increasing: ratios <= 1
    for i in range(n):
        if i > 0:
            c *= np.exp(lse[i] - lse[i - 1])
        if i < k:
            loss += lse[i] - s[i]
            c += 1.0
        grad[i] = np.exp(s[i] - lse[i]) * c - (1.0 if i < k else 0.0)
    return loss


@njit(cache=True)
def _softmax(v):
    e = np.exp(v - v.max())
    return e / e.sum()


@njit(cache=True)
def _listnet_list(s, labels, grad):
    """ListNet top-one cross-entropy of scores ``s`` against ``softmax(labels)``; gradient in
    ``grad``."""
    p_y = _softmax(labels)
    m = s.max()
    lse = m + np.log(np.exp(s - m).sum())
    p_s = np.exp(s - lse)
    loss = 0.0
    for i in range(s.size):
        loss -= p_y[i] * (s[i] - lse)
        grad[i] = p_s[i] - p_y[i]
    return loss


@njit(cache=True)
def _list_loss(X, y, members, w, loss_kind, k, grad_s):
    """Loss of one list whose rows ``members`` are in ranked order (ListMLE) or any order
    (ListNet); ``grad_s`` receives ``∂L/∂s`` per member."""
    n = members.size
    s = np.empty(n)
    labels = np.empty(n)
    for j in range(n):
        r = members[j]
        acc = 0.0
        for a in range(X.shape[1]):
            acc += X[r, a] * w[a]
        s[j] = acc
        labels[j] = y[r]
    if loss_kind == LISTMLE:
        return _listmle_list(s, k, grad_s)
    return _listnet_list(s, labels, grad_s)


@njit(cache=True)
def _rank_members(members, y, state, out):
    """``members`` sorted by decreasing label, equal labels shuffled (Fisher-Yates, stream 0)."""
    order = np.argsort(-y[members], kind="mergesort")
    n = members.size
    for j in range(n):
        out[j] = members[order[j]]
    start = 0
    for j in range(1, n + 1):
        if j == n or y[out[j]] != y[out[start]]:
            for a in range(j - 1, start, -1):
                b = start + randint(state, 0, a - start + 1)
                out[a], out[b] = out[b], out[a]
            start = j


# ----------------------------------------------------------------------------- objective, SGD
@njit(cache=True)
def _regulariser(W, lam, alpha, out):
    """Value of ``λ Σ_k ||w_k - w̄||² + α Σ_k ||w_k||²``; its gradient is written to ``out``."""
    K, d = W.shape
    value = 0.0
    for a in range(d):
        mean = 0.0
        for k in range(K):
            mean += W[k, a]
        mean /= K
        for k in range(K):
            dev = W[k, a] - mean
            value += lam * dev * dev + alpha * W[k, a] * W[k, a]
            out[k, a] = 2.0 * lam * dev + 2.0 * alpha * W[k, a]
    return value


@njit(cache=True, parallel=True)
def _objective_kernel(X, y, ranked, offsets, task, top, W, loss_kind, lam, alpha, grad):
    n_lists = offsets.size - 1
    losses = np.empty(n_lists)
    G = np.zeros((n_lists, W.shape[1]))
    for l in prange(n_lists):
        members = ranked[offsets[l] : offsets[l + 1]]
        g_s = np.empty(members.size)
        losses[l] = _list_loss(X, y, members, W[task[l]], loss_kind, top[l], g_s)
        for j in range(members.size):
            for a in range(X.shape[1]):
                G[l, a] += g_s[j] * X[members[j], a]
    total = _regulariser(W, lam, alpha, grad)
    for l in range(n_lists):  # sequential sum: the result does not depend on the thread count
        total += losses[l]
        grad[task[l]] += G[l]
    return total


def listwise_objective(
    W, X, y, ranked, offsets, task, top, loss_kind=LISTMLE, mtl_regularization=0.0, regularization=0.0
):
    """Eq. 10 objective and its gradient with respect to ``W`` (K, d).

    List ``l`` owns rows ``ranked[offsets[l]:offsets[l + 1]]``, given in ranked order for
    ListMLE, belongs to task ``task[l]`` and keeps ``top[l]`` Plackett-Luce factors (ListMLE);
    ``loss_kind`` is ``LISTMLE`` or ``LISTNET``.
    Internal inputs are trusted (validated callers).
    """
    W = np.ascontiguousarray(W, dtype=np.float64)
    grad = np.empty_like(W)
    lam, alpha = float(mtl_regularization), float(regularization)
    value = _objective_kernel(X, y, ranked, offsets, task, top, W, loss_kind, lam, alpha, grad)
    return value, grad


@njit(cache=True)
def _sgd_epoch(X, y, rows, offsets, task, top, W, W_avg, n_steps, loss_kind, lr, lam, alpha, state):
    """One epoch of SGD on Eq. 10: lists in a random order, one list per step.  ``W_avg`` keeps
    the running mean of the iterates after the ``n_steps`` steps done so far; returns the new
    step count."""
    n_lists = offsets.size - 1
    perm = np.arange(n_lists)
    for a in range(n_lists - 1, 0, -1):
        b = randint(state, 0, a + 1)
        perm[a], perm[b] = perm[b], perm[a]
    reg = np.empty_like(W)
    members = np.empty(rows.size, dtype=np.int64)
    for l in perm:
        n = offsets[l + 1] - offsets[l]
        m = members[:n]
        if loss_kind == LISTMLE:
            _rank_members(rows[offsets[l] : offsets[l + 1]], y, state, m)
        else:
            m[:] = rows[offsets[l] : offsets[l + 1]]
        g_s = np.empty(n)
        _list_loss(X, y, m, W[task[l]], loss_kind, top[l], g_s)
        _regulariser(W, lam, alpha, reg)
        step = lr / n_lists
        for k in range(W.shape[0]):
            for a in range(W.shape[1]):
                W[k, a] -= step * reg[k, a]
        k = task[l]
        for j in range(n):
            gj = lr * g_s[j]
            for a in range(W.shape[1]):
                W[k, a] -= gj * X[m[j], a]
        n_steps += 1
        for k in range(W.shape[0]):
            for a in range(W.shape[1]):
                W_avg[k, a] += (W[k, a] - W_avg[k, a]) / n_steps
    return n_steps


def _ranked_stable(rows, offsets, y):
    """Each list's rows sorted by decreasing label, ties in row order."""
    list_id = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    return rows[np.lexsort((-y[rows], list_id))]  # lexsort is stable


def top_lengths(y, rows, offsets, top_k):
    """Plackett-Luce factors kept per list: all (``None``), ``min(top_k, n)`` (an int), or the
    number of documents labelled above the list's lowest label (``"labels"``)."""
    sizes = np.diff(offsets)
    if top_k is None:
        return sizes
    if top_k == "labels":
        low = np.repeat(np.minimum.reduceat(y[rows], offsets[:-1]), sizes)
        return np.add.reduceat((y[rows] > low).astype(np.int64), offsets[:-1])
    return np.minimum(sizes, top_k)


SGD_SALT = 0x11


def fit_listwise(est, state, X, y, rows, offsets, task, n_tasks, loss_kind, lam):
    """Run ``est.iterations`` SGD epochs from ``W = 0`` drawing from row 0 of ``state`` (made by
    ``seed_state(est.random_state, n, salt=SGD_SALT)`` before any other draw, so that learners
    with the same seed draw the same numbers); sets ``est.loss_curve_`` (Eq. 10 after each epoch,
    ties in row order) and returns the weights (n_tasks, d): the last or the averaged iterate.
    Raises ``FloatingPointError`` when an epoch leaves the weights or the objective non-finite."""
    W = np.zeros((n_tasks, X.shape[1]))
    W_avg, n_steps = W.copy(), 0
    ranked = _ranked_stable(rows, offsets, y)
    top = top_lengths(y, rows, offsets, getattr(est, "top_k", None)).astype(np.int64)
    lr, alpha = float(est.learning_rate), float(est.regularization)
    curve = []
    threads = check_num_threads(est.num_threads)
    bar = progress(est.show_progress, total=est.iterations, desc=type(est).__name__, unit="epoch")
    with limit_threads(threads), bar:
        for _ in range(est.iterations):
            n_steps = _sgd_epoch(X, y, rows, offsets, task, top, W, W_avg, n_steps, loss_kind, lr, lam, alpha, state)
            value, _ = listwise_objective(
                W_avg if est.average else W, X, y, ranked, offsets, task, top, loss_kind, lam, alpha
            )
            curve.append(value)
            bar.update()
            if not (np.isfinite(value) and np.all(np.isfinite(W))):
                raise FloatingPointError(
                    f"{type(est).__name__} diverged in epoch {len(curve)} (objective {value}, weights not all "
                    f"finite): lower learning_rate={est.learning_rate:g} or {_penalties(est)}"
                )
    est.loss_curve_ = np.array(curve)
    return W_avg if est.average else W


def _penalties(est) -> str:
    return " or ".join(f"{k}={v:g}" for k, v in est.get_params().items() if k.endswith("regularization"))


# ----------------------------------------------------------------------------- feature scaling
def query_level_norm(X, offsets):
    """LETOR's QueryLevelNorm: per query, each feature mapped to ``(x - min) / (max - min)``
    (0 where the feature is constant in the query).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr.listwise import query_level_norm
    >>> query_level_norm(np.array([[1.0, 5.0], [3.0, 5.0], [10.0, 0.0]]), offsets=np.array([0, 2, 3]))
    array([[0., 0.],
           [1., 0.],
           [0., 0.]])
    """
    starts = offsets[:-1]
    lo = np.repeat(np.minimum.reduceat(X, starts, axis=0), np.diff(offsets), axis=0)
    span = np.repeat(np.maximum.reduceat(X, starts, axis=0), np.diff(offsets), axis=0) - lo
    return np.divide(X - lo, span, out=np.zeros_like(X), where=span > 0)


class LinearListwise(Persistable, QueryRanker):
    """Shared parameters, scaling, scoring and persistence (``save(path)`` / ``load(path)``, see
    :class:`~recsys_ltr._io.Persistable`) of the linear listwise learners (see the module
    docstring)."""

    _state_attributes = ("coef_", "feature_mean_", "feature_scale_")

    def __init__(
        self,
        learning_rate=0.001,
        iterations=30,
        regularization=0.0,
        average=True,
        feature_scaling="standard",
        num_threads=1,
        show_progress=None,
        random_state=0,
    ):
        self.learning_rate = learning_rate
        self.iterations = iterations
        self.regularization = regularization
        self.average = average
        self.feature_scaling = feature_scaling
        self.num_threads = num_threads
        self.show_progress = show_progress
        self.random_state = random_state

    def _check_params(self):
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        check_real(self.regularization, "regularization", low=0.0)
        check_positive_int(self.iterations, "iterations", minimum=0)
        check_num_threads(self.num_threads)
        check_random_state(self.random_state)
        progress_enabled(self.show_progress)
        if self.feature_scaling not in _SCALINGS:
            raise ValueError(f"feature_scaling must be one of {_SCALINGS}, got {self.feature_scaling!r}")
        if not isinstance(self.average, (bool, np.bool_)):
            raise TypeError(f"average must be a bool, got {self.average!r}")

    def _coef_shape(self, d):
        return (d,)

    def _load_state(self, state, specs):
        """Cross-check the loaded arrays (float, shapes consistent with the parameters)."""
        super()._load_state(state, specs)
        for name in self._state_attributes:
            if getattr(self, name).dtype.kind != "f":
                raise ValueError(f"{name} must be a float array")
        d = self.feature_mean_.shape[0] if self.feature_mean_.ndim == 1 else 0
        if d == 0 or self.feature_scale_.shape != (d,) or self.coef_.shape != self._coef_shape(d):
            raise ValueError(
                f"inconsistent shapes: coef_ {self.coef_.shape}, feature_mean_ {self.feature_mean_.shape}, "
                f"feature_scale_ {self.feature_scale_.shape}"
            )
        if np.any(self.feature_scale_ <= 0):
            raise ValueError("feature_scale_ must be > 0")
        self.n_features_in_ = d

    def _fit_scaling(self, X, offsets):
        """Scale the training features and remember the standardisation (``feature_mean_``,
        ``feature_scale_``)."""
        if self.feature_scaling == "query":
            X = query_level_norm(X, offsets)
        if self.feature_scaling == "standard":
            self.feature_mean_ = X.mean(axis=0)
            std = X.std(axis=0)
            self.feature_scale_ = np.where(std > 0, std, 1.0)
        else:
            self.feature_mean_, self.feature_scale_ = np.zeros(X.shape[1]), np.ones(X.shape[1])
        return (X - self.feature_mean_) / self.feature_scale_

    def _scaled(self, X, qid):
        X, offsets = self._check_predict_data(X, qid)
        if self.feature_scaling == "query":
            X = query_level_norm(X, offsets)
        return (X - self.feature_mean_) / self.feature_scale_


def _query_rows(offsets, queries):
    """``(rows, list_offsets)`` of the given queries, each query's rows in order."""
    sizes = offsets[queries + 1] - offsets[queries]
    list_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    rows = np.arange(list_offsets[-1]) + np.repeat(offsets[queries] - list_offsets[:-1], sizes)
    return rows.astype(np.int64), list_offsets


class _SingleTask(LinearListwise):
    _loss_kind = LISTMLE

    def fit(self, X, y, qid):
        """Learn ``coef_`` from the informative queries of ``(X, y, qid)``; returns ``self``."""
        self._check_params()
        X, y, offsets, queries = self._check_fit_data(X, y, qid)
        Xs = self._fit_scaling(X, offsets)
        rows, list_offsets = _query_rows(offsets, queries)
        task = np.zeros(queries.size, dtype=np.int64)
        state = seed_state(self.random_state, 1, salt=SGD_SALT)
        self.coef_ = fit_listwise(self, state, Xs, y, rows, list_offsets, task, 1, self._loss_kind, 0.0)[0]
        return self

    def predict(self, X, qid) -> np.ndarray:
        """Linear score ``coef_ · x`` of each (scaled) row; higher = more relevant."""
        return self._scaled(X, qid) @ self.coef_


_DOC = """{name} ({paper}): one linear scorer ``s = coef_ · x`` minimising the {what} summed over
    the training queries (plus ``regularization ||w||²``) by SGD; see :mod:`recsys_ltr.ltr.listwise`.

    Parameters
    ----------
{extra}    learning_rate : float > 0, default=0.001
        Constant SGD step ``η`` (one step per query).
    iterations : int >= 0, default=30
        Passes over the informative training queries (random order each epoch).
    regularization : float >= 0, default=0.0
        L2 penalty ``α ||w||²`` on the scaled features' weights.
    average : bool, default=True
        Return the mean of the SGD iterates (Polyak-Ruppert averaging), which removes most of
        the noise of a constant step, instead of the last iterate.
    feature_scaling : {{"standard", "query", None}}, default="standard"
        "standard": z-scores with the training rows' mean and deviation; "query": LETOR's
        QueryLevelNorm (per-query min-max, :func:`query_level_norm`), at prediction too;
        None: raw features.
    num_threads : int, default=1
        Threads of the objective's kernel and of BLAS (0: all); SGD itself is sequential, so the
        result does not depend on it.
    show_progress : bool or None, default=None
        Progress bar over the epochs (``None``: on when standard error is a terminal).
    random_state : int, Generator or None
        Seed of the query order{ties}.

    Attributes
    ----------
    coef_ : ndarray (d,)  weights of the scaled features
    feature_mean_, feature_scale_ : ndarray (d,)  standardisation of the features
    loss_curve_ : ndarray (iterations,)  training objective after each epoch (not saved)
    n_features_in_ : int

    ``save(path)`` / ``{name}.load(path)`` persist a fitted model (``.npz`` + JSON header).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr import {name}
    >>> from recsys_ltr.query_metrics import ndcg_at_k
    >>> rng = np.random.default_rng(0)
    >>> X, qid = rng.normal(size=(300, 5)), np.repeat(np.arange(30), 10)  # 30 queries of 10 documents
    >>> y = np.digitize(X @ [1.0, 0.5, 0.0, 0.0, 0.0], [0.5, 1.5])  # graded labels 0, 1, 2
    >>> model = {name}(random_state=0).fit(X[:200], y[:200], qid[:200])
    >>> round(float(np.nanmean(ndcg_at_k(y[200:], model.predict(X[200:], qid[200:]), qid[200:], k=5))), 4)
    {ndcg}
    """


_TOP_K_DOC = """    top_k : "labels", int >= 1 or None, default="labels"
        Plackett-Luce factors kept per list (top-k ListMLE, Xia et al. 2009).  "labels": as many
        as the list has documents labelled above its lowest label, since graded labels leave the
        order among the lowest ones unknown (the likelihood of the top part is exact, the rest
        marginalised out); None: the whole derived ordering (wu2016's ListMLE on full orderings).
"""


def check_top_k(top_k):
    """Validate a ``top_k`` parameter (see :class:`ListMLE`)."""
    if top_k is not None and top_k != "labels":
        check_positive_int(top_k, "top_k")


class ListMLE(_SingleTask):
    _loss_kind = LISTMLE
    __doc__ = _DOC.format(
        name="ListMLE",
        paper="Xia et al., 2008",
        what="Plackett-Luce negative log-likelihood of the label orderings",
        ties=" and of the tie-breaks between equal labels",
        extra=_TOP_K_DOC,
        ndcg="1.0",
    )

    def __init__(
        self,
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
        self.top_k = top_k

    def _check_params(self):
        super()._check_params()
        check_top_k(self.top_k)


class ListNet(_SingleTask):
    _loss_kind = LISTNET
    __doc__ = _DOC.format(
        name="ListNet",
        paper="Cao et al., 2007",
        what="cross-entropy of the top-one probabilities of scores and labels",
        ties="",
        extra="",
        ndcg="0.9764",
    )
