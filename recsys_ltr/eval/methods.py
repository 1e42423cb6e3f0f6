"""The recommenders that ``python -m recsys_ltr.eval`` can compare, with their tuning grids.

Each method names a factory (keyword arguments -> unfitted estimator exposing ``fit(X)`` and
``score(user_ids)``) and, per budget, the grid of settings tuned on validation ADG
(dissertation sec. 4.7.3: the main hyper-parameter first, e.g. the neighbourhood size k).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Method:
    """A named recommender and its hyper-parameter grid per budget."""

    name: str
    factory: Callable[..., object]
    grids: dict[str, tuple[dict, ...]] = field(default_factory=dict)
    description: str = ""
    k_axis: tuple[int, ...] = ()  # axes of X whose size bounds the neighbourhood size k

    def grid(self, budget: str, shape: tuple[int, int] | None = None) -> tuple[dict, ...]:
        """Settings to try under ``budget`` (one empty setting when there is nothing to tune).

        With the data's ``shape``, settings whose ``k`` exceeds the catalogue (``n - 1`` along
        ``k_axis``) are dropped; if none is left, the largest feasible ``k`` is used.
        """
        grid = self.grids.get(budget, ()) or ({},)
        if shape is None or not self.k_axis:
            return grid
        k_max = min(shape[a] for a in self.k_axis) - 1
        feasible = tuple(p for p in grid if p.get("k") is None or p["k"] <= k_max)
        return feasible or tuple(dict(p, k=k_max) for p in grid[:1])

    def build(self, **params):
        return self.factory(**params)


def _model(class_name, **fixed):
    """Factory for a ``recsys_ltr.models`` class, imported on first use."""

    def build(**params):
        import recsys_ltr.models as models

        return getattr(models, class_name)(**fixed, **params)

    return build


#: Neighbourhood sizes of the dissertation's grid (sec. 4.7.3) and a quick subset.
K_PAPER = (10, 20, 50, 100, 200, 500, 1000)
K_QUICK = (20, 50, 100, 200)


def _k_grid(ks, **extra):
    return tuple({"k": k, **extra} for k in ks)


_K_GRIDS = {"quick": _k_grid(K_QUICK), "paper": _k_grid(K_PAPER)}


def _slim_grid(ks):
    # fsSLIM: main k, secondary l1 = l2 in {10, 1, 0.1} in the paper (both from the same grid here).
    return tuple({"k": k, "l1": r, "l2": r} for k in ks for r in (10.0, 1.0, 0.1))


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("popularity", _model("Popularity"), description="global item popularity in train"),
        Method("item-p", _model("ItemKNN"), _K_GRIDS, "item-based cosine KNN (aggsum of item affinities)", (1,)),
        Method("user-p", _model("UserKNN"), _K_GRIDS, "user-based cosine KNN", (0,)),
        Method("KUNN", _model("KUNN", side="both"), _K_GRIDS, "KUNN, Eq. (4.4)", (0, 1)),
        Method("KUNN-i", _model("KUNN", side="item"), _K_GRIDS, "item-p over the KUNN item affinity, Eq. (4.5)", (1,)),
        Method("KUNN-u", _model("KUNN", side="user"), _K_GRIDS, "user-p over the KUNN user affinity, Eq. (4.6)", (0,)),
        Method("SLIM", _model("SLIM"), {"quick": tuple({"k": k} for k in (50, 100)), "paper": _slim_grid(K_PAPER)},
               "fsSLIM (Ning & Karypis 2011) on cosine neighbourhoods", (1,)),
    )
}


def get_method(name: str) -> Method:
    """Look a method up by name, with a clear error listing the known ones."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}") from None
