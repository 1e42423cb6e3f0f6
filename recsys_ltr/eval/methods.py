"""The recommenders that ``python -m recsys_ltr.eval`` can compare, with their tuning grids.

Each method names a factory (keyword arguments -> unfitted estimator exposing ``fit(X)`` --
``fit(X, validation=V)`` when ``uses_validation`` -- and ``score(user_ids)``) and, per budget, the
grids of the two-level tuning on validation ADG (dissertation sec. 4.7.3): the values of the
*main* hyper-parameter (neighbourhood size ``k``, number of factors, ...) and the settings of the
*secondary* ones (regularisers), whose first setting is the default used while the main one is
tuned.  ``fixed`` holds per-budget parameters that are not tuned (e.g. FEBR's iteration budget).
A *stacking* method (``stack_on``) runs after its base methods on each fold and receives their
chosen settings as ``bases`` (``recsys_ltr.eval.tuning.stack_context``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from ..febr import FEBR, AffinityFEBR
from ..febr.bases import AUTO_BASES, Workload
from ..models import (
    ALS,
    BPR,
    BSPM,
    EASE,
    GFCF,
    KUNN,
    SLIM,
    ChebyCF,
    ItemKNN,
    LightFMWARP,
    Popularity,
    RP3beta,
    UserKNN,
)


@dataclass(frozen=True)
class Method:
    """A named recommender and its two-level hyper-parameter grids per budget ("quick", "paper")."""

    name: str
    factory: Callable[..., object]
    main: str | None = None  # name of the main hyper-parameter (None: nothing to tune at level 1)
    main_grid: dict[str, tuple] = field(default_factory=dict)
    secondary: dict[str, tuple[dict, ...]] = field(default_factory=dict)  # first setting = defaults
    fixed: dict[str, dict] = field(default_factory=dict)
    group: str = "n/a"  # the "Aff. Matrix" column of Tables 4.3 / 4.4
    description: str = ""
    k_axis: tuple[int, ...] = ()  # axes of X whose size bounds the neighbourhood size k
    uses_validation: bool = False  # fit(X, validation=V): early stopping on the validation matrix
    seeded: bool = False  # takes random_state
    threaded: bool = True  # takes num_threads
    skip_on: tuple[type, ...] = (ImportError,)  # errors meaning "cannot run here": skipped, not fatal
    keep_best: bool = True  # tuning holds the best model while fitting the next (False: refits it at the end)
    stack_on: tuple[str, ...] = ()  # base methods whose settings tuned on the fold become ``bases``

    def main_values(self, budget: str, shape: tuple[int, int] | None = None) -> tuple:
        """Main hyper-parameter values tried under ``budget`` (``(None,)`` when there is none).

        With the data's ``shape``, a neighbourhood size ``k`` (or a number of ``factors``) beyond the
        catalogue (``n - 1`` along ``k_axis``) is dropped; if none is left, the largest feasible
        value is used.
        """
        values = self.main_grid.get(budget, ()) if self.main else ()
        if not values:
            return (None,)
        if shape is None or self.main not in ("k", "factors") or not self.k_axis:
            return tuple(values)
        k_max = min(shape[a] for a in self.k_axis) - 1
        return tuple(v for v in values if v <= k_max) or (k_max,)

    def defaults(self, budget: str) -> dict:
        """Fixed parameters and the default secondary setting of ``budget``."""
        secondary = self.secondary.get(budget, ())
        return {**self.fixed.get(budget, {}), **(secondary[0] if secondary else {})}

    def main_settings(self, budget: str, shape: tuple[int, int] | None = None) -> tuple[dict, ...]:
        """Level 1: every main value with the secondary hyper-parameters at their defaults."""
        base = self.defaults(budget)
        return tuple(base if v is None else {**base, self.main: v} for v in self.main_values(budget, shape))

    def secondary_settings(self, budget: str, best: dict) -> tuple[dict, ...]:
        """Level 2: every secondary setting at the main value of ``best`` (the level-1 winner)."""
        return tuple({**best, **s} for s in self.secondary.get(budget, ())) or (dict(best),)

    def build(self, **params):
        return self.factory(**params)

    def stacked(self, workload: Workload | None = None) -> tuple[str, ...]:
        """The base methods stacked on data of ``workload`` (``None``: any data); a default base of
        FEBR is stacked where ``FEBR()`` stacks it (``AutoBase.applies``)."""
        if workload is None:
            return self.stack_on
        return tuple(n for n in self.stack_on if n not in _AUTO_BASES or _AUTO_BASES[n].applies(workload))

    def spec(self) -> dict:
        """JSON-able description of everything that changes the method's results (for the cache key)."""
        return {
            "name": self.name,
            "main": self.main,
            "main_grid": self.main_grid,
            "secondary": self.secondary,
            "fixed": self.fixed,
            "uses_validation": self.uses_validation,
            "stack_on": self.stack_on,
        }


