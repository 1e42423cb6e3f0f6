"""The shared WARP / β-WSS sampling engine (dissertation Alg. 3.2, 3.4, 4.2; su2017 Eq. 17-21).

One round of β-WSS: draw a query ``q`` uniformly, a relevant item ``pos`` uniformly from its
relevant set, then negatives uniformly (with replacement) from its irrelevant set until one
*violates* the margin, ``score(q, pos) - score(q, neg) < margin``, or ``β_q`` draws are spent.
On a violation after ``n_s`` draws (``n_s`` counts the violating draw, ``1 <= n_s <= β_q``) the
triplet gets the weight

* ``L[floor(N_q / n_s)]`` with ``L`` an NML loss array (``loss=``): ``L̂_WARP`` (Eq. 3.10) with the
  query's own ``N_q``; truncation at ``β_q`` is implicit (Def. 3.5), or
* ``theta[n_s - 1]`` with a fixed estimator table (``estimator=``), e.g. :func:`opt_est`.

The model plugs in through two numba functions (module-level, ``@numba.njit(cache=True)``; the
kernels are compiled once per model)::

    score_fn(model_state, query, item) -> float64
    update_fn(model_state, query, pos, neg, weight, lr) -> None   # step on weight*hinge, in place

``model_state`` is a tuple of arrays/scalars owned by the model.  The engine guarantees
``0 <= query < n_queries`` and ``0 <= item < n_items``; bounds inside ``model_state`` are the
model's business.

Relevant / irrelevant sets
--------------------------
``relevant`` is a CSR matrix, queries x items (rows = queries, stored entries = relevant).
The irrelevant set ``X-_q`` of query ``q`` is either

* the complement of its relevant row in ``[0, n_items)`` (``irrelevant=None``), optionally minus
  item ``q`` itself (``exclude_self=True``: retrieval, where the queries are the database); a drawn
  positive is handled by ``positive_draws``:

  - ``"reject"`` — negatives are uniform over ``X-_q`` and a positive never counts as a draw
    (what rejection sampling without counting gives; implemented exactly by rank-selecting the
    ``r``-th non-relevant item with one binary search, so it never loops); ``N_q = |X-_q|``;
  - ``"count"`` — LightFM: draw from the whole pool ``[0, n_items)`` (minus ``q`` when
    ``exclude_self``), a drawn positive is a non-violating draw; ``N_q`` = pool size;

* or an explicit CSR ``irrelevant`` of the same shape, disjoint from ``relevant`` (L-GMML: the
  label-0 documents of the query); ``N_q`` = row length.

The sampling limit ``β_q`` (at most one of ``beta``, ``kappa``, ``gamma``):

* ``beta``: absolute cap (LightFM's ``max_sampled``), ``β_q = min(beta, N_q)`` (more draws than
  ``N_q`` would only earn weight ``L(0) = 0``);
* ``kappa`` in (0, 1]: a fraction of the irrelevant set (sec. 3.5), ``β_q = ceil(kappa * N_q)``
  (ceil, so that ``β_q >= 1`` and ``kappa = 1`` is plain WARP);
* ``gamma``: rank-γ truncation (Alg. 4.2, Theorem 3.8), ``β_q = floor(N_q / gamma)``;
* none: ``β_q = N_q``, the standard WARP scheme.

``min_beta`` raises every limit to at least ``min(min_beta, N_q)``: with ``gamma`` and
``min_beta=1``, ``β_q = max(1, floor(N_q / gamma))``, the draw count of Alg. 4.2, whose
repeat-until loop always draws once (default 0: the limits above as they are).

Queries are drawn uniformly among those with at least one relevant item, one irrelevant item and
``β_q >= 1`` (a query with ``β_q = 0`` would never produce a step).

Kernels and reproducibility
---------------------------
:func:`warp_sgd` is Hogwild SGD: the samples are split over ``num_threads`` threads, thread ``t``
draws from RNG stream ``t`` and calls ``update_fn`` without locks.  With one thread and a seed the
result is bit-for-bit reproducible; with more threads the interleaving of updates (and the
partition of the streams) changes the result.  :func:`warp_minibatch` collects ``b`` triplets
with the model frozen; slot ``s`` always uses stream ``s``, so a batch depends only on the seed,
the call history and the model, never on the thread count.  Use them through
:class:`WarpSampler`, which validates everything first (the kernels do no bounds checks).

Example
-------
A dot-product model (user factors · item factors), trained with β = 10 and the reciprocal loss;
:func:`~recsys_ltr.warp.dot.dot_score` and :func:`~recsys_ltr.warp.dot.dot_update` are the two
functions it needs, and the template for any model::

    import numpy as np
    from recsys_ltr.warp import DOT_ROWS, WarpSampler, dot_score, dot_update

    # X: scipy.sparse CSR users x items (implicit feedback)
    sampler = WarpSampler(X, beta=10, loss="reciprocal", random_state=0, num_threads=2)
    rng = np.random.default_rng(0)
    U = 0.1 * rng.standard_normal((X.shape[0], 32))
    V = 0.1 * rng.standard_normal((X.shape[1], 32))
    stats = sampler.sgd((U, V), dot_score, dot_update, n_samples=X.nnz, learning_rate=0.05, rows=DOT_ROWS)
    batch = sampler.minibatch((U, V), dot_score, batch_size=5, rows=DOT_ROWS)   # for a batched update
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange, types
from numba.core.registry import CPUDispatcher

from recsys_ltr._rng import randint, seed_state
from recsys_ltr._threads import check_num_threads, numba_threads
from recsys_ltr._validation import INDEX_DTYPE, check_bool, check_feedback, check_positive_int, check_real, check_seed
from recsys_ltr.warp.estimators import _check_curve
from recsys_ltr.warp.losses import NML_KINDS, nml_loss

__all__ = ["Minibatch", "WarpSampler", "WarpStats", "warp_minibatch", "warp_sgd"]

_REJECT, _COUNT, _EXPLICIT = 0, 1, 2
_BY_LOSS, _BY_TABLE = 0, 1
_NAN = -2  # sentinel ``neg`` of a round whose scores were NaN
_BATCH_SALT = 1
_DIVERGED = "score_fn returned NaN or an infinite score: the model has diverged (lower the learning rate?)"


class WarpStats(NamedTuple):
    """Counts of one :meth:`WarpSampler.sgd` call."""

    samples: int  #: (query, positive) pairs drawn
    violators: int  #: violating triplets found (= update_fn calls)
    draws: int  #: negative draws spent


class Minibatch(NamedTuple):
    """``b`` triplets from :meth:`WarpSampler.minibatch`; ``negatives == -1`` (weight 0) where
    no violator was found."""

    queries: np.ndarray
    positives: np.ndarray
    negatives: np.ndarray
    weights: np.ndarray
    draws: np.ndarray  #: negative draws spent by each slot (over all its tries)


# ---------------------------------------------------------------------------------------------
# numba core: one definition of the sampling logic, used by both kernels
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _is_member(indices, start, end, x):
    """Whether ``x`` occurs in the sorted slice ``indices[start:end]``."""
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo < end and indices[lo] == x


@njit(cache=True)
def _kth_outside(indices, start, end, r):
    """The ``r``-th (0-based) non-negative integer absent from the sorted slice.

    ``indices[start + j] - j`` is non-decreasing, and the answer is ``r`` plus the number of
    ``j`` with ``indices[start + j] - j <= r``.
    """
    lo, hi = 0, end - start
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[start + mid] - mid <= r:
            lo = mid + 1
        else:
            hi = mid
    return r + lo


@njit(cache=True)
def _draw_negative(spec, rng, row, q):
    """One uniform draw from the pool of ``q``; -1 for a counted positive (``"count"`` mode)."""
    rel_indptr, rel_indices, irr_indptr, irr_indices = spec[1], spec[2], spec[3], spec[4]
    self_rank, n_irr, mode, exclude_self = spec[5], spec[6], spec[9], spec[12]
    if mode == _EXPLICIT:
        s = irr_indptr[q]
        return np.int64(irr_indices[s + randint(rng, row, irr_indptr[q + 1] - s)])
    r = randint(rng, row, n_irr[q])
    if mode == _REJECT:
        if self_rank[q] >= 0 and r >= self_rank[q]:
            r += 1
        return np.int64(_kth_outside(rel_indices, rel_indptr[q], rel_indptr[q + 1], r))
    if exclude_self and r >= q:
        r += 1
    if _is_member(rel_indices, rel_indptr[q], rel_indptr[q + 1], r):
        return np.int64(-1)
    return np.int64(r)


@njit  # not cached: it may take numba dispatchers, whose type names are not stable across runs
def _sample(spec, model_state, score_fn, rng, row):
    """One β-WSS round: returns ``(q, pos, neg, n_s, weight)``; ``neg = -1`` and ``n_s = β_q``
    when no violator was found, ``neg = _NAN`` when ``score_fn`` returned NaN, a non-finite score
    for the positive, or ``+inf`` for a negative (``-inf`` marks a negative that never violates)."""
    queries, rel_indptr, rel_indices = spec[0], spec[1], spec[2]
    n_irr, beta, table, weight_mode, margin = spec[6], spec[7], spec[8], spec[10], spec[13]
    q = queries[randint(rng, row, queries.size)]
    s = rel_indptr[q]
    pos = np.int64(rel_indices[s + randint(rng, row, rel_indptr[q + 1] - s)])
    threshold = score_fn(model_state, q, pos) - margin
    if not np.isfinite(threshold):
        return q, pos, np.int64(_NAN), np.int64(0), 0.0
    for n_s in range(1, beta[q] + 1):
        neg = _draw_negative(spec, rng, row, q)
        if neg < 0:
            continue
        s_neg = score_fn(model_state, q, neg)
        if np.isnan(s_neg) or s_neg == np.inf:
            return q, pos, np.int64(_NAN), n_s, 0.0
        if s_neg > threshold:
            w = table[n_irr[q] // n_s] if weight_mode == _BY_LOSS else table[n_s - 1]
            return q, pos, neg, n_s, w
    return q, pos, np.int64(-1), beta[q], 0.0


def _sgd_kernel(spec, model_state, score_fn, update_fn, rng, n_threads, n_samples, lr):
    counts = np.zeros((n_threads, 4), dtype=np.int64)
    for t in prange(n_threads):
        share = n_samples // n_threads + (1 if t < n_samples % n_threads else 0)
        violators = 0
        draws = 0
        for i in range(share):
            q, pos, neg, n_s, w = _sample(spec, model_state, score_fn, rng, t)
            draws += n_s
            if neg == _NAN:  # stop this thread: the model has diverged
                counts[t, 3] = 1
                share = i + 1
                break
            if neg >= 0:
                violators += 1
                update_fn(model_state, q, pos, neg, w, lr)
        counts[t, 0] = share
        counts[t, 1] = violators
        counts[t, 2] = draws
    return counts.sum(axis=0)


def _minibatch_kernel(spec, model_state, score_fn, rng, batch_size, max_tries):
    queries = np.empty(batch_size, dtype=np.int64)
    positives = np.empty(batch_size, dtype=np.int64)
    negatives = np.full(batch_size, -1, dtype=np.int64)
    weights = np.zeros(batch_size, dtype=np.float64)
    draws = np.zeros(batch_size, dtype=np.int64)
    for s in prange(batch_size):
        for _ in range(max_tries):
            q, pos, neg, n_s, w = _sample(spec, model_state, score_fn, rng, s)
            queries[s] = q
            positives[s] = pos
            draws[s] += n_s
            if neg >= 0 or neg == _NAN:
                negatives[s] = neg
                weights[s] = w
                break
    return queries, positives, negatives, weights, draws


# "pointer": the model functions are typed as first-class function pointers with a stable
# signature, so the kernel is cached on disk; "inline": they are typed as dispatchers and inlined
# (faster for cheap models), but such a kernel cannot be cached and compiles in every process.
_KERNELS = {
    ("sgd", "pointer"): njit(cache=True, parallel=True)(_sgd_kernel),
    ("sgd", "inline"): njit(parallel=True)(_sgd_kernel),
    ("minibatch", "pointer"): njit(cache=True, parallel=True)(_minibatch_kernel),
    ("minibatch", "inline"): njit(parallel=True)(_minibatch_kernel),
}


def _run(kind, compile_mode, args):
    kernel = _KERNELS[kind, compile_mode]
    if compile_mode == "inline":
        return kernel(*args)
    state_t = numba.typeof(args[1])
    fn_types = [types.FunctionType(types.float64(state_t, types.int64, types.int64))]
    if kind == "sgd":
        fn_types.append(types.FunctionType(types.none(state_t, *[types.int64] * 3, types.float64, types.float64)))
    rest = args[2 + len(fn_types) :]
    sig = (numba.typeof(args[0]), state_t, *fn_types, *(numba.typeof(a) for a in rest))
    return kernel.compile(sig)(*args)


def warp_sgd(spec, model_state, score_fn, update_fn, rng, n_threads, n_samples, lr, compile_mode="pointer"):
    """Hogwild β-WSS SGD: ``n_samples`` rounds over ``n_threads`` threads (stream ``t`` of ``rng``
    for thread ``t``); returns int64 ``[samples, violators, draws]``.  Unchecked: use
    :meth:`WarpSampler.sgd`."""
    return _run("sgd", compile_mode, (spec, model_state, score_fn, update_fn, rng, n_threads, n_samples, lr))


def warp_minibatch(spec, model_state, score_fn, rng, batch_size, max_tries, compile_mode="pointer"):
    """Collect ``batch_size`` triplets with the model frozen; slot ``s`` uses stream ``s`` and
    up to ``max_tries`` rounds.  Unchecked: use :meth:`WarpSampler.minibatch`."""
    return _run("minibatch", compile_mode, (spec, model_state, score_fn, rng, batch_size, max_tries))


# ---------------------------------------------------------------------------------------------
# Python side: validation, per-query N_q and β_q, the spec tuple
# ---------------------------------------------------------------------------------------------


def _resolve_beta(n_irr: np.ndarray, beta, kappa, gamma, min_beta=0) -> np.ndarray:
    """``β_q`` from at most one of beta / kappa / gamma, raised to ``min(min_beta, N_q)``
    (module docstring)."""
    min_beta = check_positive_int(min_beta, "min_beta", minimum=0)
    return np.maximum(_limit(n_irr, beta, kappa, gamma), np.minimum(min_beta, n_irr))


def _limit(n_irr, beta, kappa, gamma):
    given = [name for name, v in (("beta", beta), ("kappa", kappa), ("gamma", gamma)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"give at most one of beta, kappa, gamma; got {', '.join(given)}")
    if beta is not None:
        return np.minimum(check_positive_int(beta, "beta"), n_irr)
    if gamma is not None:
        return n_irr // check_positive_int(gamma, "gamma")
    if kappa is not None:
        kappa = check_real(kappa, "kappa", low=0.0, high=1.0, low_open=True)
        # round first so that e.g. 0.1 * 30 = 3.0000000000000004 gives 3, not 4
        return np.ceil(np.round(kappa * n_irr, 9)).astype(np.int64)
    return n_irr.copy()


def _check_dispatcher(fn, name: str) -> None:
    if not isinstance(fn, CPUDispatcher):
        raise TypeError(f"{name} must be a numba.njit function, got {type(fn).__name__}")


class WarpSampler:
    """Validated β-WSS sampler over fixed relevant / irrelevant sets (see the module docstring).

    Parameters
    ----------
    relevant : sparse matrix or 2-D array, queries x items
        Stored positive entries are the relevant items of each query.
    irrelevant : sparse matrix or 2-D array, optional
        Explicit irrelevant sets, same shape, disjoint from ``relevant``; default: complement.
    exclude_self : bool
        Complement mode only: item ``q`` is never a negative of query ``q``.
    positive_draws : {"reject", "count"}
        Complement mode only: how a drawn positive is treated.
    beta, kappa, gamma : int, float, int, optional
        Sampling limit ``β_q``, at most one of them.
    min_beta : int >= 0
        Lower bound on ``β_q`` (capped at ``N_q``); ``1`` gives Alg. 4.2's at least one draw.
    loss : str or array, optional
        NML loss for the weight ``L[floor(N_q / n_s)]``: a kind of :func:`nml_loss` (built with
        order ``max_q N_q``) or an array ``L(0..K)`` with ``K >= max_q N_q``.  Default
        ``"reciprocal"`` unless ``estimator`` is given.
    k, normalize : passed to :func:`nml_loss` when ``loss`` is a kind.
    estimator : array, optional
        Fixed estimator table, weight ``estimator[n_s - 1]``; needs ``len >= max_q β_q``.
    margin : float
        Violation margin (default 1).
    random_state : int, numpy Generator or None
    num_threads : int
        Threads for :meth:`sgd` (0 = all numba threads).
    compile_mode : {"pointer", "inline"}
        How the kernels see the model's functions: ``"pointer"`` (default) calls them through
        function pointers, so the kernels are cached on disk and compile once per model state
        type; ``"inline"`` inlines them (up to ~1.5x faster for a model as cheap as a dot
        product) but numba cannot cache such kernels, so they compile in every process.

    Attributes
    ----------
    n_queries, n_items : int
    queries : int64 array, the queries that can be drawn.
    n_irr : int64 array, ``N_q`` per query (pool size in ``"count"`` mode).
    beta_q : int64 array, ``β_q`` per query.
    table : float64 array, the loss ``L`` or the estimator ``theta`` used for the weights.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.warp import DOT_ROWS, WarpSampler, dot_score, dot_update
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> rng = np.random.default_rng(0)
    >>> U, V = 0.1 * rng.standard_normal((200, 8)), 0.1 * rng.standard_normal((100, 8))
    >>> sampler = WarpSampler(X, beta=2, random_state=0, num_threads=1)
    >>> stats = sampler.sgd((U, V), dot_score, dot_update, n_samples=X.nnz, learning_rate=0.05, rows=DOT_ROWS)
    >>> stats.samples
    965
    """

    def __init__(
        self,
        relevant,
        irrelevant=None,
        *,
        exclude_self: bool = False,
        positive_draws: str = "reject",
        beta=None,
        kappa=None,
        gamma=None,
        min_beta: int = 0,
        loss=None,
        k=None,
        normalize: bool = True,
        estimator=None,
        margin: float = 1.0,
        random_state=None,
        num_threads: int = 1,
        compile_mode: str = "pointer",
    ):
        R = check_feedback(relevant, "relevant")
        Q = None if irrelevant is None else check_feedback(irrelevant, "irrelevant", allow_empty=True)
        self._setup(
            R,
            Q,
            exclude_self,
            positive_draws,
            beta,
            kappa,
            gamma,
            min_beta,
            loss,
            k,
            normalize,
            estimator,
            margin,
            random_state,
            num_threads,
            compile_mode,
        )

    @classmethod
    def trusted(cls, relevant, irrelevant=None, **settings) -> WarpSampler:
        """A sampler over canonical binary CSR ``relevant`` (and ``irrelevant``) built by this
        package: the matrices are not checked again; the other settings are."""
        self = cls.__new__(cls)
        defaults = dict(
            exclude_self=False,
            positive_draws="reject",
            beta=None,
            kappa=None,
            gamma=None,
            min_beta=0,
            loss=None,
            k=None,
            normalize=True,
            estimator=None,
            margin=1.0,
            random_state=None,
            num_threads=1,
            compile_mode="pointer",
        )
        unknown = set(settings) - set(defaults)
        if unknown:
            raise TypeError(f"unknown WarpSampler settings {sorted(unknown)}")
        self._setup(relevant, irrelevant, **{**defaults, **settings})
        return self

    def _setup(
        self,
        R,
        Q,
        exclude_self,
        positive_draws,
        beta,
        kappa,
        gamma,
        min_beta,
        loss,
        k,
        normalize,
        estimator,
        margin,
        random_state,
        num_threads,
        compile_mode,
    ):
        self.n_queries, self.n_items = R.shape
        exclude_self = check_bool(exclude_self, "exclude_self")
        if positive_draws not in ("reject", "count"):
            raise ValueError(f"positive_draws must be 'reject' or 'count', got {positive_draws!r}")
        n_rel = np.diff(R.indptr).astype(np.int64)
        if Q is None:
            mode = _REJECT if positive_draws == "reject" else _COUNT
            irr_indptr, irr_indices = np.zeros(1, INDEX_DTYPE), np.zeros(0, INDEX_DTYPE)
            self_rank, n_true_irr = self._complement_sizes(R, n_rel, bool(exclude_self))
        else:
            if exclude_self or positive_draws != "reject":
                raise ValueError(
                    "exclude_self and positive_draws apply to the complement mode only; "
                    "with explicit irrelevant sets, leave the query out of its own list instead"
                )
            mode = _EXPLICIT
            if Q.shape != R.shape:
                raise ValueError(f"shape mismatch: relevant is {R.shape} but irrelevant is {Q.shape}")
            overlap = R.multiply(Q).nnz
            if overlap:
                raise ValueError(f"relevant and irrelevant share {overlap} (query, item) pair(s)")
            irr_indptr, irr_indices = Q.indptr, Q.indices
            self_rank, n_true_irr = np.full(self.n_queries, -1, np.int64), np.diff(irr_indptr).astype(np.int64)
        self.n_irr = (
            n_true_irr
            if mode != _COUNT
            else np.full(self.n_queries, self.n_items - int(bool(exclude_self)), dtype=np.int64)
        )
        self.beta_q = _resolve_beta(self.n_irr, beta, kappa, gamma, min_beta).astype(np.int64)
        self.queries = np.flatnonzero((n_rel > 0) & (n_true_irr > 0) & (self.beta_q > 0)).astype(np.int64)
        if self.queries.size == 0:
            raise ValueError("no query has a relevant item, an irrelevant item and beta_q >= 1: nothing to sample")
        weight_mode, self.table = self._weight_table(loss, k, normalize, estimator)
        self.margin = margin = check_real(margin, "margin", low=0.0)
        self.num_threads = check_num_threads(num_threads)
        if compile_mode not in ("pointer", "inline"):
            raise ValueError(f"compile_mode must be 'pointer' or 'inline', got {compile_mode!r}")
        self.compile_mode = compile_mode
        if isinstance(random_state, np.random.Generator) or random_state is None:
            random_state = int(seed_state(random_state, 1)[0, 0])
        random_state = check_seed(random_state)
        self._seed = random_state
        self._rng = seed_state(random_state, self.num_threads)
        self._batch_rng = seed_state(random_state, 1, salt=_BATCH_SALT)
        self._spec = (
            self.queries, R.indptr, R.indices, irr_indptr,
            irr_indices, self_rank, self.n_irr, self.beta_q, self.table, np.int64(mode),
            np.int64(weight_mode), np.int64(self.n_items), bool(exclude_self), np.float64(margin),
        )  # fmt: skip

    def _complement_sizes(self, R, n_rel, exclude_self):
        """``self_rank[q]`` (rank of item q among the non-relevant items of q, -1 if unused) and
        the true number of irrelevant items per query."""
        n_true = self.n_items - n_rel
        self_rank = np.full(self.n_queries, -1, np.int64)
        if not exclude_self:
            return self_rank, n_true
        if self.n_queries > self.n_items:
            raise ValueError(
                f"exclude_self needs query q to be item q, but there are {self.n_queries} queries "
                f"and only {self.n_items} items"
            )
        row = np.repeat(np.arange(self.n_queries), n_rel)
        below = np.bincount(row[R.indices < row], minlength=self.n_queries)
        self_relevant = np.bincount(row[R.indices == row], minlength=self.n_queries) > 0
        q = np.arange(self.n_queries)
        self_rank[~self_relevant] = (q - below)[~self_relevant]
        return self_rank, n_true - (~self_relevant)

    def _weight_table(self, loss, k, normalize, estimator):
        if estimator is not None:
            if loss is not None or k is not None:
                raise ValueError("give either loss (with its k) or estimator, not both")
            return _BY_TABLE, _check_curve(estimator, int(self.beta_q[self.queries].max()), "estimator")
        loss = "reciprocal" if loss is None else loss
        n_max = int(self.n_irr[self.queries].max())
        if isinstance(loss, str):
            if loss not in NML_KINDS:
                raise ValueError(f"loss must be one of {NML_KINDS} or an array, got {loss!r}")
            return _BY_LOSS, nml_loss(loss, n_max, k=k, normalize=normalize)
        if k is not None:
            raise ValueError("k is only used with a loss kind, not with a loss array")
        return _BY_LOSS, _check_curve(loss, n_max + 1, "loss")

    def sgd(self, model_state, score_fn, update_fn, n_samples: int, learning_rate: float, *, rows) -> WarpStats:
        """Run ``n_samples`` β-WSS rounds of lock-free SGD through ``update_fn`` (Alg. 3.2 / 4.2).

        Returns :class:`WarpStats`.  ``model_state`` is updated in place.  ``rows`` (required, see
        :meth:`check_rows`) declares which state arrays are indexed by query and by item; they are
        checked to cover every query and item before any kernel runs.  Raises
        ``FloatingPointError`` if ``score_fn`` returns NaN or an infinite score where a finite
        one is needed (the model has diverged).
        """
        _check_dispatcher(score_fn, "score_fn")
        _check_dispatcher(update_fn, "update_fn")
        model_state = self.check_rows(self._check_state(model_state), rows)
        n_samples = check_positive_int(n_samples, "n_samples", minimum=0)
        lr = check_real(learning_rate, "learning_rate")
        with numba_threads(self.num_threads):
            counts = warp_sgd(
                self._spec, model_state, score_fn, update_fn, self._rng, self.num_threads, n_samples, lr,
                self.compile_mode,
            )  # fmt: skip
        if counts[3]:
            raise FloatingPointError(_DIVERGED)
        return WarpStats(*(int(c) for c in counts[:3]))

    def minibatch(
        self,
        model_state,
        score_fn,
        batch_size: int,
        require_violation: bool = True,
        max_tries: int = 100,
        *,
        rows,
    ) -> Minibatch:
        """Collect ``batch_size`` triplets with the current model (Alg. 3.4, minibatch variant).

        With ``require_violation`` each slot redraws ``(q, pos)`` until a violator is found (at
        most ``max_tries`` rounds); otherwise each slot is exactly one round, and a slot without a
        violator still reports its ``(q, pos)`` (for a regulariser on it, Alg. 3.4 line 16).
        ``rows`` as in :meth:`sgd`; non-finite scores raise ``FloatingPointError``.
        """
        _check_dispatcher(score_fn, "score_fn")
        model_state = self.check_rows(self._check_state(model_state), rows)
        b = check_positive_int(batch_size, "batch_size")
        tries = check_positive_int(max_tries, "max_tries") if require_violation else 1
        if self._batch_rng.shape[0] < b:  # new slots get their own streams; old ones continue
            grown = seed_state(self._seed, b, salt=_BATCH_SALT)
            grown[: self._batch_rng.shape[0]] = self._batch_rng
            self._batch_rng = grown
        with numba_threads(self.num_threads):
            out = warp_minibatch(self._spec, model_state, score_fn, self._batch_rng, b, tries, self.compile_mode)
        if np.any(out[2] == _NAN):
            raise FloatingPointError(_DIVERGED)
        return Minibatch(*out)

    def check_rows(self, model_state, rows):
        """Check that the model can be indexed by every query and item the kernels may pass.

        ``rows`` maps a position in ``model_state`` to ``"query"`` or ``"item"``: that array's
        first dimension must cover ``n_queries`` or ``n_items`` (e.g.
        :data:`~recsys_ltr.warp.dot.DOT_ROWS` for :func:`~recsys_ltr.warp.dot.dot_score`); ``{}``
        declares that no state array is indexed by query or item.  The kernels trust the model's
        functions, so a model whose state is too small would otherwise read out of bounds.
        """
        if not isinstance(rows, dict):
            raise TypeError(f"rows must be a dict {{position: 'query' | 'item'}}, got {type(rows).__name__}")
        for pos, kind in rows.items():
            if isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos < len(model_state):
                raise ValueError(f"rows names position {pos!r}, but model_state has {len(model_state)} entries")
            if kind not in ("query", "item"):
                raise ValueError(f"rows[{pos}] must be 'query' or 'item', got {kind!r}")
            need = self.n_queries if kind == "query" else self.n_items
            have = np.shape(model_state[pos])[0] if np.ndim(model_state[pos]) else 0
            if have < need:
                raise ValueError(f"model_state[{pos}] has {have} rows but the sampler has {need} {kind}s")
        return model_state

    @staticmethod
    def _check_state(model_state):
        if not isinstance(model_state, tuple) or len(model_state) == 0:
            raise TypeError("model_state must be a non-empty tuple (of arrays / scalars)")
        return model_state
