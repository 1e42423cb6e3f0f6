"""Input checks shared by every estimator and kernel.

Numba kernels trust their inputs (no bounds checks at run time), so every public entry
point validates here first and turns bad input into a clear ``ValueError``/``TypeError``.
"""

from __future__ import annotations

import contextlib
import numbers

import numpy as np
import scipy.sparse as sp

__all__ = [
    "check_feedback",
    "check_ids",
    "check_num_threads",
    "check_positive_int",
    "check_random_state",
    "check_real",
    "check_same_shape",
    "check_scores",
    "numba_threads",
]


def check_feedback(X, name: str = "X", *, allow_empty: bool = False) -> sp.csr_matrix:
    """Return ``X`` as a canonical binary feedback matrix.

    Canonical means: ``scipy.sparse.csr_matrix`` of float64 ones, int32 indices sorted within
    each row, no duplicates and no stored zeros.  Accepts a scipy sparse matrix/array, a dense
    2-D array or an object with a ``matrix`` attribute (such as ``recsys_ltr.Interactions``).
    Any positive stored value counts as one interaction.

    Raises ``TypeError`` for non-matrix input and ``ValueError`` for a wrong dimension, NaN/inf,
    negative values, explicitly stored zeros, or (unless ``allow_empty``) no interactions at all.
    """
    if hasattr(X, "matrix") and not sp.issparse(X) and not isinstance(X, np.ndarray):
        X = X.matrix
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {X.shape}")
        X = sp.csr_matrix(X, copy=True)
        try:  # out-of-range indices or a broken indptr would make kernels read out of bounds
            X.check_format(full_check=True)
        except ValueError as exc:
            raise ValueError(f"{name} is a malformed sparse matrix: {exc}") from None
        X.sum_duplicates()
    elif isinstance(X, (np.ndarray, list, tuple)):
        arr = np.asarray(X)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got an array of shape {arr.shape}")
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
        _check_values(arr.astype(np.float64, copy=False).ravel(), name)
        X = sp.csr_matrix(arr.astype(np.float64))
    else:
        raise TypeError(
            f"{name} must be a scipy.sparse matrix, a 2-D numpy array or an Interactions object, got {type(X).__name__}"
        )
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
        raise TypeError(f"{name} must be numeric, got dtype {X.dtype}")
    data = X.data.astype(np.float64, copy=False)
    _check_values(data, name)
    if np.any(data == 0):
        raise ValueError(
            f"{name} stores {int(np.sum(data == 0))} explicit zero(s); call {name}.eliminate_zeros() "
            "first (an explicit zero is ambiguous: missing or negative feedback?)"
        )
    if X.nnz == 0 and not allow_empty:
        raise ValueError(f"{name} has no interactions (shape {X.shape}, nnz 0)")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} has an empty dimension: shape {X.shape}")
    if X.nnz > _INT32_MAX or X.shape[1] > _INT32_MAX:
        raise ValueError(
            f"{name} is too large for the int32 CSR every kernel takes: nnz {X.nnz}, shape {X.shape} "
            f"(at most {_INT32_MAX} interactions and items)"
        )
    out = sp.csr_matrix(
        (np.ones(X.nnz, dtype=np.float64), X.indices.astype(np.int32), X.indptr.astype(np.int32)),
        shape=X.shape,
    )
    out.sort_indices()
    return out


_INT32_MAX = np.iinfo(np.int32).max


def _check_values(data: np.ndarray, name: str) -> None:
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(data < 0):
        raise ValueError(f"{name} contains negative values; feedback weights must be >= 0")


def check_same_shape(A: sp.spmatrix, B: sp.spmatrix, name_a: str, name_b: str) -> None:
    """Raise ``ValueError`` unless ``A`` and ``B`` have the same shape."""
    if A.shape != B.shape:
        raise ValueError(f"shape mismatch: {name_a} is {A.shape} but {name_b} is {B.shape}")


def check_ids(ids, n: int, name: str = "user_ids") -> np.ndarray:
    """Return ``ids`` as a 1-D int64 array, checking every id lies in ``[0, n)``.

    A scalar becomes a length-1 array.  Raises ``TypeError`` for non-integer ids and
    ``ValueError`` for ids out of range.
    """
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        bad = arr[(arr < 0) | (arr >= n)][:5]
        raise ValueError(f"{name} out of range [0, {n}): {bad.tolist()}")
    return arr


def check_positive_int(value, name: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int in ``[minimum, maximum]`` or raise a clear error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_num_threads(num_threads) -> int:
    """Validate a ``num_threads`` parameter; 0 means all cores numba sees."""
    import numba

    n = check_positive_int(num_threads, "num_threads", minimum=0)
    return numba.config.NUMBA_NUM_THREADS if n == 0 else min(n, numba.config.NUMBA_NUM_THREADS)


@contextlib.contextmanager
def numba_threads(num_threads):
    """Run the enclosed numba kernels on ``num_threads`` threads (0 = all), then restore."""
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(check_num_threads(num_threads))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def check_random_state(seed, name: str = "random_state") -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from ``None``, an int or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or (isinstance(seed, numbers.Integral) and not isinstance(seed, bool)):
        return np.random.default_rng(seed)
    raise TypeError(f"{name} must be None, an int or a numpy Generator, got {seed!r}")


def check_real(value, name: str, *, low=-np.inf, high=np.inf, low_open=False, high_open=False) -> float:
    """Return ``value`` as a finite float in the interval from ``low`` to ``high`` (closed unless
    ``low_open``/``high_open``); ``TypeError`` for a non-real (or bool), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    below = value < low or (low_open and value == low)
    above = value > high or (high_open and value == high)
    if not np.isfinite(value) or below or above:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open or high == np.inf else ']'}"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value}")
    return value


def check_scores(scores, shape: tuple[int, int], name: str = "scores") -> np.ndarray:
    """A dense score block as a C-contiguous float32/float64 array of the expected shape.

    float32 and float64 are kept (no copy when already contiguous), other real dtypes become
    float64.  NaN is *not* checked here: the ranking kernels flag it in their own pass.
    """
    scores = np.asarray(scores)
    if scores.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (users, n_items), got {scores.shape}")
    if not (np.issubdtype(scores.dtype, np.number) or scores.dtype == bool) or np.iscomplexobj(scores):
        raise TypeError(f"{name} must be real numbers, got dtype {scores.dtype}")
    if scores.dtype not in (np.float32, np.float64):
        scores = scores.astype(np.float64)
    return np.ascontiguousarray(scores)
