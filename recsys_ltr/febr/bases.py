"""The base recommenders of stacked FEBR: the default set and reuse.

With ``bases="auto"`` FEBR stacks the strong simple models a user would otherwise pick, each at its
one-line default: ``EASE()`` (dense up to 4,096 items, sparse above), ``GFCF()``, ``ChebyCF()``,
``ALS()``, ``RP3beta()``, ``KUNN()``, user-p, item-p and, up to :data:`SLIM_ITEMS` items, fsSLIM.  On
large data a base whose cost grows faster than the positives is left out where its cost model
(:class:`Workload`) passes a fixed limit: the user-side neighbourhoods past :data:`USER_PAIRS`,
EASE past :data:`ITEM_PAIRS`, GF-CF past :data:`GRAPH_PAIRS`, ChebyCF past :data:`GRAPH_PAIRS` or
:data:`CHEBY_POSITIVES`.  :data:`AUTO_BASES` is the one list of default bases: the
command line's stacked methods stack its tuned rows.  No setting is searched: a grid of 2-3
settings per base, searched on the training labels, fitted every base up to five times instead of
three for at most .0010 more test ADG of ``FEBR()`` on the five benchmark sets (3 seeds; README).
Every base is fitted on the feature part ``F`` of each label part (the training features), on the
training part that FEBR validates on and on ``X`` for prediction.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from ..models import ALS, EASE, GFCF, KUNN, SLIM, ChebyCF, ItemKNN, RP3beta, UserKNN
from ..models.base import Recommender
from ..models.graph_filter import GRAPH_ENTRY_BYTES
from ..split import label_parts, sample_users_trusted
from .stacking import Pool, Stack, build_pool, concatenate_pools, context_statistics
from .training import STAT_USERS, OptADGRecommender

__all__ = [
    "AUTO_BASES",
    "CHEBY_POSITIVES",
    "GRAPH_BYTES",
    "GRAPH_PAIRS",
    "ITEM_PAIRS",
    "POOL_SCORES",
    "POOL_USERS",
    "SLIM_ITEMS",
    "USER_PAIRS",
    "AutoBase",
    "BaseSpec",
    "Workload",
    "auto_bases",
    "check_bases",
    "fit_on",
    "fit_stack",
    "named_bases",
    "pool_user_limit",
    "pools_of_label_parts",
    "resolve_bases",
    "reuse_or_fit",
    "training_pool",
]


class BaseSpec(NamedTuple):
    """One base: an unfitted template and, when the user gave a fitted model, that model."""

    template: Recommender
    fitted: Recommender | None


class Workload(NamedTuple):
    """What the default bases' fits grow with, read off a feedback matrix ``X`` in ``O(nnz)``.

    ``user_pairs = sum_i d_i^2`` over the items' degrees: the (user, user) pairs through a shared
    item that the user-side neighbourhoods (UserKNN, KUNN) visit.  ``item_pairs = sum_u n_u^2``
    over the users' activity: the (item, item) pairs that EASE's Gram matrix ``X^T X`` sums, at most
    its stored entries.  ``positives = nnz(X)``: a product of a dense row by the item graph through the
    users costs ``2 nnz(X)`` (ChebyCF scores a user with seven of them).
    """

    n_items: int
    user_pairs: float
    item_pairs: float
    positives: int

    @classmethod
    def of(cls, X) -> Workload:
        """The workload of a canonical CSR ``X``."""
        item_degree = np.bincount(X.indices, minlength=X.shape[1]).astype(np.float64)
        activity = np.diff(X.indptr).astype(np.float64)
        return cls(X.shape[1], float(item_degree @ item_degree), float(activity @ activity), X.nnz)


class AutoBase(NamedTuple):
    """One default base: its name (the command line's row), template and the largest data it is
    stacked on: catalogue size, :class:`Workload` pairs and positives (``None``: any)."""

    name: str
    template: Recommender
    max_items: int | None = None
    max_user_pairs: float | None = None
    max_item_pairs: float | None = None
    max_positives: int | None = None

    def applies(self, workload: Workload) -> bool:
        """Whether the base is stacked on data of ``workload``."""
        limits = zip((self.max_items, self.max_user_pairs, self.max_item_pairs, self.max_positives), workload)
        return all(limit is None or value <= limit for limit, value in limits)


#: ``training_users="auto"``: the label users of the training pools are a random sample when their
#: base scores (users x items x bases, over the label parts) would exceed this many values.  Building
#: the pools costs about that (each base's dense row of every user), while the scorer's weights (three
#: per base) gain nothing measurable from more queries: on gowalla (29,858 users x 40,981 items, six
#: bases) the pools of every user took 135 s of a 333 s fit, those of 8,733 users 42 s of 242 s, with
#: the same test figures (``benchmarks/gowalla_febr.py``, both validation metrics); ``make_tastes``'
#: 100,000 users x 30,000 items (five bases) keep 7,158 label users, whose pools take about 20 s.
#: No sample on the five data sets of the benchmark tables (citeulike-a, the largest, scores 6.8e8
#: values with its seven bases).
POOL_SCORES = 2**30

#: ``training_users="auto"``: the most label users of the training pools, over the label parts, a
#: random sample past it whatever the catalogue size.  On ``make_tastes``' 100,000 users x 10,000
#: items (four bases) :data:`POOL_SCORES` alone kept 53,687 label users, whose pools took 72 s of a
#: 171 s fit; with this limit they take 24 s (the fit, with EASE's faster solve, 95 s), for the
#: same model (the paired test kept the tail both times; ``benchmarks/scale_table.py``).  Every
#: label user of the benchmark sets and of gowalla's :data:`POOL_SCORES` sample is within it
#: (msweb, the most: 9,544).
POOL_USERS = 2**14

#: Catalogue size up to which FEBR stacks fsSLIM: it pays on small catalogues (msweb, 285 items,
#: where it is the best single model: ``FEBR()`` test ADG .5604 with it, .5574 without, 3 seeds)
#: and not its cost above (movielens-1m-implicit, 3,628 items: +.0003 ADG, with 1,156 validation users
#: in place of 1,000, for a fit 30% longer).
SLIM_ITEMS = 2048

#: :attr:`Workload.user_pairs` up to which FEBR stacks the user-side neighbourhoods (KUNN and
#: user-p): their fits cost about 6 ns a pair on two cores (``UserKNN()``: 26 CPU s at 4.9e9 pairs,
#: 252 s at 3.5e10, ``benchmarks/scale_table.py``), so at most about 13 s each here, and every data
#: set of the benchmark tables is within it (movielens-1m-implicit, the most, has 6.5e8).
USER_PAIRS = 2**31

#: :attr:`Workload.item_pairs` up to which FEBR stacks EASE: its fit stores at most that many entries
#: of the Gram matrix ``X^T X`` (12 bytes each), in practice about half of them (``make_tastes``
#: 300,000 users x 30,000 items: 4.7e8 pairs, 2.3e8 entries, 2.5 GiB; the five benchmark sets at
#: most 2.6e8 pairs).
ITEM_PAIRS = 2**30

#: :attr:`Workload.item_pairs` up to which FEBR stacks GF-CF, its ``P = R^T R`` formed (at most that
#: many entries of 8 bytes, :data:`GRAPH_BYTES`) and held beside FEBR's other bases.  In practice
#: about half of the bound: ``make_tastes``' 1,000,000 users x 100,000 items have 1.6e9 pairs and
#: 8.6e8 entries, 6.9 GB, where GF-CF is the best single model by 8% ADG
#: (``benchmarks/scale_table.py``) and scores a user in about 2.5 ms with ``P`` on two cores, 44 without.
GRAPH_PAIRS = 2**31

#: GF-CF's ``max_graph_bytes`` as a base: its ``P`` formed (its binary rows scored by one product)
#: wherever :data:`GRAPH_PAIRS` stacks it.
GRAPH_BYTES = GRAPH_ENTRY_BYTES * GRAPH_PAIRS

#: :attr:`Workload.positives` up to which FEBR stacks ChebyCF beside GF-CF.  ChebyCF scores a user
#: with seven dense products by the item graph, ``14 nnz(X)`` multiply-adds, and FEBR scores each base
#: for up to about 20,000 users (the pools' :data:`POOL_USERS`, the validation samples and the context
#: statistics): at this limit about 7e10, half a minute on two cores.  Within it: citeulike-a,
#: lastfm-2k, msweb and movielens-100k, where it pays (citeulike-a: its tail; without it ``FEBR()`` was
#: below ``ChebyCF()`` on MAP, ``benchmarks/febr_defaults.py``).  Past it: movielens-1m-implicit
#: (527,000 training positives, where it doubled the fit's CPU and was never in the tail) and gowalla
#: (810,128: Recall@20 .1850 -> .1888 for a fit of 311 CPU s, 19x ``EASE()``'s).
CHEBY_POSITIVES = 2**18

#: ``bases="auto"``: the models at their defaults (fsSLIM with ``k=100`` candidates per item).
AUTO_BASES = (
    AutoBase("EASE", EASE(), max_item_pairs=ITEM_PAIRS),
    AutoBase("GF-CF", GFCF(max_graph_bytes=GRAPH_BYTES), max_item_pairs=GRAPH_PAIRS),
    AutoBase(
        "ChebyCF", ChebyCF(max_graph_bytes=GRAPH_BYTES), max_item_pairs=GRAPH_PAIRS, max_positives=CHEBY_POSITIVES
    ),
    AutoBase("ALS", ALS()),
    AutoBase("RP3beta", RP3beta()),
    AutoBase("KUNN", KUNN(), max_user_pairs=USER_PAIRS),
    AutoBase("user-p", UserKNN(), max_user_pairs=USER_PAIRS),
    AutoBase("item-p", ItemKNN()),
    AutoBase("SLIM", SLIM(k=100), SLIM_ITEMS),
)


def auto_bases(workload: Workload) -> tuple[AutoBase, ...]:
    """The default bases stacked on data of ``workload``."""
    return tuple(b for b in AUTO_BASES if b.applies(workload))


def check_bases(bases) -> None:
    """Check ``bases``: ``"auto"`` or a non-empty list of recommenders or ``(name, recommender)``
    pairs (unique non-empty names), none of them a FEBR model."""
    if isinstance(bases, str) and bases == "auto":
        return
    if not isinstance(bases, (list, tuple)) or not bases:
        raise TypeError(f"bases must be 'auto' or a non-empty list of recommenders, got {bases!r}")
    for entry in bases:
        model = entry
        if isinstance(entry, tuple):
            if len(entry) != 2 or not (isinstance(entry[0], str) and entry[0]):
                raise TypeError(f"a named base must be a (non-empty str, recommender) pair, got {entry!r}")
            model = entry[1]
        if not isinstance(model, Recommender):
            raise TypeError(f"bases must be 'auto' or a non-empty list of recommenders, got {entry!r} in it")
        if isinstance(model, OptADGRecommender):
            raise TypeError("a FEBR model cannot be a base of FEBR")
    names = [name for name, _ in named_bases(bases)]
    if len(set(names)) < len(names):
        raise ValueError(f"the bases' names must differ, got {names}")


def named_bases(bases) -> list[tuple[str, Recommender]]:
    """``(name, recommender)`` of each of a list of ``bases`` (checked by ``check_bases``): a
    pair's own name, a bare recommender its class's (``ItemKNN``; ``ItemKNN<j>`` at place ``j`` when
    an earlier base has it)."""
    named = []
    for entry in bases:
        if isinstance(entry, tuple):
            named.append(entry)
            continue
        name = type(entry).__name__
        taken = any(name == other for other, _ in named)
        named.append((f"{name}{len(named)}" if taken else name, entry))
    return named


def resolve_bases(bases, X, num_threads=0) -> tuple[list[str], list[BaseSpec]]:
    """``(names, specs)`` of ``bases`` ("auto" or a list, :func:`named_bases`) for the feedback
    ``X``; for ``"auto"`` the default bases stacked on ``X`` (:func:`auto_bases`)."""
    if isinstance(bases, str):  # "auto"
        chosen = auto_bases(Workload.of(X))
        specs = []
        for base in chosen:
            template = clone(base.template).set_params(num_threads=num_threads)
            params = template.get_params()
            # sizes that must fit both sides: neighbourhoods (KUNN uses both), GF-CF's singular vectors
            for name, most in (("k", min(X.shape) - 1), ("factors", min(X.shape))):
                if name in params and params[name] > most:
                    template.set_params(**{name: most})
            specs.append(BaseSpec(template, None))
        return [base.name for base in chosen], specs
    named = named_bases(bases)
    specs = [BaseSpec(clone(base), base if hasattr(base, "user_items_") else None) for _, base in named]
    return [name for name, _ in named], specs


def pools_of_label_parts(specs, names, parts, held_out, n_top, exclude_known, n_pool_users, rng, stage, never=()):
    """The training pool of the label ``parts`` ``[(F, L), ...]``: each base fitted on ``F`` (one fit
    of each base held at a time), at most ``n_pool_users`` label users of each part (a random sample;
    ``None``: all).  No pool holds an item of ``held_out`` (the validation positives, never a
    training negative; ``None``: none) nor, with ``exclude_known``, of ``F``.  ``stage(message)`` reports
    progress; ``never``: items that are no one's candidate."""
    pools = []
    for part, (F, L) in enumerate(parts):
        bases_F = []
        for j, spec in enumerate(specs):
            stage(
                f"bases {j + 1}/{len(specs)}: {names[j]}"
                + (f", part {part + 1}/{len(parts)}" if len(parts) > 1 else "")
            )
            bases_F.append(clone(spec.template)._fit_trusted(F))
        stage("features of the training pairs")
        context = context_statistics(bases_F, F, sample_users_trusted(F, STAT_USERS))
        excluded = F if exclude_known else sp.csr_matrix(F.shape)
        if held_out is not None:
            excluded = (excluded + held_out).tocsr()
            excluded.sort_indices()
        # a child stream: every other draw of the fit stays as it is without a limit
        users = sample_users_trusted(L, n_pool_users, rng.spawn(1)[0])
        pools.append(build_pool(bases_F, context, F, L, n_top, users, excluded, never))
        del bases_F
    return concatenate_pools(pools)


def pool_user_limit(training_users, n_items, n_bases, n_parts):
    """The most label users of each part's training pool (``None``: all): ``training_users``, or for
    ``"auto"`` as many as keep the base scores of the parts within :data:`POOL_SCORES` values and
    the parts' users within :data:`POOL_USERS`."""
    if isinstance(training_users, str):  # "auto"
        return max(1, min(POOL_SCORES // (n_items * n_bases), POOL_USERS) // n_parts)
    return training_users


def training_pool(
    specs, names, X, held_out, holdout, exclude_top, candidates, training_users, rng, stage, never
) -> Pool:
    """FEBR's training pool: ``X`` split into label parts (``recsys_ltr.split.label_parts``),
    the heads of at most ``training_users`` label users of each part (``"auto"``: as many as keep
    the parts' base scores within :data:`POOL_SCORES` values; ``None``: all) under the bases fitted
    on its feature part (:func:`pools_of_label_parts`; ``held_out``: the validation positives, or
    ``None``).  A pool where no user has a label and a non-label in its head is refused before any
    training."""
    parts = label_parts(X, holdout, rng, exclude_top)
    limit = pool_user_limit(training_users, X.shape[1], len(specs), len(parts))
    pool = pools_of_label_parts(specs, names, parts, held_out, candidates, holdout != 0, limit, rng, stage, never)
    sizes = np.diff(pool.indptr)
    labels = np.diff(np.concatenate(([0], np.cumsum(pool.label)))[pool.indptr])
    if not np.any((labels > 0) & (labels < sizes)):
        raise ValueError(
            f"no user has a held-out label among the bases' top candidates={candidates} beside an item that "
            f"is not one: nothing to train on (holdout={holdout}, label_exclude_top={exclude_top}); raise "
            "candidates, lower label_exclude_top or give users more positives"
        )
    return pool


def fit_stack(specs, names, X, candidates, never, stage) -> Stack:
    """The stack FEBR predicts with: the bases fitted on ``X`` (``fit_on``) and their context
    statistics there."""
    bases = fit_on(specs, names, X, stage)
    return Stack(bases, context_statistics(bases, X, sample_users_trusted(X, STAT_USERS)), candidates, never)


def fit_on(specs, names, X, stage) -> list[Recommender]:
    """The bases for prediction, each fitted on ``X`` (:func:`reuse_or_fit`)."""
    bases = []
    for j, spec in enumerate(specs):
        stage(f"bases on X {j + 1}/{len(specs)}: {names[j]}")
        bases.append(reuse_or_fit(spec, X))
    return bases


def reuse_or_fit(spec: BaseSpec, X) -> Recommender:
    """The base for prediction: the user's fitted model when it was fitted on ``X`` itself, else the
    template fitted on ``X``."""
    fitted = spec.fitted
    if fitted is not None and fitted.user_items_.shape == X.shape and (fitted.user_items_ != X).nnz == 0:
        return fitted
    return clone(spec.template)._fit_trusted(X)
