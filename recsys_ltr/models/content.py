"""Content item-p: item-based KNN over a content affinity, for items nobody has consumed.

``score(u, i) = sum_{j in O+_u & KNN_content(i)} A_ij = [ktrunc(A)]_i . u`` (Theorem 4.3), the
item-p rule of :class:`~recsys_ltr.models.ItemKNN` with ``A`` and ``KNN`` taken from item content
(:class:`~recsys_ltr.neighbors.ContentAffinity`, :class:`~recsys_ltr.ltr.LGMMLAffinity`)
instead of the feedback matrix.  A cold item ``i`` (no training interaction) scores through its
warm content neighbours ``j`` that the user consumed, so it can be recommended before anyone has
consumed it.
"""

from __future__ import annotations

from sklearn.base import BaseEstimator, clone

from ..neighbors.affinity import Affinity
from .neighborhood import ItemKNN

__all__ = ["ContentItemKNN"]


class ContentItemKNN(ItemKNN):
    """item-p over a precomputed content affinity.

    Reads weights as :class:`ItemKNN` does (``uses_weights``): a user's stored values (counts,
    confidences) scale the content affinities of their items, ``score(u, i) = sum_j A_ij x_uj``.

    Parameters
    ----------
    affinity : Affinity or fitted affinity estimator
        Item affinity over the catalogue of the training matrix (``n_items x n_items``, side
        ``"item"``), e.g. ``ContentAffinity(k=100, metric=frml).fit(F)`` or
        ``LGMMLAffinity(k=100).fit(F, X)`` (any estimator whose fitted ``affinity_`` is one).  Required by ``fit``;
        a loaded model keeps its affinity in ``item_affinity_`` (the parameter is then ``None``).
    k : int
        Neighbourhood size, ``1 <= k <= affinity.k_max``.
    num_threads : int
        numba threads for scoring (0 = all).
    show_progress : bool or None
        Unused: the affinity is computed beforehand (kept for the ItemKNN interface).

    Attributes
    ----------
    item_affinity_ : Affinity
        The affinity used (the given one, not copied).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.models import ContentItemKNN
    >>> from recsys_ltr.neighbors import ContentAffinity
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, random_state=0).matrix
    >>> F = np.random.default_rng(0).random((100, 8))  # item content, e.g. tf-idf tags
    >>> model = ContentItemKNN(affinity=ContentAffinity(k=20).fit(F), k=20).fit(X)
    >>> ids, scores = model.recommend(0, N=3)
    >>> ids.shape
    (3,)
    """

    _affinity_kind = None  # any kind: content affinities are "custom", a given Affinity may be any

    def __init__(self, affinity=None, k=100, num_threads=0, show_progress=None):
        self.affinity = affinity
        super().__init__(k=k, num_threads=num_threads, show_progress=show_progress)

    def _fit(self, X):
        A = self.affinity
        k = self._param("k")
        if isinstance(A, BaseEstimator):  # ContentAffinity, LGMMLAffinity or any estimator with affinity_
            if not hasattr(A, "affinity_"):
                raise ValueError(
                    f"the {type(A).__name__} given as affinity has no affinity_: not fitted (call its fit first) "
                    "or not an affinity estimator"
                )
            A = A.affinity_
        if not isinstance(A, Affinity):
            raise TypeError(
                f"affinity must be an Affinity or a fitted affinity estimator (ContentAffinity, LGMMLAffinity), "
                f"got {type(A).__name__}"
            )
        if A.side != "item" or A.n != X.shape[1]:
            raise ValueError(f"affinity must be an item affinity over the {X.shape[1]} items of X, got {A!r}")
        if k > A.k_max:
            raise ValueError(f"k={k} exceeds the affinity's k_max={A.k_max}")
        self.item_affinity_ = A

    def _items_state(self, ids, cols, grown):
        raise NotImplementedError(
            "ContentItemKNN's item neighbours come from item content, not from the items' users: refit it with "
            "an affinity over the grown catalogue"
        )

    def __sklearn_clone__(self):
        """An unfitted copy that keeps the given ``affinity`` (fitted: it is content data, like the
        training matrix, not a setting): ``clone`` would refit nothing and drop its ``affinity_``."""
        params = {k: clone(v, safe=False) for k, v in self.get_params(deep=False).items() if k != "affinity"}
        return type(self)(affinity=self.affinity, **params)

    def _saved_params(self):
        """The affinity is saved in the fitted state, so the file records the parameter as ``None``."""
        return {**super()._saved_params(), "affinity": None}
