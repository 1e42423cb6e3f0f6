"""Input checks at the public boundary.

Numba kernels trust their inputs (no bounds checks at run time), so every public entry point
validates here, once, and turns bad input into a clear ``ValueError``/``TypeError``; internal
functions take the validated forms and check nothing again.

Sparse input is checked on its *raw* arrays, format by format, before scipy converts it: a CSC,
COO, BSR or LIL matrix whose stored indices lie outside its shape corrupts memory inside scipy's
own conversion routines, so no conversion may run first.

Canonical sparse form (what :func:`check_sparse` and :func:`check_feedback` return): a
``scipy.sparse.csr_matrix`` with float64 data and **int32** ``indices`` and ``indptr`` (one index
dtype everywhere, so every numba kernel compiles once), indices sorted within each row, no
duplicates.  :func:`check_feedback` further makes every stored value 1; :func:`check_weighted` keeps
the values as weights (positive, between :data:`WEIGHT_MIN` and :data:`WEIGHT_MAX`).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from numba import njit

__all__ = [
    "INDEX_DTYPE",
    "WEIGHT_MAX",
    "WEIGHT_MIN",
    "check_bool",
    "check_compressed",
    "check_csr_structure",
    "check_dense",
    "check_feedback",
    "check_ids",
    "check_item_selection",
    "check_new_ids",
    "check_positive_int",
    "check_positive_values",
    "check_random_state",
    "check_real",
    "check_same_shape",
    "check_scores",
    "check_sparse",
    "check_values",
    "check_weighted",
    "stores_a_repeat",
]

#: Index dtype of every canonical CSR matrix (``indices`` and ``indptr``).
INDEX_DTYPE = np.int32
_INT32_MAX = int(np.iinfo(np.int32).max)
_INT64_MAX = int(np.iinfo(np.int64).max)
#: Smallest and largest weight a model reads: products and sums of squares of two weights neither
#: underflow to 0 nor overflow (a similarity of two positive weights is positive).
WEIGHT_MIN, WEIGHT_MAX = 1e-100, 1e100


# ----------------------------------------------------------------------------- sparse input
def check_sparse(X, name: str = "X", *, allow_empty: bool = False, nonnegative: bool = True) -> sp.csr_matrix:
    """Return the canonical CSR form of ``X`` keeping its values (duplicates summed).

    ``X`` is a scipy sparse matrix or array of any format, a dense 2-D array (or nested list),
    or an object with a ``matrix`` attribute (such as ``recsys_ltr.Interactions``).  The raw
    arrays of a sparse input are checked first (index dtypes, lengths, ``indptr`` monotone and
    within bounds, every index inside the shape), then the values: real (not complex), finite,
    and ``>= 0`` when ``nonnegative``.  Raises ``TypeError`` for a non-matrix, non-numeric or
    complex input and ``ValueError`` naming the problem otherwise; an empty dimension, or (unless
    ``allow_empty``) no stored entry at all, is an error.
    """
    if hasattr(X, "matrix") and not sp.issparse(X) and not isinstance(X, np.ndarray):
        X = X.matrix
    if sp.issparse(X):
        shape = _check_shape(X.shape, name)
        _check_dtype(X.dtype, name)
        out = _SPARSE_PARTS.get(X.format, _unsupported)(X, shape, name)
    elif isinstance(X, (np.ndarray, list, tuple)):
        try:
            arr = np.asarray(X)
        except ValueError:  # numpy refuses nested sequences of unequal lengths
            raise ValueError(f"{name} must be a 2-D matrix, got rows of different lengths") from None
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got an array of shape {arr.shape}")
        _check_dtype(arr.dtype, name)
        shape = _check_shape(arr.shape, name)
        arr = arr.astype(np.float64)
        check_values(arr.ravel(), name, nonnegative)
        rows, cols = np.nonzero(arr)
        out = _from_triplets(arr[rows, cols], rows, cols, shape)
    else:
        raise TypeError(
            f"{name} must be a scipy.sparse matrix, a 2-D numpy array or an Interactions object, got {type(X).__name__}"
        )
    check_values(out.data, name, nonnegative)
    if out.nnz == 0 and not allow_empty:
        raise ValueError(f"{name} has no interactions (shape {shape}, nnz 0)")
    return out


def check_feedback(X, name: str = "X", *, allow_empty: bool = False) -> sp.csr_matrix:
    """Return ``X`` as a canonical binary feedback matrix (every stored value 1).

    Accepts what :func:`check_sparse` accepts; any positive stored value counts as one
    interaction.  Besides :func:`check_sparse`'s errors, a stored zero raises ``ValueError`` (an
    explicit zero is ambiguous: missing or negative feedback?).
    """
    X = check_positive_values(X, name, allow_empty=allow_empty)
    X.data[:] = 1.0
    return X


def check_positive_values(X, name: str = "X", *, allow_empty: bool = False, hint: str = "") -> sp.csr_matrix:
    """:func:`check_sparse` with its values kept, every one positive: a stored zero raises
    ``ValueError`` (an explicit zero is ambiguous: missing or negative feedback?), ``hint`` added
    to the message.  The common part of :func:`check_feedback` and :func:`check_weighted`."""
    X = check_sparse(X, name, allow_empty=allow_empty)
    zeros = int(np.count_nonzero(X.data == 0))
    if zeros:
        raise ValueError(
            f"{name} stores {zeros} explicit zero(s); call {name}.eliminate_zeros() first (an explicit zero "
            f"is ambiguous: missing or negative feedback?){hint}"
        )
    return X


def check_weighted(X, name: str = "X", *, allow_empty: bool = False) -> sp.csr_matrix:
    """Return ``X`` as a canonical weighted feedback matrix: the stored values are the weights.

    For the models that read weights (``uses_weights``): every stored value is a positive
    weight in ``[WEIGHT_MIN, WEIGHT_MAX]`` (counts, confidences, :mod:`recsys_ltr.weighting`'s
    outputs); a stored zero or a negative value is an error, as in :func:`check_feedback`.
    """
    X = check_positive_values(
        X, name, allow_empty=allow_empty, hint=" (or a weighting gave them: see recsys_ltr.weighting)"
    )
    if X.nnz and (X.data.min() < WEIGHT_MIN or X.data.max() > WEIGHT_MAX):
        raise ValueError(
            f"{name} stores weights in [{X.data.min():.3g}, {X.data.max():.3g}]: weights must lie in "
            f"[{WEIGHT_MIN:g}, {WEIGHT_MAX:g}]; rescale them"
        )
    return X


def _check_shape(shape, name) -> tuple[int, int]:
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D, got shape {shape}")
    if not all(isinstance(s, numbers.Integral) and not isinstance(s, (bool, np.bool_)) for s in shape):
        raise TypeError(f"{name} has shape {shape}: its dimensions must be integers")
    n_rows, n_cols = (int(s) for s in shape)
    if n_rows < 0 or n_cols < 0:
        raise ValueError(f"{name} has a negative dimension: shape {(n_rows, n_cols)}")
    if n_rows == 0 or n_cols == 0:
        raise ValueError(f"{name} has an empty dimension: shape {(n_rows, n_cols)}")
    if n_rows > _INT32_MAX or n_cols > _INT32_MAX:
        raise ValueError(f"{name} has shape {(n_rows, n_cols)}: at most {_INT32_MAX} rows and columns are supported")
    return n_rows, n_cols


def _check_dtype(dtype, name):
    if np.issubdtype(dtype, np.complexfloating):
        raise TypeError(f"{name} has complex values (dtype {dtype}); feedback and weights must be real")
    if not (np.issubdtype(dtype, np.number) or np.dtype(dtype).kind == "b"):
        raise TypeError(f"{name} must be numeric, got dtype {dtype}")


def check_values(data: np.ndarray, name: str, nonnegative: bool = True) -> None:
    """Raise ``ValueError`` unless ``data`` is finite (and ``>= 0`` when ``nonnegative``)."""
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} contains NaN or infinite values (or duplicate entries whose sum overflows)")
    if nonnegative and np.any(data < 0):
        raise ValueError(f"{name} contains negative values; they must be non-negative (>= 0)")


def _index_array(a, what: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{what} must be a 1-D integer array, got dtype {a.dtype} and shape {a.shape}")
    return a


def _check_range(idx: np.ndarray, n: int, what: str, name: str) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][:5].tolist()
        raise ValueError(f"{name} is a malformed sparse matrix: {what} out of range [0, {n}): {bad}")


def check_compressed(indptr, indices, n_major, n_minor, name, what) -> int:
    """Check the raw arrays of a compressed (CSR/CSC/BSR) structure of ``n_major`` rows whose
    indices (``what``) lie in ``[0, n_minor)``; returns the number of stored entries."""
    indptr = _index_array(indptr, f"{name}.indptr")
    indices = _index_array(indices, f"{name}.indices")
    if indptr.size != n_major + 1:
        raise ValueError(
            f"{name} is a malformed sparse matrix: indptr has {indptr.size} entries, expected {n_major + 1}"
        )
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise ValueError(f"{name} is a malformed sparse matrix: indptr must start at 0 and never decrease")
    nnz = int(indptr[-1])
    if nnz > _INT32_MAX:
        raise ValueError(f"{name} stores {nnz} entries: at most {_INT32_MAX} are supported")
    if nnz > indices.size:
        raise ValueError(
            f"{name} is a malformed sparse matrix: indptr ends at {nnz} but there are {indices.size} indices"
        )
    _check_range(indices[:nnz], n_minor, what, name)
    return nnz


def _data_array(data, size: int, name: str) -> np.ndarray:
    """The first ``size`` stored values as a float64 copy."""
    data = np.asarray(data)
    if data.ndim != 1 or data.size < size:
        raise ValueError(f"{name} is a malformed sparse matrix: {size} entries but data has shape {data.shape}")
    return data[:size].astype(np.float64)


def check_csr_structure(X, name: str) -> int:
    """Check the raw arrays of a CSR matrix (shape, index dtypes, ``indptr``, index range, real
    finite data) without converting or reordering it; returns its number of stored entries."""
    _check_dtype(X.dtype, name)
    shape = _check_shape(X.shape, name)
    nnz = check_compressed(X.indptr, X.indices, shape[0], shape[1], name, "column index")
    check_values(_data_array(X.data, nnz, name), name, nonnegative=False)
    return nnz


def stores_a_repeat(M, diagonal: bool = False) -> bool:
    """Whether a CSR matrix whose structure is checked (:func:`check_csr_structure`) stores a column
    twice in one row or, with ``diagonal``, a row's own index: one pass over its entries, O(nnz + n)."""
    return _stores_a_repeat(M.indptr, M.indices, M.shape[1], diagonal)


