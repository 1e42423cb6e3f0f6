"""WARP / β-WSS: NML losses, loss estimators and the one sampling engine shared by every model.

* :mod:`recsys_ltr.warp.losses` — NML loss functions ``L(0..K)`` (Def. 3.1).
* :mod:`recsys_ltr.warp.estimators` — ``L̂_WARP`` (Eq. 3.10), β-truncation (Def. 3.5),
  ``L̃^(β)`` (Eq. 3.11), OPT-EST (Eq. 3.20), rank-γ truncation (Eq. 3.21).
* :mod:`recsys_ltr.warp.sampler` — :class:`WarpSampler` and its numba kernels; the module
  docstring documents the API with a worked example.
* :mod:`recsys_ltr.warp.dot` — the reference dot-product model (the template for a new model).
"""

from recsys_ltr.warp.dot import DOT_ROWS, dot_score, dot_update
from recsys_ltr.warp.estimators import (
    OPT_EST_MAX_ENTRIES,
    expected_truncated_loss,
    ns_distribution,
    opt_est,
    rank_gamma_estimator,
    truncate_estimator,
    warp_estimator,
)
from recsys_ltr.warp.losses import NML_KINDS, nml_loss
from recsys_ltr.warp.sampler import Minibatch, WarpSampler, WarpStats, warp_minibatch, warp_sgd

__all__ = [
    "DOT_ROWS",
    "NML_KINDS",
    "OPT_EST_MAX_ENTRIES",
    "Minibatch",
    "WarpSampler",
    "WarpStats",
    "dot_score",
    "dot_update",
    "expected_truncated_loss",
    "nml_loss",
    "ns_distribution",
    "opt_est",
    "rank_gamma_estimator",
    "truncate_estimator",
    "warp_estimator",
    "warp_minibatch",
    "warp_sgd",
]
