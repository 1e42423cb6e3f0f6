"""Top-N recommenders sharing one API (:class:`~recsys_ltr.models.base.Recommender`).

:class:`FEBR` lives in :mod:`recsys_ltr.febr` (its features, stacking and model) and is re-exported
here, imported on first use.
"""

from .base import Recommender
from .content import ContentItemKNN
from .ease import EASE
from .factorization import ALS, BPR, LightFMWARP
from .neighborhood import KUNN, ItemKNN, UserKNN
from .popularity import Popularity
from .rp3beta import RP3beta
from .slim import SLIM

__all__ = [
    "ALS",
    "BPR",
    "EASE",
    "FEBR",
    "KUNN",
    "SLIM",
    "ContentItemKNN",
    "ItemKNN",
    "LightFMWARP",
    "Popularity",
    "RP3beta",
    "Recommender",
    "UserKNN",
]


def __getattr__(name):
    if name == "FEBR":  # lazy: recsys_ltr.febr imports this package's base class
        from ..febr.model import FEBR

        return FEBR
    raise AttributeError(f"module 'recsys_ltr.models' has no attribute {name!r}")
