"""Nonincreasing marginal loss (NML) functions, dissertation Def. 3.1.

An NML function of order ``K`` is ``L(0) = 0`` and ``L(k) = alpha_1 + ... + alpha_k`` with
``alpha_1 >= alpha_2 >= ... >= alpha_K >= 0``: losing a position near the top of the ranking costs
at least as much as losing one further down.  ``L(r)`` is the loss of a relevant item preceded by
``r`` irrelevant ones (its violators).  Kinds:

============  ==========================================  ===================================
kind          alpha_i / L(k)                              source
============  ==========================================  ===================================
reciprocal    alpha_i = 1/i                               WARP (Weston et al. 2010), sec. 3.3.4
pak           alpha_i = 1/k for i <= k, else 0            precision-at-k, sec. 3.3.4
uniform       alpha_i = 1/K  (L(k) = k/K)                 AUC, sec. 3.3.4
adg           L(k) = C(k) = 1 - 1/log2(k+2)               1 - ADG, Eq. (4.8), Theorem 4.5
lgmml         L(k) = sum_{i<=k} 1/log2(i+1)               su2017 Eq. (16), NDCG-shaped
============  ==========================================  ===================================
"""

from __future__ import annotations

import numpy as np

from recsys_ltr._validation import check_bool, check_positive_int

__all__ = ["NML_KINDS", "nml_loss"]

#: The NML functions :func:`nml_loss` builds (module docstring).
NML_KINDS = ("reciprocal", "pak", "uniform", "adg", "lgmml")


def nml_loss(kind: str, n: int, k: int | None = None, normalize: bool = True) -> np.ndarray:
    """Return the NML function ``L(0), L(1), ..., L(n)`` as a float64 array of length ``n + 1``.

    Parameters
    ----------
    kind : {"reciprocal", "pak", "uniform", "adg", "lgmml"}
        See the module docstring.
    n : int
        Order ``K`` of the function, normally the number of irrelevant items ``N_irr``; >= 1.
    k : int, optional
        Cut-off of ``"pak"`` (required there, rejected for the other kinds).
    normalize : bool
        Divide by ``L(n)`` so that the worst ranking costs 1 (Def. 3.2).

    Examples
    --------
    >>> from recsys_ltr.warp import nml_loss
    >>> nml_loss("uniform", 4)  # the AUC: linear in the rank
    array([0.  , 0.25, 0.5 , 0.75, 1.  ])
    >>> nml_loss("pak", 4, k=2)  # precision at 2: saturates at rank 2
    array([0. , 0.5, 1. , 1. , 1. ])
    >>> nml_loss("reciprocal", 4).round(2)  # WARP's: the first ranks weigh most
    array([0.  , 0.48, 0.72, 0.88, 1.  ])
    """
    if kind not in NML_KINDS:
        raise ValueError(f"kind must be one of {NML_KINDS}, got {kind!r}")
    n = check_positive_int(n, "n")
    normalize = check_bool(normalize, "normalize")
    if kind == "pak":
        if k is None:
            raise ValueError("kind='pak' needs the cut-off k")
        k = check_positive_int(k, "k")
    elif k is not None:
        raise ValueError(f"k is only used by kind='pak', got k={k!r} for kind={kind!r}")
    r = np.arange(n + 1, dtype=np.float64)
    if kind == "adg":
        L = 1.0 - 1.0 / np.log2(r + 2.0)
    elif kind == "uniform":
        L = r / n
    elif kind == "pak":
        L = np.minimum(r, k) / k
    else:
        i = r[1:]
        alpha = 1.0 / i if kind == "reciprocal" else 1.0 / np.log2(i + 1.0)
        L = np.concatenate(([0.0], np.cumsum(alpha)))
    if normalize:
        L = L / L[n]
    return L
