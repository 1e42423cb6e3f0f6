"""Loss estimators of β-WSS and their expectations, dissertation sec. 3.3.

Notation (Table 3.1): for one (query, positive) pair, ``N_irr`` irrelevant items of which ``n_v``
are violators; β-WSS draws negatives uniformly with replacement until a violator turns up or β
draws are spent; ``n_s`` (1..β) is the number of draws used including the violator, and
``n_s = β + 1`` stands for "no violator found".

Array convention: an *estimator* is a float array ``est`` with ``est[j] = L̂(j + 1)``, i.e. it is
indexed by ``n_s - 1``.

* ``L̂_WARP(n_s) = L(floor(N_irr / n_s))`` (Eq. 3.10) — :func:`warp_estimator`.
* β-truncation ``L̂^(β)(i) = L̂(i)`` for ``i <= β``, else 0 (Def. 3.5) — :func:`truncate_estimator`.
* ``n_s ~ G_{n_v,β}``, a geometric law with success probability ``p = n_v / N_irr`` truncated at
  β + 1 (Def. 3.5-3.6) — :func:`ns_distribution`.
* ``L̃^(β)(n_v) = E[L̂^(β)(G_{n_v,β})] = sum_{i<=β} p (1-p)^(i-1) L̂(i)`` (Eq. 3.11): the loss that
  β-WSS actually minimises in place of ``L_opt`` (Theorem 3.3) — :func:`expected_truncated_loss`.
* OPT-EST (Eq. 3.20): the β-nonincreasing θ minimising ``sum_{n_v} (L̃^(β)(n_v) - L_opt(n_v))^2``
  — :func:`opt_est`.
* The rank-γ truncated estimator of Lim & Lanckriet 2014 (Eq. 3.21), equal to ``L̂_WARP``
  truncated at ``β = floor(N_irr / γ)`` (Theorem 3.8) — :func:`rank_gamma_estimator`.
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial import polynomial
from scipy.optimize import nnls

from recsys_ltr._validation import check_positive_int

__all__ = [
    "OPT_EST_MAX_ENTRIES",
    "expected_truncated_loss",
    "ns_distribution",
    "opt_est",
    "rank_gamma_estimator",
    "truncate_estimator",
    "warp_estimator",
]

#: Largest design ``n_irr * beta`` that :func:`opt_est` builds (float64: 128 MiB).  For a
#: gowalla-sized ``n_irr = 40,981`` this allows ``beta <= 409``.
OPT_EST_MAX_ENTRIES = 2**24


def _check_curve(values, min_len: int, name: str) -> np.ndarray:
    """A 1-D finite non-negative float64 array with at least ``min_len`` entries."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.size < min_len:
        raise ValueError(f"{name} needs at least {min_len} entries, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(arr < 0):
        raise ValueError(f"{name} contains negative values")
    return arr


def _check_beta(beta, n_irr: int) -> int:
    return check_positive_int(beta, "beta", maximum=n_irr)


def warp_estimator(L, n_irr: int) -> np.ndarray:
    """``L̂_WARP(n_s) = L(floor(n_irr / n_s))`` for ``n_s = 1..n_irr`` (Equation 3.10).

    Parameters
    ----------
    L : array, length >= n_irr + 1
        The target loss ``L(0..)``, e.g. from :func:`nml_loss`.
    n_irr : int
        Number of irrelevant items ``N_irr``.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.warp import nml_loss, warp_estimator
    >>> L = nml_loss("uniform", 4)  # L(r) = r / 4
    >>> warp_estimator(L, n_irr=4)  # a violator after n_s draws: rank about 4 / n_s
    array([1.  , 0.5 , 0.25, 0.25])
    """
    n_irr = check_positive_int(n_irr, "n_irr")
    L = _check_curve(L, n_irr + 1, "L")
    return L[n_irr // np.arange(1, n_irr + 1)]


def truncate_estimator(estimator, beta: int) -> np.ndarray:
    """β-truncation (Definition 3.5): a copy of ``estimator`` with ``L̂(i) = 0`` for ``i > beta``.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.warp import truncate_estimator
    >>> truncate_estimator(np.array([1.0, 0.5, 0.25, 0.25]), beta=2)
    array([1. , 0.5, 0. , 0. ])
    """
    est = _check_curve(estimator, 1, "estimator")
    beta = _check_beta(beta, est.size)
    out = est.copy()
    out[beta:] = 0.0
    return out


def rank_gamma_estimator(L, gamma: int, n_irr: int) -> np.ndarray:
    """Rank-γ truncated estimator ``L^γ(floor(n_irr / n_s))``, ``n_s = 1..n_irr`` (Equation 3.21).

    ``L^γ(r) = L(r)`` if ``r >= γ`` else 0.  Theorem 3.8: equals ``truncate_estimator(
    warp_estimator(L, n_irr), n_irr // gamma)``.

    Examples
    --------
    >>> from recsys_ltr.warp import nml_loss, rank_gamma_estimator
    >>> rank_gamma_estimator(nml_loss("uniform", 4), gamma=2, n_irr=4)  # ranks below 2 cost nothing
    array([1. , 0.5, 0. , 0. ])
    """
    n_irr = check_positive_int(n_irr, "n_irr")
    gamma = check_positive_int(gamma, "gamma", maximum=n_irr)
    L = _check_curve(L, n_irr + 1, "L")
    r = n_irr // np.arange(1, n_irr + 1)
    return np.where(r >= gamma, L[r], 0.0)


def ns_distribution(n_v: int, beta: int, n_irr: int) -> np.ndarray:
    """``P(G_{n_v,β} = i)`` for ``i = 1..β+1`` (Definition 3.5-3.6), as an array indexed by ``i - 1``.

    The last entry is the probability that no violator is found in β draws.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.warp import ns_distribution
    >>> np.round(ns_distribution(n_v=1, beta=2, n_irr=4), 4)  # found at draw 1, 2, or not at all
    array([0.25  , 0.1875, 0.5625])
    """
    n_irr = check_positive_int(n_irr, "n_irr")
    beta = _check_beta(beta, n_irr)
    n_v = check_positive_int(n_v, "n_v", minimum=0, maximum=n_irr)
    p = n_v / n_irr
    out = np.empty(beta + 1)
    out[:beta] = p * (1.0 - p) ** np.arange(beta)
    out[beta] = (1.0 - p) ** beta
    return out


def expected_truncated_loss(estimator, beta: int, n_irr: int) -> np.ndarray:
    """``L̃^(β)(n_v)`` for ``n_v = 0..n_irr`` (Equation 3.11).

    Parameters
    ----------
    estimator : array, length >= beta
        ``estimator[j] = L̂(j + 1)``; entries past ``beta`` are ignored (truncation).
    beta : int
        Sampling limit, ``1 <= beta <= n_irr``.
    n_irr : int
        Number of irrelevant items.

    Evaluated by Horner's scheme on ``q = 1 - p``, ``p * sum_i L̂(i) q^(i-1)``: O(n_irr) memory
    and O(n_irr * beta) time (no (n_irr + 1) x beta design).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.warp import expected_truncated_loss, nml_loss, warp_estimator
    >>> estimator = warp_estimator(nml_loss("uniform", 4), 4)
    >>> np.round(expected_truncated_loss(estimator, beta=4, n_irr=4), 4)  # biased up: L(n_v) = n_v / 4
    array([0.    , 0.4053, 0.6719, 0.8584, 1.    ])
    """
    n_irr = check_positive_int(n_irr, "n_irr")
    beta = _check_beta(beta, n_irr)
    est = _check_curve(estimator, beta, "estimator")
    p = np.arange(n_irr + 1, dtype=np.float64) / n_irr
    return p * polynomial.polyval(1.0 - p, est[:beta])


def opt_est(L, beta: int, n_irr: int) -> np.ndarray:
    """OPT-EST (Equation 3.20): the estimator θ = (L̂(1), ..., L̂(β)) minimising
    ``sum_{n_v=1}^{n_irr} (L̃^(β)(n_v) - L(n_v))^2`` subject to ``θ_1 >= θ_2 >= … >= θ_β >= 0``.

    Solved exactly as non-negative least squares: with ``θ_j = sum_{i >= j} δ_i`` the constraints
    become ``δ >= 0`` and the design's column ``i`` becomes ``P(G <= i) = 1 - (1 - p)^i``.

    The dense ``n_irr x beta`` design is bounded by :data:`OPT_EST_MAX_ENTRIES` (128 MiB).

    Returns
    -------
    theta : float64 array of length ``beta`` (an estimator: ``theta[n_s - 1]``).

    Raises
    ------
    ValueError
        When ``n_irr * beta > OPT_EST_MAX_ENTRIES`` (use a smaller ``beta``).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.warp import nml_loss, opt_est
    >>> theta = opt_est(nml_loss("reciprocal", 100), beta=5, n_irr=100)
    >>> theta.shape, bool(np.all(np.diff(theta) <= 0))  # non-increasing
    ((5,), True)
    """
    n_irr = check_positive_int(n_irr, "n_irr")
    beta = _check_beta(beta, n_irr)
    if n_irr * beta > OPT_EST_MAX_ENTRIES:
        raise ValueError(
            f"opt_est needs an n_irr x beta = {n_irr} x {beta} design, above OPT_EST_MAX_ENTRIES = "
            f"{OPT_EST_MAX_ENTRIES}; use beta <= {OPT_EST_MAX_ENTRIES // n_irr}"
        )
    L = _check_curve(L, n_irr + 1, "L")
    p = np.arange(1, n_irr + 1, dtype=np.float64)[:, None] / n_irr
    design = 1.0 - (1.0 - p) ** np.arange(1, beta + 1)[None, :]
    delta, _ = nnls(design, L[1 : n_irr + 1], maxiter=50 * beta)
    return np.cumsum(delta[::-1])[::-1]
