"""Top-N evaluation from held-out positives: the UMD measures (ADG, ATOP, Recall@k) and the usual
ranking metrics (dissertation sec. 4.4, Eq. 4.1-4.2).

Protocol
--------
For user ``u`` the **candidates** are all items that are neither among ``u``'s training positives
nor in ``u``'s row of ``exclude`` (the validation positives at test time).  Candidates are ordered
by score descending; ties are broken by the item's popularity in ``train`` (descending), then by
item id (ascending), so the order is total and every number below is exact.
``rank(i)`` is the number of candidates preceding ``i`` (0-based, Definition 4.1: the top item has
rank 0).  Over the user's test items ``R`` (``m = |R|``), among ``N`` candidates:

=========  =================================================================================
ADG        mean over ``R`` of ``1 / log2(rank + 2)`` -- Average Discounted Gain (Eq. 4.1).
ATOP       mean over ``R`` of ``1 - rank / (N - 1)`` (1 when ``N == 1``); higher is better.
REC@k      mean over ``R`` of ``[rank < k]`` (Recall at k).
MAP        average precision over the full candidate list: mean over the sorted relevant
           ranks ``r_1 < ... < r_m`` of ``j / (r_j + 1)``.
NDCG       ``sum_R 1/log2(rank + 2)`` divided by the ideal ``sum_{j<m} 1/log2(j + 2)``
           (binary gain, full list; graded NDCG@k of query-document ranking is
           :func:`recsys_ltr.query_metrics.ndcg_at_k`).
P@k        hits among the top ``k`` candidates divided by ``k``.
NDCG@k     ``sum`` over the hits among the top ``k`` of ``1/log2(rank + 2)``, divided by the ideal
           ``sum_{j < min(m, k)} 1/log2(j + 2)`` (binary gain: implicit's ``ranking_metrics_at_k``
           and LightGCN's NDCG@20).
MAP@k      ``sum`` over the hits ``r_1 < ... < r_h`` among the top ``k`` of ``j / (r_j + 1)``,
           divided by ``min(m, k)`` (implicit's MAP@K).
REC@k      as above: hits among the top ``k`` divided by ``m`` (LightGCN's and RecBole's Recall@k).
HR@k       1 when the top ``k`` hold a test item (hit rate).
AUC        fraction of (relevant, irrelevant candidate) pairs in the right order (1 when every
           candidate is relevant).
MRR        ``1 / (min rank + 1)``.
=========  =================================================================================

ADG, ATOP and REC@k share the form ``mean_{i in R} g(rank(i))`` (Eq. 4.2): under the missing-data
model where observed positives are a simple random sample of the relevant set, their observed
value is unbiased for the complete one (Theorem 4.1); NDCG is not unless nothing is missing
(Theorem 4.2).  Means are taken over users with at least one test item; per-user values are kept
for standard errors and paired tests.

Speed: the candidate list is never sorted.  A numba kernel, parallel over users, counts how many
candidates precede each test item: for users with few test items, one vectorised pass per test
item minus the preceding non-candidates; for users with many, one binary-search pass over the
catalogue against their sorted test items that skips the non-candidates, O(n_items log m)
(:mod:`recsys_ltr._ranking`).  Scores are requested in
bounded user batches, which can run as tasks of an executor -- local processes or Ray
(:mod:`recsys_ltr.executors`) -- with the same per-user values, bit for bit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from recsys_ltr import _ranking
from recsys_ltr._memory import TASK_BYTES, rows_per_block
from recsys_ltr._parallel import product_work, strided_chunks
from recsys_ltr._progress import progress, progress_enabled
from recsys_ltr._ranking import (
    BASE_METRICS,
    CUTOFF_METRICS,
    evaluate_block,
    evaluate_product_block,
    metrics_from_ranks,
    rank_block,
)
from recsys_ltr._threads import numba_threads
from recsys_ltr._validation import (
    INDEX_DTYPE,
    check_bool,
    check_dense,
    check_feedback,
    check_ids,
    check_positive_int,
    check_same_shape,
    check_scores,
)
from recsys_ltr.executors import check_executor, executor_scope

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "EvaluationResult",
    "evaluate",
    "evaluate_trusted",
    "metric_name",
    "rank_test_items",
    "ranked_last",
    "retrieval_metrics",
    "squared_distances",
]

#: Metric names accepted by :func:`evaluate` (any case; ``Recall`` is ``REC``, ``Precision`` is ``P``).
#: ``REC``, ``P`` and ``HR`` take a cutoff (``"REC@20"``, or the ``k`` argument when written bare);
#: ``NDCG`` and ``MAP`` are over the full candidate list, and ``NDCG@k`` / ``MAP@k`` over the top ``k``.
#: Result keys are the names as asked (``"Recall@20"``; a bare cutoff metric with its ``@k``), and
#: the canonical name (``"REC@20"``) reads the same value.
METRICS = ("ADG", "ATOP", "REC", "MAP", "NDCG", "P", "AUC", "MRR", "HR")
#: What ``metrics=None`` computes.
DEFAULT_METRICS = ("ADG", "ATOP", "REC", "MAP", "NDCG", "P", "AUC", "MRR")
_BARE_CUTOFF = ("REC", "P", "HR")  # a bare name takes the cutoff ``k``
_SYNONYMS = {"RECALL": "REC", "PRECISION": "P"}  # as LightGCN, RecBole and RecTools write them


class _Named(dict):
    """A dict keyed by the names a caller asked for that also answers the canonical names."""

    def __init__(self, items, canonical: dict):
        super().__init__(items)
        self._canonical = canonical  # canonical name -> the key asked

    def __missing__(self, name):
        if name in self._canonical:
            return self[self._canonical[name]]
        raise KeyError(f"{name!r} was not computed; available: {', '.join(self)}")


class EvaluationResult(Mapping):
    """Mean of each metric over the evaluated users, as a read-only mapping name -> float.

    Attributes
    ----------
    users : int64 array
        Ids of the evaluated users (ascending; each has at least one test item).
    per_user : dict of str -> float64 array
        Per-user values of each metric, aligned with ``users``.
    stderr : dict of str -> float
        Standard error of each mean (sample standard deviation / sqrt(n); NaN for one user).
    k : int
        The default cutoff used for bare ``REC``/``P``.

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.metrics import evaluate
    >>> from recsys_ltr.models import Popularity
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> train, val, test = split.holdout(X, val=0.1, test=0.2, random_state=0)
    >>> result = evaluate(Popularity().fit(train), train, test, exclude=val, metrics=["ADG", "REC@5"])
    >>> list(result), result.users.size == result.per_user["ADG"].size
    (['ADG', 'REC@5'], True)
    """

    def __init__(self, per_user: dict[str, np.ndarray], users: np.ndarray, k: int, canonical=None):
        canonical = {} if canonical is None else canonical  # canonical name -> the key asked
        self.per_user = _Named(per_user, canonical)
        self.users = users
        self.k = k
        n = len(users)
        self._means = _Named({name: float(v.mean()) for name, v in per_user.items()}, canonical)
        self.stderr = _Named(
            {name: float(v.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan") for name, v in per_user.items()},
            canonical,
        )

    def __getitem__(self, name: str) -> float:
        return self._means[name]  # asked or canonical names (Mapping's `in` follows)

    def __iter__(self):
        return iter(self._means)

    def __len__(self) -> int:
        return len(self._means)

    def __repr__(self) -> str:
        width = max(map(len, self._means), default=0)
        rows = [f"  {name:<{width}}  {mean:.4f} ± {self.stderr[name]:.4f}" for name, mean in self._means.items()]
        return f"EvaluationResult(n_users={len(self.users)}, k={self.k})\n" + "\n".join(rows)

    def to_dict(self) -> dict:
        """JSON-serialisable summary: means, standard errors, number of users and k."""
        return {"means": dict(self._means), "stderr": dict(self.stderr), "n_users": len(self.users), "k": self.k}


def evaluate(
    model_or_score_fn,
    train,
    test,
    exclude=None,
    metrics=None,
    k=10,
    batch_size=None,
    users=None,
    num_threads=0,
    show_progress=None,
    executor=None,
    blocks_per_task=1,
) -> EvaluationResult:
    """Evaluate a scorer on held-out positives (see the module docstring for the definitions).

    Parameters
    ----------
    model_or_score_fn : object with ``score(user_ids)``, or callable
        Maps an int64 array of user ids to a dense ``(len(user_ids), n_items)`` score array
        (higher = better; ``-inf`` allowed, NaN is an error).  An object that also has
        ``score_product(user_ids)`` -- ``(R, B)``, CSR, with ``R @ B`` equal to its scores and ``B``
        non-negative, or ``None`` -- is ranked from that product without dense rows (every
        neighbourhood :class:`~recsys_ltr.models.Recommender` has it).
    train, test : feedback matrices (users x items)
        Training positives (define the candidates and the popularity tie-break) and held-out
        positives.  ``test`` must be disjoint from ``train`` and ``exclude``: a test item that is
        not a candidate has no rank, so an overlap raises ``ValueError`` (holdout splits are
        disjoint by construction).
    exclude : feedback matrix, optional
        More items removed from each user's candidates (e.g. validation positives); it may
        overlap ``train`` (an item in both is simply not a candidate).
    metrics : iterable of str, optional
        Subset of :data:`METRICS` (``"REC@20"``-style cutoffs allowed); ``None`` means all.
    k : int
        Cutoff of bare ``REC`` and ``P``; must not exceed the number of items when one of
        them is requested (a larger ``k`` raises rather than being clamped).
    batch_size : int, optional
        Users scored per block; default keeps the float64 block under :data:`recsys_ltr._memory.TASK_BYTES`
        (a task's memory is bounded by one block).
    users : array of int, optional
        Restrict the evaluation to these users (those without test items are skipped).
    num_threads : int
        Numba threads (0: all, or a worker task's share).  Results do not depend on it.
    show_progress : bool or None
        Progress bar over blocks (``None``: on when standard error is a terminal).
    executor : Executor or {"serial", "processes", "ray"}, optional
        Where the blocks are scored and ranked (:mod:`recsys_ltr.executors`; default in this
        process).  The scorer is shipped once; each task carries one block of users with their
        train, test and exclude rows, and only its rows of the metric table come back.  Every
        per-user value is the same, bit for bit, on every executor.  The arguments are checked
        before any task starts.
    blocks_per_task : int
        Consecutive blocks of ``batch_size`` users evaluated by one task, one after the other:
        fewer, longer tasks for the same memory per task (on a large catalogue a block holds
        few users, and per-task costs would dominate).

    Returns
    -------
    EvaluationResult
        Mapping from metric name (``"ADG"``, ``"ATOP"``, ``"REC@10"``, ``"MAP"``, ``"NDCG"``,
        ``"P@10"``, ``"AUC"``, ``"MRR"``) to its mean over users, with ``per_user``,
        ``users`` and ``stderr``.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        For a model that is not fitted.
    ValueError
        On shape mismatches, overlapping test/train or test/exclude, an unknown metric, ``k``
        larger than the catalogue, users out of range, no user with a test item to evaluate,
        or a score block of the wrong shape or with NaN scores.

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.metrics import evaluate
    >>> from recsys_ltr.models import RP3beta
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> train, val, test = split.holdout(X, val=0.1, test=0.2, random_state=0)
    >>> result = evaluate(RP3beta(k=20).fit(train), train, test, exclude=val)
    >>> round(result["ADG"], 4), round(result.stderr["ADG"], 4), len(result.users)
    (0.3804, 0.0118, 300)

    A score function works too: here uniform scores, ranked by the popularity tie-break.

    >>> import numpy as np
    >>> popular = evaluate(lambda users: np.zeros((len(users), X.shape[1])), train, test, metrics=["ADG"])
    >>> round(popular["ADG"], 4)
    0.301
    """
    _score_function(model_or_score_fn)
    progress_enabled(show_progress)
    train, test, exclude = _check_matrices(train, test, exclude)
    return evaluate_trusted(
        model_or_score_fn,
        train,
        test,
        exclude,
        metrics,
        k=k,
        batch_size=batch_size,
        users=users,
        num_threads=num_threads,
        show_progress=show_progress,
        executor=executor,
        blocks_per_task=blocks_per_task,
    )


def evaluate_trusted(
    scorer,
    train,
    test,
    exclude,
    metrics=None,
    k=10,
    batch_size=None,
    users=None,
    num_threads=0,
    show_progress=False,
    executor=None,
    blocks_per_task=1,
) -> EvaluationResult:
    """:func:`evaluate` of canonical, disjoint ``train``/``test`` (and ``exclude`` or ``None``): the
    matrices are trusted, not checked again (for estimators evaluating themselves repeatedly, such as
    early stopping)."""
    if exclude is None:
        exclude = _empty_like(train)
    n_items = train.shape[1]
    names, cutoffs, asked = _parse_metrics(metrics, k, n_items)
    eval_users = _users_to_evaluate(test, users)
    if batch_size is None:
        batch_size = rows_per_block(8 * n_items, TASK_BYTES)
    batch_size = check_positive_int(batch_size, "batch_size")
    task_size = batch_size * check_positive_int(blocks_per_task, "blocks_per_task")
    check_executor(executor)
    tiebreak = _tiebreak(np.bincount(train.indices, minlength=n_items))
    columns = list(BASE_METRICS) + [f"{m}@{c}" for c in cutoffs for m in CUTOFF_METRICS]

    table = np.empty((len(eval_users), len(columns)))
    starts = range(0, len(eval_users), task_size)
    # a task carries its users' rows; the scorer and what every block reads are shipped once
    blocks = (_user_rows(eval_users[s : s + task_size], train, test, exclude) for s in starts)
    n_blocks = -(-len(eval_users) // batch_size)
    shared = _EvaluationInputs(
        _score_function(scorer),
        getattr(scorer, "score_product", None),
        tiebreak,
        cutoffs,
        num_threads,
        batch_size,
        n_blocks,
    )
    bar = progress(show_progress, total=len(starts), desc="evaluate", unit="task")
    with executor_scope(executor) as ex, bar:
        for position, rows in ex.map(_evaluate_users, blocks, shared):
            table[starts[position] : starts[position] + len(rows)] = rows
            bar.update()
    per_user = {key: np.ascontiguousarray(table[:, columns.index(name)]) for name, key in zip(names, asked)}
    return EvaluationResult(per_user, eval_users, int(k), dict(zip(names, asked)))


@dataclass(frozen=True)
class _EvaluationInputs:
    """What every block of :func:`evaluate_trusted` reads: shipped once to the workers."""

    score_fn: object
    product_fn: object  # the model's sparse factorisation of its scores, or None
    tiebreak: np.ndarray
    cutoffs: np.ndarray
    num_threads: int
    batch_size: int
    n_blocks: int  # of the whole evaluation: a kernel runs serially only if all of them are small


def _user_rows(users, *matrices) -> tuple:
    """Users with their rows of each matrix (one evaluation task)."""
    return (users, *(X[users] for X in matrices))


def _evaluate_users(inputs: _EvaluationInputs, task: tuple) -> np.ndarray:
    """Metric table rows of one task's users, given with their train, test and exclude rows, in
    blocks of ``batch_size`` users."""
    users, *rows = task
    out = np.empty((users.size, len(BASE_METRICS) + len(CUTOFF_METRICS) * inputs.cutoffs.size))
    with numba_threads(inputs.num_threads):
        for lo in range(0, users.size, inputs.batch_size):
            block = slice(lo, lo + inputs.batch_size)
            product = None if inputs.product_fn is None else inputs.product_fn(users[block])
            if product is not None:
                out[block] = _evaluate_product(product, inputs, *(X[block] for X in rows))
                continue
            scores = _score_block(inputs.score_fn, users[block], rows[0].shape[1])
            args = _kernel_args(scores, inputs.tiebreak, *(X[block] for X in rows))
            out[block], nan_rows = evaluate_block(*args, inputs.cutoffs)
            _check_nan(nan_rows)
    return out


def _evaluate_product(product, inputs: _EvaluationInputs, train, test, exclude) -> np.ndarray:
    """Metric rows of a block whose scores are ``R @ B`` (non-negative), ranked without dense rows."""
    R, B = product
    return evaluate_product_block(
        R.indptr, R.indices, R.data, B.indptr, B.indices, B.data, inputs.tiebreak,
        *_csr_parts(train), *_csr_parts(test), *_csr_parts(exclude), inputs.cutoffs, strided_chunks(R.shape[0]),
        work=product_work(R.indices, B.indptr, R.shape[0], B.shape[1]), calls=inputs.n_blocks,
    )  # fmt: skip


def ranked_last(score_fn, items):
    """The score function ``score_fn`` (user ids -> dense scores) with ``items`` scored ``-inf``:
    ranked below every other item, as items a model knows are never held out.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.metrics import ranked_last
    >>> score = ranked_last(lambda users: np.ones((len(users), 4)), items=[0, 2])
    >>> score(np.array([0]))
    array([[-inf,   1., -inf,   1.]])
    """

    def score(user_ids):
        scores = np.array(score_fn(user_ids), dtype=np.float64)
        scores[:, items] = -np.inf
        return scores

    return score


def rank_test_items(scores, train_rows, test_rows, exclude_rows=None, popularity=None):
    """Ranks of held-out items among each row's candidates, by counting (no full sort).

    Kernel-level API shared by the evaluator and feature extractors.  Row ``r`` of every matrix
    refers to the same user; ``scores`` is the dense ``(n_rows, n_items)`` block of those users.

    Parameters
    ----------
    scores : array (n_rows, n_items)
    train_rows, test_rows, exclude_rows : feedback matrices (n_rows, n_items)
        Candidates of row ``r`` are the items outside ``train_rows[r]`` and ``exclude_rows[r]``;
        ``test_rows`` must be disjoint from both.
    popularity : array (n_items,), optional
        Tie-break key (descending, then item id ascending); the evaluator uses the item counts of
        the *full* training matrix.  ``None``: ties broken by item id only.

    Returns
    -------
    ranks : int64 array (test_rows.nnz,)
        0-based rank of each test item, aligned with the canonical CSR of ``test_rows``
        (``check_feedback(test_rows).indices``: per row, items ascending).
    n_candidates : int64 array (n_rows,)
        Number of candidates of each row (-1 for rows without test items: not computed).

    ``recsys_ltr._ranking.metrics_from_ranks`` turns these into the evaluator's metric table.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from recsys_ltr.metrics import rank_test_items
    >>> scores = np.array([[0.9, 0.1, 0.5, 0.3]])
    >>> train, test = sp.csr_matrix([[1, 0, 0, 0]]), sp.csr_matrix([[0, 0, 0, 1]])
    >>> rank_test_items(scores, train, test)
    (array([1]), array([3]))
    """
    train_rows, test_rows, exclude_rows = _check_matrices(
        train_rows, test_rows, exclude_rows, allow_empty_train=True, names=("train_rows", "test_rows", "exclude_rows")
    )
    n_items = train_rows.shape[1]
    if popularity is None:
        popularity = np.zeros(n_items)
    popularity = np.asarray(popularity, dtype=np.float64)
    if popularity.shape != (n_items,) or not np.all(np.isfinite(popularity)):
        raise ValueError(f"popularity must be a finite array of shape ({n_items},), got shape {popularity.shape}")
    return _rank_trusted(
        check_scores(scores, train_rows.shape), _tiebreak(popularity), train_rows, test_rows, exclude_rows
    )


def _rank_trusted(scores, tiebreak, train_rows, test_rows, exclude_rows):
    ranks, n_cand, nan_rows = rank_block(*_kernel_args(scores, tiebreak, train_rows, test_rows, exclude_rows))
    _check_nan(nan_rows)
    return ranks, n_cand


def squared_distances(Zq, Zdb, db_norms):
    """Squared Euclidean distances between the rows of ``Zq`` and ``Zdb`` (``db_norms``: squared
    norms of the rows of ``Zdb``), clipped at 0 against rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.metrics import squared_distances
    >>> Z = np.array([[0.0, 0.0], [3.0, 4.0]])
    >>> squared_distances(Z, Z, (Z * Z).sum(axis=1))
    array([[ 0., 25.],
           [25.,  0.]])
    """
    D = (Zq * Zq).sum(axis=1)[:, None] - 2.0 * (Zq @ Zdb.T) + db_norms[None, :]
    return np.maximum(D, 0.0, out=D)


def _without_diagonal(R) -> sp.csr_matrix:
    """The canonical square ``R`` without its diagonal entries (a query is not its own answer)."""
    rows = np.repeat(np.arange(R.shape[0]), np.diff(R.indptr))
    keep = R.indices != rows
    indptr = np.concatenate(([0], np.cumsum(np.bincount(rows[keep], minlength=R.shape[0])))).astype(INDEX_DTYPE)
    return sp.csr_matrix((R.data[keep], R.indices[keep], indptr), shape=R.shape)


def retrieval_metrics(Zq, Zdb, relevance, ks=(1, 10), exclude_self=False) -> dict:
    """Retrieval quality of an embedding: queries ``Zq`` rank the database ``Zdb`` by Euclidean
    distance (dissertation section 3.5).

    Parameters
    ----------
    Zq, Zdb : arrays (n_queries, m), (n_database, m)
        Embedded queries and database (e.g. ``FRML.transform``; the raw data for Euclidean).
    relevance : sparse matrix (n_queries, n_database)
        Nonzero = relevant.  Queries without a relevant point are left out of the means.
    ks : tuple of int
        Cutoffs of P@k.
    exclude_self : bool
        Queries are the database (``Zq is Zdb``): leave each query out of its own ranking (its own
        entry of ``relevance``, when stored, is ignored).

    Returns
    -------
    dict
        ``{"MAP", "AUC", "P@k" for k in ks, "n_queries"}``: means over the evaluated queries.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from recsys_ltr.metrics import retrieval_metrics
    >>> Z = np.array([[0.0], [0.1], [5.0], [5.1]])
    >>> same_class = sp.csr_matrix(np.kron(np.eye(2), [[0, 1], [1, 0]]))  # the other point of its pair
    >>> retrieval_metrics(Z, Z, same_class, ks=(1,), exclude_self=True)
    {'MAP': 1.0, 'P@1': 1.0, 'AUC': 1.0, 'n_queries': 4}
    """
    Zq, Zdb = check_dense(Zq, "Zq"), check_dense(Zdb, "Zdb")
    if Zq.shape[1] != Zdb.shape[1]:
        raise ValueError(f"Zq and Zdb must be 2-D with equal widths, got {Zq.shape} and {Zdb.shape}")
    R = check_feedback(relevance, "relevance", allow_empty=True)
    if R.shape != (Zq.shape[0], Zdb.shape[0]):
        raise ValueError(f"relevance must be {(Zq.shape[0], Zdb.shape[0])} (queries x database), got {R.shape}")
    if check_bool(exclude_self, "exclude_self"):
        if Zq.shape[0] != Zdb.shape[0]:
            raise ValueError("exclude_self needs the queries to be the database")
        R = _without_diagonal(R)
    n_db = Zdb.shape[0]
    ks = tuple(check_positive_int(k, "k", maximum=n_db) for k in ks)
    cutoffs = np.asarray(sorted(set(ks)), dtype=np.int64)
    rows = np.flatnonzero(np.diff(R.indptr) > 0)
    if rows.size == 0:
        raise ValueError("no query has a relevant point in the database: metrics are undefined")
    norms = (Zdb * Zdb).sum(axis=1)
    tiebreak = np.arange(n_db, dtype=np.int64)
    step = rows_per_block(8 * n_db, TASK_BYTES)
    tables = []
    for s in range(0, rows.size, step):
        block = rows[s : s + step]
        scores = -squared_distances(Zq[block], Zdb, norms)
        none = _empty_like(scores)
        own = sp.csr_matrix(
            (np.ones(block.size), block.astype(INDEX_DTYPE), np.arange(block.size + 1, dtype=INDEX_DTYPE)),
            shape=scores.shape,
        )
        ranks, n_cand = _rank_trusted(scores, tiebreak, none, R[block], own if exclude_self else none)
        te_ptr = np.concatenate(([0], np.cumsum(np.diff(R[block].indptr)))).astype(np.int64)
        tables.append(metrics_from_ranks(ranks, te_ptr, n_cand, np.arange(block.size, dtype=np.int64), cutoffs))
    table = np.vstack(tables)
    out = {"MAP": float(table[:, BASE_METRICS.index("MAP")].mean())}
    for k in ks:
        column = len(BASE_METRICS) + len(CUTOFF_METRICS) * int(np.searchsorted(cutoffs, k)) + CUTOFF_METRICS.index("P")
        out[f"P@{k}"] = float(table[:, column].mean())
    out["AUC"] = float(table[:, BASE_METRICS.index("AUC")].mean())
    out["n_queries"] = int(rows.size)
    return out


# ----------------------------------------------------------------------------------- helpers


def _check_matrices(train, test, exclude, *, allow_empty_train=False, names=("train", "test", "exclude")):
    n_train, n_test, n_exclude = names
    train = check_feedback(train, n_train, allow_empty=allow_empty_train)
    test = check_feedback(test, n_test, allow_empty=True)
    check_same_shape(train, test, n_train, n_test)
    if exclude is None:
        exclude = _empty_like(train)
    else:
        exclude = check_feedback(exclude, n_exclude, allow_empty=True)
        check_same_shape(train, exclude, n_train, n_exclude)
    for other, name in ((train, n_train), (exclude, n_exclude)):
        overlap = test.multiply(other).nnz
        if overlap:
            raise ValueError(
                f"{n_test} and {name} share {overlap} (user, item) pair(s); test items must be candidates, "
                f"so remove them from {name} or from {n_test} (holdout splits are disjoint)"
            )
    return train, test, exclude


def _empty_like(X) -> sp.csr_matrix:
    return sp.csr_matrix((np.zeros(0), np.zeros(0, INDEX_DTYPE), np.zeros(X.shape[0] + 1, INDEX_DTYPE)), shape=X.shape)


def metric_name(spec, n_items, k=10) -> str:
    """The result name of one metric ``spec`` (``"recall@20"`` -> ``"REC@20"``, bare cutoff metrics
    at ``k``) on a catalogue of ``n_items`` items; an unknown name raises ``ValueError``.

    Examples
    --------
    >>> from recsys_ltr.metrics import metric_name
    >>> metric_name("Recall@20", n_items=100), metric_name("adg", n_items=100), metric_name("P", n_items=100, k=5)
    ('REC@20', 'ADG', 'P@5')
    """
    if not isinstance(spec, str):
        raise TypeError(f"a metric name must be a str, got {spec!r}")
    return _parse_metrics((spec,), k, n_items)[0][0]


def _parse_metrics(metrics, k, n_items) -> tuple[list[str], np.ndarray, list[str]]:
    """Canonical result names (in request order), the sorted distinct cutoffs they need, and each
    name's key as asked (the first spelling of it; a bare cutoff metric with its ``@k``)."""
    k = check_positive_int(k, "k")
    if metrics is None:
        metrics = DEFAULT_METRICS
    elif isinstance(metrics, str):
        metrics = (metrics,)
    names, asked = [], []
    for spec in metrics:
        match = re.fullmatch(r"([A-Za-z]+)(?:@(\d+))?", str(spec))
        base = match.group(1).upper() if match else None
        base = _SYNONYMS.get(base, base)
        if base not in METRICS or (match.group(2) and base not in CUTOFF_METRICS):
            raise ValueError(
                f"unknown metric {spec!r}; valid names: {', '.join(METRICS)} "
                f"({', '.join(CUTOFF_METRICS)} accept a cutoff, e.g. 'REC@20', 'NDCG@10')"
            )
        key = str(spec)
        if base in _BARE_CUTOFF or match.group(2):
            if match.group(2) is None and k > n_items:
                raise ValueError(f"k={k} (the cutoff of {base}) is larger than the catalogue ({n_items} items)")
            cutoff = int(match.group(2)) if match.group(2) else k
            if not 1 <= cutoff <= n_items:
                raise ValueError(f"cutoff of {spec!r} must lie in [1, {n_items}] (the catalogue size)")
            key = key if match.group(2) else f"{key}@{cutoff}"
            base = f"{base}@{cutoff}"
        if base not in names:
            names.append(base)
            asked.append(key)
    if not names:
        raise ValueError(f"metrics is empty; valid names: {', '.join(METRICS)}")
    cutoffs = sorted({int(n.split("@")[1]) for n in names if "@" in n})
    return names, np.asarray(cutoffs, dtype=np.int64), asked


def _users_to_evaluate(test: sp.csr_matrix, users) -> np.ndarray:
    has_test = np.diff(test.indptr) > 0
    if users is None:
        chosen = np.flatnonzero(has_test).astype(np.int64)
    else:
        users = np.unique(check_ids(users, test.shape[0], "users"))
        chosen = users[has_test[users]]
    if chosen.size == 0:
        where = "test" if users is None else "test rows of the requested users"
        raise ValueError(f"nothing to evaluate: the {where} hold no interactions")
    return chosen


def _tiebreak(popularity: np.ndarray) -> np.ndarray:
    """Position of each item when sorted by popularity descending, then item id ascending."""
    order = np.lexsort((np.arange(popularity.size), -popularity))
    tiebreak = np.empty(popularity.size, dtype=np.int64)
    tiebreak[order] = np.arange(popularity.size)
    return tiebreak


def _score_function(model_or_score_fn):
    if hasattr(model_or_score_fn, "__sklearn_is_fitted__"):  # an estimator: NotFittedError before any scoring
        check_is_fitted(model_or_score_fn)
    score = getattr(model_or_score_fn, "score", None)
    if callable(score):
        return score
    if callable(model_or_score_fn):
        return model_or_score_fn
    raise TypeError(
        "model_or_score_fn must have a score(user_ids) method or be a callable mapping user ids to "
        f"scores, got {type(model_or_score_fn).__name__}"
    )


def _score_block(score_fn, block: np.ndarray, n_items: int) -> np.ndarray:
    return check_scores(score_fn(block.copy()), (len(block), n_items), "score block")


def _kernel_args(scores, tiebreak, train, test, exclude) -> tuple:
    """Arguments of the ranking kernels for validated CSR rows of one block."""
    return (
        scores,
        tiebreak,
        *_csr_parts(train),
        *_csr_parts(test),
        *_csr_parts(exclude),
        _ranking.LINEAR_MAX,  # read at call time so tests can exercise both counting paths
    )


def _check_nan(nan_rows: np.ndarray) -> None:
    if nan_rows.any():
        raise ValueError(
            f"scores contain NaN in {int(nan_rows.sum())} row(s) of the block (row {np.argmax(nan_rows)} first)"
        )


def _csr_parts(X: sp.csr_matrix):
    return X.indptr, X.indices
