"""The inner solver of MLR / R-MLR: ADMM on the working-set problem (dissertation sec. 2.3, Alg. 2.2).

Step 3 of Alg. 2.1 minimises, over symmetric ``d x d`` matrices,

    tr(W) + g(W) + C max_{(Δ_i, Ψ_i) in A} [Δ_i - <W, Ψ_i>]_+     subject to W ⪰ 0        (Eq. 2.3)

with ``g = 0`` (MLR), ``λ ||W||_2,1`` (R-MLR) or ``λ Σ_ij |W_ij|`` (l1-MLR).  It is split as
``f(W) + g(V) + h(Z)`` with ``W = V = Z`` (``h`` the indicator of the PSD cone) and solved by
scaled ADMM:

* W-update (Eq. 2.4) through the dual QP (2.7)-(2.8) in the ``m = |A|`` multipliers, solved by
  :func:`solve_dual_qp`, and the primal recovery (2.9) ``W = R + (Σ α_i Ψ_i - I) / ρ``,
  ``R = Z - U_W``;
* V-update (Eq. 2.5): :func:`prox_l21_symmetric` (the l2,1 prox (2.10) under the symmetry
  constraint, by the inner ADMM of sec. 2.3.2) or the element-wise soft threshold (l1);
* Z-update: :func:`project_psd` of the average ``(W + U_W + V + U_V) / 2`` (sec. 2.3.3); MLR-ADMM
  (``g = 0``) skips the V-update and projects ``W + U_W``.

Departures from Alg. 2.2, all standard ADMM practice (Boyd et al. 2011, sec. 3.3-3.4): the loop
stops when the primal and dual residuals fall below ``tol`` relative to the iterates (with the
floors ``1 / max_i ||Ψ_i||_F``, the size of a W that moves the margins by about 1, and
``||I||_F = sqrt(d)``, the gradient of ``tr W``, so that a zero optimum is reached too) or after
``max_iter = T`` iterations (the early stopping of sec. 2.3.3); ``ρ`` is rebalanced (x2 or /2) when
one residual, relative to its tolerance, exceeds the other tenfold (Wohlberg 2017's normalised
residual balancing), at most 24 times per fit: a ρ that changes forever voids ADMM's convergence
guarantee, and l1-MLR was seen to cycle without end; the W- and V-iterates are over-relaxed by 1.6 in the Z-
and U-updates (fewer iterations for the same accuracy in our runs); every run is warm-started
from the previous cutting-plane round's ``Z, U, α``; and the returned metric is ``Z`` (PSD by
construction) rather than ``W^T``, which Alg. 2.2 outputs but which need not be PSD before
convergence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
from numba import njit

__all__ = [
    "ADMMState",
    "admm_solve",
    "project_psd",
    "prox_l21",
    "prox_l21_symmetric",
    "soft_threshold",
    "solve_dual_qp",
    "w_update",
]

_TINY = 1e-300
_BALANCE = 10.0  # residual ratio that triggers a change of ρ (Boyd et al. 2011, Eq. 3.13)
_MAX_RESCALES = 24  # per fit; a ρ that keeps changing can make ADMM cycle (seen with l1-MLR)
_RELAX = 1.6  # over-relaxation of the W- and V-iterates in the Z- and U-updates (Boyd et al. 2011, sec. 3.4.3)


# ------------------------------------------------------------------------------ proximal maps


@njit(cache=True)
def prox_l21(A, tau):
    """Row-wise group soft threshold (Eq. 2.10): ``argmin_V τ ||V||_2,1 + ||V - A||²_F / 2``.

    Row ``i`` is ``A_i· [1 - τ / ||A_i·||_2]_+`` (zero rows stay zero).
    """
    out = np.zeros_like(A)
    for i in range(A.shape[0]):
        norm = 0.0
        for j in range(A.shape[1]):
            norm += A[i, j] * A[i, j]
        norm = np.sqrt(norm)
        if norm > tau:
            f = 1.0 - tau / norm
            for j in range(A.shape[1]):
                out[i, j] = f * A[i, j]
    return out


@njit(cache=True)
def prox_l21_symmetric(A, tau, Q, U, tol, max_iter):
    """``argmin_{V = Vᵀ} τ ||V||_2,1 + ||V - A||²_F / 2`` for symmetric ``A`` (sec. 2.3.2).

    The row-wise prox (2.10) breaks symmetry, so the problem is split as ``P = Q`` with ``P``
    free and ``Q`` symmetric and solved by ADMM (penalty 1): ``P <- prox_l21((A + Q - U) / 2, τ/2)``,
    ``Q <- (P + U + (P + U)ᵀ) / 2``, ``U <- U + P - Q``; each step is ``O(d²)``.  ``Q, U`` are the
    warm start and are updated in place; stops when ``||P - Q||`` and ``||Q - Q_prev||`` are below
    ``tol ||A||``.  Returns ``(Q, iterations)``; ``Q`` is exactly symmetric.
    """
    d = A.shape[0]
    scale = max(np.sqrt(np.sum(A * A)), 1e-300)
    it = 0
    while it < max_iter:
        it += 1
        P = prox_l21(0.5 * (A + Q - U), 0.5 * tau)
        r2 = 0.0
        s2 = 0.0
        for i in range(d):
            for j in range(i, d):
                q = 0.5 * (P[i, j] + U[i, j] + P[j, i] + U[j, i])
                s2 += (q - Q[i, j]) ** 2 * (1.0 if i == j else 2.0)
                Q[i, j] = q
                Q[j, i] = q
        for i in range(d):
            for j in range(d):
                e = P[i, j] - Q[i, j]
                U[i, j] += e
                r2 += e * e
        if np.sqrt(r2) <= tol * scale and np.sqrt(s2) <= tol * scale:
            break
    return Q, it


def soft_threshold(A: np.ndarray, tau: float) -> np.ndarray:
    """Element-wise soft threshold, the prox of ``τ Σ_ij |V_ij|`` (l1-MLR); keeps symmetry."""
    return np.sign(A) * np.maximum(np.abs(A) - tau, 0.0)


def project_psd(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Frobenius projection of symmetric ``A`` on the PSD cone (sec. 2.3.3).

    Returns ``(Z, L)`` with ``Z = L Lᵀ``, ``L = V_+ diag(sqrt(λ_+))`` over the positive eigenpairs
    ``(λ_+, V_+)`` of ``(A + Aᵀ)/2`` (one ``O(d³)`` eigendecomposition); ``L`` has no column when
    ``A`` has no positive eigenvalue.
    """
    sym = 0.5 * (A + A.T)
    lam, vec = scipy.linalg.eigh(sym, check_finite=False, driver="evd")
    keep = lam > 0.0
    L = vec[:, keep] * np.sqrt(lam[keep])
    return L @ L.T, L


