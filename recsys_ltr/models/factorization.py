"""Matrix-factorisation anchors wrapping implicit (ALS, BPR) and LightFM (WARP).

All score ``score(u, i) = U_u . V_i`` with dense float64 factors ``user_factors_`` and
``item_factors_``; bias terms are folded into extra factor columns so that the product is the
library's own prediction.  The underlying libraries train in float32 and, with more than one
thread, asynchronously (BPR, LightFM: Hogwild SGD), so only ``num_threads=1`` with a fixed
``random_state`` gives bit-identical factors; ALS is deterministic at any thread count.
"""

from __future__ import annotations

import warnings

import numpy as np
from implicit.cpu.als import AlternatingLeastSquares
from implicit.cpu.bpr import BayesianPersonalizedRanking
from implicit.recommender_base import ModelFitError
from numba import njit, prange

from .._threads import check_num_threads, limit_threads
from .._validation import check_positive_int, check_random_state, check_real
from .base import Recommender

__all__ = ["ALS", "BPR", "RAW_COUNT_MEDIAN", "LightFMWARP"]

#: ``ALS`` warns when the median stored value of ``X`` passes this: ``alpha`` times such values
#: saturates the confidence of the positives.  lastfm-2k's play counts (median 259 in the training part of a 20% holdout) give ``ALS()`` an
#: NDCG@10 of .046 against .245 on the binary matrix; the counts divided by 10 (median 26) .115, by 100
#: (2.6) .204, ``log_weight`` (6.6) .187, ``bm25_weight`` at its defaults (308) .068
#: (``benchmarks/als_counts.py``).
RAW_COUNT_MEDIAN = 10.0


class _Factorization(Recommender):
    """Shared scoring, fold-in hook, ``similar_items`` and state checks of the factor models."""

    item_based = False
    _model_state = ("user_factors_", "item_factors_")
    #: trailing factor columns holding bias terms (left out of ``similar_items``)
    _bias_columns = 0

    @property
    def _n_columns(self):
        """Columns of the fitted factor matrices."""
        return self._param("factors") + self._bias_columns

    def _check_params(self):
        super()._check_params()
        check_random_state(self.random_state)

    def _score_factors(self, rows, ids, recalculate):
        return (self._fold_in(rows) if recalculate else self.user_factors_[ids]), self.item_factors_

    def _score_rows(self, rows, ids, recalculate):
        U, V = self._score_factors(rows, ids, recalculate)
        return U @ V.T

    def _fold_in(self, rows):
        raise ValueError(
            f"{type(self).__name__} cannot score users from user_items (recalculate_user=True): its user "
            "factors are learnt only by fit; refit with the new users' rows"
        )

    def _item_similarity_rows(self, items):
        """Cosine of the item factors (bias columns excluded), implicit's ``similar_items``."""
        return _factor_cosine(self._embedding(self.item_factors_), items)

    def _user_similarity_rows(self, users):
        return _factor_cosine(self._embedding(self.user_factors_), users)

    def _embedding(self, F):
        return F[:, : F.shape[1] - self._bias_columns]

    def _check_state(self):
        d = self._n_columns
        self._check_dense_state({"user_factors_": (self.n_users_, d), "item_factors_": (self.n_items_, d)})

    def _store(self, user_factors, item_factors):
        for factors in (user_factors, item_factors):
            if not np.all(np.isfinite(factors)):
                raise FloatingPointError(
                    f"{type(self).__name__} diverged: non-finite factors (lower the learning rate?)"
                )
        self.user_factors_ = np.ascontiguousarray(user_factors, dtype=np.float64)
        self.item_factors_ = np.ascontiguousarray(item_factors, dtype=np.float64)


class _Implicit(_Factorization):
    """Fitting through an implicit model, with the BLAS pool limited to one thread as implicit advises."""

    def _check_params(self):
        super()._check_params()
        check_positive_int(self.factors, "factors")
        check_real(self.regularization, "regularization", low=0.0)
        check_positive_int(self.iterations, "iterations")

    def _fit(self, X):
        with limit_threads(self.num_threads, blas=1):  # also silences implicit's OpenBLAS warning
            model = self._implicit_model(
                factors=self.factors,
                regularization=float(self.regularization),
                iterations=self.iterations,
                num_threads=check_num_threads(self.num_threads),
                random_state=check_random_state(self.random_state),
            )
            try:
                model.fit(X.astype(np.float32), show_progress=self._progress())
            except ModelFitError as exc:  # implicit's NaN check (e.g. a confidence alpha too large for float32)
                raise FloatingPointError(f"{type(self).__name__} diverged: {exc}{self._divergence_hint(X)}") from None
        self._store(model.user_factors, model.item_factors)

    def _implicit_model(self, **common):
        """The unfitted implicit model built from the ``common`` and the class's own parameters."""
        raise NotImplementedError

    def _divergence_hint(self, X) -> str:
        """What a divergence message adds about the data (e.g. ALS's largest confidence)."""
        return ""


