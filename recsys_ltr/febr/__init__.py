"""FEBR: learning to rank on per-(user, item) features extracted from the feedback matrix
(dissertation sec. 4.5-4.6).

* :mod:`recsys_ltr.febr.features` -- the features (active items / users, six aggregators and the
  missing indicator, sec. 4.5.2-4.5.4) and :class:`FeatureExtractor`;
* :mod:`recsys_ltr.febr.model` -- :class:`FEBR`, the linear scorer trained by OPT-ADG (Alg. 4.2)
  through the shared WARP engine.
"""

from .features import AGGREGATORS, FeatureExtractor, build_affinities, feature_names
from .model import FEBR

__all__ = ["AGGREGATORS", "FEBR", "FeatureExtractor", "build_affinities", "feature_names"]