# ------------------------------------------------------------------------------ dual QP (2.7)


@njit(cache=True)
def _h(H, i, j):
    """Entry of ``H`` extended by a zero row and column for the slack (index ``m``)."""
    m = H.shape[0]
    return 0.0 if i == m or j == m else H[i, j]


@njit(cache=True)
def solve_dual_qp(H, b, C, alpha, tol, max_steps):
    """``min_α ½ αᵀHα + bᵀα`` over ``α >= 0, Σ α <= C`` (the negated dual (2.7)), in place.

    Sequential minimal optimisation: a slack ``α_m = C - Σ α`` (zero row of ``H``, ``b_m = 0``)
    turns the feasible set into a simplex; each step moves mass to the coordinate of least
    gradient from the one, among those with mass, of largest second-order gain (working-set
    selection of Fan, Chen & Lin 2005), with an exact line search.  Stops when the KKT
    violation ``max_{α_j > 0} g_j - min_i g_i`` (``g = Hα + b``, ``g_m = 0``) is at most ``tol``.
    ``alpha`` is a feasible warm start.  Returns the number of steps.
    """
    m = b.shape[0]
    g = np.zeros(m + 1)
    g[:m] = H @ alpha + b
    a = np.zeros(m + 1)
    a[:m] = alpha
    a[m] = max(C - np.sum(alpha), 0.0)
    steps = 0
    while steps < max_steps:
        up = np.argmin(g)
        down, gain = -1, -1.0
        for j in range(m + 1):
            diff = g[j] - g[up]
            if a[j] > 0.0 and diff > tol:
                curv = _h(H, up, up) + _h(H, j, j) - 2.0 * _h(H, up, j)
                cand = np.inf if curv <= 0.0 else diff * diff / curv
                if cand > gain:
                    down, gain = j, cand
        if down < 0:
            break
        curv = _h(H, up, up) + _h(H, down, down) - 2.0 * _h(H, up, down)
        t = a[down] if curv <= 0.0 else min(a[down], (g[down] - g[up]) / curv)
        a[up] += t
        a[down] = 0.0 if t == a[down] else a[down] - t
        for i in range(m):
            g[i] += t * (_h(H, i, up) - _h(H, i, down))
        steps += 1
    alpha[:] = a[:m]
    return steps


