"""Metric learning to rank: FRML (dissertation ch. 3), GMML and L-GMML (Su, King & Lyu 2017).

Estimators follow metric-learn's shape: ``fit``, ``transform``, ``components_`` and
``get_mahalanobis_matrix()``.
"""

from .frml import FRML
from .gmml import GMML
from .lgmml import LGMML

__all__ = ["FRML", "GMML", "LGMML"]
