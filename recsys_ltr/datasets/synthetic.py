"""A seeded generator of implicit feedback with power-law popularity and latent structure.

The model (all draws from one ``numpy.random.Generator`` seeded by ``random_state``):

* item popularity: a random permutation gives each item a popularity rank ``r_i = 0, 1, ...``
  and a bias ``b_i = -popularity_exponent * log(1 + r_i)``, so that without latent structure
  item ``i`` is drawn with weight ``(1 + r_i) ** -popularity_exponent`` (Zipf's law);
* latent structure: user and item factors ``p_u, q_i ~ N(0, I / sqrt(n_factors))`` in
  ``R^n_factors``, so ``<p_u, q_i>`` has unit variance; the logit of the pair is
  ``z_ui = b_i + factor_scale * <p_u, q_i>``;
* activity: user ``u`` consumes ``n_u = clip(round(LogNormal(mu, activity_sigma)), 1, n_items)``
  items, with ``mu = log(density * n_items) - activity_sigma**2 / 2`` so that the expected
  density is about ``density``;
* choice: the ``n_u`` items are drawn without replacement with probabilities proportional to
  ``exp(z_ui)`` (softmax weights; sampled exactly by the Gumbel-top-k trick).

Guarantees: the matrix has exactly ``n_users x n_items`` entries of shape, every user has at
least one positive, and every item too: an item that no user drew is given to one uniformly
drawn user (this adds at most ``n_items`` positives and slightly lifts the extreme tail).
Users are processed in bounded batches (at most ~4M dense logits at a time).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import check_positive_int, check_random_state, check_real
from ..interactions import Interactions

__all__ = ["make_synthetic"]

_BATCH_CELLS = 1 << 22


def make_synthetic(
    n_users=1000,
    n_items=500,
    n_factors=8,
    density=0.02,
    popularity_exponent=1.0,
    random_state=0,
    factor_scale=1.0,
    activity_sigma=0.5,
    return_params=False,
):
    """Generate a synthetic :class:`~recsys_ltr.Interactions` (model in the module docstring).

    Parameters
    ----------
    n_users, n_items : int
        Shape of the feedback matrix.
    n_factors : int
        Dimension of the latent user/item factors (0: popularity only).
    density : float in (0, 1]
        Target fraction of positive pairs.
    popularity_exponent : float >= 0
        Zipf exponent of item popularity (0: no popularity bias).
    random_state : None, int or numpy.random.Generator
    factor_scale : float >= 0
        Strength of the latent (personal) structure relative to popularity.
    activity_sigma : float >= 0
        Log-normal spread of the number of items per user (0: all users alike).
    return_params : bool
        Also return the planted ``{"user_factors", "item_factors", "item_bias"}``.

    Returns
    -------
    Interactions or (Interactions, dict)
        Ids are ``0..n-1``.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> data = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0)
    >>> data
    Interactions(300 users x 100 items, 2995 positives)
    >>> X = data.matrix  # users x items, CSR, ones at the positives
    >>> X.shape, X.nnz, int(X.getnnz(axis=0).min())  # the least popular item
    ((300, 100), 2995, 4)
    >>> data, planted = make_synthetic(n_users=20, n_items=10, n_factors=2, random_state=0, return_params=True)
    >>> planted["user_factors"].shape, planted["item_factors"].shape
    ((20, 2), (10, 2))
    """
    n_users = check_positive_int(n_users, "n_users")
    n_items = check_positive_int(n_items, "n_items")
    n_factors = check_positive_int(n_factors, "n_factors", minimum=0)
    density = check_real(density, "density", low=0.0, low_open=True, high=1.0)
    popularity_exponent = check_real(popularity_exponent, "popularity_exponent", low=0.0)
    factor_scale = check_real(factor_scale, "factor_scale", low=0.0)
    activity_sigma = check_real(activity_sigma, "activity_sigma", low=0.0)
    rng = check_random_state(random_state, "random_state")

    rank = rng.permutation(n_items)
    bias = -popularity_exponent * np.log1p(rank)
    scale = max(n_factors, 1) ** -0.25
    P = rng.normal(0.0, scale, (n_users, n_factors))
    Q = rng.normal(0.0, scale, (n_items, n_factors))
    mu = np.log(density * n_items) - activity_sigma**2 / 2
    n_u = np.clip(np.rint(rng.lognormal(mu, activity_sigma, n_users)), 1, n_items).astype(np.int64)

    rows, cols = [], []
    step = max(1, _BATCH_CELLS // n_items)
    for start in range(0, n_users, step):
        stop = min(start + step, n_users)
        logits = bias + factor_scale * (P[start:stop] @ Q.T)
        keys = logits + rng.gumbel(size=logits.shape)
        r, c = _top_per_row(keys, n_u[start:stop])
        rows.append(r + start)
        cols.append(c)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    empty = np.flatnonzero(np.bincount(cols, minlength=n_items) == 0)
    rows = np.concatenate((rows, rng.integers(0, n_users, empty.size)))
    cols = np.concatenate((cols, empty))
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_users, n_items))
    data = Interactions(X)
    if return_params:
        return data, {"user_factors": P, "item_factors": Q, "item_bias": bias}
    return data


def _top_per_row(keys: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(row, col)`` of the ``k[row]`` largest keys of each row."""
    kmax = int(k.max())
    if kmax < keys.shape[1]:
        part = np.argpartition(-keys, kmax - 1, axis=1)[:, :kmax]
    else:
        part = np.broadcast_to(np.arange(keys.shape[1]), keys.shape)
    order = np.argsort(-np.take_along_axis(keys, part, axis=1), axis=1)
    top = np.take_along_axis(part, order, axis=1)
    mask = np.arange(kmax) < k[:, None]
    return np.nonzero(mask)[0], top[mask]