# ------------------------------------------------------------------------------ ADMM (Alg. 2.2)


@dataclass
class ADMMState:
    """Iterates carried from one cutting-plane round to the next (the warm start)."""

    d: int
    rho: float = 1.0
    rescales: int = 0  # changes of ρ since the fit began (capped: ADMM converges once ρ is fixed)
    Z: np.ndarray = None
    L: np.ndarray = None
    UW: np.ndarray = None
    UV: np.ndarray = None
    V: np.ndarray = None
    QV: np.ndarray = None  # inner ADMM warm start of the symmetric prox
    UQ: np.ndarray = None
    alpha: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self):
        zeros = lambda: np.zeros((self.d, self.d))  # noqa: E731
        self.Z, self.UW, self.UV, self.V, self.QV, self.UQ = (zeros() for _ in range(6))
        self.L = np.zeros((self.d, 0))


@dataclass
class Constraints:
    """The working set ``A``: rows of ``P`` are the flattened ``Ψ_i``, ``H = P Pᵀ`` (Eq. 2.8).

    ``idle[i]`` counts the consecutive ADMM runs in which constraint ``i`` had no multiplier;
    :meth:`prune` drops the long-idle ones (as SVM-struct's 1-slack solver does, Joachims et al.
    2009), which keeps ``m`` and the cost ``O(m d²)`` of an ADMM iteration bounded.
    """

    d: int
    P: np.ndarray = None
    delta: np.ndarray = None
    trace: np.ndarray = None
    idle: np.ndarray = None
    H: np.ndarray = None
    m: int = 0

    def __post_init__(self):
        self.P = np.zeros((4, self.d * self.d))
        self.delta, self.trace, self.idle, self.H = (
            np.zeros(4),
            np.zeros(4),
            np.zeros(4, dtype=np.int64),
            np.zeros((4, 4)),
        )

    def add(self, delta: float, Psi: np.ndarray) -> None:
        if self.m == self.P.shape[0]:  # grow by doubling
            cap = 2 * self.m
            self.P = np.vstack((self.P, np.zeros_like(self.P)))
            self.delta, self.trace, self.idle = (np.resize(a, cap) for a in (self.delta, self.trace, self.idle))
            H = np.zeros((cap, cap))
            H[: self.m, : self.m] = self.H[: self.m, : self.m]
            self.H = H
        m = self.m
        self.P[m] = Psi.ravel()
        row = self.P[: m + 1] @ self.P[m]
        self.H[m, : m + 1] = row
        self.H[: m + 1, m] = row
        self.delta[m], self.trace[m], self.idle[m] = delta, np.trace(Psi), 0
        self.m += 1

    def prune(self, alpha: np.ndarray, max_idle: int) -> np.ndarray:
        """Record which constraints the multipliers ``alpha`` use, drop those idle for more than
        ``max_idle`` runs, and return ``alpha`` restricted to the constraints kept."""
        m = self.m
        self.idle[:m] = np.where(alpha > 0, 0, self.idle[:m] + 1)
        keep = np.flatnonzero(self.idle[:m] <= max_idle)
        if keep.size < m:
            k = keep.size
            self.P[:k] = self.P[keep]
            self.H[:k, :k] = self.H[np.ix_(keep, keep)]
            for a in (self.delta, self.trace, self.idle):
                a[:k] = a[keep]
            self.m = k
        return alpha[keep]

    def margins(self, W: np.ndarray) -> np.ndarray:
        """``<W, Ψ_i>_F`` for every constraint."""
        return self.P[: self.m] @ W.ravel()


