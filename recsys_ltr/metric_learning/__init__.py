"""Metric learning: FRML (dissertation ch. 3), MLR / R-MLR (McFee & Lanckriet 2010; dissertation
ch. 2) and GMML (Zadeh, Hosseini & Sra 2016).

Estimators follow metric-learn's shape: ``fit``, ``transform``, ``components_`` and
``get_mahalanobis_matrix()``.  The query-document learner L-GMML lives in :mod:`recsys_ltr.ltr`.
"""

from .frml import FRML
from .gmml import GMML
from .mlr import MLR, RMLR

__all__ = ["FRML", "GMML", "MLR", "RMLR"]
