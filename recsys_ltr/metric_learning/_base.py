"""metric-learn's interface for every Mahalanobis learner of the package (FRML, GMML, MLR, ...).

A learner fits ``components_`` = ``L`` of shape ``(n_components, n_features)``; the metric is
``M = L^T L`` and the distance ``d(x, x') = ||L (x - x')|| = sqrt((x - x')^T M (x - x'))``.
Everything else follows from ``L``, as in metric-learn's ``MahalanobisMixin``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._io import Persistable
from .._validation import check_dense, check_sparse

__all__ = ["MahalanobisMixin", "check_dense"]


def _check_values(X) -> None:
    """What scikit-learn's ``validate_data`` lets through or words vaguely: strings (it parses
    ``"1.0"``), ragged rows, more than 2 dimensions.  The rest (1-D, empty, NaN, complex, objects
    that are not numbers) keeps the messages scikit-learn's estimator checks expect."""
    try:
        A = np.asarray(X)
    except ValueError:  # nested sequences of unequal lengths
        raise ValueError("X must be a 2-D array, got rows of different lengths") from None
    if A.dtype.kind in "SU" or (A.dtype == object and any(isinstance(v, (str, bytes)) for v in A.ravel())):
        raise TypeError("X must be numeric, got strings")
    if A.ndim > 2:
        raise ValueError(f"X must be a 2-D array, got shape {A.shape}")


class MahalanobisMixin(Persistable, TransformerMixin):
    """``transform``, ``get_mahalanobis_matrix``, ``pair_distance``, ``pair_score`` and
    ``get_metric`` from the fitted ``components_``, plus ``save``/``load``."""

    #: whether ``fit`` and ``transform`` take sparse ``X`` (kept sparse, CSR)
    _accepts_sparse = False

    def __sklearn_is_fitted__(self):
        return hasattr(self, "components_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._accepts_sparse
        return tags

    def _validate(self, X, y="no_validation", *, reset: bool, min_samples: int = 1):
        """scikit-learn's ``validate_data`` (float64, finite, ``n_features_in_``); a sparse ``X`` has
        its raw structure checked first (:func:`recsys_ltr._validation.check_sparse`), a dense one
        its values (numbers, not strings), before scikit-learn converts anything."""
        if sp.issparse(X):
            if not self._accepts_sparse:  # before scikit-learn's checks of the values (complex, NaN)
                raise TypeError(f"{type(self).__name__} takes a dense X, got a sparse matrix (use X.toarray())")
            X = check_sparse(X, "X", allow_empty=True, nonnegative=False)
        else:
            _check_values(X)
        kw = dict(
            reset=reset,
            accept_sparse="csr" if self._accepts_sparse else False,
            dtype=np.float64,
            ensure_min_samples=min_samples,
        )
        if isinstance(y, str) and y == "no_validation":
            return validate_data(self, X, **kw)
        return validate_data(self, X, y, **kw)

    def transform(self, X) -> np.ndarray:
        """Map rows to the learned space, ``x -> L x``: Euclidean there = learned distance here."""
        check_is_fitted(self)
        return np.asarray(self._validate(X, reset=False) @ self.components_.T)

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """The ``d x d`` matrix ``M = L^T L`` (symmetric positive semi-definite)."""
        check_is_fitted(self)
        return self.components_.T @ self.components_

    def pair_distance(self, pairs) -> np.ndarray:
        """Learned distance ``sqrt((x - x')^T M (x - x'))`` of each pair; ``pairs`` has shape
        ``(n_pairs, 2, n_features)`` (metric-learn's layout)."""
        check_is_fitted(self)
        pairs = np.asarray(pairs)
        if pairs.ndim != 3 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must have shape (n_pairs, 2, n_features), got {pairs.shape}")
        diff = self.transform(pairs[:, 0]) - self.transform(pairs[:, 1])
        return np.sqrt(np.einsum("ij,ij->i", diff, diff))

    def pair_score(self, pairs) -> np.ndarray:
        """``-pair_distance(pairs)``: higher means more similar (metric-learn's convention)."""
        return -self.pair_distance(pairs)

    def get_metric(self):
        """A function ``metric(u, v)`` returning the learned distance of two 1-D points (usable
        as scikit-learn's ``metric=`` callable)."""
        check_is_fitted(self)
        L = self.components_.copy()

        def metric(u, v):
            u, v = np.asarray(u, dtype=np.float64).ravel(), np.asarray(v, dtype=np.float64).ravel()
            if u.shape != (L.shape[1],) or v.shape != (L.shape[1],):
                raise ValueError(f"points must have {L.shape[1]} features, got {u.shape} and {v.shape}")
            diff = L @ (u - v)
            return float(np.sqrt(diff @ diff))

        return metric

    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        L = self.components_
        if L.ndim != 2 or L.shape[0] == 0 or L.shape[1] == 0:
            raise ValueError(f"components_ must be a non-empty 2-D array, got shape {L.shape}")
        self.n_features_in_ = L.shape[1]
