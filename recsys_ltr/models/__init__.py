"""Top-N recommenders sharing one API (:class:`~recsys_ltr.models.base.Recommender`)."""

from .base import Recommender
from .content import ContentItemKNN
from .ease import EASE
from .factorization import ALS, BPR, LightFMWARP
from ..febr.model import FEBR
from .neighborhood import KUNN, ItemKNN, UserKNN
from .popularity import Popularity
from .slim import SLIM

__all__ = ["Recommender", "Popularity", "ItemKNN", "UserKNN", "KUNN", "SLIM", "FEBR", "ContentItemKNN",
           "EASE", "ALS", "BPR", "LightFMWARP"]
