"""Query-document learning to rank: ``fit(X, y, qid)`` / ``predict(X, qid)`` learners scored by
:mod:`recsys_ltr.query_metrics` (NDCG@k with graded gains, MAP).

* :class:`LGMML` -- localized geometric mean metrics (Su, King & Lyu, SIGIR 2017).
"""

from .lgmml import LGMML

__all__ = ["LGMML"]