def _model(cls, **fixed):
    """Factory of a recommender class with ``fixed`` parameters."""
    return partial(cls, **fixed)


#: Neighbourhood sizes of the dissertation's grid (sec. 4.7.3) and a quick subset.
K_PAPER = (10, 20, 50, 100, 200, 500, 1000)
K_QUICK = (20, 50, 100, 200)
#: Numbers of factors of the dissertation's grid (sec. 4.7.3) and a quick subset.
FACTORS_PAPER = (5, 10, 20, 50, 100, 200)
FACTORS_QUICK = (20, 50, 100)


def _both(quick, paper):
    return {"quick": quick, "paper": paper}


def _knn(name, cls, group, description, k_axis, **fixed):
    return Method(
        name,
        _model(cls, **fixed),
        "k",
        _both(K_QUICK, K_PAPER),
        group=group,
        description=description,
        k_axis=k_axis,
    )


# fsSLIM: l1 = l2 in {10, 1, 0.1} (sec. 4.7.3), default 1 first.
_SLIM_SECONDARY = tuple({"l1": r, "l2": r} for r in (1.0, 10.0, 0.1))
# FEBR: regularization (the dissertation's lambda) in {1e-4, ..., 1e-1} (sec. 4.7.3), at most 2e6
# samples, early stopping; the quick budget spends less on training and evaluates early stopping on
# 1000 validation users.
_FEBR_SECONDARY = _both(
    ({"regularization": 1e-3}, {"regularization": 1e-2}),
    tuple({"regularization": v} for v in (1e-3, 1e-4, 1e-2, 1e-1)),
)
_FEBR_FIXED = _both(
    {"max_iter": 1_000_000, "eval_every": 50_000, "early_stopping": 2, "validation_users": 1000},
    {"max_iter": 2_000_000, "eval_every": 100_000, "early_stopping": 5, "validation_users": None},
)
# WRMF: the dissertation varies Hu et al.'s a in c = 1 + a r over {1, 0.1, 0.01, 0.001}, implicit's
# alpha = 1 + a (models.ALS).  implicit's penalty is not scaled by counts, so the quick grid also
# tunes it: on msweb only regularization >= 100 lifts ALS above popularity.
_ALS_SECONDARY = _both(
    tuple({"regularization": r, "alpha": a} for r in (10.0, 1.0, 100.0) for a in (10.0, 2.0, 40.0)),
    tuple({"alpha": 1.0 + a} for a in (1.0, 0.1, 0.01, 0.001)),
)
# RP3β: Dacrema et al. (2019) search alpha, beta in [0, 2]; scores are sensitive to beta (ADG
# peaks near 0.5 on movielens-100k and 0.6 on movielens-1m-implicit), hence steps of 0.1 there.
# The defaults (1, 0.5) come first.
_RP3BETA_QUICK = ((1.0, 0.5), (1.0, 0.3), (1.0, 0.4), (1.0, 0.6), (1.0, 0.7)) + tuple(
    (0.5, b) for b in (0.3, 0.4, 0.5, 0.6, 0.7)
)
_RP3BETA_PAPER = ((1.0, 0.5),) + tuple(
    (a, b)
    for a in (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
    for b in (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.5, 2.0)
    if (a, b) != (1.0, 0.5)
)
_RP3BETA_SECONDARY = _both(
    tuple({"alpha": a, "beta": b} for a, b in _RP3BETA_QUICK),
    tuple({"alpha": a, "beta": b} for a, b in _RP3BETA_PAPER),
)
_AFFINITIES = {"cos": ("cosine", "cosine"), "KUNN": ("kunn", "KUNN"), "SLIM": ("slim", "SLIM")}
_EASE_PAPER = (10.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)  # Steck's lambda, no paper grid
_SIDES = {"i": ("item", (1,)), "u": ("user", (0,)), "iu": ("both", (0, 1))}


def _febr_slim_secondary(budget):
    """FEBR's regularization crossed with SLIM's l1 = l2 grid: the features come from the same tuned
    affinity as the SLIM row, so that the starting point (Theorem 4.3) is the tuned SLIM."""
    slim = _SLIM_SECONDARY if budget == "paper" else _SLIM_SECONDARY[:2]
    return tuple({**febr, "affinity_params": reg} for reg in slim for febr in _FEBR_SECONDARY[budget])


#: The base methods that FEBR-stack / FEBR-rerank stack: FEBR's default bases (one list), tuned as rows of the table.
STACK_ON = tuple(base.name for base in AUTO_BASES)
_AUTO_BASES = {base.name: base for base in AUTO_BASES}
_STACK_FIXED = _both(
    {"max_iter": 1_000_000, "eval_every": 50_000, "early_stopping": 3, "validation_users": 2000},
    {"max_iter": 2_000_000, "eval_every": 100_000, "early_stopping": 5, "validation_users": None},
)


def _febr_stacked(name, scorer, secondary, description):
    return Method(
        name,
        _model(FEBR, scorer=scorer),
        secondary=secondary,
        fixed=_STACK_FIXED,
        group="stacked",
        description=description,
        uses_validation=True,
        seeded=True,
        stack_on=STACK_ON,
    )


def _febr(side, affinity):
    kind, group = _AFFINITIES[affinity]
    side_name, k_axis = _SIDES[side]
    secondary = _FEBR_SECONDARY if affinity != "SLIM" else {b: _febr_slim_secondary(b) for b in _FEBR_SECONDARY}
    return Method(
        f"FEBR{side}-{affinity}",
        _model(AffinityFEBR, affinity=kind, side=side_name, holdout=0.0, validation_fraction=0.0),
        "k",
        _both((50, 100), K_PAPER),
        secondary,
        _FEBR_FIXED,
        group,
        f"FEBR{side} (sec. 4.5-4.6) over the {group} affinity, trained by OPT-ADG (Alg. 4.2)",
        k_axis,
        uses_validation=True,
        seeded=True,
    )


#: Every method of the command line by name (``--models``): its factory and tuning grids.
METHODS: dict[str, Method] = {
    m.name: m
    for m in (  # the rows of Tables 4.3 / 4.4, then the extra anchors
        _knn("item-p", ItemKNN, "cosine", "item-based cosine KNN (aggsum of item affinities)", (1,)),
        _knn("user-p", UserKNN, "cosine", "user-based cosine KNN", (0,)),
        Method(
            "SLIM",
            _model(SLIM),
            "k",
            _both((50, 100), K_PAPER),
            _both(_SLIM_SECONDARY[:2], _SLIM_SECONDARY),
            group="SLIM",
            description="fsSLIM (Ning & Karypis 2011) on cosine neighbourhoods",
            k_axis=(1,),
        ),
        _knn("KUNN", KUNN, "KUNN", "KUNN, Eq. (4.4)", (0, 1), side="both"),
        Method(
            "RP3beta",
            _model(RP3beta),
            "k",
            _both(K_QUICK, K_PAPER),
            _RP3BETA_SECONDARY,
            group="RP3β",
            description="RP3β (Paudel et al. 2017) as in Dacrema et al. (2019): popularity-discounted 3-step walk",
            k_axis=(1,),
        ),
        _knn("KUNN-i", KUNN, "KUNN", "item-p over the KUNN item affinity, Eq. (4.5)", (1,), side="item"),
        _knn("KUNN-u", KUNN, "KUNN", "user-p over the KUNN user affinity, Eq. (4.6)", (0,), side="user"),
        # Paper grids: the dissertation's (BPR's four regularisers share one value here).
        Method(
            "BPR",
            _model(BPR),
            "factors",
            _both(FACTORS_QUICK, FACTORS_PAPER),
            _both(
                ({"regularization": 0.01}, {"regularization": 0.001}, {"regularization": 0.1}),
                tuple({"regularization": v} for v in (0.0025, 0.025, 0.00025)),
            ),
            description="BPR-MF (Rendle et al. 2009), implicit's implementation",
            seeded=True,
        ),
        Method(
            "ALS",
            _model(ALS),
            "factors",
            _both(FACTORS_QUICK, FACTORS_PAPER),
            _ALS_SECONDARY,
            description="WRMF (Hu et al. 2008), implicit's ALS",
            seeded=True,
        ),
        Method("popularity", _model(Popularity), description="global item popularity in train"),
        *(_febr(side, aff) for aff in ("cos", "KUNN") for side in ("i", "u", "iu")),
        _febr("i", "SLIM"),
        _febr_stacked(
            "FEBR-stack",
            "linear",
            _both(({"regularization": 1e-4},), tuple({"regularization": v} for v in (1e-4, 1e-3, 1e-2))),
            "FEBR over its default bases tuned as rows of the table (leak-free stacking), OPT-ADG",
        ),
        _febr_stacked(
            "FEBR-rerank",
            "lambdamart",
            _both(({"candidates": 100}, {"candidates": 50}), tuple({"candidates": m} for m in (100, 50, 200))),
            "FEBR-stack's features re-ranked by LambdaMART (LightGBM, optional extra)",
        ),
        Method(
            "LightFM",
            _model(LightFMWARP),
            "factors",
            _both((20, 50), FACTORS_PAPER),
            _both(
                ({"regularization": 0.0}, {"regularization": 1e-5}),
                tuple({"regularization": v} for v in (0.0, 1e-6, 1e-5, 1e-4)),
            ),
            description="LightFM WARP (optional extra: the lightfm module)",
            seeded=True,
        ),
        Method(
            "GF-CF",
            _model(GFCF),
            "factors",
            _both((256, 64), (32, 64, 128, 256)),
            _both(tuple({"alpha": a} for a in (0.3, 0.1, 1.0)), tuple({"alpha": a} for a in (0.3, 0.0, 0.1, 0.5, 1.0))),
            description="GF-CF (Shen et al. 2021): linear and ideal low-pass graph filters, closed form",
            seeded=True,
        ),
        Method(
            "BSPM",
            _model(BSPM),
            "factors",
            _both((448, 256, 64), (64, 128, 256, 448)),
            _both(
                tuple({"sharpen_time": t, "beta": b} for t, b in ((2.5, 0.2), (1.0, 0.2), (2.5, 0.5), (0.5, 0.0))),
                tuple({"sharpen_time": t, "beta": b} for t in (2.5, 0.5, 1.0, 1.5, 2.0) for b in (0.2, 0.0, 0.3, 0.5)),
            ),
            description="BSPM (Choi et al. 2023): blurring and sharpening of the graph filters, closed form",
            k_axis=(0, 1),
            seeded=True,
        ),
        Method(
            "ChebyCF",
            _model(ChebyCF),
            "factors",
            _both((512, 256), (128, 256, 512)),
            _both(
                tuple(
                    {"flatness": f, "alpha": a, "beta": b}
                    for f, a, b in ((1.5, 0.2, 0.4), (1.0, 0.2, 0.4), (2.0, 0.2, 0.4), (1.5, 0.1, 0.3))
                ),
                tuple(
                    {"flatness": f, "alpha": a, "beta": b}
                    for f in (1.5, 1.0, 2.0)
                    for a in (0.2, 0.1, 0.3)
                    for b in (0.4, 0.3, 0.5)
                ),
            ),
            description="ChebyCF (Kim et al. 2025): a Chebyshev-interpolated spectral filter of the item graph, closed form",
            k_axis=(0, 1),
            seeded=True,
        ),
        Method(
            "EASE",
            _model(EASE),  # EASE() as FEBR() stacks it: dense up to 4,096 items (the dense solve is n^3)
            "regularization",
            _both((100.0, 500.0, 2000.0), _EASE_PAPER),
            description="EASE (Steck 2019): closed form up to 4096 items, its sparse approximation above",
            threaded=False,
            skip_on=(ImportError, MemoryError),
            keep_best=False,  # the dense item-item matrix dominates memory
        ),
    )
}

#: Exported recommenders the command line cannot build from a feedback matrix alone, and why.
NO_ROW = {"ContentItemKNN": "needs the items' content (an affinity over their features)"}


def exported_recommenders() -> dict[str, type]:
    """``{name: class}`` of every recommender :mod:`recsys_ltr.models` and :mod:`recsys_ltr.febr` export."""
    from .. import febr, models

    classes = {name: getattr(module, name) for module in (models, febr) for name in module.__all__}
    return {
        name: cls
        for name, cls in classes.items()
        if isinstance(cls, type) and issubclass(cls, models.Recommender) and cls is not models.Recommender
    }


def _rows_at_defaults(methods: dict) -> dict:
    """A row for every exported recommender (:func:`exported_recommenders`) that no method builds yet
    (but :data:`NO_ROW`), at its defaults and untuned: a model added to the package is on the command
    line by itself, until a tuned row of its own replaces this one."""
    built = {getattr(m.factory, "func", m.factory) for m in methods.values()}
    rows = {}
    for name, cls in exported_recommenders().items():
        if cls not in built and name not in NO_ROW:
            seeded = "random_state" in inspect.signature(cls).parameters
            rows[name] = Method(name, _model(cls), seeded=seeded, description=f"{name}() at its defaults")
    return rows


METHODS.update(_rows_at_defaults(METHODS))

#: The default ``--models``: every method.
ALL_METHODS = tuple(METHODS)


def get_method(name: str) -> Method:
    """Look a method up by name, with a clear error listing the known ones."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}") from None
