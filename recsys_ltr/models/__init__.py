"""Top-N recommenders sharing one API (:class:`~recsys_ltr.models.base.Recommender`).

The learning-to-rank recommenders built on these, :class:`~recsys_ltr.febr.FEBR` and
:class:`~recsys_ltr.febr.AffinityFEBR`, are in :mod:`recsys_ltr.febr`.
"""

from .base import Recommender
from .content import ContentItemKNN
from .ease import EASE
from .factorization import ALS, BPR, LightFMWARP
from .graph_filter import BSPM, GFCF, ChebyCF
from .neighborhood import KUNN, ItemKNN, UserKNN
from .popularity import Popularity
from .rp3beta import RP3beta
from .slim import SLIM

__all__ = [
    "ALS",
    "BPR",
    "BSPM",
    "EASE",
    "GFCF",
    "KUNN",
    "SLIM",
    "ChebyCF",
    "ContentItemKNN",
    "ItemKNN",
    "LightFMWARP",
    "Popularity",
    "RP3beta",
    "Recommender",
    "UserKNN",
]


def __getattr__(name):
    """Say where the learning-to-rank recommenders live (``from recsys_ltr.models import FEBR``)."""
    if name in ("FEBR", "AffinityFEBR"):
        raise ImportError(
            f"{name} stacks the models of recsys_ltr.models and lives one layer above them: "
            f"from recsys_ltr.febr import {name}"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