@njit(cache=True)
def _stores_a_repeat(indptr, indices, n_cols, diagonal):
    last_row = np.full(n_cols, -1, np.int64)  # the last row that stored each column
    for row in range(indptr.size - 1):
        for p in range(indptr[row], indptr[row + 1]):
            j = indices[p]
            if last_row[j] == row or (diagonal and j == row):
                return True
            last_row[j] = row
    return False


def _compressed_parts(X, shape, name):
    csr = X.format == "csr"
    n_major, n_minor = shape if csr else shape[::-1]
    nnz = check_compressed(X.indptr, X.indices, n_major, n_minor, name, "column index" if csr else "row index")
    data = _data_array(X.data, nnz, name)
    if csr:  # copies: sum_duplicates works in place
        out = sp.csr_matrix(
            (data, np.array(X.indices[:nnz], dtype=INDEX_DTYPE), np.array(X.indptr, dtype=INDEX_DTYPE)), shape=shape
        )
        out.sum_duplicates()  # sorts the indices too
        return out
    major = np.repeat(np.arange(n_major, dtype=np.int64), np.diff(np.asarray(X.indptr, dtype=np.int64)))
    return _from_triplets(data, X.indices[:nnz], major, shape)


def _coo_parts(X, shape, name):
    coords = X.coords if hasattr(X, "coords") else (X.row, X.col)
    if len(coords) != 2:
        raise ValueError(f"{name} must be 2-D, got {len(coords)} coordinate arrays")
    rows, cols = (_index_array(c, f"{name} coordinates") for c in coords)
    if rows.size != cols.size:
        raise ValueError(f"{name} is a malformed sparse matrix: {rows.size} row and {cols.size} column indices")
    if np.ndim(X.data) != 1 or np.shape(X.data)[0] != rows.size:  # COO has no nnz but its arrays' length
        raise ValueError(
            f"{name} is a malformed sparse matrix: {rows.size} coordinates but data has shape {np.shape(X.data)}"
        )
    _check_range(rows, shape[0], "row index", name)
    _check_range(cols, shape[1], "column index", name)
    return _from_triplets(_data_array(X.data, rows.size, name), rows, cols, shape)