def w_update(A: Constraints, R: np.ndarray, rho: float, C: float, alpha: np.ndarray) -> np.ndarray:
    """``argmin_W tr(W) + C max_i [Δ_i - <W, Ψ_i>]_+ + ρ/2 ||W - R||²_F`` (Eq. 2.4 / 2.6).

    Solves the dual (2.7) with ``H`` and ``b_i = <ρR - I, Ψ_i> - ρΔ_i`` (Eq. 2.8) from the warm
    start ``alpha`` (updated in place) and recovers ``W = R + (Σ α_i Ψ_i - I) / ρ`` (Eq. 2.9).
    """
    m, d = A.m, R.shape[0]
    P = A.P[:m]
    b = rho * (P @ R.ravel() - A.delta[:m]) - A.trace[:m]
    solve_dual_qp(
        np.ascontiguousarray(A.H[:m, :m]), b, float(C), alpha, 1e-12 * max(1.0, np.abs(b).max()), 200 * m + 1000
    )
    active = np.flatnonzero(alpha)
    W = R + (alpha[active] @ P[active]).reshape(d, d) / rho
    W[np.diag_indices(d)] -= 1.0 / rho
    return 0.5 * (W + W.T)


def admm_solve(A: Constraints, state: ADMMState, C, lam, penalty, *, tol, max_iter, prox_tol, prox_max_iter):
    """Alg. 2.2 on the working set ``A``, warm-started from and updating ``state``.

    ``penalty`` is None (MLR-ADMM), ``"l21"`` (R-MLR) or ``"l1"`` (l1-MLR).  Returns the number
    of iterations and whether the residuals met ``tol``; the metric is ``state.Z`` (and
    ``state.L``, ``Z = L Lᵀ``).
    """
    m, d = A.m, state.d
    alpha = np.zeros(m)
    alpha[: state.alpha.size] = state.alpha
    w_scale = 1.0 / np.sqrt(max(A.H[np.arange(m), np.arange(m)].max(), _TINY))  # a W moving margins by ~1
    blocks = 1 if penalty is None else 2
    it, converged = 0, False
    while it < max_iter:
        it += 1
        rho = state.rho
        W = w_update(A, state.Z - state.UW, rho, C, alpha)
        Wh = _RELAX * W + (1.0 - _RELAX) * state.Z
        if penalty is None:
            target = Wh + state.UW
        else:
            Av = state.Z - state.UV
            if penalty == "l1":
                state.V = soft_threshold(Av, lam / rho)
            else:
                Q, _ = prox_l21_symmetric(Av, lam / rho, state.QV, state.UQ, prox_tol, prox_max_iter)
                state.V = Q.copy()
            Vh = _RELAX * state.V + (1.0 - _RELAX) * state.Z
            target = 0.5 * (Wh + state.UW + Vh + state.UV)
        Z_prev = state.Z
        state.Z, state.L = project_psd(target)
        state.UW += Wh - state.Z
        r2 = np.sum((W - state.Z) ** 2)
        if penalty is not None:
            state.UV += Vh - state.Z
            r2 += np.sum((state.V - state.Z) ** 2)
        r = np.sqrt(r2)
        s = rho * np.sqrt(blocks) * np.linalg.norm(state.Z - Z_prev)
        z_norm = np.linalg.norm(state.Z)
        u_norm = rho * np.sqrt(np.sum(state.UW**2) + (np.sum(state.UV**2) if penalty is not None else 0.0))
        eps_pri = tol * max(np.linalg.norm(W), z_norm, w_scale)
        eps_dual = tol * max(u_norm, np.sqrt(d))
        if r <= eps_pri and s <= eps_dual:
            converged = True
            break
        r, s = r / eps_pri, s / eps_dual  # balance the residuals relative to their tolerances
        if state.rescales < _MAX_RESCALES and max(r, s) > _BALANCE * min(r, s):
            _rescale(state, 2.0 if r > s else 0.5)
    state.alpha = alpha
    return it, converged


def _rescale(state: ADMMState, factor: float) -> None:
    """``ρ <- factor ρ``; the scaled duals ``U = Λ/ρ`` shrink by the same factor."""
    state.rescales += 1
    state.rho *= factor
    state.UW /= factor
    state.UV /= factor
