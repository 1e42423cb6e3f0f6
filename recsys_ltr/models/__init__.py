"""Top-N recommenders sharing one API (:class:`~recsys_ltr.models.base.Recommender`)."""

from ..febr.model import FEBR
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
