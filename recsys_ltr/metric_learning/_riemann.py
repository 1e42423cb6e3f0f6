"""Riemannian step on the manifold of rank-m PSD matrices in factored form (dissertation Alg. 3.3).

FRML keeps its metric as ``W = L Lᵀ`` with ``L`` of shape ``(d, m)`` and full column rank, i.e. a
point of ``S+_{d,m}``.  One SGD step with a symmetric ambient step ``G = U Vᵀ`` (``G = -η∇``,
Eq. 3.27) projects ``G`` on the tangent space at ``W`` (Lemma 3.4)::

    P_l = L L†,   ξ_s = P_l G P_l,   ξ_p = (I - P_l) G P_l + P_l G (I - P_l)

and maps ``W + ξ`` back to the manifold with the second-order retraction of Lemma 3.5::

    R_W(ξ) = Y W† Yᵀ,   Y = W + ξ_s/2 + ξ_p - ξ_s W† ξ_s/8 - ξ_p W† ξ_s/2.

Appendix 3.B shows ``R_W(ξ) = M Mᵀ`` with ``M = Y (L†)ᵀ``, which expands (for symmetric ``G``) to::

    M = L + G L†ᵀ - P_l G L†ᵀ/2 - G W† G L†ᵀ/2 + 3/8 P_l G W† G L†ᵀ.

With ``A1 = L† U``, ``A2 = L† V``, ``Â1 = L A1`` and ``S = A2ᵀ A1`` (r x r) this is
``M = L + (U - Â1/2 + (3/8 Â1 - U/2) S) A2ᵀ``.  (The extracted text of Alg. 3.3 prints
``S = A1ᵀ A2``; expanding ``G W† G L†ᵀ = U Vᵀ L†ᵀ L† U Vᵀ L†ᵀ = U (A2ᵀ A1) A2ᵀ`` gives the order
used here, and the dense reference in the tests confirms it.)

``L†`` is never formed: ``A = (LᵀL)⁻¹ Lᵀ [U V]`` is one Cholesky solve with an ``m x m`` factor, so
a step costs ``O(d m² + d m r + d r²)`` and no ``d x d`` matrix ever exists.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["symmetric_gradient_update"]


def symmetric_gradient_update(L: np.ndarray, U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Return ``M`` with ``M Mᵀ = R_W(P_TW(U Vᵀ))`` for ``W = L Lᵀ`` (Alg. 3.3).

    Parameters
    ----------
    L : array (d, m)
        Current factor, full column rank.
    U, V : arrays (d, r)
        Factors of the symmetric ambient step ``G = U Vᵀ`` (already scaled by ``-η``).  Symmetry
        of ``G`` is the caller's responsibility (FRML passes ``U = V diag(c)``).

    Returns
    -------
    M : array (d, m)
        The new factor.

    Raises
    ------
    FloatingPointError
        When ``LᵀL`` is not numerically positive definite (``L`` lost rank, e.g. after a step
        that was far too large).
    """
    r = U.shape[1]
    try:
        factor = scipy.linalg.cho_factor(L.T @ L, check_finite=True)
    except (np.linalg.LinAlgError, ValueError) as exc:
        raise FloatingPointError(
            "the metric factor L is rank deficient or not finite; lower the learning rate"
        ) from exc
    A = scipy.linalg.cho_solve(factor, L.T @ np.hstack((U, V)), check_finite=False)
    A1, A2 = A[:, :r], A[:, r:]
    S = A2.T @ A1
    A1_hat = L @ A1
    return L + (U - 0.5 * A1_hat + (0.375 * A1_hat - 0.5 * U) @ S) @ A2.T