def _bsr_parts(X, shape, name):
    R, C = (int(b) for b in X.blocksize)
    if R < 1 or C < 1 or shape[0] % R or shape[1] % C:
        raise ValueError(f"{name} is a malformed BSR matrix: blocksize {(R, C)} does not divide shape {shape}")
    nnzb = check_compressed(X.indptr, X.indices, shape[0] // R, shape[1] // C, name, "block column index")
    data = np.asarray(X.data)
    if data.ndim != 3 or data.shape[0] < nnzb or data.shape[1:] != (R, C):
        raise ValueError(f"{name} is a malformed BSR matrix: data has shape {data.shape} for {nnzb} blocks {(R, C)}")
    block_rows = np.repeat(np.arange(shape[0] // R, dtype=np.int64), np.diff(np.asarray(X.indptr, dtype=np.int64)))
    rr, cc = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    rows = (block_rows[:, None] * R + rr.ravel()[None, :]).ravel()
    cols = (np.asarray(X.indices[:nnzb], dtype=np.int64)[:, None] * C + cc.ravel()[None, :]).ravel()
    values = data[:nnzb].reshape(nnzb, R * C).ravel().astype(np.float64)
    keep = values != 0  # a block stores its structural zeros; they are not entries
    return _from_triplets(values[keep], rows[keep], cols[keep], shape)


def _dia_parts(X, shape, name):
    offsets = _index_array(X.offsets, f"{name}.offsets")
    data = np.asarray(X.data)
    if data.ndim != 2 or data.shape[0] != offsets.size:
        raise ValueError(f"{name} is a malformed DIA matrix: data {data.shape} for {offsets.size} offsets")
    cols = np.arange(data.shape[1], dtype=np.int64)
    rows = cols[None, :] - offsets.astype(np.int64)[:, None]
    cols = np.broadcast_to(cols, rows.shape)
    keep = (rows >= 0) & (rows < shape[0]) & (cols < shape[1]) & (data != 0)
    return _from_triplets(data[keep].astype(np.float64), rows[keep], cols[keep], shape)


def _lil_parts(X, shape, name):
    rows_lists, data_lists = list(X.rows), list(X.data)
    if len(rows_lists) != shape[0] or len(data_lists) != shape[0]:
        raise ValueError(f"{name} is a malformed LIL matrix: expected {shape[0]} row lists")
    counts = np.array([len(r) for r in rows_lists], dtype=np.int64)
    if not np.array_equal(counts, [len(d) for d in data_lists]):
        raise ValueError(f"{name} is a malformed LIL matrix: row and data lists differ in length")
    cols = np.asarray([c for r in rows_lists for c in r]) if counts.sum() else np.zeros(0, np.int64)
    _check_range(_index_array(cols, f"{name}.rows"), shape[1], "column index", name)
    values = _stored_values([v for d in data_lists for v in d], name)
    return _from_triplets(values, np.repeat(np.arange(shape[0]), counts), cols, shape)


def _stored_values(values: list, name: str) -> np.ndarray:
    """The values a LIL or DOK matrix stores in Python containers, as float64: their own dtype
    is checked (a container may hold strings or complex numbers whatever the matrix's dtype)."""
    arr = np.asarray(values) if values else np.zeros(0)
    if arr.dtype == object:  # mixed Python objects: numeric only if every one is a real number
        if not all(isinstance(v, numbers.Real) for v in values):
            raise TypeError(
                f"{name} must be numeric, got stored values of type(s) {sorted({type(v).__name__ for v in values})}"
            )
        arr = arr.astype(np.float64)
    _check_dtype(arr.dtype, name)
    return arr.astype(np.float64)


def _dok_parts(X, shape, name):
    keys = list(X.keys())
    try:
        coords = np.array(keys) if keys else np.zeros((0, 2), np.int64)
    except ValueError:  # keys of different lengths
        coords = np.zeros(0)
    if coords.ndim != 2 or coords.shape[1] != 2 or not np.issubdtype(coords.dtype, np.integer):
        raise ValueError(f"{name} is a malformed DOK matrix: its keys must be (row, column) integer pairs")
    _check_range(coords[:, 0], shape[0], "row index", name)
    _check_range(coords[:, 1], shape[1], "column index", name)
    return _from_triplets(_stored_values(list(X.values()), name), coords[:, 0], coords[:, 1], shape)


def _unsupported(X, shape, name):
    raise TypeError(f"{name} has an unsupported sparse format {X.format!r}")


_SPARSE_PARTS = {
    "csr": _compressed_parts,
    "csc": _compressed_parts,
    "coo": _coo_parts,
    "bsr": _bsr_parts,
    "dia": _dia_parts,
    "lil": _lil_parts,
    "dok": _dok_parts,
}


def _from_triplets(data, rows, cols, shape) -> sp.csr_matrix:
    """Canonical CSR from checked (value, row, column) triplets, duplicates summed."""
    if data.size > _INT32_MAX:
        raise ValueError(f"{data.size} stored entries: at most {_INT32_MAX} are supported")
    order = np.lexsort((cols, rows))
    rows, cols, data = np.asarray(rows)[order], np.asarray(cols)[order], np.asarray(data)[order]
    new = np.ones(rows.size, dtype=bool)
    new[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    starts = np.flatnonzero(new)
    with np.errstate(over="ignore"):  # an overflowing sum is reported as a non-finite value
        summed = np.add.reduceat(data, starts) if starts.size else data
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[starts], minlength=shape[0]), out=indptr[1:])
    return sp.csr_matrix((summed, cols[starts].astype(INDEX_DTYPE), indptr.astype(INDEX_DTYPE)), shape=shape)


def check_dense(X, name: str = "X", *, min_rows: int = 1) -> np.ndarray:
    """``X`` as a finite float64 2-D array with at least ``min_rows`` rows and one column.

    A sparse ``X`` is checked like any sparse input (:func:`check_sparse`, raw arrays first)
    before it is densified.
    """
    if sp.issparse(X):
        X = check_sparse(X, name, allow_empty=True, nonnegative=False).toarray()
    try:
        X = np.asarray(X)
    except ValueError:  # nested sequences of unequal lengths
        raise ValueError(f"{name} must be a 2-D array, got rows of different lengths") from None
    if X.dtype == object or not (np.issubdtype(X.dtype, np.number) or X.dtype.kind == "b"):
        raise TypeError(f"{name} must be numeric, got dtype {X.dtype}")
    if np.iscomplexobj(X):
        raise TypeError(f"{name} has complex values")
    if X.ndim != 2 or X.shape[0] < min_rows or X.shape[1] == 0:
        raise ValueError(f"{name} must be a 2-D array with at least {min_rows} row(s) and 1 column, got {X.shape}")
    X = X.astype(np.float64)
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return X


def check_same_shape(A: sp.spmatrix, B: sp.spmatrix, name_a: str, name_b: str) -> None:
    """Raise ``ValueError`` unless ``A`` and ``B`` have the same shape."""
    if A.shape != B.shape:
        raise ValueError(f"shape mismatch: {name_a} is {A.shape} but {name_b} is {B.shape}")


# ----------------------------------------------------------------------------- ids and scores
def check_ids(ids, n: int, name: str = "user_ids", hint: str = "") -> np.ndarray:
    """Return ``ids`` as a 1-D int64 array, checking every id lies in ``[0, n)``.

    A scalar becomes a length-1 array.  Ids are integers: a float (``3.0`` as much as ``3.5``) or a
    bool raises ``TypeError``, an id out of range ``ValueError`` (checked before any cast, so a huge
    or unsigned id is reported as given, followed by ``hint``), nested sequences ``ValueError``.
    """
    try:
        arr = np.asarray(ids)
    except ValueError:  # nested sequences of unequal lengths
        raise ValueError(f"{name} must be a scalar or a 1-D array, got nested sequences") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {arr.shape}")
    if arr.dtype == object:  # Python ints beyond the 64-bit range
        wrong = [not isinstance(v, numbers.Integral) or isinstance(v, (bool, np.bool_)) for v in arr]
        if any(wrong):
            raise TypeError(f"{name} must be integers, got {arr[wrong][:5].tolist()}")
    elif arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype}: {arr[:5].tolist()}")
    out = (arr < 0) | (arr >= n)
    if np.any(out):
        raise ValueError(f"{name} out of range [0, {n}): {arr[out][:5].tolist()}{hint}")
    return arr.astype(np.int64)


def check_item_selection(filter_ids, only_ids, n: int, what: str = "items") -> np.ndarray:
    """Mask of the columns left out by ``filter_<what>`` or outside ``<what>`` (implicit's rule: at
    most one of the two), both lists of ids checked against ``n``."""
    if filter_ids is not None and only_ids is not None:
        raise ValueError(f"give filter_{what} or {what}, not both")
    if only_ids is not None:
        excluded = np.ones(n, bool)
        excluded[check_ids(only_ids, n, what)] = False
        return excluded
    excluded = np.zeros(n, bool)
    if filter_ids is not None:
        excluded[check_ids(filter_ids, n, f"filter_{what}")] = True
    return excluded


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


# ----------------------------------------------------------------------------- parameters
def check_positive_int(value, name: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int in ``[minimum, maximum]`` or raise a clear error.

    Integers only (numpy integers included); bools, floats and strings raise ``TypeError``.
    ``maximum`` defaults to the int64 maximum: every count, size and id ends up in an int64 array
    or a numba kernel, where a larger Python int would overflow.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    maximum = _INT64_MAX if maximum is None else maximum
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_bool(value, name: str) -> bool:
    """Return ``value`` as a bool: ``True``/``False`` (numpy bools included) only, so that a string
    such as ``"no"`` or a number is not read by its truthiness; else ``TypeError``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_real(value, name: str, *, low=-np.inf, high=np.inf, low_open=False, high_open=False) -> float:
    """Return ``value`` as a finite float in the interval from ``low`` to ``high`` (closed unless
    ``low_open``/``high_open``); ``TypeError`` for a non-real (a string, a bool, a complex),
    else ``ValueError``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    below = value < low or (low_open and value == low)
    above = value > high or (high_open and value == high)
    if not np.isfinite(value) or below or above:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open or high == np.inf else ']'}"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value}")
    return value


#: Seeds are 64-bit: larger ints would silently alias smaller ones (2**64 + s gives s's stream).
SEED_MAX = 2**64 - 1


def check_seed(seed, name: str = "random_state") -> int | None:
    """``None`` or an int in ``[0, 2**64)``; anything else raises ``TypeError``/``ValueError``."""
    if seed is None:
        return None
    seed = check_positive_int(seed, name, minimum=0, maximum=SEED_MAX)
    return seed


def check_random_state(seed, name: str = "random_state") -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from ``None``, an int in ``[0, 2**64)`` or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral)):
        raise TypeError(f"{name} must be None, an int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(check_seed(seed, name))


def check_new_ids(ids, name, bound) -> np.ndarray:
    """Ids that may be new (``>= n``, the ``bound`` named): any integer ``>= 0``."""
    arr = np.asarray(ids)
    if arr.size and np.issubdtype(arr.dtype, np.number) and np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0 (ids >= {bound} are new): {arr[arr < 0][:5].tolist()}")
    return check_ids(arr, np.iinfo(np.int64).max, name)