class ALS(_Implicit):
    """WRMF (Hu, Koren & Volinsky 2008) by implicit's conjugate-gradient ALS.

    implicit 0.7 minimises ``sum_ui c_ui (p_ui - U_u . V_i)^2 + regularization (||U||^2 + ||V||^2)``
    with ``p_ui = 1`` and confidence ``c_ui = alpha r_ui`` on the positives and ``c_ui = 1``,
    ``p_ui = 0`` elsewhere: implicit scales the feedback ``r`` by ``alpha``, so Hu et al.'s
    confidence ``1 + a r`` of a binary positive is ``alpha = 1 + a`` here (``alpha = 1`` weighs
    positives like negatives).  ALS reads weights (``uses_weights``): ``r_ui`` is the stored value
    (1 for binary input; counts, or :func:`recsys_ltr.weighting.bm25_weight` /
    :func:`~recsys_ltr.weighting.log_weight` of counts, as implicit's users weigh them).

    ``recommend(..., user_items=R, recalculate_user=True)`` folds users in by the closed-form least
    squares given ``V`` (implicit's ``recalculate_user``, in float64)::

        U_u = (V^T V + V_P^T (C_u - I) V_P + regularization I)^{-1} V_P^T C_u 1

    where ``V_P`` holds the factors of the user's items and ``C_u`` their confidences
    ``alpha r_ui`` (a user without items gets ``U_u = 0``).

    A fit warns when the median stored value of ``X`` passes :data:`~recsys_ltr.models.factorization.RAW_COUNT_MEDIAN` (raw counts:
    their confidences saturate; ``bm25_weight`` at its defaults does too, ``log_weight`` does not).

    The defaults are not implicit's (``regularization=0.01, alpha=1``: no extra confidence on
    positives), which rank worse than popularity on some sets: ``regularization=100, alpha=20``
    was the best single setting over the validation ADG of five data sets
    (``benchmarks/defaults_als_bpr.py``; test ADG 0.2583 against 0.2153 on movielens-100k).

    Parameters
    ----------
    factors : int
        Dimension of the factors.
    regularization : float >= 0
        L2 penalty (implicit's: not scaled by the number of interactions).
    alpha : float > 0
        Confidence of the positives.
    iterations : int
        ALS sweeps.
    random_state : None, int or numpy.random.Generator
        Seed of the initial factors.
    num_threads : int
        Threads of implicit and of the fold-in kernel (0 = all).
    show_progress : bool or None
        implicit's progress bar over iterations (``None``: on when standard error is a terminal).

    Attributes
    ----------
    user_factors_, item_factors_ : ndarray of shape (n_users, factors), (n_items, factors)

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> from recsys_ltr.models import ALS
    >>> model = ALS(factors=16, iterations=5, random_state=0).fit(X)
    >>> model.user_factors_.shape, model.item_factors_.shape
    ((200, 16), (100, 16))
    >>> ids, scores = model.recommend(0, N=3)
    >>> ids.shape, bool(scores[0] >= scores[-1])
    ((3,), True)
    """

    _log_fit = True  # start and end of each fit logged at INFO (size, setting, seconds)
    uses_weights = True

    def __init__(
        self,
        factors=64,
        regularization=100.0,
        alpha=20.0,
        iterations=15,
        random_state=0,
        num_threads=0,
        show_progress=None,
    ):
        self.factors = factors
        self.regularization = regularization
        self.alpha = alpha
        self.iterations = iterations
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_params(self):
        super()._check_params()
        check_real(self.alpha, "alpha", low=0.0, low_open=True)

    def _fit(self, X):
        median = float(np.median(X.data)) if X.nnz else 1.0
        if median > RAW_COUNT_MEDIAN:
            warnings.warn(
                f"ALS reads X's values as confidences (alpha={self.alpha:g} times each) and their median is "
                f"{median:g}: raw counts this large saturate them (lastfm-2k's play counts: NDCG@10 .05 against "
                ".24 on the binary matrix).  Fit on X.sign(), or on recsys_ltr.weighting.log_weight(X) with a "
                "lower alpha",
                UserWarning,
                stacklevel=4,
            )
        super()._fit(X)

    def _implicit_model(self, **common):
        return AlternatingLeastSquares(alpha=float(self.alpha), **common)

    def _divergence_hint(self, X) -> str:
        top = float(self.alpha) * X.data.max()
        return f" (the largest confidence alpha * weight is {top:.3g}: implicit trains in float32; rescale the weights)"

    def _prepare(self):
        super()._prepare()
        self.gram_ = self.item_factors_.T @ self.item_factors_

    def _fold_in(self, rows):
        return _fold_in(rows, self.item_factors_, self.gram_, self._param("regularization"), self._param("alpha"))

    def _fold_in_items(self, cols):
        """The fold-in with users and items swapped: item factors from their user columns."""
        U = self.user_factors_
        return _fold_in(cols, U, U.T @ U, self._param("regularization"), self._param("alpha"))

    def _recalculated_item_rows(self, cols):
        """Cosine of the items folded in from their users."""
        return _unit_rows(self._fold_in_items(cols)) @ _unit_rows(self.item_factors_).T

    def _users_state(self, ids, rows, grown):
        """implicit's ``partial_fit_users``: the users folded in, the item factors kept."""
        return {"user_factors_": _set_rows(self.user_factors_, ids, self._fold_in(rows), grown.shape[0])}

    def _items_state(self, ids, cols, grown):
        """implicit's ``partial_fit_items``: the items folded in, the user factors kept."""
        return {"item_factors_": _set_rows(self.item_factors_, ids, self._fold_in_items(cols), grown.shape[1])}


