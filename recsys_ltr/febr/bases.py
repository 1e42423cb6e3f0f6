"""The base recommenders of stacked FEBR: the default set, their tuning on the training labels, reuse.

With ``bases="auto"`` FEBR stacks the strong simple models a user would otherwise pick -- EASE
(dense up to :data:`DENSE_EASE_ITEMS` items, sparse above), ALS, RP3β, KUNN, user-p, item-p and,
up to :data:`SLIM_ITEMS` items, fsSLIM -- each with a small grid of its main hyper-parameters.  :data:`AUTO_BASES` is the one list of default bases: the command
line's stacked methods stack its tuned rows.  The grid is searched leak-free: every setting is fitted on the
feature part ``F`` of the training matrix and ranked by its ADG on the label part ``L`` (the
held-out positives that the features are trained to predict); the winner's ``F``-fit makes the
training features and its setting is refitted on all of ``X`` for prediction.  A grid shares what its
settings have in common (``Recommender._fit_grid_trusted``: EASE's Gram matrix, a neighbourhood fitted
once at its largest ``k``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.base import clone

from ..metrics import evaluate_trusted
from ..models import ALS, EASE, KUNN, SLIM, ItemKNN, RP3beta, UserKNN
from ..models.base import Recommender
from ..split import sample_users_trusted
from .stacking import build_pool, concatenate_pools, context_statistics
from .training import STAT_USERS

__all__ = [
    "AUTO_BASES",
    "DENSE_EASE_ITEMS",
    "SLIM_ITEMS",
    "AutoBase",
    "BaseSpec",
    "auto_bases",
    "fit_base",
    "fit_on",
    "pools_of_label_parts",
    "resolve_bases",
    "reuse_or_fit",
]


class BaseSpec(NamedTuple):
    """One base: an unfitted template, the settings to search (``()``: none) and, when the user
    gave a fitted model, that model."""

    template: Recommender
    grid: tuple[dict, ...]
    fitted: Recommender | None


#: Catalogue size up to which FEBR's EASE base is solved densely, the sparse approximate inverse
#: above: the dense solve costs about ``n_items^3`` flops (4096 items: 7e10, a few seconds on two
#: cores) and FEBR fits each base up to five times (grid, label part, refit), while the sparse one
#: grows as ``n_items k^2`` (lastfm-2k, 17,632 items: 4 s against about 5 minutes, test ADG .2121
#: against .2128).
DENSE_EASE_ITEMS = 4096


class AutoBase(NamedTuple):
    """One default base: its name (the command line's row), template, grid and the largest
    catalogue it is stacked on (``None``: any)."""

    name: str
    template: Recommender
    grid: tuple[dict, ...]
    max_items: int | None = None

    def applies(self, n_items) -> bool:
        """Whether the base is stacked on a catalogue of ``n_items`` items."""
        return self.max_items is None or n_items <= self.max_items


#: Catalogue size up to which FEBR stacks fsSLIM: it pays on small catalogues (msweb, 285 items,
#: where it is the best single model: ``FEBR()`` test ADG .5604 with it, .5574 without, 3 seeds)
#: and not its cost above (movielens-1m-implicit, 3,628 items: +.0003 ADG, with 1,156 validation users
#: in place of 1,000, for a fit 30% longer).
SLIM_ITEMS = 2048

#: ``bases="auto"``.  ALS's grid crosses regularisation with the confidence of the positives
#: (implicit's penalty is unscaled, sec. "Noticed" of the eval results); RP3β's popularity discount
#: is the hyper-parameter it is most sensitive to.  Settings that never won on the five data sets
#: (two seeds each, ``benchmarks/febr_grids.py``) are not searched: ALS at regularization 1 and
#: alpha 2, RP3β at beta .7, KUNN and item-p at k = 50 (each at least .003 ADG below its grid's best).
AUTO_BASES = (
    AutoBase(
        "EASE", EASE(dense_max_items=DENSE_EASE_ITEMS), tuple({"regularization": v} for v in (500.0, 100.0, 2000.0))
    ),
    AutoBase(
        "ALS", ALS(), tuple({"regularization": r, "alpha": a} for r, a in ((100.0, 20.0), (10.0, 10.0), (100.0, 10.0)))
    ),
    AutoBase("RP3beta", RP3beta(), tuple({"beta": b} for b in (0.5, 0.3))),
    AutoBase("KUNN", KUNN(), tuple({"k": k} for k in (100, 200))),
    AutoBase("user-p", UserKNN(), tuple({"k": k} for k in (100, 50, 200))),
    AutoBase("item-p", ItemKNN(), tuple({"k": k} for k in (100, 200))),
    AutoBase("SLIM", SLIM(k=100), tuple({"k": k} for k in (100, 50)), SLIM_ITEMS),
)


def auto_bases(n_items) -> tuple[AutoBase, ...]:
    """The default bases stacked on a catalogue of ``n_items`` items."""
    return tuple(b for b in AUTO_BASES if b.applies(n_items))


def resolve_bases(bases, shape, num_threads=0) -> tuple[list[str], list[BaseSpec]]:
    """``(names, specs)`` of ``bases`` ("auto" or a list of recommenders) for data of ``shape``."""
    if isinstance(bases, str):  # "auto"
        names, specs = [], []
        for name, template, grid, _ in auto_bases(shape[1]):
            template = clone(template).set_params(num_threads=num_threads)
            k_max = min(shape) - 1  # neighbourhood sizes must fit both sides (KUNN uses both)
            if "k" in template.get_params() and template.k > k_max:
                template.set_params(k=k_max)
            grid = tuple(g for g in grid if g.get("k", 0) <= k_max) or ({"k": k_max},)
            names.append(name)
            specs.append(BaseSpec(template, grid, None))
        return names, specs
    names, specs = [], []
    for base in bases:
        name = type(base).__name__
        names.append(name if name not in names else f"{name}{len(names)}")
        fitted = base if hasattr(base, "user_items_") else None
        specs.append(BaseSpec(clone(base), (), fitted))
    return names, specs


def fit_base(spec: BaseSpec, F, L, n_eval_users, rng) -> Recommender:
    """The base fitted on the feature part ``F``: its template, or the setting of its grid with the
    best ADG on the labels ``L`` (at most ``n_eval_users`` label users)."""
    if not spec.grid:
        return clone(spec.template)._fit_trusted(F)
    users = sample_users_trusted(L, n_eval_users, rng)
    best, best_adg = None, -np.inf
    for model in spec.template._fit_grid_trusted(F, spec.grid):
        adg = evaluate_trusted(model, F, L, None, ["ADG"], users=users, num_threads=model.num_threads)["ADG"]
        if adg > best_adg:
            best, best_adg = model, adg
    return best


def pools_of_label_parts(specs, names, parts, n_top, exclude_known, n_eval_users, n_pool_users, rng, stage, never=()):
    """``(pool, settings)``: the training pool of the label ``parts`` ``[(F, L), ...]`` (each base
    fitted on ``F``, its grid searched on the first part and its winner used on the others; one fit
    of each base held at a time; at most ``n_pool_users`` label users of each part, a random sample,
    ``None``: all) and the chosen setting of every base.  ``stage(message)`` reports progress;
    ``never``: items that are no one's candidate."""
    pools, settings = [], None
    for part, (F, L) in enumerate(parts):
        bases_F = []
        for j, spec in enumerate(specs):
            stage(
                f"bases {j + 1}/{len(specs)}: {names[j]}"
                + (f", part {part + 1}/{len(parts)}" if len(parts) > 1 else "")
            )
            if settings is None:
                bases_F.append(fit_base(spec, F, L, n_eval_users, rng))
            else:
                bases_F.append(clone(spec.template).set_params(**settings[j])._fit_trusted(F))
        settings = settings or [b.get_params() for b in bases_F]  # the first part's grid winners
        stage("features of the training pairs")
        context = context_statistics(bases_F, F, sample_users_trusted(F, STAT_USERS))
        # a child stream: every other draw of the fit stays as it is without a limit
        users = sample_users_trusted(L, n_pool_users, rng.spawn(1)[0])
        pools.append(build_pool(bases_F, context, F, L, n_top, users, exclude_known=exclude_known, never=never))
        del bases_F
    return concatenate_pools(pools), settings


def fit_on(specs, names, settings, X, stage) -> list[Recommender]:
    """The bases for prediction, each fitted on ``X`` at its chosen setting (:func:`reuse_or_fit`)."""
    bases = []
    for j, (spec, params) in enumerate(zip(specs, settings)):
        stage(f"bases on X {j + 1}/{len(specs)}: {names[j]}")
        bases.append(reuse_or_fit(spec, params, X))
    return bases


def reuse_or_fit(spec: BaseSpec, params: dict, X) -> Recommender:
    """The base for prediction: the user's fitted model when it was fitted on ``X`` itself, else the
    chosen ``params`` fitted on ``X``."""
    fitted = spec.fitted
    if fitted is not None and fitted.user_items_.shape == X.shape and (fitted.user_items_ != X).nnz == 0:
        return fitted
    return clone(spec.template).set_params(**params)._fit_trusted(X)
