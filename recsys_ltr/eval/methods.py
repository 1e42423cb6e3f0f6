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

    def grid(self, budget: str) -> tuple[dict, ...]:
        """Settings to try under ``budget`` (one empty setting when there is nothing to tune)."""
        return self.grids.get(budget, ()) or ({},)

    def build(self, **params):
        return self.factory(**params)


def _popularity(**params):
    from recsys_ltr.models import Popularity

    return Popularity(**params)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("popularity", _popularity, description="global item popularity in train"),
    )
}


def get_method(name: str) -> Method:
    """Look a method up by name, with a clear error listing the known ones."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}") from None