def _set_rows(F, ids, values, n):
    """A copy of the factors ``F`` grown to ``n`` rows, rows ``ids`` set to ``values``."""
    out = np.zeros((n, F.shape[1]))
    out[: F.shape[0]] = F
    out[ids] = values
    return out


def _fold_in(rows, V, gram, regularization, alpha):
    out = np.zeros((rows.shape[0], V.shape[1]))
    _als_fold_in(rows.indptr, rows.indices, rows.data, V, gram, float(regularization), float(alpha), out)
    return out


def _unit_rows(E):
    norms = np.linalg.norm(E, axis=1)
    return E / np.where(norms > 0, norms, 1.0)[:, None]


def _factor_cosine(E, ids):
    E = _unit_rows(E)
    return E[ids] @ E.T


@njit(parallel=True, cache=True)
def _als_fold_in(indptr, indices, data, V, gram, regularization, alpha, out):
    f = V.shape[1]
    for r in prange(indptr.shape[0] - 1):
        if indptr[r] == indptr[r + 1]:
            continue
        A = gram + regularization * np.eye(f)
        b = np.zeros(f)
        for p in range(indptr[r], indptr[r + 1]):
            j = indices[p]
            conf = alpha * data[p]  # the positive's confidence
            w = conf - 1.0  # its extra confidence; 0 for a binary positive when alpha = 1
            for a in range(f):
                b[a] += conf * V[j, a]
                if w != 0.0:
                    wa = w * V[j, a]
                    for c in range(f):
                        A[a, c] += wa * V[j, c]
        out[r] = np.linalg.solve(A, b)


class BPR(_Implicit):
    """BPR-MF (Rendle et al., 2009) by implicit's Hogwild SGD.

    implicit learns an item bias as an extra factor column (the user's entry is fixed at 1), so
    the fitted matrices have ``factors + 1`` columns and ``U V^T`` includes the bias.  Users are
    learnt only by ``fit``: ``recalculate_user=True`` raises.

    Parameters
    ----------
    factors : int
        Dimension of the factors (without the bias column).
    learning_rate : float > 0
        SGD step.
    regularization : float >= 0
        L2 penalty (the same for users, items and biases).
    iterations : int
        Epochs.
    random_state : None, int or numpy.random.Generator
        Seed of the initial factors and of the sampler.
    num_threads : int
        implicit's threads (0 = all); only ``num_threads=1`` is reproducible.
    show_progress : bool or None
        implicit's progress bar over iterations (``None``: on when standard error is a terminal).

    Attributes
    ----------
    user_factors_, item_factors_ : ndarray of shape (n_users, factors + 1), (n_items, factors + 1)

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> from recsys_ltr.models import BPR
    >>> model = BPR(factors=16, iterations=5, random_state=0, num_threads=1).fit(X)
    >>> model.item_factors_.shape  # 16 factors and the item bias
    (100, 17)
    """

    _log_fit = True  # start and end of each fit logged at INFO (size, setting, seconds)

    _bias_columns = 1

    def __init__(
        self,
        factors=64,
        learning_rate=0.01,
        regularization=0.01,
        iterations=100,
        random_state=0,
        num_threads=0,
        show_progress=None,
    ):
        self.factors = factors
        self.learning_rate = learning_rate
        self.regularization = regularization
        self.iterations = iterations
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_params(self):
        super()._check_params()
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)

    def _implicit_model(self, **common):
        return BayesianPersonalizedRanking(learning_rate=float(self.learning_rate), **common)


