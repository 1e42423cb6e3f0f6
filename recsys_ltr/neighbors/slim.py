"""SLIM and fsSLIM item-item weights (Ning & Karypis 2011) by covariance coordinate descent.

SLIM learns a sparse item-item matrix ``W`` (zero diagonal, non-negative) and scores
``X @ W``.  Column ``i`` of ``W`` solves, independently of the other columns, the elastic net

    min_w  1/2 ||x_i - X w||^2 + (l2 / 2) ||w||^2 + l1 ||w||_1   s.t.  w >= 0,  w_i = 0,

where ``x_i`` is column ``i`` of the binary users x items matrix ``X`` (penalties named as in
the SLIM library: ``l1`` = lambda, ``l2`` = beta).  fsSLIM additionally fixes ``w_j = 0`` for
every item ``j`` outside the allowed regressors of ``i`` (its KNN), so that with ``A = W^T``
every row ``A_i`` is supported on ``KNN(i)``: ``ktrunc(W^T) = W^T`` (dissertation sec. 4.5.5,
Algorithm 4.1 and appendix A), which is what makes SLIM a special case of FEBR's ``aggsum``.

Since ``X`` is binary the problem only needs the Gram matrix ``G = X^T X`` (co-occurrence
counts, exact in int32): the objective is ``1/2 w^T G w - G[:, i]^T w + ...``.  Each item runs
cyclic coordinate descent on that quadratic, first over all candidate regressors then over the
non-zero ones until they settle, as in glmnet's covariance updates.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from sklearn.exceptions import ConvergenceWarning

from .. import _memory
from .._gram import gram, local_block
from .._memory import rows_per_block
from .._progress import progress, progress_enabled
from .._threads import check_num_threads, numba_threads
from .._validation import check_feedback, check_positive_int, check_sparse

__all__ = ["check_slim_params", "slim_weights"]


def slim_weights(
    X,
    l1=1.0,
    l2=1.0,
    neighbors=None,
    positive=True,
    max_iter=100,
    tol=1e-4,
    num_threads=0,
    show_progress=None,
    max_gram_bytes=_memory.MATRIX_BYTES,
) -> sp.csr_matrix:
    """Fit the SLIM (or, with ``neighbors``, fsSLIM) item-item weight matrix.

    Parameters
    ----------
    X : sparse matrix, array or Interactions, shape (n_users, n_items)
        Implicit feedback; any positive entry counts as one interaction.
    l1, l2 : float >= 0, not both 0
        L1 and (halved) squared-L2 penalties of the objective in the module docstring.  It is
        scikit-learn's ``ElasticNet`` objective multiplied by ``n_samples = n_users``, hence
        ``ElasticNet(alpha=(l1 + l2) / n_users, l1_ratio=l1 / (l1 + l2), positive=True,
        fit_intercept=False)`` fitted on ``X`` with column ``i`` zeroed (and, for fsSLIM, every
        column outside ``neighbors[i]`` zeroed) gives column ``i`` of ``W``.
    neighbors : sparse matrix, shape (n_items, n_items), optional
        fsSLIM: the stored entries (the structure, values are ignored) of row ``i`` are the
        allowed regressors of item ``i``, e.g. its cosine KNN; ``i`` itself is dropped.
        ``None`` (default) fits full SLIM over all other items.
    positive : bool
        Constrain ``W >= 0`` (SLIM's default).  ``False`` fits the plain elastic net.
    max_iter : int
        Maximum number of epochs per item; an epoch is one coordinate-descent sweep over all
        candidate regressors, then up to ``max_iter`` sweeps over the non-zero ones.  Items
        still unconverged raise one ``ConvergenceWarning``.
    tol : float >= 0
        An item has converged when the duality gap of its problem is at most
        ``tol * ||x_i||^2`` (scikit-learn's stopping rule, same scale).
    num_threads : int
        Threads for the numba kernels, 0 = all.  Items are solved independently in a fixed
        coordinate order, so ``W`` does not depend on the number of threads.
    show_progress : bool or None
        Show a tqdm progress bar over items (``None``: when standard error is a terminal).
    max_gram_bytes : int
        Bound on the dense int32 Gram matrix ``X^T X`` (``4 n_items**2`` bytes; default
        :data:`recsys_ltr._memory.MATRIX_BYTES`, at most 16,384 items).  Full SLIM above it
        raises ``MemoryError``; fsSLIM holds it sparse instead (:func:`recsys_ltr._gram.gram`: 12
        bytes per co-occurring pair, refused up front when they would not fit in the memory
        available) and reads each item's ``k x k`` block from it.

    Returns
    -------
    W : scipy.sparse.csr_matrix, shape (n_items, n_items)
        float64 weights with zero diagonal; column ``i`` predicts item ``i``, so the scores
        are ``X @ W``.  Exact zeros are not stored.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.neighbors.slim import slim_weights
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, random_state=0).matrix
    >>> W = slim_weights(X, l1=1.0, l2=1.0)  # column i regresses item i on the others
    >>> W.shape, bool(W.diagonal().max() == 0), bool(W.data.min() > 0)
    ((100, 100), True, True)
    """
    X = check_feedback(X)
    l1, l2, max_iter, tol = check_slim_params(l1, l2, max_iter, tol)
    check_num_threads(num_threads)
    max_gram_bytes = check_positive_int(max_gram_bytes, "max_gram_bytes")
    if not isinstance(positive, (bool, np.bool_)):
        raise TypeError(f"positive must be a bool, got {positive!r}")
    show_progress = progress_enabled(show_progress)
    if neighbors is not None:
        neighbors = _check_neighbors(neighbors, X.shape[1])
    return fit_slim(X, l1, l2, neighbors, positive, max_iter, tol, num_threads, show_progress, max_gram_bytes)


def fit_slim(
    X,
    l1,
    l2,
    neighbors=None,
    positive=True,
    max_iter=100,
    tol=1e-4,
    num_threads=0,
    show_progress=False,
    max_gram_bytes=_memory.MATRIX_BYTES,
) -> sp.csr_matrix:
    """:func:`slim_weights` of a canonical feedback matrix, checked parameters and canonical
    ``neighbors`` (sorted rows; the diagonal is dropped by the solver)."""
    n_items = X.shape[1]
    num_threads = check_num_threads(num_threads)
    full = neighbors is None
    if full:
        nb_indptr = np.zeros(1, np.int32)
        nb_indices = np.zeros(0, np.int32)
        m_max = n_items - 1
    else:
        if not neighbors.has_sorted_indices:
            neighbors = neighbors.copy()
            neighbors.sort_indices()
        nb_indptr, nb_indices = neighbors.indptr, neighbors.indices
        m_max = int(np.diff(nb_indptr).max(initial=0))

    gram_bytes = 4 * n_items * n_items
    use_gram = gram_bytes <= max_gram_bytes
    if full and not use_gram:
        raise MemoryError(
            f"full SLIM needs the dense {n_items} x {n_items} Gram matrix X^T X "
            f"({gram_bytes / 2**30:.2f} GiB > max_gram_bytes = {max_gram_bytes / 2**30:.2f} GiB); "
            "pass neighbors= (fsSLIM) or raise max_gram_bytes"
        )
    Xc = X.tocsc()
    Xc.sort_indices()
    args = (
        Xc.indptr,
        Xc.indices,
        nb_indptr,
        nb_indices,
        full,
        float(l1),
        float(l2),
        bool(positive),
        max_iter,
        float(tol),
    )
    with numba_threads(num_threads):
        if use_gram:
            G, S = _dense_gram(X.indptr, X.indices, *args[:2], n_items), sp.csr_matrix((0, 0))
        else:  # the counts of the binary X, sparse
            G, S = (
                np.zeros((0, 0), np.int32),
                gram(sp.csr_matrix((np.ones(X.nnz), X.indices, X.indptr), X.shape), "fsSLIM"),
            )
        W, n_unconverged = _solve_all(G, S, args, n_items, m_max, num_threads, show_progress, full)
    if n_unconverged:
        warnings.warn(
            f"{n_unconverged} of {n_items} item problems did not converge within max_iter={max_iter} "
            "epochs; increase max_iter or tol",
            ConvergenceWarning,
            stacklevel=2,
        )
    return W


def check_slim_params(l1, l2, max_iter, tol) -> tuple[float, float, int, float]:
    """Validate SLIM's penalties and solver settings; returns ``(l1, l2, max_iter, tol)``.

    ``TypeError`` for non-numbers, ``ValueError`` for negative or non-finite values and for
    ``l1 == l2 == 0`` (unregularised least squares is ill-posed).
    """
    l1 = _check_penalty(l1, "l1")
    l2 = _check_penalty(l2, "l2")
    if l1 == 0.0 and l2 == 0.0:
        raise ValueError("l1 and l2 are both 0: SLIM needs l1 > 0 or l2 > 0 (unregularised least squares is ill-posed)")
    return l1, l2, check_positive_int(max_iter, "max_iter"), _check_penalty(tol, "tol")


def _check_penalty(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value}")
    return value


def _check_neighbors(neighbors, n_items: int) -> sp.csr_matrix:
    """The canonical CSR structure (sorted unique indices) of a neighbours matrix; values are ignored."""
    if not sp.issparse(neighbors):
        raise TypeError(f"neighbors must be a scipy.sparse matrix, got {type(neighbors).__name__}")
    neighbors = check_sparse(neighbors, "neighbors", allow_empty=True, nonnegative=False)
    if neighbors.shape != (n_items, n_items):
        raise ValueError(f"neighbors must have shape ({n_items}, {n_items}) (items x items), got {neighbors.shape}")
    return neighbors


def _solve_all(G, S, args, n_items, m_max, num_threads, show_progress, full):
    """Solve every item in chunks (one progress update per chunk) and assemble ``W``: from the dense
    Gram matrix ``G``, or when it is empty from the sparse one ``S``."""
    chunk = max(num_threads, min(math.ceil(n_items / 20), rows_per_block(8 * m_max)))
    g_diag = np.diag(G).astype(np.float64)
    sparse = (S.indptr.astype(np.int64), S.indices, S.data)
    rows, cols, vals = [], [], []
    n_unconverged = 0
    with progress(show_progress, total=n_items, desc="fsSLIM" if not full else "SLIM", unit="item") as bar:
        for start in range(0, n_items, chunk):
            targets = np.arange(start, min(start + chunk, n_items), dtype=np.int64)
            coef = np.zeros((targets.size, m_max))
            with numba.parallel_chunksize(1):  # items differ widely in cost: schedule dynamically
                status = _solve_chunk(G, g_diag, *sparse, targets, coef, *args)
            n_unconverged += int(np.sum(status < 0))
            r, c, v = _collect(targets, coef, n_items, args[2], args[3], full)
            rows.append(r)
            cols.append(c)
            vals.append(v)
            bar.update(targets.size)
    W = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_items, n_items))
    W.sort_indices()
    return W, n_unconverged


@njit(parallel=True, cache=True)
def _dense_gram(indptr, indices, c_indptr, c_indices, n_items):
    """G = X^T X as dense int32 co-occurrence counts; row j sums the rows of item j's users."""
    G = np.zeros((n_items, n_items), np.int32)
    for j in prange(n_items):
        for p in range(c_indptr[j], c_indptr[j + 1]):
            u = c_indices[p]
            for s in range(indptr[u], indptr[u + 1]):
                G[j, indices[s]] += 1
    return G


@njit(cache=True)
def _candidates(i, n_items, nb_indptr, nb_indices, full):
    """Allowed regressors of item ``i`` (sorted global ids, ``i`` excluded)."""
    if full:
        out = np.empty(n_items - 1, np.int32)
        out[:i] = np.arange(i)
        out[i:] = np.arange(i + 1, n_items)
        return out
    row = nb_indices[nb_indptr[i] : nb_indptr[i + 1]]
    return row[row != i]


@njit(parallel=True, cache=True)
def _solve_chunk(
    G,
    g_diag,
    s_indptr,
    s_indices,
    s_data,
    targets,
    coef,
    c_indptr,
    c_indices,
    nb_indptr,
    nb_indices,
    full,
    l1,
    l2,
    positive,
    max_iter,
    tol,
):
    """Solve the items ``targets`` in parallel; ``coef[t, :m]`` gets item t's local weights.  The Gram
    matrix is the dense ``G`` or, when that is empty, the sparse ``s_*``.

    Returns per item the number of epochs used, negated when ``max_iter`` was reached.
    """
    n_items = c_indptr.size - 1
    status = np.zeros(targets.size, np.int64)
    for t in prange(targets.size):
        i = targets[t]
        idx = _candidates(i, n_items, nb_indptr, nb_indices, full)
        m = idx.size
        if G.shape[0] > 0:
            H, hidx = G, idx
            b = np.empty(m)
            h = np.empty(m)
            for a in range(m):
                b[a] = G[i, idx[a]]
                h[a] = g_diag[idx[a]]
        else:  # the block of the candidates and i, i last
            pattern = np.empty(m + 1, np.int64)
            pattern[:m], pattern[m] = idx, i
            local = local_block(s_indptr, s_indices, s_data, pattern)
            H, b = local[:m, :m].astype(np.int32), local[:m, m].copy()  # counts, as the dense G holds them
            hidx = np.arange(m).astype(idx.dtype)
            h = np.diag(local)[:m].copy()
        yy = c_indptr[i + 1] - c_indptr[i]  # ||x_i||^2 = number of users of item i
        status[t] = _coordinate_descent(H, hidx, h, b, yy, l1, l2, positive, max_iter, tol, coef[t, :m])
    return status


@njit(cache=True)
def _coordinate_descent(H, idx, h, b, yy, l1, l2, positive, max_iter, tol, w):
    """Minimise 1/2 w'Qw - b'w + l1 |w|_1 + l2/2 |w|^2 (w >= 0 if positive), Q[a,c] = H[idx[a], idx[c]].

    ``h`` is the diagonal of Q (read once: the diagonal of a large H is cache-hostile).
    Cyclic coordinate descent from ``w = 0`` (updated in place) with ``q = Q w`` maintained.
    Each epoch is one full sweep over all ``m`` candidates followed, unless the duality gap is
    already at most ``tol * yy`` (``yy = ||x_i||^2``, scikit-learn's rule), by sweeps over the
    non-zero coordinates only, on a contiguous copy of their Gram block, until that
    subproblem's gap is small too (at most ``max_iter`` sweeps).  Returns the number of epochs,
    negated if ``max_iter`` epochs did not converge.
    """
    m = idx.size
    q = np.zeros(m)
    for epoch in range(1, max_iter + 1):
        for a in range(m):
            new = _coordinate_minimum(h[a], b[a] - q[a] + h[a] * w[a], l1, l2, positive)
            d = new - w[a]
            if d != 0.0:
                w[a] = new
                _add_row(q, d, H, idx[a], idx)
        if _duality_gap(b, w, q, yy, l1, l2, positive) <= tol * yy:
            return epoch
        active = np.flatnonzero(w)
        if active.size == 0:
            continue
        # active-set phase on a contiguous copy of Q restricted to the non-zero coordinates
        rows = idx[active]
        Q = np.empty((active.size, active.size))
        for s in range(active.size):
            for r in range(active.size):
                Q[s, r] = H[rows[s], rows[r]]
        wa, qa, ba = w[active], q[active], b[active]
        for _ in range(max_iter):
            for s in range(active.size):
                new = _coordinate_minimum(Q[s, s], ba[s] - qa[s] + Q[s, s] * wa[s], l1, l2, positive)
                d = new - wa[s]
                if d != 0.0:
                    wa[s] = new
                    for r in range(active.size):
                        qa[r] += d * Q[s, r]
            if _duality_gap(ba, wa, qa, yy, l1, l2, positive) <= tol * yy:
                break
        w[active] = wa
        q[:] = 0.0  # refresh q = Q w exactly on every candidate for the next full sweep
        for s in range(active.size):
            if wa[s] != 0.0:
                _add_row(q, wa[s], H, rows[s], idx)
    return -max_iter


@njit(cache=True)
def _add_row(q, d, H, row, idx):
    """q += d * H[row, idx]."""
    for c in range(q.size):
        q[c] += d * H[row, idx[c]]


@njit(cache=True)
def _coordinate_minimum(h, g, l1, l2, positive):
    """argmin_x 1/2 (h + l2) x^2 - g x + l1 |x| (x >= 0 if positive): soft thresholding.

    ``g`` is coordinate j's correlation with the residual of the other coordinates' fit.
    """
    if h + l2 <= 0.0:  # item without users and no ridge: the coordinate only pays l1
        return 0.0
    if g > l1:
        return (g - l1) / (h + l2)
    if g < -l1 and not positive:
        return (g + l1) / (h + l2)
    return 0.0


@njit(cache=True)
def _duality_gap(b, w, q, yy, l1, l2, positive):
    """Duality gap of min 1/2 w'Qw - b'w + yy/2 + l1 |w|_1 + l2/2 |w|^2 given ``q = Q w``.

    With ``v = b - q = X^T r`` (r the residual): for ``l2 > 0`` the dual point is ``r`` itself,
    ``gap = w'(q - b) + l1 |w|_1 + l2/2 |w|^2 + sum_j (v_j - l1)_+^2 / (2 l2)`` (``|v_j|`` in place
    of ``v_j`` without the sign constraint); for ``l2 = 0`` (lasso) ``r`` is scaled into the
    dual feasible set ``max_j v_j <= l1`` as in scikit-learn.
    """
    wb = wq = w_l1 = w_l2 = excess2 = v_max = 0.0
    for a in range(w.size):
        wb += w[a] * b[a]
        wq += w[a] * q[a]
        w_l1 += abs(w[a])
        w_l2 += w[a] * w[a]
        v = b[a] - q[a] if positive else abs(b[a] - q[a])
        v_max = max(v_max, v)
        if v > l1:
            excess2 += (v - l1) * (v - l1)
    if l2 > 0.0:
        return wq - wb + l1 * w_l1 + 0.5 * l2 * w_l2 + excess2 / (2.0 * l2)
    r2 = yy - 2.0 * wb + wq  # ||r||^2
    const = l1 / v_max if v_max > l1 else 1.0
    return 0.5 * (1.0 + const * const) * r2 + l1 * w_l1 - const * (yy - wb)


@njit(cache=True)
def _collect(targets, coef, n_items, nb_indptr, nb_indices, full):
    """COO triplets (regressor j, target i, w) of the non-zero weights of one chunk."""
    count = 0
    for t in range(targets.size):
        for a in range(coef.shape[1]):
            if coef[t, a] != 0.0:
                count += 1
    rows = np.empty(count, np.int64)
    cols = np.empty(count, np.int64)
    vals = np.empty(count)
    k = 0
    for t in range(targets.size):
        idx = _candidates(targets[t], n_items, nb_indptr, nb_indices, full)
        for a in range(idx.size):
            if coef[t, a] != 0.0:
                rows[k] = idx[a]
                cols[k] = targets[t]
                vals[k] = coef[t, a]
                k += 1
    return rows, cols, vals
