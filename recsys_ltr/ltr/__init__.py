"""Query-document learning to rank: ``fit(X, y, qid)`` / ``predict(X, qid)`` learners scored by
:mod:`recsys_ltr.query_metrics` (NDCG@k with graded gains, MAP).

* :class:`LGMML` -- localized geometric mean metrics (Su, King & Lyu, SIGIR 2017).
* :class:`ListMLE`, :class:`ListNet` -- linear listwise learners (Xia et al. 2008; Cao et al. 2007).
* :class:`RPCMTL` -- rank-preserving clustering + multi-task ListMLE (Wu et al., TKDE 2016).
* :class:`LambdaMART` -- LightGBM's lambdarank behind the same interface (optional ``lightgbm``).
* :class:`RankBlend` -- weighted blend of rankers' per-query standardised scores, weights chosen
  on held-out queries.
* :class:`LGMMLAffinity` -- L-GMML on item content: an item affinity for cold-start items, learned
  on co-consumption (:mod:`recsys_ltr.ltr.content`).
"""

from ._base import QueryRanker, check_query_data
from .content import LGMMLAffinity
from .ensemble import LambdaMART, RankBlend
from .lgmml import LGMML
from .listwise import ListMLE, ListNet
from .rpcmtl import RPCMTL

__all__ = [
    "LGMML",
    "RPCMTL",
    "LGMMLAffinity",
    "LambdaMART",
    "ListMLE",
    "ListNet",
    "QueryRanker",
    "RankBlend",
    "check_query_data",
]
