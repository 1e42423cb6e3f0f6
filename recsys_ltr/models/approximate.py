"""Approximate top-N of the factor models: candidates from a faiss inverted-file index, ranked exactly.

:class:`ApproximateTopN` serves a fitted :class:`~recsys_ltr.models.ALS`, :class:`~recsys_ltr.models.BPR`
or :class:`~recsys_ltr.models.LightFMWARP` as implicit's ANN models serve theirs: the items' factors
are clustered into ``nlist`` cells by k-means on their inner product (faiss's ``IndexIVFFlat`` with
``METRIC_INNER_PRODUCT``), and a user's query scans the ``nprobe`` cells whose centroids score
highest.  Each user asks for ``N`` plus the items it must not be given (its liked items and
``filter_items``), rounded up to a power of two, so that filtering never starves the answer; the
candidates are then scored in float64 and ranked by the model's own rule (score, then training
popularity, then smaller id), and a user left with fewer than ``N`` candidates -- or whose request is
a large part of the catalogue (``items=`` a few ids) -- is ranked exactly.  With ``nprobe >= nlist``
every item is scanned and the answers equal the model's ``recommend`` (a test checks it).

The index is built from the model's item factors in the constructor (not saved: a model file
loaded with ``ALS.load`` is served by ``ApproximateTopN(model)`` again; faiss's k-means is seeded,
so the index is the same).  faiss is an optional dependency: ``pip install "recsys-ltr[ann]"``
(``faiss-cpu``), imported by the constructor.

Measured on gowalla's ALS factors (``benchmarks/ann_topn.py``), every user's top 20 with their
liked items filtered: see the table in ``docs/in_practice.rst``.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from .._memory import rows_per_block
from .._threads import check_num_threads, numba_threads
from .._topk import top_k_candidates
from .._validation import check_positive_int
from .factorization import _Factorization
from .ranking import ID_DTYPE, Factors, top_n, unpad

__all__ = ["ApproximateTopN"]

#: a user whose request passes this share of the catalogue is ranked exactly
_EXACT_SHARE = 1 / 8


class ApproximateTopN:
    """implicit's ``recommend`` of a fitted factor model by a faiss IVF index (module docstring).

    Parameters
    ----------
    model : fitted ALS, BPR or LightFMWARP
        The model served (its factors are read, not copied; refit it, then build a new index).
    nlist : int or None
        k-means cells of the items (``None``: ``2.5 sqrt(n_items)``, 506 for gowalla's 40,981 items:
        with ``nprobe=40`` a recall of .964 where faiss's ``4 sqrt(n_items)`` gives .934), at most
        ``n_items // 39`` so that every cell trains on 39 items.
    nprobe : int
        Cells scanned per query: more is slower and closer to exact.
    num_threads : int
        faiss's and numba's threads (0 = all).

    Attributes
    ----------
    nlist_ : int
        The cells of the index.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.models import ALS
    >>> from recsys_ltr.models.approximate import ApproximateTopN
    >>> X = make_synthetic(n_users=300, n_items=400, density=0.05, random_state=0).matrix
    >>> model = ALS(factors=16, iterations=5).fit(X)
    >>> served = ApproximateTopN(model, nprobe=4)  # doctest: +SKIP
    >>> ids, scores = served.recommend([0, 1, 2], N=5)  # doctest: +SKIP
    >>> ids.shape  # doctest: +SKIP
    (3, 5)
    """

    def __init__(self, model, nlist=None, nprobe=40, num_threads=0):
        if not isinstance(model, _Factorization):
            raise TypeError(f"model must be a fitted ALS, BPR or LightFMWARP, got {type(model).__name__}")
        model._check_fitted()
        try:
            import faiss  # the optional extra recsys-ltr[ann]
        except ImportError as exc:
            raise ImportError('ApproximateTopN needs faiss: pip install "recsys-ltr[ann]" (or faiss-cpu)') from exc
        limit = max(1, model.n_items_ // 39)
        default = min(limit, max(1, round(2.5 * np.sqrt(model.n_items_))))
        self.nlist_ = default if nlist is None else check_positive_int(nlist, "nlist", maximum=limit)
        self.nprobe = check_positive_int(nprobe, "nprobe")
        self.num_threads = check_positive_int(num_threads, "num_threads", minimum=0)
        self.model = model
        V = np.ascontiguousarray(model.item_factors_, dtype=np.float32)
        self._faiss = faiss
        with self._threads():
            quantizer = faiss.IndexFlatIP(V.shape[1])
            self._index = faiss.IndexIVFFlat(quantizer, V.shape[1], self.nlist_, faiss.METRIC_INNER_PRODUCT)
            self._index.train(V)
            self._index.add(V)
        self._index.nprobe = min(self.nprobe, self.nlist_)

    @contextmanager
    def _threads(self):
        """faiss's OpenMP pool held to ``num_threads`` (it is process-wide: restored after)."""
        faiss, previous = self._faiss, self._faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(check_num_threads(self.num_threads))
        try:
            yield
        finally:
            faiss.omp_set_num_threads(previous)

    def recommend(
        self,
        userid,
        user_items=None,
        N=10,
        filter_already_liked_items=True,
        filter_items=None,
        recalculate_user=False,
        items=None,
    ):
        """The model's :meth:`~recsys_ltr.models.Recommender.recommend`, approximately: the same
        arguments, checks and answers (``(ids, scores)``, 1-D for a scalar ``userid``, padded with
        ``-1`` / ``-inf``), the candidates from the index."""
        model = self.model
        rows, ids, liked, excluded, n_out = model._recommend_inputs(
            userid, user_items, N, filter_already_liked_items, filter_items, recalculate_user, items
        )
        with numba_threads(self.num_threads), self._threads():
            U = model._score_factors(rows, ids, recalculate_user)[0]
            found = self._top_n(np.ascontiguousarray(U), liked, excluded, n_out)
        return unpad(*found) if np.ndim(userid) == 0 else found

    def _top_n(self, U, liked, excluded, n_out):
        """Each user's best ``n_out`` items among the index's candidates, ranked exactly where they fall short."""
        model, n_items = self.model, self.model.n_items_
        V, popularity = model.item_factors_, model.item_popularity_
        out_ids = np.full((U.shape[0], n_out), -1, np.int64)
        out_scores = np.full((U.shape[0], n_out), -np.inf)
        wanted = n_out + np.diff(liked.indptr) + int(np.count_nonzero(excluded))
        request = np.maximum(32, 2 ** np.ceil(np.log2(np.maximum(wanted, 1))).astype(np.int64))
        exact = request > _EXACT_SHARE * n_items
        for k in np.unique(request[~exact]):
            step = rows_per_block(int(k) * V.shape[1] * 8)  # the candidates' factors of a block of users
            group = np.flatnonzero((request == k) & ~exact)
            for lo in range(0, group.size, step):
                users = group[lo : lo + step]
                candidates = self._index.search(U[users].astype(np.float32), int(k))[1]
                part, ids, scores = liked[users], out_ids[users], out_scores[users]
                top_k_candidates(U[users], V, candidates, popularity, part.indptr, part.indices, excluded, ids, scores)
                out_ids[users], out_scores[users] = ids, scores
                exact[users[ids[:, -1] < 0]] = True  # fewer than n_out candidates left
        if exact.any():
            users = np.flatnonzero(exact)
            found = top_n(Factors(U[users], V), popularity, liked[users], excluded, n_out, self.num_threads)
            out_ids[users], out_scores[users] = found
        return out_ids.astype(ID_DTYPE), out_scores