class LightFMWARP(_Factorization):
    """LightFM (Kula 2015) with the WARP loss and identity features (a pure collaborative model).

    LightFM predicts ``user_bias + item_bias + user_embedding . item_embedding``; the fitted
    matrices hold ``[user_embedding, user_bias, 1]`` and ``[item_embedding, 1, item_bias]``
    (``factors + 2`` columns), so ``U V^T`` is LightFM's ``predict``.  ``lightfm`` is an
    optional dependency (``pip install "recsys-ltr[lightfm]"``, which installs ``rectools-lightfm``),
    imported by ``fit``.  Users are learnt only by ``fit``: ``recalculate_user=True`` raises.

    Parameters
    ----------
    factors : int
        Dimension of the embeddings.
    learning_rate : float > 0
        Initial AdaGrad step.
    max_sampled : int
        WARP's maximum number of negatives sampled per positive.
    iterations : int
        Passes over the interactions.
    regularization : float >= 0
        L2 penalty of the item and of the user features (LightFM's ``item_alpha`` and ``user_alpha``).
    random_state : None, int or numpy.random.Generator
        Seed of the initial embeddings and of the sampler.
    num_threads : int
        LightFM's threads (0 = all); only ``num_threads=1`` is reproducible.
    show_progress : bool or None
        LightFM's verbose epoch progress (``None``: on when standard error is a terminal).

    Attributes
    ----------
    user_factors_, item_factors_ : ndarray of shape (n_users, factors + 2), (n_items, factors + 2)

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> from recsys_ltr.models import LightFMWARP
    >>> model = LightFMWARP(factors=16, iterations=5, random_state=0).fit(X)  # doctest: +SKIP
    >>> model.recommend(0, N=3)[0].shape  # doctest: +SKIP
    (3,)
    """

    _bias_columns = 2

    def __init__(
        self,
        factors=64,
        learning_rate=0.05,
        max_sampled=10,
        iterations=30,
        regularization=0.0,
        random_state=0,
        num_threads=0,
        show_progress=None,
    ):
        self.factors = factors
        self.learning_rate = learning_rate
        self.max_sampled = max_sampled
        self.iterations = iterations
        self.regularization = regularization
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_params(self):
        super()._check_params()
        check_positive_int(self.factors, "factors")
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        check_positive_int(self.max_sampled, "max_sampled")
        check_positive_int(self.iterations, "iterations")
        check_real(self.regularization, "regularization", low=0.0)

    def _fit(self, X):
        try:
            from lightfm import LightFM  # the optional extra recsys-ltr[lightfm]
        except ImportError as exc:
            raise ImportError(
                'LightFMWARP needs the optional lightfm module: pip install "recsys-ltr[lightfm]" '
                "(or pip install rectools-lightfm)"
            ) from exc
        seed = int(check_random_state(self.random_state).integers(2**31 - 1))
        model = LightFM(
            no_components=self.factors,
            loss="warp",
            learning_rate=float(self.learning_rate),
            max_sampled=self.max_sampled,
            item_alpha=float(self.regularization),
            user_alpha=float(self.regularization),
            random_state=np.random.RandomState(seed),
        )
        model.fit(
            X.tocoo(), epochs=self.iterations, num_threads=check_num_threads(self.num_threads), verbose=self._progress()
        )
        user_bias, user_emb = model.get_user_representations()
        item_bias, item_emb = model.get_item_representations()
        ones_u, ones_i = np.ones((X.shape[0], 1)), np.ones((X.shape[1], 1))
        self._store(
            np.hstack([user_emb, user_bias[:, None], ones_u]), np.hstack([item_emb, ones_i, item_bias[:, None]])
        )
