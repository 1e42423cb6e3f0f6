"""Hostile inputs for every public entry point, their oracles, and a batch runner.

Shared by the fuzz suite (``tests/test_fuzz.py``) and the campaign
(``benchmarks/fuzz_campaign.py``).  A *case* is a JSON-able recipe (a dict) drawn by a hypothesis
strategy of this module; :func:`run_case` builds the hostile input from it, calls one entry point
and classifies what happened:

* ``clear``       -- a ``TypeError``/``ValueError`` (or an expected subclass) whose message names
  the problem (a regex per defect) and, where it has one, the argument;
* ``right``       -- a valid input answered as its canonical form (or a brute force) is answered;
* ``accepted``    -- a documented acceptance (the reason is reported with the count);
* ``wrong``       -- an answer that differs from the reference: a silent wrong answer;
* ``unexplained`` -- any other exception type;
* ``misleading``  -- the right exception type with a message that does not name the problem;
* ``undocumented``-- a malformed input accepted without a documented reason.

``crash`` (a signal or an abort) and ``timeout`` only exist for cases run in a subprocess
(:func:`run_batch_subprocess`), where the worker reports each case before running it.

Every oracle is independent of the code under test: malformed inputs are recognised from the
recipe, valid inputs are compared with the same call on a canonical CSR built here from the
recipe's triplets (``sum`` of duplicates by a dict), ids with their meaning computed here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from hypothesis import strategies as st

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CATEGORIES = ("clear", "right", "accepted", "crash", "timeout", "wrong", "unexplained", "misleading", "undocumented")
#: categories a test may end in (crashes, wrong answers and unclear messages must be 0)
GOOD = ("clear", "right", "accepted")


# ============================================================================ expectations
@dataclass(frozen=True)
class Reject:
    """The call must raise one of ``types`` with ``match`` (regex, case-insensitive) and ``name``
    (the argument) in its message."""

    match: str
    name: str = ""
    types: tuple = (TypeError, ValueError)


@dataclass(frozen=True)
class Same:
    """The call must behave exactly as ``reference()`` does: equal answers, or the same exception
    type and message.  ``reason``: the input is a documented acceptance."""

    reference: object
    reason: str = ""
    finite: bool = False  # the answer must hold no NaN (scores of a fitted model)
    exact: bool = True  # False: any answer will do (an unseeded estimator)
    tol: float = 0.0  # > 0: float answers equal to this relative tolerance (a brute-force reference)


@dataclass(frozen=True)
class Outcome:
    category: str
    detail: str = ""


def _call(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(), None
        except Exception as exc:
            return None, exc


def _message(exc) -> str:
    return f"{type(exc).__name__}: {exc}"


def _clear_type(exc, types=(TypeError, ValueError)) -> bool:
    """An exception type a bad input may end in: ``types``, or the package's documented
    ``FloatingPointError`` for a model that diverged (a learning rate too large for the data)."""
    return isinstance(exc, types) or (isinstance(exc, FloatingPointError) and "diverged" in str(exc))


def judge(fn, expect) -> Outcome:
    """Run ``fn()`` and classify the outcome against ``expect``."""
    if isinstance(expect, Either):
        rejected = judge(fn, expect.reject)
        return rejected if rejected.category != "undocumented" else judge(fn, expect.same)
    result, exc = _call(fn)
    if isinstance(expect, Reject):
        if exc is None:
            return Outcome("undocumented", f"accepted, expected an error matching {expect.match!r}")
        if not _clear_type(exc, expect.types):
            return Outcome("unexplained", _message(exc))
        text = str(exc)
        if not re.search(expect.match, text, re.IGNORECASE) or expect.name not in text:
            return Outcome("misleading", f"{_message(exc)} (expected {expect.match!r} naming {expect.name!r})")
        return Outcome("clear")
    ref, ref_exc = _call(expect.reference)
    if ref_exc is not None and not _clear_type(ref_exc):
        return Outcome("unexplained", f"reference: {_message(ref_exc)}")
    if exc is not None or ref_exc is not None:
        if exc is not None and not _clear_type(exc):
            return Outcome("unexplained", _message(exc))
        if exc is None or ref_exc is None:
            got = "an answer" if exc is None else _message(exc)
            want = "an answer" if ref_exc is None else _message(ref_exc)
            return Outcome("misleading" if exc is not None else "wrong", f"got {got}, canonical input gave {want}")
        if type(exc) is not type(ref_exc) or str(exc) != str(ref_exc):
            return Outcome("misleading", f"got {_message(exc)}, canonical input gave {_message(ref_exc)}")
        return Outcome("clear")
    if expect.exact and not (equal(result, ref) or (expect.tol and _close(result, ref, expect.tol))):
        return Outcome("wrong", f"answer differs from the canonical input's: {_short(result)} vs {_short(ref)}")
    if expect.finite and _has_nan(result):
        return Outcome("wrong", f"the answer holds NaN: {_short(result)}")
    return Outcome("accepted", expect.reason) if expect.reason else Outcome("right")


def _close(a, b, tol) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return (
        a.shape == b.shape
        and a.dtype.kind == b.dtype.kind == "f"
        and np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True)
    )


def _has_nan(x) -> bool:
    if isinstance(x, (list, tuple)):
        return any(_has_nan(v) for v in x)
    if isinstance(x, dict):
        return any(_has_nan(v) for v in x.values())
    return isinstance(x, np.ndarray) and x.dtype.kind == "f" and bool(np.isnan(x).any())


def _short(x) -> str:
    return repr(x)[:200].replace("\n", " ")


def equal(a, b) -> bool:
    """Exact equality of answers: arrays (NaN equal to NaN, dtype kind and shape included), sparse
    matrices (structure and values), mappings and sequences recursively, else ``==``."""
    if sp.issparse(a) or sp.issparse(b):
        if not (sp.issparse(a) and sp.issparse(b)) or a.shape != b.shape:
            return False
        a, b = sp.csr_matrix(a), sp.csr_matrix(b)
        return all(equal(getattr(a, p), getattr(b, p)) for p in ("indptr", "indices", "data"))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return type(a) is type(b) and a == b


# ============================================================================ sparse matrices
#: formats a user may pass: every scipy sparse format, a dense array and a nested list
FORMATS = ("csr", "csc", "coo", "bsr", "dia", "lil", "dok", "dense", "list")
_COMPRESSED = ("csr", "csc", "bsr")
_DUPLICATES = ("csr", "csc", "coo", "lil")  # formats that can store a position twice
_STORES_ZEROS = ("csr", "csc", "coo", "lil", "dok")  # formats that can store an explicit zero

#: defect -> (formats it applies to, regex the error must match; None: a valid input)
#: a non-finite value named: the package's words or scikit-learn's ("Input X contains NaN.")
NONFINITE = r"NaN or infinite|contains NaN|contains infinity"
DEFECTS = {
    # valid inputs, answered as their canonical CSR
    "none": (FORMATS, None),
    "no_entries": (FORMATS, None),
    "huge": (FORMATS, None),
    "int_dtype": (FORMATS, None),
    "bool_dtype": (FORMATS, None),
    "float32_dtype": (FORMATS, None),
    "indices_int8": (("csr", "csc"), None),
    "indices_uint64": (("csr", "csc"), None),
    "trailing": (("csr", "csc"), None),
    "offset_far": (("dia",), None),
    # malformed structure
    "index_high": (_COMPRESSED, r"out of range"),
    "index_negative": (_COMPRESSED, r"out of range"),
    "indptr_decreasing": (_COMPRESSED, r"indptr"),
    "indptr_start": (_COMPRESSED, r"indptr"),
    "indptr_short": (_COMPRESSED, r"indptr"),
    "indptr_long": (_COMPRESSED, r"indptr"),
    "indptr_end_beyond": (_COMPRESSED, r"indptr"),
    "indices_float": (_COMPRESSED, r"integer"),
    "indices_2d": (_COMPRESSED, r"integer"),
    "data_short": (("csr", "csc", "coo"), r"malformed"),
    "data_long": (("coo",), r"malformed"),
    "row_high": (("coo", "dok"), r"out of range"),
    "col_high": (("coo", "lil", "dok"), r"out of range"),
    "row_negative": (("coo", "dok"), r"out of range"),
    "col_negative": (("coo", "lil", "dok"), r"out of range"),
    "coords_mismatch": (("coo",), r"malformed"),
    "coords_float": (("coo",), r"integer"),
    "col_float": (("lil", "dok"), r"integer"),
    "rows_count": (("lil",), r"LIL"),
    "row_data_mismatch": (("lil",), r"LIL"),
    "key_not_pair": (("dok",), r"DOK"),
    "offsets_float": (("dia",), r"integer"),
    "dia_data_rows": (("dia",), r"DIA"),
    "ragged": (("list",), r"2-D"),
    "dim3": (("dense", "list"), r"2-D|dim 3"),
    "empty_dim": (FORMATS, r"empty dimension|2-D|2D array|0 feature|0 sample"),  # [] is a 1-D list
    "float_shape": (FORMATS[:7], r"shape"),
    "frac_shape": (FORMATS[:7], r"shape"),
    "neg_shape": (FORMATS[:7], r"negative dimension"),
    "big_shape": (("coo", "dok"), r"at most"),
    # malformed values
    "nan": (FORMATS, NONFINITE),
    "inf": (FORMATS, NONFINITE),
    "overflow": (_DUPLICATES, r"NaN or infinite"),
    "complex": (FORMATS, r"complex"),
    "str_values": (("lil", "dok", "dense", "list"), r"numeric"),
    "object_values": (("csr", "coo", "dense"), r"numeric"),
    # role-dependent: rejected by feedback, accepted as weights
    "negative": (FORMATS, r"negative"),
    "zero": (_STORES_ZEROS, r"explicit zero"),
}
#: defects that used to corrupt memory inside scipy's conversions: in-process tests leave them to
#: the subprocess batch
CRASH_PRONE_FORMATS = ("csc", "coo", "bsr", "lil", "dia", "dok")
CRASH_PRONE_DEFECTS = (
    "index_high", "index_negative", "indptr_decreasing", "indptr_start", "indptr_short", "indptr_long",
    "indptr_end_beyond", "data_short", "data_long", "row_high", "col_high", "row_negative", "col_negative",
    "coords_mismatch", "rows_count", "row_data_mismatch", "dia_data_rows",
)  # fmt: skip

#: roles of a matrix argument: which role-dependent defects are errors, and their patterns
ROLES = {
    "feedback": {"negative": r"negative", "zero": r"explicit zero"},
    "nonneg": {"negative": r"negative"},
    "weights": {},
    # read as weights by a model (uses_weights): positive, in [1e-100, 1e100]
    "weighted": {"negative": r"negative", "zero": r"explicit zero", "huge": r"weights must lie in"},
}
ACCEPTANCES = {
    "trailing": "storage past indptr[-1] is ignored: scipy defines nnz = indptr[-1] (what prune() trims)",
    "negative": "negative weights are accepted where a real weight is meaningful (affinities: the "
    "neighbourhood is the row order, not the sign; content features; weights before a threshold)",
    "zero": "explicit zeros are kept where a stored zero is meaningful (an affinity's neighbour of "
    "affinity 0 is active for FEBR's agglen; a weight below a threshold)",
}


def crash_prone(case) -> bool:
    return case["fmt"] in CRASH_PRONE_FORMATS and case["defect"] in CRASH_PRONE_DEFECTS


@st.composite
def sparse_cases(draw, defects=None, formats=FORMATS, shape=None, max_dim=6, crash=None):
    """A recipe for a (possibly malformed) matrix: format, class, shape, triplets, defect.

    ``shape`` fixes the shape of valid matrices (so that a matrix fits a fitted model);
    ``crash`` keeps only crash-prone (True) or only other (False) recipes.
    """
    pairs = [
        (d, f)
        for d in (defects or DEFECTS)
        for f in DEFECTS[d][0]
        if f in formats and (crash is None or crash_prone({"fmt": f, "defect": d}) == crash)
    ]
    defect, fmt = draw(st.sampled_from(sorted(pairs)))
    if shape is None:
        shape = [draw(st.integers(1, max_dim)), draw(st.integers(1, max_dim))]
    if defect == "empty_dim":
        shape = draw(st.sampled_from([[0, shape[1]], [shape[0], 0], [0, 0]]))
    rows, cols = shape
    entries = []
    if rows and cols and defect != "no_entries":
        cell = st.tuples(st.integers(0, rows - 1), st.integers(0, cols - 1))
        values = st.sampled_from([1.0, 2.0, 0.5, 3.0] if defect != "int_dtype" else [1.0, 2.0, 7.0])
        entries = [[r, c, v] for (r, c), v in draw(st.lists(st.tuples(cell, values), min_size=1, max_size=10))]
    if defect == "bool_dtype":
        entries = [[r, c, 1.0] for r, c, _ in entries]
    block = [1, 1]
    if fmt == "bsr":
        block = [draw(st.sampled_from([b for b in (1, 2, 3) if rows % b == 0] or [1])),
                 draw(st.sampled_from([b for b in (1, 2, 3) if cols % b == 0] or [1]))]  # fmt: skip
    case = {
        "fmt": fmt,
        "cls": draw(st.sampled_from(["matrix", "array"])),
        "shape": shape,
        "entries": entries,
        "block": block,
        "defect": defect,
        "arg": draw(st.sampled_from([0, 1, 7, 10**6, 2**31])),
    }
    return case if defect == "empty_dim" or entries or defect == "no_entries" else {**case, "defect": "no_entries"}


def _summed(entries):
    """Position -> summed value, in order of first appearance (the brute force of duplicates)."""
    out = {}
    for r, c, v in entries:
        out[(r, c)] = out.get((r, c), 0.0) + v
    return out


def _with_value_defect(case):
    """The triplets after a value defect: the first position gets the bad value."""
    entries = [list(e) for e in case["entries"]]
    defect = case["defect"]
    if not entries or defect not in ("nan", "inf", "huge", "overflow", "negative", "zero"):
        return entries
    pos = tuple(entries[0][:2])
    rest = [e for e in entries if tuple(e[:2]) != pos]
    value = {"nan": np.nan, "inf": np.inf, "huge": 1e308, "overflow": 1e308, "negative": -2.5, "zero": 0.0}[defect]
    twice = [[*pos, value]] if defect == "overflow" else []
    return [[*pos, value], *twice, *rest]


def _dtype(case):
    return {"int_dtype": np.int64, "bool_dtype": np.bool_, "float32_dtype": np.float32}.get(case["defect"], np.float64)


def reference_csr(case, keep_order=False) -> sp.csr_matrix:
    """The canonical CSR of a valid recipe, built by brute force: duplicates summed, explicit zeros
    kept where the format stores them, rows sorted by column (``keep_order``: in the CSR input's
    order, duplicates not summed, as an affinity reads a CSR)."""
    dtype = _dtype(case)
    entries = _with_value_defect(case)
    rows, cols = case["shape"]
    if case["fmt"] in _DUPLICATES:  # each stored value is read in its dtype, then summed in float64
        entries = [[r, c, float(dtype(v))] for r, c, v in entries]
    if keep_order and case["fmt"] == "csr":
        per_row = [[(c, v) for r, c, v in entries if r == i] for i in range(rows)]
    else:  # other formats store one value per position, in their dtype
        summed = _summed(entries)
        if case["fmt"] not in _DUPLICATES:
            summed = {p: float(dtype(v)) for p, v in summed.items()}
        if case["fmt"] not in _STORES_ZEROS:
            summed = {p: v for p, v in summed.items() if v != 0}
        per_row = [sorted((c, v) for (r, c), v in summed.items() if r == i) for i in range(rows)]
    indptr = np.cumsum([0] + [len(r) for r in per_row]).astype(np.int32)
    indices = np.array([c for r in per_row for c, _ in r], dtype=np.int32)
    data = np.array([v for r in per_row for _, v in r], dtype=np.float64)
    return sp.csr_matrix((data, indices, indptr), shape=(rows, cols))


def _sparse_class(fmt, cls):
    return getattr(sp, f"{fmt}_{cls}")


def build_sparse(case):
    """The hostile object of a recipe (built with scipy's constructors, then its raw arrays edited)."""
    fmt, defect, arg = case["fmt"], case["defect"], case["arg"]
    rows, cols = case["shape"]
    entries = _with_value_defect(case)
    dtype = _dtype(case)
    r = np.array([e[0] for e in entries], dtype=np.int64)
    c = np.array([e[1] for e in entries], dtype=np.int64)
    v = np.array([e[2] for e in entries], dtype=np.float64).astype(dtype)
    if fmt in ("dense", "list"):
        D = np.zeros((rows, cols), dtype=dtype)
        for (i, j), value in _summed(entries).items():
            D[i, j] = value
        return _dense_defect(D if fmt == "dense" else D.tolist(), defect)
    M = _build_format(fmt, case["cls"], (rows, cols), r, c, v, dtype, case["block"])
    return _sparse_defect(M, fmt, defect, arg)


def _build_format(fmt, cls, shape, r, c, v, dtype, block):
    make = _sparse_class(fmt, cls)
    if fmt in ("csr", "csc"):
        major, minor = (r, c) if fmt == "csr" else (c, r)
        order = np.argsort(major, kind="stable")  # rows grouped, listing order kept inside a row
        indptr = np.concatenate(([0], np.cumsum(np.bincount(major, minlength=shape[fmt == "csc"]))))
        return make((v[order], minor[order].astype(np.int32), indptr.astype(np.int32)), shape=shape)
    if fmt == "coo":
        return make((v, (r, c)), shape=shape)
    if fmt == "lil":
        M = make(shape, dtype=dtype)
        for i in range(shape[0]):
            at = np.flatnonzero(r == i)
            M.rows[i] = c[at].tolist()
            M.data[i] = v[at].tolist()
        return M
    D = np.zeros(shape, dtype=dtype)
    summed = _summed(zip(r.tolist(), c.tolist(), v.astype(np.float64).tolist()))
    for (i, j), value in summed.items():
        D[i, j] = value
    if fmt == "dok":
        M = make(shape, dtype=dtype)
        for (i, j), value in summed.items():  # explicit zeros kept: written past __setitem__
            M._dict[(i, j)] = dtype(value) if dtype is not np.bool_ else bool(value)
        return M
    if fmt == "bsr":
        return make(D, blocksize=tuple(block))
    return make(D)  # dia


def _dense_defect(D, defect):
    if defect == "ragged":
        return [list(row) for row in D] + [[1.0] * (len(D[0]) + 1)] if D else [[1.0], [1.0, 2.0]]
    if defect == "dim3":
        return np.asarray(D)[None] if isinstance(D, np.ndarray) else [D]
    if defect == "complex":
        return np.asarray(D, dtype=np.complex128) if isinstance(D, np.ndarray) else [[complex(x) for x in r] for r in D]
    if defect == "str_values":
        return np.asarray(D).astype(str) if isinstance(D, np.ndarray) else [[str(x) for x in r] for r in D]
    if defect == "object_values":
        out = np.asarray(D).astype(object)
        out.flat[0] = None
        return out
    return D


def _sparse_defect(M, fmt, defect, arg):
    """Edit the raw arrays of a valid sparse ``M`` (scipy's constructors would refuse most of it)."""
    nnz_arrays = fmt in ("csr", "csc", "bsr")
    if defect == "complex":
        return M.astype(np.complex128)
    if defect in ("float_shape", "frac_shape"):
        M._shape = (M.shape[0] + (0.0 if defect == "float_shape" else 0.5), float(M.shape[1]))
        return M
    if defect == "neg_shape":
        M._shape = (-1 - arg % 3, M.shape[1])
        return M
    if defect == "big_shape":
        M._shape = (2**31 + arg, M.shape[1])
        return M
    if nnz_arrays:
        n_minor = M.shape[1] // M.blocksize[1] if fmt == "bsr" else M.shape[fmt == "csr"]
        edits = {
            "index_high": lambda: _set_wide(M, "indices", 0, n_minor + arg),
            "index_negative": lambda: _set_wide(M, "indices", 0, -1 - arg),
            "indptr_decreasing": lambda: setattr(M, "indptr", M.indptr[::-1].copy()),
            "indptr_start": lambda: setattr(M, "indptr", M.indptr + 1),
            "indptr_short": lambda: setattr(M, "indptr", M.indptr[:-1].copy()),
            "indptr_long": lambda: setattr(M, "indptr", np.append(M.indptr, M.indptr[-1])),
            "indptr_end_beyond": lambda: _set_wide(M, "indptr", -1, M.indptr[-1] + 1 + arg % 5),
            "indices_float": lambda: setattr(M, "indices", M.indices.astype(np.float64)),
            "indices_2d": lambda: setattr(M, "indices", M.indices.reshape(-1, 1)),
            "indices_int8": lambda: setattr(M, "indices", M.indices.astype(np.int8)),
            "indices_uint64": lambda: setattr(M, "indices", M.indices.astype(np.uint64)),
            "data_short": lambda: setattr(M, "data", M.data[:-1].copy()),
            "trailing": lambda: (
                setattr(M, "indices", np.append(M.indices, [0, 0]).astype(np.int32)),
                setattr(M, "data", np.append(M.data, [np.nan, -1.0]).astype(M.data.dtype)),
            ),
            "object_values": lambda: setattr(M, "data", M.data.astype(object)),
        }
        if defect in edits:
            edits[defect]()
        return M
    if fmt == "coo":
        row, col = M.coords
        edits = {
            "row_high": lambda: _set_coord(M, 0, M.shape[0] + arg),
            "col_high": lambda: _set_coord(M, 1, M.shape[1] + arg),
            "row_negative": lambda: _set_coord(M, 0, -1 - arg),
            "col_negative": lambda: _set_coord(M, 1, -1 - arg),
            "coords_mismatch": lambda: setattr(M, "coords", (np.append(row, 0), col)),
            "coords_float": lambda: setattr(M, "coords", (row.astype(np.float64) + 0.5, col)),
            "data_short": lambda: setattr(M, "data", M.data[:-1].copy()),
            "data_long": lambda: setattr(M, "data", np.append(M.data, 1.0).astype(M.data.dtype)),
            "object_values": lambda: setattr(M, "data", M.data.astype(object)),
        }
        if defect in edits:
            edits[defect]()
        return M
    if fmt == "lil":
        first = next((i for i in range(M.shape[0]) if M.rows[i]), 0)
        edits = {
            "col_high": lambda: M.rows[first].__setitem__(0, M.shape[1] + arg),
            "col_negative": lambda: M.rows[first].__setitem__(0, -1 - arg),
            "col_float": lambda: M.rows[first].__setitem__(0, M.rows[first][0] + 0.5),
            "rows_count": lambda: setattr(M, "rows", M.rows[:-1]),
            "row_data_mismatch": lambda: M.data[first].append(1.0),
            "str_values": lambda: M.data[first].__setitem__(0, "1"),
        }
        if defect in edits and (M.rows[first] or defect in ("rows_count", "row_data_mismatch")):
            edits[defect]()
        return M
    if fmt == "dok":
        key = next(iter(M._dict), None)
        value = M._dict.pop(key) if key is not None and defect in _DOK_KEYS else None
        bad = {
            "row_high": (M.shape[0] + arg, 0),
            "col_high": (0, M.shape[1] + arg),
            "row_negative": (-1 - arg, 0),
            "col_negative": (0, -1 - arg),
            "col_float": (0, 0.5),
            "key_not_pair": (0, 0, 0),
        }.get(defect)
        if bad is not None:
            M._dict[bad] = 1.0 if value is None else value
        if defect == "str_values" and key is not None:
            M._dict[key] = "1"
        return M
    if fmt == "dia":
        if defect == "offsets_float":
            M.offsets = M.offsets.astype(np.float64) + 0.5
        elif defect == "dia_data_rows":
            M.data = np.vstack([M.data, M.data[:1]]) if M.data.shape[0] else np.ones((1, M.shape[1]))
        elif defect == "offset_far":
            M.offsets = np.append(M.offsets, -(M.shape[0] + arg % 50))
            M.data = np.vstack([M.data, np.full((1, M.data.shape[1]), 9.0, M.data.dtype)])
        return M
    return M


_DOK_KEYS = ("row_high", "col_high", "row_negative", "col_negative", "col_float", "key_not_pair")


def _set_wide(M, attr, i, value):
    """``M.<attr>[i] = value`` in an int64 copy of the array (the value may not fit int32)."""
    a = getattr(M, attr).astype(np.int64)
    a[i] = value
    setattr(M, attr, a)


def _set_coord(M, axis, value):
    coords = [c.astype(np.int64) for c in M.coords]
    coords[axis][0] = value
    M.coords = tuple(coords)


def expect_sparse(case, role: str, name: str, reference, keep_order=False):
    """The expectation for a recipe passed as argument ``name`` of an entry whose ``reference(M)``
    runs the same call on another matrix."""
    defect = case["defect"]
    if defect in ROLES[role]:
        pattern = ROLES[role][defect]
    else:  # a negative value or a stored zero is accepted where the role does not refuse it
        pattern = None if defect in ("negative", "zero") else DEFECTS[defect][1]
    if keep_order and case["fmt"] == "csr" and pattern is not None:  # an affinity refuses duplicates first
        pattern += "|twice"
    if pattern is not None:
        return Reject(pattern, name)
    canonical = reference_csr(case, keep_order)
    return Same(lambda: reference(canonical), ACCEPTANCES.get(defect, ""))


# ============================================================================ entry points
@dataclass(frozen=True)
class Entry:
    """A public entry point with one matrix argument ``arg`` (named so in error messages) played by
    the hostile matrix; ``call(M)`` returns a comparable answer.  ``shape``: the shape a valid
    matrix needs to fit the call's other arguments; ``keep_order``: the call reads a CSR's row
    order (affinities)."""

    name: str
    role: str
    arg: str
    call: object
    shape: tuple | None = None
    keep_order: bool = False
    kinds: str = "any"  # inputs accepted: "any" (sparse, ndarray, list), "array" (no list), "sparse", "dense"
    sklearn: bool = False  # SKLEARN_PRESCRIBED defects get the messages scikit-learn's estimator checks prescribe


#: defects whose message scikit-learn's estimator checks prescribe ("Found array with 0 sample(s)",
#: "Complex data not supported"): the argument is not named in them
SKLEARN_PRESCRIBED = ("empty_dim", "complex")


#: for each ``Entry.kinds``, the formats it refuses (with a TypeError naming what it takes)
_REFUSED = {
    "any": (),
    "array": ("list",),
    "sparse": ("dense", "list"),
    "dense": tuple(f for f in FORMATS if f not in ("dense", "list")),
}


_CACHE: dict = {}


def cached(key, make):
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def base_matrix() -> sp.csr_matrix:
    """A fixed 7 users x 6 items feedback matrix (every user and item has an interaction)."""

    def make():
        D = (np.random.default_rng(5).random((7, 6)) < 0.45).astype(float)
        D[np.arange(7), np.arange(7) % 6] = 1.0
        return sp.csr_matrix(D)

    return cached("base", make)


def fitted(name):
    """A model of kind ``name`` (see :func:`model_factories`) fitted on :func:`base_matrix`."""
    return cached(("fitted", name), lambda: model_factories()[name]().fit(base_matrix()))


#: the dissertation's FEBR (its own affinity features, trained on X itself)
PAPER = {"affinity": "cosine", "holdout": 0.0, "validation_fraction": 0.0}


def model_factories() -> dict:
    """Small, fast, deterministic configurations of every recommender."""
    from recsys_ltr.febr import AffinityFEBR
    from recsys_ltr.models import ALS, BPR, BSPM, EASE, GFCF, KUNN, SLIM, ChebyCF, ItemKNN, Popularity, RP3beta, UserKNN

    one = dict(num_threads=1)
    return {
        "Popularity": lambda: Popularity(**one),
        "ItemKNN": lambda: ItemKNN(k=2, **one),
        "UserKNN": lambda: UserKNN(k=2, **one),
        "KUNN": lambda: KUNN(k=2, **one),
        "SLIM": lambda: SLIM(max_iter=5, **one),
        "RP3beta": lambda: RP3beta(k=2, **one),
        "EASE": lambda: EASE(regularization=1.0, **one),
        "ALS": lambda: ALS(factors=2, iterations=1, random_state=0, **one),
        "BPR": lambda: BPR(factors=2, iterations=1, random_state=0, **one),
        "AffinityFEBR": lambda: AffinityFEBR(**PAPER, k=2, max_iter=40, eval_every=40, random_state=0, **one),
        "AffinityFEBRiu": lambda: AffinityFEBR(
            **PAPER, k=2, side="both", max_iter=40, eval_every=40, random_state=0, **one
        ),
        "ContentItemKNN": lambda: _content_model(),
        "GFCF": lambda: GFCF(factors=2, **one),
        "BSPM": lambda: BSPM(factors=2, **one),
        "ChebyCF": lambda: ChebyCF(order=3, factors=2, **one),
        "EASEsparse": lambda: EASE(regularization=1.0, solver="sparse", k=2, **one),
        "FEBR": lambda: _stacked_febr(),
        **(
            {"FEBRlm": lambda: _stacked_febr(scorer="lambdamart", lambdamart_params=LAMBDAMART_FAST)}
            if _has("lightgbm")
            else {}
        ),
    }


def _has(module) -> bool:
    """Whether an optional dependency is importable."""
    import importlib.util

    return importlib.util.find_spec(module) is not None


#: a few LightGBM rounds on leaves of one sample (the fuzz matrices are tiny)
LAMBDAMART_FAST = {"num_iterations": 3, "min_data_in_leaf": 1}


def _stacked_febr(**params):
    """A small, fast, seeded stacked FEBR (two bases; the brief's configuration)."""
    from recsys_ltr.febr import FEBR
    from recsys_ltr.models import ItemKNN, Popularity

    base = dict(candidates=5, max_iter=200, eval_every=100, random_state=0, num_threads=1)
    bases = params.pop("bases") if "bases" in params else [ItemKNN(k=2, num_threads=1), Popularity(num_threads=1)]
    return FEBR(bases=bases, **{**base, **params})


def _content_model():
    from recsys_ltr.models import ContentItemKNN
    from recsys_ltr.neighbors import ContentAffinity

    F = np.random.default_rng(1).random((6, 3))
    return ContentItemKNN(affinity=ContentAffinity(k=2).fit(F), k=2, num_threads=1)


def _lgmml_affinity_answers(m):
    return m.affinity_.matrix, m.components_, m.bandwidth_


def _fit_answers(make):
    def call(M, **fit_params):
        model = make().fit(M, **fit_params)
        users = np.arange(model.n_users_)
        return model.score(users), model.recommend(users, N=3)

    return call


def _ranking_scores(users):
    return np.tile(np.arange(6, dtype=np.float64)[::-1], (len(users), 1))


def _test_matrix():
    D = np.zeros((7, 6))
    D[1, 5] = D[3, 0] = D[6, 2] = 1.0
    X = base_matrix().toarray()
    return sp.csr_matrix(D * (X == 0))


def sparse_entries() -> dict:
    """Every public entry point that takes a matrix, by name."""
    from recsys_ltr import Interactions, split
    from recsys_ltr._validation import check_feedback, check_sparse
    from recsys_ltr.febr import AffinityFEBR, FeatureExtractor
    from recsys_ltr.metric_learning import FRML, GMML
    from recsys_ltr.metrics import evaluate, rank_test_items, retrieval_metrics
    from recsys_ltr.models import ContentItemKNN
    from recsys_ltr.neighbors import (
        Affinity,
        ContentAffinity,
        cosine_affinity,
        cosine_knn,
        knn_index,
        knn_query,
        ktrunc,
        kunn_affinity,
        rp3beta_affinity,
        rp3beta_similarity,
        slim_affinity,
        weighted_cosine_knn,
    )
    from recsys_ltr.neighbors.slim import slim_weights
    from recsys_ltr.warp import WarpSampler
    from recsys_ltr.weighting import bm25_weight, log_weight, tfidf_weight

    X7 = base_matrix()
    T7 = _test_matrix()
    one = dict(num_threads=1)
    labels = np.array([0, 1, 0, 1, 0, 1, 0])

    def sampler_answer(s):
        return s.queries, s.n_irr, s.beta_q, s.table

    entries = [
        Entry("check_feedback", "feedback", "X", check_feedback),
        Entry("check_sparse", "weights", "X", lambda M: check_sparse(M, allow_empty=True, nonnegative=False)),
        Entry("check_sparse(nonneg)", "nonneg", "X", lambda M: check_sparse(M)),
        Entry("Interactions", "feedback", "matrix", lambda M: Interactions(M).matrix),
        Entry("Interactions.from_sparse", "feedback", "X", lambda M: Interactions.from_sparse(M).matrix, kinds="array"),
        Entry(
            "Interactions.from_sparse(threshold)",
            "weights",
            "X",
            lambda M: Interactions.from_sparse(M, threshold=1.5).matrix,
            kinds="array",
        ),
        Entry(
            "Interactions.with_item_features",
            "nonneg",
            "features",
            lambda M: Interactions(X7).with_item_features(M).item_features,
            (6, 4),
        ),
        Entry("bm25_weight", "nonneg", "X", lambda M: bm25_weight(M, K1=1.2)),
        Entry("tfidf_weight", "nonneg", "X", tfidf_weight),
        Entry("log_weight", "nonneg", "X", lambda M: log_weight(M, alpha=2.0)),
        Entry("split.holdout", "feedback", "X", lambda M: split.holdout(M, random_state=1)),
        Entry("split.folds", "feedback", "X", lambda M: list(split.folds(M, n_folds=2, random_state=1))),
        Entry("split.leave_k_out", "feedback", "X", lambda M: split.leave_k_out(M, random_state=1)),
        Entry(
            "recommend(user_items)",
            "weighted",
            "user_items",
            lambda M: fitted("ItemKNN").recommend(np.arange(3), user_items=M, N=3),
            (3, 6),
        ),
        Entry(
            "recommend(recalculate_user)",
            "weighted",
            "user_items",
            lambda M: fitted("UserKNN").recommend(np.arange(3), user_items=M, N=3, recalculate_user=True),
            (3, 6),
        ),
        Entry(
            "similar_items(item_users)",
            "weighted",
            "item_users",
            lambda M: fitted("UserKNN").similar_items([6, 7], N=3, recalculate_item=True, item_users=M),
            (2, 7),
        ),
        Entry("evaluate(train)", "feedback", "train", lambda M: dict(evaluate(_ranking_scores, M, T7, k=3)), (7, 6)),
        Entry("evaluate(test)", "feedback", "test", lambda M: dict(evaluate(_ranking_scores, X7, M, k=3)), (7, 6)),
        Entry(
            "evaluate(exclude)",
            "feedback",
            "exclude",
            lambda M: dict(evaluate(_ranking_scores, X7, T7, M, k=3)),
            (7, 6),
        ),
        Entry(
            "rank_test_items",
            "feedback",
            "train_rows",
            lambda M: rank_test_items(_ranking_scores(np.arange(7)), M, T7),
            (7, 6),
        ),
        Entry(
            "retrieval_metrics",
            "feedback",
            "relevance",
            lambda M: retrieval_metrics(np.eye(4)[:3], np.eye(4) * 2, M, ks=(1,)),
            (3, 4),
        ),
        Entry("knn_index", "feedback", "M", lambda M: _index_answer(knn_index(M))),
        Entry("knn_query", "feedback", "queries", lambda M: knn_query(knn_index(X7.T), M, 2, num_threads=1), (3, 7)),
        Entry("cosine_knn", "feedback", "X", lambda M: cosine_knn(M, 1, **one)),
        Entry("weighted_cosine_knn", "feedback", "M", lambda M: weighted_cosine_knn(M, 1, **one)),
        Entry("cosine_affinity", "feedback", "X", lambda M: cosine_affinity(M, 1, **one).matrix),
        Entry("kunn_affinity", "feedback", "X", lambda M: kunn_affinity(M, 1, side="user", **one).matrix),
        Entry("slim_affinity", "feedback", "X", lambda M: slim_affinity(M, max_iter=3, **one).matrix),
        Entry("rp3beta_affinity", "feedback", "X", lambda M: rp3beta_affinity(M, 1, **one).matrix),
        Entry("rp3beta_similarity", "feedback", "X", lambda M: rp3beta_similarity(M, 1, **one)),
        Entry("slim_weights", "feedback", "X", lambda M: slim_weights(M, max_iter=3, **one)),
        Entry(
            "slim_weights(neighbors)",
            "weights",
            "neighbors",
            lambda M: slim_weights(X7, neighbors=M, max_iter=3, **one),
            (6, 6),
            kinds="sparse",
        ),
        Entry("Affinity", "weights", "matrix", lambda M: Affinity(M, 8).matrix, keep_order=True, kinds="sparse"),
        Entry(
            "ContentItemKNN(Affinity)",
            "weights",
            "matrix",
            lambda M: _fit_answers(lambda: ContentItemKNN(affinity=Affinity(M, 5), k=1, num_threads=1))(X7),
            (6, 6),
            keep_order=True,
            kinds="sparse",
        ),
        Entry(
            "AffinityFEBR(Affinity)",
            "weights",
            "matrix",
            lambda M: _fit_answers(
                lambda: AffinityFEBR(
                    **{**PAPER, "affinity": Affinity(M, 5)},
                    k=1,
                    max_iter=20,
                    eval_every=20,
                    random_state=0,
                    num_threads=1,
                )
            )(X7),
            (6, 6),
            keep_order=True,
            kinds="sparse",
        ),
        Entry("ktrunc", "weights", "A", lambda M: ktrunc(M, 1)),
        Entry("ContentAffinity", "weights", "content F", lambda M: ContentAffinity(k=1).fit(M).affinity_.matrix),
        Entry("WarpSampler(relevant)", "feedback", "relevant", lambda M: sampler_answer(WarpSampler(M, beta=2))),
        Entry(
            "WarpSampler(irrelevant)",
            "feedback",
            "irrelevant",
            lambda M: sampler_answer(WarpSampler(T7, irrelevant=M)),
            (7, 6),
        ),
        Entry(
            "FeatureExtractor",
            "feedback",
            "X",
            lambda M: FeatureExtractor(M, 1, item_affinity=fitted("ItemKNN").item_affinity_).transform([0]),
            (7, 6),
        ),
        Entry(
            "FRML.fit(X)",
            "weights",
            "X",
            lambda M: FRML(max_iter=3, random_state=0, **one).fit(M, y=labels).components_,
            (7, 3),
            sklearn=True,
        ),
        Entry(
            "FRML.fit(relevance)",
            "feedback",
            "relevance",
            lambda M: FRML(max_iter=3, random_state=0, **one).fit(np.eye(7)[:, :3] + 0.1, relevance=M).components_,
            (7, 7),
        ),
        Entry(
            "GMML.fit",
            "weights",
            "X",
            lambda M: GMML(random_state=0).fit(M, labels).components_,
            (7, 3),
            kinds="dense",
            sklearn=True,
        ),
        Entry(
            "FRML.transform",
            "weights",
            "X",
            lambda M: cached(
                "frml", lambda: FRML(max_iter=3, random_state=0).fit(np.eye(7)[:, :3], y=labels)
            ).transform(M),
            (2, 3),
            sklearn=True,
        ),
    ]
    Xl, yl = _labels_data()
    for name, make in _metric_learners().items():
        entries.append(Entry(f"{name}.fit(X)", "weights", "X", lambda M, make=make: make().fit(M, y=yl).components_,
                             (12, 3), sklearn=True))  # fmt: skip
    entries += [
        Entry(
            "MLR.fit(relevance)",
            "feedback",
            "relevance",
            lambda M: _metric_learners()["MLR"]().fit(Xl[:7], relevance=M).components_,
            (7, 7),
        ),
        Entry(
            "LGMMLAffinity.fit(F)",
            "weights",
            "F",
            lambda M: _lgmml_affinity_answers(_lgmml_affinity().fit(M, X7)),
            (6, 3),
        ),
        Entry(
            "LGMMLAffinity.fit(X)",
            "feedback",
            "X",
            lambda M: _lgmml_affinity_answers(_lgmml_affinity().fit(Xl[:6], M)),
            (7, 6),
        ),
        Entry(
            "LGMMLAffinity.fit(relevance)",
            "feedback",
            "relevance",
            lambda M: _lgmml_affinity_answers(_lgmml_affinity().fit(Xl[:6], relevance=M)),
            (6, 6),
        ),
        Entry(
            "FEBR.fit(validation)",
            "feedback",
            "validation",
            lambda M: _fit_answers(lambda: _stacked_febr(validation_fraction=0.0))(X7, validation=M),
            (7, 6),
        ),
    ]
    entries += [
        Entry(
            f"{name}.fit",
            "weighted" if make().uses_weights else "feedback",
            "X",
            _fit_answers(make),
            (7, 6) if name == "ContentItemKNN" else None,
        )
        for name, make in model_factories().items()
    ]
    return {e.name: e for e in entries}


def _index_answer(index):
    return index.indptr, index.indices, index.scale, index.weights, index.n_rows, index.n_features


def sparse_case_outcome(entry_name, case) -> Outcome:
    entry = cached("sparse_entries", sparse_entries)[entry_name]
    hostile = build_sparse(case)
    if case["fmt"] in _REFUSED[entry.kinds]:
        expect = Reject(r"sparse", entry.arg, (TypeError,))
    else:
        reference = entry.call if entry.kinds != "dense" else lambda C: entry.call(C.toarray())
        name = "" if entry.sklearn and case["defect"] in SKLEARN_PRESCRIBED else entry.arg
        expect = expect_sparse(case, entry.role, name, reference, entry.keep_order)
    return judge(lambda: entry.call(hostile), expect)


# ============================================================================ ids
#: scalar id recipes: (kind, value); JSON-able, built by :func:`build_id`
_SCALAR_IDS = st.one_of(
    st.tuples(st.just("int"), st.integers(-3, 9)),
    st.tuples(st.just("int"), st.sampled_from([2**31, 2**40, 2**63 - 1, -(2**63), 2**63, 2**64, 2**80, -(2**70)])),
    st.tuples(st.sampled_from(["int8", "int32", "uint8", "uint64", "int64"]), st.integers(0, 9)),
    st.tuples(st.just("uint64"), st.just(2**64 - 1)),
    st.tuples(st.sampled_from(["float", "float32"]), st.sampled_from([0.0, 1.0, 2.0, 1.5, -1.0, 1e300])),
    st.tuples(st.just("float"), st.sampled_from(["nan", "inf", "-inf"])),
    st.tuples(st.sampled_from(["bool", "str", "bytes", "none", "complex", "dict", "set"]), st.integers(0, 2)),
)


@st.composite
def id_cases(draw):
    """A hostile id argument: a scalar, a sequence (list, tuple, array, nested) of scalars."""
    shape = draw(st.sampled_from(["scalar", "list", "tuple", "array", "nested", "ragged", "empty"]))
    items = draw(st.lists(_SCALAR_IDS, min_size=1, max_size=4))
    if draw(st.booleans()):  # mostly homogeneous, valid ids
        items = [("int", draw(st.integers(0, 4))) for _ in items]
    return {"shape": shape, "items": [list(i) for i in items]}


def _scalar(kind, v):
    if kind == "int":
        return int(v)
    if kind in ("int8", "int32", "uint8", "uint64", "int64"):
        return getattr(np, kind)(v)
    if kind in ("float", "float32"):
        with np.errstate(over="ignore"):
            return {"float": float, "float32": np.float32}[kind](v)
    return {"bool": v == 1, "str": str(v), "bytes": bytes([48 + v]), "none": None, "complex": complex(v, 0),
            "dict": {v: v}, "set": {v}}[kind]  # fmt: skip


def build_ids(case):
    values = [_scalar(*i) for i in case["items"]]
    shape = case["shape"]
    if shape == "scalar":
        return values[0]
    if shape == "array":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return np.array(values)
            except (ValueError, TypeError, OverflowError):
                return np.array(values, dtype=object)
    return {"list": values, "tuple": tuple(values), "nested": [values], "ragged": [values, [0, *values]],
            "empty": []}[shape]  # fmt: skip


def _meaning(x):
    """The integer an id stands for (``None``: not an integer id), by the rules of the API: integers
    (any width, Python or numpy, not bool); a float is never an id, ``3.0`` as much as ``3.5``."""
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    return None


def expected_ids(case, n):
    """``(ids, reason)``: an int or an int64 array for valid ids in ``[0, n)`` (``reason``: why an
    unusual form is accepted), or ``(None, regex)`` for the error they must raise.  A sequence means
    what numpy's array conversion makes of it."""
    if case["shape"] in ("nested", "ragged"):
        return None, r"1-D|nested"
    hostile = build_ids(case)
    if case["shape"] == "scalar":
        values = [hostile]
    else:
        arr = np.asarray(hostile, dtype=object if isinstance(hostile, np.ndarray) and hostile.dtype == object else None)
        values = [] if arr.dtype.kind in "bUSc" and arr.size else arr.tolist()
        if arr.size and arr.dtype.kind in "bUSc":
            return None, r"integer"
    meanings = [_meaning(v) for v in values]
    if any(m is None for m in meanings):
        return None, r"integer"
    if any(not 0 <= m < n for m in meanings):
        return None, r"out of range"
    ids = np.array(meanings, dtype=np.int64)
    kinds = {k for k, _ in case["items"]} if case["shape"] != "scalar" else {case["items"][0][0]}
    reason = ""
    if "bool" in kinds and case["shape"] != "scalar":
        reason = "numpy's conversion of a list mixing bools and integers makes True 1"
    return (int(ids[0]) if case["shape"] == "scalar" else ids), reason


def id_entries() -> dict:
    """Entry points taking ids: name -> (argument name, n, call(ids))."""
    from recsys_ltr._validation import check_ids
    from recsys_ltr.executors import recommend_users, score_users
    from recsys_ltr.metrics import evaluate

    X7, T7 = base_matrix(), _test_matrix()
    out = {
        "check_ids": ("user_ids", 5, lambda ids: check_ids(ids, 5)),
        "evaluate(users)": ("users", 7, lambda ids: dict(evaluate(_ranking_scores, X7, T7, users=ids, k=3))),
        "FeatureExtractor.neighbors": ("user_ids", 7, lambda ids: fitted("AffinityFEBRiu").extractor_.neighbors(ids)),
        "AffinityFEBR.transform": ("user_ids", 7, lambda ids: fitted("AffinityFEBR").transform(ids)),
        "FEBR.head_features": ("user_ids", 7, lambda ids: fitted("FEBR").head_features(ids)),
        "score_users(users)": ("users", 7, lambda ids: _user_blocks(score_users, ids)),
        "recommend_users(users)": ("users", 7, lambda ids: _user_blocks(recommend_users, ids, N=3)),
    }
    for name in model_factories():
        out[f"{name}.score"] = ("user_ids", 7, lambda ids, m=name: fitted(m).score(ids))
        out[f"{name}.recommend"] = ("userid", 7, lambda ids, m=name: fitted(m).recommend(ids, N=3))
        out[f"{name}.similar_items"] = ("itemid", 6, lambda ids, m=name: fitted(m).similar_items(ids, N=3))
        out[f"{name}.similar_users"] = ("userid", 7, lambda ids, m=name: fitted(m).similar_users(ids, N=3))
        out[f"{name}.recommend(filter_items)"] = (
            "filter_items", 6, lambda ids, m=name: fitted(m).recommend([0, 1], N=3, filter_items=ids),
        )  # fmt: skip
        out[f"{name}.recommend(items)"] = (
            "items", 6, lambda ids, m=name: fitted(m).recommend([0, 1], N=3, items=ids),
        )  # fmt: skip
    return out


def _user_blocks(fn, ids, **kwargs):
    """The blocks of a user-sharded job of the fitted ItemKNN (batches of 2 users), in order."""
    return [(np.asarray(t[0]).tolist(), *t[1:]) for t in fn(fitted("ItemKNN"), ids, batch_size=2, **kwargs)]


def id_case_outcome(entry_name, case) -> Outcome:
    arg, n, call = cached("id_entries", id_entries)[entry_name]
    hostile = build_ids(case)
    ids, note = expected_ids(case, n)
    if ids is None:
        return judge(lambda: call(hostile), Reject(note, arg))
    return judge(lambda: call(hostile), Same(lambda: call(ids), note))


# ============================================================================ parameters
_INT64_MAX = 2**63 - 1


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def integer(lo=1, hi=_INT64_MAX, cost=False):
    """Domain of an int parameter in ``[lo, hi]`` (``cost``: the work grows with it)."""
    return {"kind": "int", "lo": lo, "hi": hi, "cost": cost}


def real(lo=-np.inf, hi=np.inf, lo_open=False, hi_open=False):
    return {"kind": "real", "lo": lo, "hi": hi, "lo_open": lo_open, "hi_open": hi_open}


def choice(*values):
    return {"kind": "choice", "values": values}


def optional(domain):
    return {**domain, "optional": True}


def any_of(*domains):
    """A value valid in one of ``domains`` (``top_k``: "labels", an int >= 1 or None)."""
    return {"kind": "any_of", "domains": domains, "optional": any(d.get("optional") for d in domains)}


def satisfying(check, cost=False):
    """A value ``check(v)`` accepts (a parameter no other domain describes: a list of weights)."""
    return {"kind": "predicate", "check": check, "cost": cost}


SEED = {"kind": "seed"}  # None or an int in [0, 2**64)
SEED_OR_GENERATOR = {"kind": "seed", "generator": True}
BOOL = {"kind": "bool"}
PROGRESS = {**BOOL, "optional": True}  # None: a bar when standard error is a terminal
THREADS = integer(0)


def valid(domain, v) -> bool:
    """Whether ``v`` is in ``domain`` (the API's documented parameter types, decided here)."""
    if v is None:
        return bool(domain.get("optional")) or domain["kind"] == "seed"
    kind = domain["kind"]
    if kind == "any_of":
        return any(valid(d, v) for d in domain["domains"])
    if kind == "predicate":
        return bool(domain["check"](v))
    if kind == "int":
        return _is_int(v) and domain["lo"] <= int(v) <= domain["hi"]
    if kind == "real":
        if not _is_real(v) or not np.isfinite(float(v)):
            return False
        x = float(v)
        lo_ok = x > domain["lo"] if domain["lo_open"] else x >= domain["lo"]
        hi_ok = x < domain["hi"] if domain["hi_open"] else x <= domain["hi"]
        return lo_ok and hi_ok
    if kind == "choice":
        return any(type(v) is type(c) and v == c for c in domain["values"])
    if kind == "seed":
        return (_is_int(v) and 0 <= int(v) < 2**64) or (
            domain.get("generator", False) and isinstance(v, np.random.Generator)
        )
    return isinstance(v, (bool, np.bool_))  # bool


def canonical(v):
    """The plain Python value a numpy scalar stands for."""
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


#: hostile values: (kind, value) recipes, JSON-able
_PARAM_VALUES = [
    ("str", "1"), ("str", "abc"), ("str", ""), ("bytes", "1"), ("bool", True), ("bool", False), ("none", None),
    ("float", "nan"), ("float", "inf"), ("float", "-inf"), ("int", -1), ("float", -0.5), ("int", 0),
    ("float", 0.0), ("float", 0.5), ("int", 1), ("int", 2), ("int", 3), ("float", 1.0), ("float", 2.5),
    ("float", 1e308), ("float", -1e308), ("float", 1e-310), ("int", 2**31), ("int", 2**63 - 1), ("int", 2**63),
    ("int", 2**64), ("int", 2**80), ("int", -(2**80)), ("list", [1, 2]), ("tuple", [1]), ("dict", {"a": 1}),
    ("complex", 1), ("int64", 2), ("int32", 1), ("uint64", 3), ("float32", 0.5), ("float32", "nan"),
    ("np_bool", True), ("object", None), ("generator", 0), ("random_state", 0),
]  # fmt: skip


def build_value(recipe):
    kind, v = recipe
    simple = {"str": str, "int": int, "list": list, "tuple": tuple, "dict": dict}
    if kind in simple:
        return simple[kind](v)
    if kind == "float":
        return float(v)
    if kind in ("int64", "int32", "uint64", "float32"):
        return getattr(np, kind)(float(v) if kind == "float32" else v)
    return {
        "bytes": lambda: str(v).encode(),
        "bool": lambda: bool(v),
        "none": lambda: None,
        "complex": lambda: complex(v, 1),
        "np_bool": lambda: np.bool_(v),
        "object": object,
        "generator": lambda: np.random.default_rng(v),
        "random_state": lambda: np.random.RandomState(v),
    }[kind]()


def _labels_data():
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1, 2], 4)
    return rng.standard_normal((12, 3)) + y[:, None], y


def _ltr_data():
    rng = np.random.default_rng(4)
    qid = np.repeat(np.arange(4), 5)
    y = np.tile([2, 1, 0, 0, 0], 4)
    return rng.standard_normal((20, 3)) + y[:, None], y, qid


def _lgmml_affinity(**params):
    """A small LGMMLAffinity (6 items of the base matrix, content = the first 6 rows of the labels data)."""
    from recsys_ltr.ltr import LGMML, LGMMLAffinity

    ranker = LGMML(n_metrics=2, queries_per_metric=2, iterations=1)
    base = {"k": 2, "n_candidates": 3, "n_components": 2, "lgmml": ranker, "random_state": 0, "num_threads": 1}
    return LGMMLAffinity(**{**base, **params})


def param_targets() -> dict:
    """name -> (run(params) -> answer, {parameter: domain}): every estimator and parametrised
    function, fitted or called on small fixed data."""
    from recsys_ltr import Interactions, split
    from recsys_ltr.febr import AffinityFEBR
    from recsys_ltr.ltr import LGMML
    from recsys_ltr.metric_learning import FRML, GMML
    from recsys_ltr.metrics import evaluate
    from recsys_ltr.models import (
        ALS,
        BPR,
        BSPM,
        EASE,
        GFCF,
        KUNN,
        SLIM,
        ChebyCF,
        ContentItemKNN,
        ItemKNN,
        Popularity,
        RP3beta,
        UserKNN,
    )
    from recsys_ltr.neighbors import Affinity, ContentAffinity, cosine_knn, rp3beta_similarity, slim_affinity
    from recsys_ltr.query_metrics import ndcg_at_k
    from recsys_ltr.warp import DOT_ROWS, WarpSampler, dot_score, dot_update

    X7, T7 = base_matrix(), _test_matrix()
    common = {"num_threads": THREADS, "show_progress": PROGRESS}
    k_item = integer(1)
    implicit = {"factors": integer(cost=True), "regularization": real(0), "iterations": integer(cost=True),
                "random_state": SEED_OR_GENERATOR}  # fmt: skip

    def recommender(cls, base, **domains):
        def run(params):
            model = cls(**{**base, **params}).fit(X7)
            users = np.arange(7)
            return model.score(users), model.recommend(users, N=3)

        return run, {**common, **domains}

    Xl, yl = _labels_data()
    Xq, yq, qid = _ltr_data()
    aff = fitted("ItemKNN").item_affinity_
    qr = _query_rankers()
    top_k = any_of(choice("labels"), optional(integer()))
    opt_adg = dict(  # the OPT-ADG trainer's parameters, shared by the two FEBRs
        regularization=real(0),
        learning_rate=real(0, lo_open=True),
        max_iter=integer(0, cost=True),
        gamma=integer(),
        beta=optional(integer()),
        eval_every=integer(),
        early_stopping=optional(integer()),
        validation_users=optional(integer()),
    )

    def sampler_run(params):
        s = WarpSampler(X7, **{"num_threads": 1, "random_state": 0, **params})
        rng = np.random.default_rng(0)
        U, V = 0.1 * rng.standard_normal((7, 2)), 0.1 * rng.standard_normal((6, 2))
        stats = s.sgd((U, V), dot_score, dot_update, n_samples=20, learning_rate=0.1, rows=DOT_ROWS)
        return stats, U, V

    def recommend_run(params):
        return fitted("ItemKNN").recommend(np.arange(3), **{"N": 3, **params})

    return {
        "Popularity": recommender(Popularity, {"num_threads": 1}),
        "ItemKNN": recommender(ItemKNN, {"k": 2, "num_threads": 1}, k=k_item),
        "UserKNN": recommender(UserKNN, {"k": 2, "num_threads": 1}, k=k_item),
        "KUNN": recommender(KUNN, {"k": 2, "num_threads": 1}, k=k_item, side=choice("both", "item", "user")),
        "SLIM": recommender(
            SLIM,
            {"max_iter": 5, "num_threads": 1},
            k=optional(k_item),
            l1=real(0),
            l2=real(0),
            max_iter=integer(cost=True),
            tol=real(0),
        ),
        "RP3beta": recommender(RP3beta, {"k": 2, "num_threads": 1}, k=k_item, alpha=real(0), beta=real(0)),
        "EASE": recommender(EASE, {"num_threads": 1}, regularization=real(0, lo_open=True), max_items=integer()),
        "ALS": recommender(
            ALS, {"factors": 2, "iterations": 1, "num_threads": 1}, alpha=real(0, lo_open=True), **implicit
        ),
        "BPR": recommender(
            BPR, {"factors": 2, "iterations": 1, "num_threads": 1}, learning_rate=real(0, lo_open=True), **implicit
        ),
        "AffinityFEBR": recommender(
            AffinityFEBR,
            {**PAPER, "k": 2, "max_iter": 40, "eval_every": 20, "num_threads": 1, "random_state": 0},
            affinity=choice("cosine", "kunn", "slim", "rp3beta"),
            side=choice("item", "user", "both"),
            k=k_item,
            **opt_adg,
            holdout=real(0, 1, hi_open=True),
            init=choice("sum", "zeros"),
            random_state=SEED,
        ),
        "ContentItemKNN": recommender(
            ContentItemKNN,
            {"affinity": cached("content", lambda: _content_model().affinity), "num_threads": 1},
            k=k_item,
        ),
        "GFCF": recommender(
            GFCF,
            {"factors": 2, "num_threads": 1},
            factors=integer(),
            alpha=real(0),
            iterations=integer(0, cost=True),
            random_state=SEED_OR_GENERATOR,
        ),
        "BSPM": recommender(
            BSPM,
            {"factors": 2, "num_threads": 1},
            factors=integer(),
            beta=real(0),
            blur_time=real(0, lo_open=True),
            blur_steps=integer(cost=True),
            sharpen_time=real(0),
            sharpen_steps=integer(0, cost=True),
            solver=choice("rk4", "euler"),
            final_sharpening=BOOL,
            point_combination=BOOL,
            iterations=integer(0, cost=True),
            random_state=SEED_OR_GENERATOR,
        ),
        "ChebyCF": recommender(
            ChebyCF,
            {"order": 3, "factors": 2, "num_threads": 1},
            order=integer(0, cost=True),
            flatness=real(0, lo_open=True),
            factors=integer(),
            alpha=real(0),
            beta=real(0),
            iterations=integer(0, cost=True),
            random_state=SEED_OR_GENERATOR,
        ),
        "EASE(sparse)": recommender(
            EASE,
            {"regularization": 1.0, "solver": "sparse", "k": 2, "num_threads": 1},
            k=integer(),
            regularization=real(0, lo_open=True),
            solver=choice("auto", "dense", "sparse"),
            dense_max_items=integer(),
        ),
        "FEBR": recommender(
            lambda **p: _stacked_febr(**p),
            {"lambdamart_params": LAMBDAMART_FAST},
            scorer=choice("linear", "lambdamart"),
            candidates=integer(),
            label_exclude_top=optional(integer(0)),
            validation_fraction=real(0, 1, hi_open=True),
            refit=BOOL,
            **opt_adg,
            init=choice("best", "zeros"),
            fallback_p=optional(real(0, 1)),
            random_state=SEED,
        ),
        **{
            name: (
                lambda p, make=make: make().set_params(**p).fit(Xq, yq, qid).predict(Xq, qid),
                {**_listwise_domains(), **extra},
            )
            for name, make, extra in [
                ("ListMLE", qr["ListMLE"], {"top_k": top_k}),
                ("ListNet", qr["ListNet"], {}),
                (
                    "RPCMTL",
                    qr["RPCMTL"],
                    {
                        "top_k": top_k,
                        "n_clusters": integer(cost=True),
                        "mtl_regularization": real(0),
                        "kappa1": integer(),
                        "kappa2": integer(),
                        "metric": choice("xing", "identity"),
                        "max_pairs": integer(cost=True),
                        "max_iter": integer(0, cost=True),
                        "odr_regularization": real(0),
                    },
                ),
            ]
        },
        **(
            {
                "LambdaMART": (
                    lambda p: qr["LambdaMART"]().set_params(**p).fit(Xq, yq, qid).predict(Xq, qid),
                    {
                        "n_estimators": integer(cost=True),
                        "learning_rate": real(0, lo_open=True),
                        "num_leaves": integer(2, cost=True),
                        "min_child_samples": integer(),
                        "bagging_fraction": real(0, 1, lo_open=True),
                        "feature_fraction": real(0, 1, lo_open=True),
                        "num_threads": THREADS,
                        "random_state": SEED_OR_GENERATOR,
                    },
                )
            }
            if "LambdaMART" in qr
            else {}
        ),
        "RankBlend": (
            lambda p: qr["RankBlend"]().set_params(**p).fit(Xq, yq, qid).predict(Xq, qid),
            {
                "estimators": satisfying(lambda v: False),  # the fuzz values hold no list of rankers
                "weights": {**satisfying(_two_weights), "optional": True},
                "grid_steps": integer(cost=True),
                "k": integer(),
            },
        ),
        **{
            name: (
                lambda p, make=make: make().set_params(**p).fit(Xl, y=yl).components_,
                {
                    "loss": choice("auc", "map", "mrr", "prec@k", "ndcg"),
                    "k": optional(integer()),
                    "C": real(0, lo_open=True),
                    "epsilon": real(0, lo_open=True),
                    "max_iter": integer(cost=True),
                    "admm_max_iter": integer(cost=True),
                    "admm_tol": real(0, lo_open=True),
                    "warm_start": BOOL,
                    "num_threads": THREADS,
                    "show_progress": PROGRESS,
                    **(
                        {"regularization": real(0, lo_open=True), "penalty": choice("l21", "l1")}
                        if name == "RMLR"
                        else {}
                    ),
                },
            )
            for name, make in _metric_learners().items()
        },
        "FRML": (
            lambda p: FRML(**{"max_iter": 5, "random_state": 0, "num_threads": 1, **p}).fit(Xl, y=yl).components_,
            {
                "n_components": optional(integer(1, 3)),
                "loss": choice("reciprocal", "pak", "uniform"),
                "beta": optional(integer()),
                "kappa": optional(real(0, 1, lo_open=True)),
                "regularization": real(0),
                "learning_rate": real(0, lo_open=True),
                "batch_size": integer(cost=True),
                "max_iter": integer(0, cost=True),
                "early_stopping": BOOL,
                "n_iter_no_change": integer(),
                "eval_every": integer(),
                "random_state": SEED_OR_GENERATOR,
                "num_threads": THREADS,
            },
        ),
        "GMML": (
            lambda p: GMML(**{"random_state": 0, **p}).fit(Xl, yl).components_,
            {
                "regularization": real(0),
                "t": real(0, 1),
                "num_constraints": optional(integer(cost=True)),
                "random_state": SEED_OR_GENERATOR,
            },
        ),
        "LGMML": (
            lambda p: (
                LGMML(**{"n_metrics": 2, "queries_per_metric": 2, "iterations": 1, "random_state": 0, **p})
                .fit(Xq, yq, qid)
                .predict(Xq, qid)
            ),
            {
                "n_metrics": integer(cost=True),
                "queries_per_metric": integer(cost=True),
                "regularization": real(0),
                "t": real(0, 1),
                "distance": choice("eq12", "mahalanobis"),
                "anchor_k": integer(),
                "feature_scaling": optional(choice("l2")),
                "phi_mode": choice("shared", "per_query"),
                "test_anchors": choice("train", "candidates"),
                "phi_init": real(0),
                "learning_rate": real(0),
                "margin": real(0),
                "iterations": integer(0, cost=True),
                "max_sampled": optional(integer()),
                "num_threads": THREADS,
                "random_state": SEED_OR_GENERATOR,
            },
        ),
        "ContentAffinity": (
            lambda p: ContentAffinity(**{"k": 2, **p}).fit(Xl).affinity_.matrix,
            {"k": k_item, "bandwidth": optional(real(0, lo_open=True))},
        ),
        "LGMMLAffinity": (
            lambda p: _lgmml_affinity(**p).fit(Xl[:6], X7).affinity_.matrix,
            {
                "k": k_item,
                "n_candidates": k_item,
                "n_components": integer(),
                "pair": choice("absdiff", "product", "both"),
                "distance_feature": BOOL,
                "content_weight": real(0, 1),
                "relevance_fraction": real(0, 1, lo_open=True),
                "relevance_scope": choice("all", "candidates"),
                "bandwidth": optional(real(0, lo_open=True)),
                "random_state": SEED_OR_GENERATOR,
                **common,
            },
        ),
        "Affinity": (
            lambda p: Affinity(aff.matrix, **{"k_max": aff.k_max, **p}).truncate(1),
            {
                "k_max": integer(),
                "kind": choice("cosine", "kunn", "slim", "rp3beta", "custom"),
                "side": choice("item", "user"),
            },
        ),
        "WarpSampler": (
            sampler_run,
            {
                "beta": optional(integer()),
                "gamma": optional(integer()),
                "kappa": optional(real(0, 1, lo_open=True)),
                "min_beta": integer(0),
                "margin": real(0),
                "random_state": SEED_OR_GENERATOR,
                "num_threads": THREADS,
                "exclude_self": BOOL,
                "normalize": BOOL,
                "positive_draws": choice("reject", "count"),
                "compile_mode": choice("pointer", "inline"),
            },
        ),
        "recommend": (
            recommend_run,
            {"N": integer(), "filter_already_liked_items": BOOL, "recalculate_user": BOOL},
        ),
        "Interactions.from_arrays": (
            lambda p: Interactions.from_arrays([1, 1, 2, 3, 3], [5, 6, 5, 6, 7], [1.0, 2.0, 3.0, 1.0, 2.0], **p).matrix,
            {
                "threshold": optional(real()),
                "rule": choice(">=", ">"),
                "min_user_count": integer(0),
                "min_item_count": integer(0),
                "drop_empty": BOOL,
            },
        ),
        "split.holdout": (
            lambda p: split.holdout(X7, **p),
            {
                "val": real(0, 1, hi_open=True),
                "test": real(0, 1, hi_open=True),
                "seed": SEED_OR_GENERATOR,
                "exclude_top": optional(integer(0)),
            },
        ),
        "split.folds": (
            lambda p: list(split.folds(X7, **p)),
            {"n_folds": integer(cost=True), "seed": SEED_OR_GENERATOR, "val": real(0, 1, hi_open=True)},
        ),
        "split.leave_k_out": (
            lambda p: split.leave_k_out(X7, **p),
            {"k": integer(), "val_k": integer(0), "seed": SEED_OR_GENERATOR, "exclude_top": optional(integer(0))},
        ),
        "evaluate": (
            lambda p: dict(evaluate(_ranking_scores, X7, T7, **{"k": 3, **p})),
            {"k": integer(), "batch_size": optional(integer()), "num_threads": THREADS, "show_progress": PROGRESS},
        ),
        "cosine_knn": (lambda p: cosine_knn(X7, **{"k": 2, **p}), {"k": k_item, "side": choice("item", "user")}),
        "rp3beta_similarity": (
            lambda p: rp3beta_similarity(X7, **{"k": 2, **p}),
            {"k": k_item, "alpha": real(0), "beta": real(0)},
        ),
        "slim_affinity": (
            lambda p: slim_affinity(X7, **{"max_iter": 3, "num_threads": 1, **p}).matrix,
            {"k": optional(k_item), "l1": real(0), "l2": real(0), "max_iter": integer(cost=True), "tol": real(0)},
        ),
        "ndcg_at_k": (
            lambda p: ndcg_at_k(yq, -Xq[:, 0], qid, **p),
            {"k": optional(integer())},
        ),
    }


def _listwise_domains() -> dict:
    """Parameters shared by the linear listwise learners (ListMLE, ListNet, RPC-MTL)."""
    return {
        "learning_rate": real(0, lo_open=True),
        "iterations": integer(0, cost=True),
        "regularization": real(0),
        "average": BOOL,
        "feature_scaling": optional(choice("standard", "query")),
        "num_threads": THREADS,
        "show_progress": PROGRESS,
        "random_state": SEED_OR_GENERATOR,
    }


def _two_weights(v) -> bool:
    """Weights of a blend of two members: two non-negative reals with a positive sum."""
    return (
        isinstance(v, (list, tuple))
        and len(v) == 2
        and all(valid(real(0), w) for w in v)
        and sum(float(w) for w in v) > 0
    )


@st.composite
def param_cases(draw, targets=None):
    """A (target, parameter, hostile value) recipe."""
    names = targets or sorted(cached("param_targets", param_targets))
    target = draw(st.sampled_from(names))
    domains = cached("param_targets", param_targets)[target][1]
    name = draw(st.sampled_from(sorted(domains)))
    domain = domains[name]
    values = [v for v in _PARAM_VALUES if not _too_costly(domain, build_value(v))]
    return {"target": target, "param": name, "value": list(draw(st.sampled_from(values)))}


def _too_costly(domain, value) -> bool:
    """A valid value of a work-size parameter large enough to run for minutes (not a bad input)."""
    if domain["kind"] == "any_of":
        return any(_too_costly(d, value) for d in domain["domains"])
    return bool(domain.get("cost")) and _is_int(value) and valid(domain, value) and int(value) > 20


def param_case_outcome(case) -> Outcome:
    run, domains = cached("param_targets", param_targets)[case["target"]]
    name = case["param"]
    value = build_value(case["value"])
    if not valid(domains[name], value):
        return judge(lambda: run({name: value}), Reject(re.escape(name), ""))
    reference = canonical(value)
    if isinstance(value, np.random.Generator):  # a Generator is consumed: give the reference its own copy
        reference = np.random.default_rng(case["value"][1])
    unseeded = value is None and domains[name]["kind"] == "seed"
    return judge(lambda: run({name: value}), Same(lambda: run({name: reference}), finite=True, exact=not unseeded))


# ============================================================================ model files
@dataclass(frozen=True)
class Either:
    """The call must either raise as ``reject`` says or answer as ``same`` says (a damaged file
    whose damage is harmless, e.g. a flipped bit in a zip comment, may still load)."""

    reject: Reject
    same: Same


def file_models() -> dict:
    """Fitted estimators whose files are damaged: name -> (model, answers(model))."""
    from recsys_ltr.ltr import LGMML
    from recsys_ltr.metric_learning import FRML, GMML

    def recommender_answers(m):
        users = np.arange(m.n_users_)
        return m.score(users), m.recommend(users, N=3), m.similar_items(np.arange(m.n_items_), N=2)

    Xl, yl = _labels_data()
    Xq, yq, qid = _ltr_data()
    out = {name: (lambda n=name: fitted(n), recommender_answers) for name in model_factories()}
    out["FRML"] = (lambda: FRML(max_iter=5, random_state=0, num_threads=1).fit(Xl, y=yl), lambda m: m.transform(Xl))
    out["GMML"] = (lambda: GMML(random_state=0).fit(Xl, yl), lambda m: m.transform(Xl))
    out["LGMML"] = (
        lambda: LGMML(n_metrics=2, queries_per_metric=2, iterations=1, random_state=0).fit(Xq, yq, qid),
        lambda m: m.predict(Xq, qid),
    )
    out["LGMMLAffinity"] = (
        lambda: _lgmml_affinity().fit(Xl[:6], base_matrix()),
        lambda m: (m.affinity_.matrix, m.lgmml_.predict(Xq[:, :2], qid), m.components_),
    )
    for name, make in _metric_learners().items():
        out[name] = (lambda make=make: make().fit(Xl, y=yl), lambda m: m.transform(Xl))
    for name, make in _query_rankers().items():
        out[name] = (lambda make=make: make().fit(Xq, yq, qid), lambda m: m.predict(Xq, qid))
    if _has("lightfm"):
        from recsys_ltr.models import LightFMWARP

        out["LightFMWARP"] = (
            lambda: LightFMWARP(factors=2, iterations=1, random_state=0, num_threads=1).fit(base_matrix()),
            recommender_answers,
        )
    return out


def _metric_learners() -> dict:
    """Small configurations of the metric learners to rank (MLR, its robust variant RMLR)."""
    from recsys_ltr.metric_learning import MLR, RMLR

    few = dict(max_iter=3, admm_max_iter=2, num_threads=1)
    return {"MLR": lambda: MLR(**few), "RMLR": lambda: RMLR(regularization=0.1, **few)}


MUTATIONS = (
    "intact", "truncate", "flip", "deflate_flip", "deflate_truncate", "not_zip", "empty", "missing", "directory",
    "extra_member", "declared_bomb", "lying_npy_shape", "complex_member", "object_member", "float_shape",
    "wrong_class", "unknown_class", "params_str", "params_seed_list", "params_seed_huge", "params_unknown",
    "params_huge", "version", "state_nan", "state_shape", "csr_index_high", "csr_index_negative",
    "csr_indptr_decreasing", "affinity_kmax", "affinity_kind", "header_not_json", "missing_member",
    "duplicate_member", "swapped_arrays", "swapped_rehashed", "huge_shape", "digest_edit", "digest_missing",
)  # fmt: skip
#: mutations that may reach a kernel with bad indices if a check were missing: run in a subprocess
CRASH_PRONE_MUTATIONS = (
    "csr_index_high", "csr_index_negative", "csr_indptr_decreasing", "state_shape", "swapped_rehashed", "huge_shape",
)  # fmt: skip


@st.composite
def file_cases(draw, crash=None):
    mutations = [m for m in MUTATIONS if crash is None or (m in CRASH_PRONE_MUTATIONS) == crash]
    return {
        "model": draw(st.sampled_from(sorted(cached("file_models", file_models)))),
        "mutation": draw(st.sampled_from(mutations)),
        "pos": draw(st.floats(0, 1, exclude_max=True)),
        "val": draw(st.integers(0, 2**16)),
    }


def _saved(name, directory) -> str:
    """Path of the intact file of model ``name`` (written once per process)."""

    def make():
        model = cached(("file_model", name), lambda: cached("file_models", file_models)[name][0]())
        return model.save(os.path.join(directory, f"{name}.npz"))

    return cached(("saved", name), make)


def _members(path) -> dict:
    import zipfile

    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _npy(array, allow_pickle=False) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(array), allow_pickle=allow_pickle)
    return buf.getvalue()


def _read_npy(data):
    import io

    return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)


def _write_zip(path, members, compression=None, duplicate=None):
    import zipfile

    compression = zipfile.ZIP_STORED if compression is None else compression
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about a duplicate name
        with zipfile.ZipFile(path, "w", compression=compression) as zf:
            for name, data in members.items():
                zf.writestr(name, data)
            if duplicate:
                zf.writestr(duplicate, members[duplicate])


def _header(members):
    return json.loads(str(_read_npy(members["header.npy"])))


def _with_header(members, header):
    return {**members, "header.npy": _npy(np.array(json.dumps(header)))}


def _pick(names, pos):
    names = sorted(names)
    return names[int(pos * len(names)) % len(names)]


def damage_file(case, directory) -> str:
    """Write the damaged file of a recipe; returns its path."""
    import zipfile

    src = _saved(case["model"], directory)
    path = os.path.join(directory, f"{case['model']}-{case['mutation']}-{case['val']}.npz")
    raw = open(src, "rb").read()
    pos, val, mutation = case["pos"], case["val"], case["mutation"]
    at = int(pos * len(raw))
    members = _members(src)
    header = _header(members)
    state = header["state"]
    dense = [n for n, s in state.items() if s["type"] == "dense"]
    csr = [n for n, s in state.items() if s["type"] != "dense"]
    arrays = [n for n in members if n != "header.npy"]
    if mutation == "missing":
        return path + ".absent"
    if mutation == "directory":
        os.makedirs(path, exist_ok=True)
        return path
    data = {
        "intact": lambda: raw,
        "truncate": lambda: raw[:at],
        "flip": lambda: raw[:at] + bytes([raw[at] ^ (val % 255 + 1)]) + raw[at + 1 :],
        "not_zip": lambda: np.random.default_rng(val).integers(0, 256, val % 4096, dtype=np.uint8).tobytes(),
        "empty": lambda: b"",
    }.get(mutation)
    if data is not None:
        with open(path, "wb") as f:
            f.write(data())
        return path
    if mutation in ("deflate_flip", "deflate_truncate"):
        _write_zip(path, members, zipfile.ZIP_DEFLATED)
        deflated = open(path, "rb").read()
        at = int(pos * len(deflated))
        out = deflated[:at] if mutation == "deflate_truncate" else (
            deflated[:at] + bytes([deflated[at] ^ (val % 255 + 1)]) + deflated[at + 1 :])  # fmt: skip
        with open(path, "wb") as f:
            f.write(out)
        return path
    members = _mutate_members(mutation, members, header, state, dense, csr, arrays, pos, val)
    _write_zip(path, members, zipfile.ZIP_DEFLATED if mutation == "declared_bomb" else None,
               duplicate=_pick(arrays, pos) if mutation == "duplicate_member" else None)  # fmt: skip
    return path


def _mutate_members(mutation, members, header, state, dense, csr, arrays, pos, val):
    params = header["params"]
    if mutation == "extra_member":
        return {**members, "extra.npy": _npy(np.zeros(val % 1000))}
    if mutation == "declared_bomb":  # 64 MB of zeros, ~64 KB deflated: a legal deflate ratio
        state["extra_"] = {"type": "dense"}
        return {**_with_header(members, header), "extra_.npy": cached("bomb", lambda: _npy(np.zeros(2**23)))}
    if mutation == "missing_member":
        return {n: d for n, d in members.items() if n != _pick(arrays, pos)}
    if mutation == "duplicate_member":
        return members
    if mutation == "lying_npy_shape":
        name = _pick(arrays, pos)
        arr = _read_npy(members[name])
        head = _npy(np.zeros((arr.shape[0] + 1 + val % 7, *arr.shape[1:]), arr.dtype))
        body = members[name][len(_npy(arr)) - arr.nbytes :]
        return {**members, name: head[: len(head) - arr.nbytes - (1 + val % 7) * arr.itemsize *
                                      int(np.prod(arr.shape[1:], dtype=np.int64))] + body}  # fmt: skip
    if mutation in ("complex_member", "object_member", "state_nan", "state_shape"):
        name = _pick([f"{n}.npy" for n in dense] or [f"{n}.data.npy" for n in csr], pos)
        arr = _read_npy(members[name])
        new = {
            "complex_member": lambda: _npy(arr.astype(np.complex128) + 1j),
            "object_member": lambda: _npy(arr.astype(object), allow_pickle=True),
            "state_nan": lambda: _npy(np.where(np.arange(arr.size).reshape(arr.shape) == 0, np.nan, arr)),
            "state_shape": lambda: _npy(arr[: max(0, arr.shape[0] - 1 - val % 3)]),
        }[mutation]()
        return {**members, name: new}
    if mutation in ("csr_index_high", "csr_index_negative", "csr_indptr_decreasing"):
        if not csr:
            return _mutate_members("state_nan", members, header, state, dense, csr, arrays, pos, val)
        name = _pick(csr, pos)
        part = "indptr" if mutation == "csr_indptr_decreasing" else "indices"
        arr = _read_npy(members[f"{name}.{part}.npy"]).astype(np.int64)
        if arr.size == 0 or (part == "indptr" and arr[-1] == 0):
            arr = np.append(arr, 5) if part == "indices" else arr
        if part == "indptr":
            arr = arr[::-1].copy()
        elif arr.size:
            arr[val % arr.size] = state[name]["shape"][1] + val if mutation == "csr_index_high" else -1 - val
        return {**members, f"{name}.{part}.npy": _npy(arr)}
    if mutation in ("float_shape", "affinity_kmax", "affinity_kind") and csr:
        name = _pick(csr, pos)
        spec = state[name]
        if mutation == "float_shape":
            spec["shape"] = [spec["shape"][0] + 0.5, spec["shape"][1]]
        elif mutation == "affinity_kmax" and spec["type"] == "affinity":
            spec["k_max"] = [0, 10**9, "3", 2.5, None, -1][val % 6]
        elif mutation == "affinity_kind" and spec["type"] == "affinity":
            spec["kind"] = ["bogus", None, 3, "custom", "slim"][val % 5]
        return _with_header(members, header)
    edits = {
        "wrong_class": lambda: header.__setitem__("class", _other_class(header["class"], val)),
        "unknown_class": lambda: header.__setitem__("class", "Nonexistent"),
        "params_str": lambda: _edit_param(params, pos, lambda v: str(v)),
        "params_seed_list": lambda: params.__setitem__("random_state", [1, 2]),
        "params_seed_huge": lambda: params.__setitem__("random_state", 2**80),
        "params_unknown": lambda: params.__setitem__("bogus", 1),
        "params_huge": lambda: _edit_param(params, pos, lambda v: 2**70 if isinstance(v, int) else 1e308),
        "version": lambda: header.__setitem__("version", [1, 3, 5, "4", None][val % 5]),
    }
    if mutation in edits:
        edits[mutation]()
        return _with_header(members, header)
    if mutation == "header_not_json":
        return {**members, "header.npy": _npy(np.array("{not json" if val % 2 else "[1, 2]"))}
    if mutation in ("swapped_arrays", "swapped_rehashed"):
        import hashlib

        pair = _swappable(members, pos)
        if pair is None:
            return members
        a, b = pair
        members = {**members, a: members[b], b: members[a]}
        if mutation == "swapped_rehashed":  # a consistent forgery: the digests recomputed for the new content
            header["digests"] = {n[:-4]: _array_digest(_read_npy(d)) for n, d in members.items() if n != "header.npy"}
            rest = {k: v for k, v in header.items() if k != "header_digest"}
            header["header_digest"] = hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()
            return _with_header(members, header)
        return members
    if mutation == "huge_shape":
        if csr:
            spec = state[_pick(csr, pos)]
            spec["shape"] = [2**62, spec["shape"][1]] if val % 2 else [spec["shape"][0], 2**40 + val]
            return _with_header(members, header)
        name = _pick([f"{n}.npy" for n in dense], pos)  # a dense member whose .npy header declares 2**40 rows
        arr = _read_npy(members[name])
        return {**members, name: _npy_head(arr, (2**40 + val, *arr.shape[1:])) + arr.tobytes()}
    if mutation == "digest_edit":
        name = _pick(sorted(header.get("digests", {})), pos) if header.get("digests") else None
        if name is not None:
            digest = header["digests"][name]
            header["digests"][name] = ("0" if digest[val % 64] != "0" else "1").join(
                (digest[: val % 64], digest[val % 64 + 1 :])
            )
        return _with_header(members, header)
    if mutation == "digest_missing":
        header.pop("digests", None)
        return _with_header(members, header)
    return members  # a mutation that does not apply to this model: the intact file


def _npy_head(arr, shape) -> bytes:
    """A ``.npy`` header declaring ``shape`` for ``arr``'s dtype (the data that follows is the caller's)."""
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(arr.dtype),
                                                "fortran_order": False, "shape": shape})  # fmt: skip
    return buf.getvalue()


def _swappable(members, pos):
    """Two members of equal dtype and shape and different content (``None``: no such pair)."""
    arrays = {n: _read_npy(d) for n, d in sorted(members.items()) if n != "header.npy"}
    pairs = [
        (a, b)
        for a in arrays
        for b in arrays
        if a < b and arrays[a].dtype == arrays[b].dtype and arrays[a].shape == arrays[b].shape
        and not np.array_equal(arrays[a], arrays[b])
    ]  # fmt: skip
    return pairs[int(pos * len(pairs)) % len(pairs)] if pairs else None


def _array_digest(array) -> str:
    """sha256 of an array's dtype, shape and C-order bytes (the digest of a version-4 file, computed here)."""
    import hashlib

    h = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


def _edit_param(params, pos, change):
    names = [n for n, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if names:
        name = _pick(names, pos)
        params[name] = change(params[name])


def _other_class(name, val):
    from recsys_ltr._io import _REGISTRY

    classes = {
        type(cached(("file_model", m), make)).__name__ for m, (make, _) in cached("file_models", file_models).items()
    }
    others = sorted(c for c in classes | {"AffinityFEBR", "FRML", "GMML", "LGMML"} if c != name and c in _REGISTRY)
    return others[val % len(others)]


#: what loading a hostile file may allocate (the fitted models here are a few KB; the bomb is 64 MB)
_LOAD_MEMORY = 16 * 2**20
#: mutations after which the file must load and answer as the intact one
_HARMLESS = ("intact",)
#: mutations that may or may not change anything (a flipped byte in unused space, a mutation that
#: does not apply to this model's state)
_EITHER = ("flip", "deflate_flip", "float_shape", "affinity_kmax", "affinity_kind", "params_str", "params_huge",
           "params_seed_list", "params_seed_huge", "csr_index_high", "csr_index_negative", "csr_indptr_decreasing",
           "lying_npy_shape", "wrong_class")  # fmt: skip
#: mutations that must be refused unless they left the file as it was (no pair of arrays to swap)
_IF_CHANGED = ("swapped_arrays", "swapped_rehashed", "digest_edit", "huge_shape")
#: a tampered file whose digests were recomputed: the digests detect corruption, not forgery (``_io``)
FORGERY = (
    "a forgery with its sha256 digests recomputed loads (the digests detect corruption and edits, they do not "
    "authenticate: whoever can write the file can recompute them)"
)


def file_case_outcome(case, directory) -> Outcome:
    import tracemalloc

    make, answers = cached("file_models", file_models)[case["model"]]
    cls = type(cached(("file_model", case["model"]), make))
    intact = cached(("intact_answers", case["model"]), lambda: answers(cls.load(_saved(case["model"], directory))))
    path = damage_file(case, directory)

    def load_and_answer():
        tracemalloc.start()
        try:
            model, exc = _call(lambda: cls.load(path))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        if peak > _LOAD_MEMORY:
            raise MemoryError(f"load allocated {peak / 2**20:.0f} MB for a {os.path.getsize(path)} byte file")
        if exc is not None:
            raise exc
        return answers(model)

    if case["mutation"] == "missing":
        return judge(load_and_answer, Reject(r".", "absent", (FileNotFoundError,)))
    reject = Reject(r".", path.split(os.sep)[-1], (ValueError,))
    same = Same(lambda: intact)
    if case["mutation"] in _HARMLESS or (
        case["mutation"] in _IF_CHANGED and _members(path) == _members(_saved(case["model"], directory))
    ):
        return judge(load_and_answer, same)
    if case["mutation"] in _EITHER:
        return judge(load_and_answer, Either(reject, same))
    if case["mutation"] == "swapped_rehashed":
        outcome = judge(load_and_answer, Either(reject, same))
        return Outcome("accepted", FORGERY) if outcome.category == "wrong" else outcome
    return judge(load_and_answer, reject)


# ============================================================================ LETOR files
LETOR_DAMAGES = (
    "none", "float_label_integral", "unsorted_features", "duplicate_feature", "feature_zero", "feature_too_big",
    "nan_value", "inf_value", "huge_value", "negative_label", "float_label", "text_label", "bad_qid", "missing_qid",
    "huge_qid", "truncate", "garbage", "empty", "comment_only", "gz_corrupt", "gz_truncate", "utf16", "missing",
    "extra_colon", "empty_value", "query_file_sum", "query_file_negative", "query_file_text",
)  # fmt: skip
_LETOR_FEATURES = 4


@st.composite
def letor_cases(draw):
    n = draw(st.integers(1, 6))
    lines = []
    for i in range(n):
        feats = sorted(draw(st.sets(st.integers(1, _LETOR_FEATURES), max_size=_LETOR_FEATURES)))
        values = [draw(st.sampled_from([0.5, 1.0, -2.0, 3.25, 0.0])) for _ in feats]
        lines.append([draw(st.integers(0, 2)), 1 + i // 2, [[j, v] for j, v in zip(feats, values)]])
    damage = draw(st.sampled_from(LETOR_DAMAGES))
    return {"lines": lines, "damage": damage, "row": draw(st.integers(0, n - 1)), "val": draw(st.integers(0, 99))}


def _letor_text(lines, damage="none", row=0, val=0):
    """The file's text; ``damage`` edits row ``row``."""
    out = []
    for i, (label, qid, feats) in enumerate(lines):
        label_s, qid_s = str(label), f"qid:{qid}"
        tokens = [f"{j}:{v!r}" for j, v in feats]
        if i == row:
            edit = {
                "float_label_integral": (f"{label}.0", qid_s, tokens),
                "unsorted_features": (label_s, qid_s, [f"{_LETOR_FEATURES}:1.0", "1:1.0"]),
                "duplicate_feature": (label_s, qid_s, ["1:1.0", "1:2.0"]),
                "feature_zero": (label_s, qid_s, ["0:1.0", *tokens]),
                "feature_too_big": (label_s, qid_s, [*tokens, f"{_LETOR_FEATURES + 1 + val}:1.0"]),
                "nan_value": (label_s, qid_s, ["1:nan"]),
                "inf_value": (label_s, qid_s, ["1:-inf"]),
                "huge_value": (label_s, qid_s, ["1:1e400"]),
                "negative_label": (f"-{1 + val}", qid_s, tokens),
                "float_label": (f"{label}.5", qid_s, tokens),
                "text_label": ("high", qid_s, tokens),
                "bad_qid": (label_s, "qid:q1", tokens),
                "missing_qid": (label_s, "", tokens),
                "huge_qid": (label_s, "qid:" + "9" * (20 + val % 5), tokens),
                "extra_colon": (label_s, qid_s, ["1:2:3"]),
                "empty_value": (label_s, qid_s, ["1:"]),
            }
            label_s, qid_s, tokens = edit.get(damage, (label_s, qid_s, tokens))
        out.append(" ".join(t for t in (label_s, qid_s, *tokens) if t) + f"  # doc {i}")
    return "\n".join(out) + "\n"


def expected_letor(lines):
    """Brute-force parse of intact lines: ``(X, y, qid)``."""
    X = np.zeros((len(lines), _LETOR_FEATURES))
    for i, (_, _, feats) in enumerate(lines):
        for j, v in feats:
            X[i, j - 1] = v
    return X, np.array([l[0] for l in lines], dtype=np.int64), np.array([l[1] for l in lines], dtype=np.int64)


def write_letor(case, directory) -> tuple[str, str | None]:
    """The damaged file (and query file, for the LightGBM layout) of a recipe."""
    import gzip

    damage, val = case["damage"], case["val"]
    base = os.path.join(directory, f"letor-{abs(hash(json.dumps(case))) % 10**12}")
    text = _letor_text(case["lines"], damage, case["row"], val)
    if damage == "missing":
        return base + ".absent", None
    if damage.startswith("query_file"):  # LightGBM layout: no qid: fields, group sizes in a .query file
        text = "".join(line.replace(f" qid:{l[1]}", "", 1) + "\n" for line, l in zip(text.splitlines(), case["lines"]))
        sizes = np.bincount([l[1] for l in case["lines"]])[1:]
        sizes = {"query_file_sum": [*sizes[:-1], sizes[-1] + 1 + val % 3], "query_file_negative": [*sizes, -1],
                 "query_file_text": ["two", *sizes]}[damage]  # fmt: skip
        with open(base + ".query", "w") as f:
            f.write("\n".join(map(str, sizes)) + "\n")
        with open(base + ".txt", "w") as f:
            f.write(text)
        return base + ".txt", base + ".query"
    data = text.encode()
    path = base + (".txt.gz" if damage.startswith("gz") else ".txt")
    if damage == "truncate":
        cut = [i for i, ch in enumerate(text) if ch in " \n"]
        data = data[: cut[val % len(cut)]] if cut else data
        data = data + (b"" if data.endswith(b"\n") else b"\n")
    elif damage == "garbage":
        data = np.random.default_rng(val).integers(0, 256, 10 + val * 10, dtype=np.uint8).tobytes()
    elif damage in ("empty", "comment_only"):
        data = b"" if damage == "empty" else b"# nothing here\n"
    elif damage == "utf16":
        data = text.encode("utf-16")
    elif damage.startswith("gz"):
        data = gzip.compress(data)
        data = data[: len(data) // 2] if damage == "gz_truncate" else data[:10] + bytes(20) + data[30:]
    with open(path, "wb") as f:
        f.write(data)
    return path, None


def _truncated_lines(case):
    """The rows left after a whole-token truncation (``None`` when a row lost its qid)."""
    text = _letor_text(case["lines"])
    cut = [i for i, ch in enumerate(text) if ch in " \n"]
    kept = text[: cut[case["val"] % len(cut)]].split("\n")
    lines = []
    for src, line in zip(case["lines"], kept):
        tokens = line.split("#")[0].split()
        if len(tokens) < 2:
            return None if tokens else lines
        feats = [f for f in src[2] if f"{f[0]}:{f[1]!r}" in tokens]
        lines.append([src[0], src[1], feats])
    return lines


def letor_case_outcome(case, directory) -> Outcome:
    from recsys_ltr.datasets.letor import read_svmlight_ltr

    path, query = write_letor(case, directory)
    damage = case["damage"]
    call = lambda: read_svmlight_ltr(path, _LETOR_FEATURES, query_file=query)  # noqa: E731
    if damage == "missing":
        return judge(call, Reject(r".", "absent", (FileNotFoundError,)))
    name = os.path.basename(path if not damage.startswith("query_file") else query).split(".")[0]
    if damage in ("none", "float_label_integral"):
        note = "an integral float label (2.0) is read as the integer label" if damage != "none" else ""
        return judge(call, Same(lambda: expected_letor(case["lines"]), note))
    if damage == "truncate":
        lines = _truncated_lines(case)
        if lines:
            return judge(call, Same(lambda: expected_letor(lines)))
    return judge(call, Reject(r".", name, (ValueError,)))


# ============================================================================ hand-built kernel inputs
KNN_INDEX_DEFECTS = {
    "none": None, "index_high": r"out of range", "index_negative": r"out of range", "indptr_decreasing": r"indptr",
    "indptr_short": r"indptr", "indptr_long": r"indptr", "indptr_end_beyond": r"indptr", "indices_float": r"integer",
    "scale_nan": r"scale", "scale_negative": r"scale", "scale_short": r"scale", "weights_zero": r"weights",
    "weights_negative": r"weights", "weights_nan": r"weights", "weights_short": r"weights",
    "n_rows_small": r"out of range|scale", "n_rows_float": r"n_rows", "n_rows_bool": r"n_rows",
    "n_rows_huge": r"n_rows|scale|at most", "n_features_small": r"indptr|weights", "n_features_float": r"n_features",
    "write_indices": r"read-only", "write_scale": r"read-only", "set_attribute": r"read-only",
}  # fmt: skip


@st.composite
def knn_index_cases(draw):
    return {"defect": draw(st.sampled_from(sorted(KNN_INDEX_DEFECTS))), "val": draw(st.integers(0, 2**40))}


def _knn_index_parts():
    from recsys_ltr.neighbors import knn_index

    index = knn_index(base_matrix().T)  # rows: 6 items, features: 7 users
    return {
        "indptr": index.indptr.astype(np.int64), "indices": index.indices.astype(np.int64),
        "scale": index.scale.copy(), "weights": index.weights.copy(), "n_rows": 6, "n_features": 7,
    }  # fmt: skip


def knn_index_case_outcome(case) -> Outcome:
    from recsys_ltr.neighbors import KnnIndex, knn_query

    parts = _knn_index_parts()
    defect, val = case["defect"], case["val"]
    edits = {
        "index_high": lambda p: p["indices"].__setitem__(val % p["indices"].size, 6 + val),
        "index_negative": lambda p: p["indices"].__setitem__(val % p["indices"].size, -1 - val),
        "indptr_decreasing": lambda p: p.__setitem__("indptr", p["indptr"][::-1].copy()),
        "indptr_short": lambda p: p.__setitem__("indptr", p["indptr"][:-1]),
        "indptr_long": lambda p: p.__setitem__("indptr", np.append(p["indptr"], p["indptr"][-1])),
        "indptr_end_beyond": lambda p: p["indptr"].__setitem__(-1, p["indptr"][-1] + 1 + val % 9),
        "indices_float": lambda p: p.__setitem__("indices", p["indices"] + 0.5),
        "scale_nan": lambda p: p["scale"].__setitem__(val % 6, np.nan),
        "scale_negative": lambda p: p["scale"].__setitem__(val % 6, -1.0),
        "scale_short": lambda p: p.__setitem__("scale", p["scale"][:-1]),
        "weights_zero": lambda p: p["weights"].__setitem__(val % 7, 0.0),
        "weights_negative": lambda p: p["weights"].__setitem__(val % 7, -2.0),
        "weights_nan": lambda p: p["weights"].__setitem__(val % 7, np.inf),
        "weights_short": lambda p: p.__setitem__("weights", p["weights"][:-1]),
        "n_rows_small": lambda p: p.__setitem__("n_rows", 1 + val % 5),
        "n_rows_float": lambda p: p.__setitem__("n_rows", 6.0),
        "n_rows_bool": lambda p: p.__setitem__("n_rows", True),
        "n_rows_huge": lambda p: p.__setitem__("n_rows", 2**63 + val),
        "n_features_small": lambda p: p.__setitem__("n_features", 1 + val % 6),
        "n_features_float": lambda p: p.__setitem__("n_features", 7.5),
    }
    if defect in edits:
        edits[defect](parts)
    Q = base_matrix().T.tocsr()

    def call():
        index = KnnIndex(**parts)
        if defect == "write_indices":
            index.indices[0] = 10**6
        elif defect == "write_scale":
            index.scale[0] = -1.0
        elif defect == "set_attribute":
            index.indices = np.full(3, 10**6)
        return knn_query(index, Q, 2, num_threads=1)

    pattern = KNN_INDEX_DEFECTS[defect]
    if pattern is None:
        from recsys_ltr.neighbors import knn_index

        return judge(call, Same(lambda: knn_query(knn_index(base_matrix().T), Q, 2, num_threads=1)))
    return judge(call, Reject(pattern, "", (TypeError, ValueError, AttributeError)))


WARP_DEFECTS = {
    "none": None, "users_short": r"rows", "items_short": r"rows", "rows_not_dict": r"rows", "rows_bad_kind": r"rows",
    "rows_bad_position": r"rows", "state_list": r"model_state", "state_empty": r"model_state", "state_nan": r"diverged",
    "state_inf": r"diverged", "score_not_njit": r"njit", "rows_missing": None,
}  # fmt: skip


@st.composite
def warp_cases(draw):
    return {
        "defect": draw(st.sampled_from(sorted(WARP_DEFECTS))),
        "method": draw(st.sampled_from(["sgd", "minibatch"])),
        "short": draw(st.integers(0, 6)),
    }


def warp_case_outcome(case) -> Outcome:
    from recsys_ltr.warp import DOT_ROWS, WarpSampler, dot_score, dot_update

    X7 = base_matrix()
    defect, short = case["defect"], case["short"]

    def call(defect=defect):
        sampler = WarpSampler(X7, beta=3, random_state=0, num_threads=1)
        rng = np.random.default_rng(0)
        U = 0.1 * rng.standard_normal((7 - (short + 1 if defect == "users_short" else 0), 2))
        V = 0.1 * rng.standard_normal((6 - (short % 6 + 1 if defect == "items_short" else 0), 2))
        if defect in ("state_nan", "state_inf"):
            U[:] = np.nan if defect == "state_nan" else np.inf
        state = {"state_list": [U, V], "state_empty": ()}.get(defect, (U, V))
        rows = {"rows_not_dict": [(0, "query")], "rows_bad_kind": {0: "user", 1: "item"},
                "rows_bad_position": {5: "query"}, "rows_missing": {1: "item", 0: "query"}}.get(defect, DOT_ROWS)  # fmt: skip
        score = (lambda s, q, i: 0.0) if defect == "score_not_njit" else dot_score
        if case["method"] == "sgd":
            stats = sampler.sgd(state, score, dot_update, n_samples=30, learning_rate=0.1, rows=rows)
            return stats, U, V
        return sampler.minibatch(state, score, batch_size=4, rows=rows)

    pattern = WARP_DEFECTS[defect]
    if pattern is None:
        return judge(call, Same(lambda: call("none")))
    return judge(call, Reject(pattern, ""))


# ============================================================================ stacked FEBR's configurations
#: what each FEBR recipe varies -> the values it draws from (JSON-able, built by :func:`_febr_value`)
FEBR_KINDS = {
    "bases": ["empty", "one", "tuple", "same_object", "fitted_same", "fitted_other", "febr", "affinity_febr",
              "string", "class", "none_member", "auto_string"],
    "holdout": [0, 0.0, 0.2, 0.5, 0.99, 2, 3, 4, 5, 7, 2**62, 1, -1, 1.0, -0.5, True, "nan", "int64:2", "float32:0.5"],
    "candidates": [1, 2, 5, 6, 7, 2**62, 0, -1, 2.0, True, "int64:3"],
    "label_exclude_top": [None, 0, 1, 3, 5, 6, 7, 10**9, -1, 2.5, True],
    "few_positives": [0, 0.2, 0.5, 2, 3],
    "lambdamart_params": ["fast", "lr_huge", "leaves_huge", "min_data_huge", "objective", "metric", "seed",
                          "verbose", "threads_huge", "boosting_rf", "iterations_bool", "iterations_float",
                          "key_none", "key_int", "lr_nan", "max_bin_1", "unknown", "iterations_zero", "not_dict"],
    "scorer": ["linear", "lambdamart", "LINEAR", " linear", None, 1, "list", "np_str"],
}  # fmt: skip
#: lambdamart_params recipe -> (params, expectation: "valid", "reject" or "either" a clear refusal or an answer)
_LAMBDAMART_RECIPES = {
    "fast": (LAMBDAMART_FAST, "valid"),
    "lr_huge": ({**LAMBDAMART_FAST, "learning_rate": 1e308}, "either"),
    "leaves_huge": ({**LAMBDAMART_FAST, "num_leaves": 2**40}, "either"),
    "min_data_huge": ({**LAMBDAMART_FAST, "min_data_in_leaf": 10**9}, "either"),
    "objective": ({**LAMBDAMART_FAST, "objective": "regression"}, "either"),
    "metric": ({**LAMBDAMART_FAST, "metric": "auc"}, "either"),
    "seed": ({**LAMBDAMART_FAST, "seed": 5}, "valid"),
    "verbose": ({**LAMBDAMART_FAST, "verbose": 1}, "valid"),
    "threads_huge": ({**LAMBDAMART_FAST, "num_threads": 2**40}, "either"),
    "boosting_rf": ({**LAMBDAMART_FAST, "boosting": "rf"}, "either"),
    "iterations_bool": ({**LAMBDAMART_FAST, "num_iterations": True}, "reject"),
    "iterations_float": ({**LAMBDAMART_FAST, "num_iterations": 3.5}, "reject"),
    "key_none": ({**LAMBDAMART_FAST, None: 1}, "reject"),
    "key_int": ({**LAMBDAMART_FAST, 1: 2}, "reject"),
    "lr_nan": ({**LAMBDAMART_FAST, "learning_rate": float("nan")}, "reject"),
    "max_bin_1": ({**LAMBDAMART_FAST, "max_bin": 1}, "either"),
    "unknown": ({**LAMBDAMART_FAST, "num_iteratoins": 3}, "reject"),
    "iterations_zero": ({"num_iterations": 0}, "reject"),
    "not_dict": ([("num_iterations", 3)], "reject"),
}


@st.composite
def febr_cases(draw, kind=None):
    kind = kind or draw(st.sampled_from(sorted(FEBR_KINDS)))
    return {"kind": kind, "value": draw(st.sampled_from(FEBR_KINDS[kind])), "val": draw(st.integers(0, 99))}


def _febr_value(v):
    if isinstance(v, str) and ":" in v:
        kind, x = v.split(":")
        return getattr(np, kind)(float(x) if kind.startswith("float") else int(x))
    return float(v) if v == "nan" else v


def _few_positives_matrix():
    """9 users x 6 items, users with 1 or 2 positives only."""
    D = np.zeros((9, 6))
    for u in range(9):
        D[u, u % 6] = 1.0
        if u % 2:
            D[u, (u + 2) % 6] = 1.0
    return sp.csr_matrix(D)


def _febr_fit(X=None, **params):
    return _fit_answers(lambda: _stacked_febr(**params))(base_matrix() if X is None else X)


def febr_case_outcome(case) -> Outcome:
    """A configuration of stacked FEBR: a clear refusal naming the parameter, or finite answers equal
    to those of the canonical configuration (same seed: the answers are deterministic)."""
    from recsys_ltr.febr import AffinityFEBR
    from recsys_ltr.models import ItemKNN, Popularity

    kind, value = case["kind"], _febr_value(case["value"])
    X7 = base_matrix()

    def two():
        return [ItemKNN(k=2, num_threads=1), Popularity(num_threads=1)]

    reference = lambda: _febr_fit()  # noqa: E731
    if kind == "bases":
        other = sp.csr_matrix(np.eye(5, 4) + np.eye(5, 4, 1))
        if value in ("empty", "febr", "affinity_febr", "string", "class", "none_member", "auto_string"):
            bad = {"empty": [], "febr": [ItemKNN(k=2), _stacked_febr()], "string": "itemknn", "class": [ItemKNN],
                   "affinity_febr": [AffinityFEBR(**PAPER, k=2, max_iter=10, eval_every=10, random_state=0)],
                   "none_member": [ItemKNN(k=2), None], "auto_string": "AUTO"}[value]  # fmt: skip
            return judge(lambda: _febr_fit(bases=bad), Reject(r"bases|base of FEBR", ""))
        if value == "one":
            return judge(lambda: _febr_fit(bases=[ItemKNN(k=2, num_threads=1)]), Same(
                lambda: _febr_fit(bases=[ItemKNN(k=2, num_threads=1)]), finite=True))  # fmt: skip
        b = ItemKNN(k=2, num_threads=1)
        given = {
            "tuple": lambda: tuple(two()),
            "same_object": lambda: [b, b],
            "fitted_same": lambda: [m.fit(X7) for m in two()],
            "fitted_other": lambda: [m.fit(other) for m in two()],
        }[value]
        ref = (lambda: _febr_fit(bases=[ItemKNN(k=2, num_threads=1)] * 1 + [ItemKNN(k=2, num_threads=1)])) if (
            value == "same_object") else reference  # fmt: skip
        same = Same(ref, finite=True)
        if value in ("same_object", "fitted_other"):
            return judge(lambda: _febr_fit(bases=given()), Either(Reject(r"bases", "bases"), same))
        return judge(lambda: _febr_fit(bases=given()), same)
    if kind in ("holdout", "few_positives"):
        X = X7 if kind == "holdout" else _few_positives_matrix()
        most = int(np.diff(X.indptr).max())
        call = lambda: _febr_fit(X, holdout=value)  # noqa: E731
        if _is_int(value) and int(value) != 0:
            if int(value) < 2:
                return judge(call, Reject(r"holdout", "holdout"))
            if int(value) > max(most, 2):
                return judge(call, Reject(r"holdout=\d+ folds", "holdout"))
            return judge(call, Same(lambda: _febr_fit(X, holdout=int(value)), finite=True))
        if not valid(real(0, 1, hi_open=True), value) and not _is_int(value):
            return judge(call, Reject(r"holdout", "holdout"))
        ref = 0 if float(value) == 0 else float(value)  # 0.0: training on X itself, as 0 is
        return judge(call, Same(lambda: _febr_fit(X, holdout=ref), finite=True))
    if kind == "candidates":
        call = lambda: _febr_fit(candidates=value)  # noqa: E731
        if not valid(integer(), value):
            return judge(call, Reject(r"candidates", "candidates"))
        return judge(call, Same(lambda: _febr_fit(candidates=min(int(value), X7.shape[1])), finite=True))
    if kind == "label_exclude_top":
        call = lambda: _febr_fit(label_exclude_top=value)  # noqa: E731
        if value is not None and not valid(integer(0), value):
            return judge(call, Reject(r"label_exclude_top", "label_exclude_top"))
        if value is not None and value >= X7.shape[1]:
            return judge(call, Reject(r"label_exclude_top=\d+ leaves no item", "label_exclude_top"))
        return judge(call, Same(lambda: _febr_fit(label_exclude_top=value), finite=True))
    if kind == "lambdamart_params":
        if not _has("lightgbm"):
            return Outcome("accepted", "LightGBM (optional) is not installed")
        params, expect = _LAMBDAMART_RECIPES[value]
        call = lambda: _febr_fit(scorer="lambdamart", lambdamart_params=params)  # noqa: E731
        reject = Reject(r"lambdamart_params|LightGBM", "lambdamart_params")
        same = Same(call, finite=True)
        either = Either(Reject(r"lambdamart_params|LightGBM|diverged", ""), same)  # LightGBM's words, or divergence
        return judge(call, {"valid": same, "reject": reject, "either": either}[expect])
    # scorer
    given = {"list": ["linear"], "np_str": np.str_("linear")}.get(value, value)
    call = lambda: _febr_fit(scorer=given, lambdamart_params=LAMBDAMART_FAST)  # noqa: E731
    if value in ("linear", "np_str") or (value == "lambdamart" and _has("lightgbm")):
        canonical_scorer = "linear" if value == "np_str" else value
        return judge(call, Same(lambda: _febr_fit(scorer=canonical_scorer, lambdamart_params=LAMBDAMART_FAST),
                                finite=True))  # fmt: skip
    return judge(call, Reject(r"scorer", "scorer"))


# ============================================================================ executors
#: hostile ``executor=`` arguments: recipe -> expectation ("valid": as executor=None; else the regex)
EXECUTOR_VALUES = {
    "none": "valid", "serial": "valid", "instance": "valid", "np_str": "valid", "processes": "valid",
    "bogus": r"unknown executor", "empty": r"unknown executor", "upper": r"unknown executor",
    "padded": r"unknown executor", "int": r"executor must be", "bytes": r"executor must be",
    "list": r"executor must be", "class": r"executor must be", "object": r"executor must be",
    "true": r"executor must be", "dict": r"executor must be",
    "address_serial": r"address", "address_instance": r"address",
    "n_workers_zero": r"n_workers", "n_workers_str": r"n_workers", "n_workers_float": r"n_workers",
    "n_workers_huge": r"n_workers", "threads_zero": r"threads", "threads_bool": r"threads",
    "max_retries_negative": r"max_retries", "max_pending_zero": r"max_pending",
    "ray_address_int": r"address", "ray_address_empty": r"address", "ray_init_kwargs": r"init_kwargs",
    "ray_cpus_zero": r"cpus_per_task",
}  # fmt: skip
#: where an ``executor=`` is taken: name -> call(executor, address)
EXECUTOR_ENTRIES = ("evaluate", "score_users", "recommend_all", "febr_features")


@st.composite
def executor_cases(draw, entry=None):
    return {"value": draw(st.sampled_from(sorted(EXECUTOR_VALUES))), "batch": draw(st.sampled_from([None, 1, 3]))}


def _executor_value(recipe):
    from recsys_ltr.executors import Executor, ProcessExecutor, RayExecutor, SerialExecutor

    return {
        "none": lambda: None, "serial": lambda: "serial", "instance": SerialExecutor, "np_str": lambda: np.str_("serial"),
        "processes": lambda: ProcessExecutor(n_workers=1, threads=1),
        "bogus": lambda: "bogus", "empty": lambda: "", "upper": lambda: "SERIAL", "padded": lambda: " serial",
        "int": lambda: 3, "bytes": lambda: b"serial", "list": lambda: ["serial"], "class": lambda: SerialExecutor,
        "object": object, "true": lambda: True, "dict": lambda: {"executor": "serial"}, "address_serial": lambda: "serial",
        "address_instance": SerialExecutor,
        "n_workers_zero": lambda: ProcessExecutor(n_workers=0), "n_workers_str": lambda: ProcessExecutor(n_workers="2"),
        "n_workers_float": lambda: ProcessExecutor(n_workers=1.5), "n_workers_huge": lambda: ProcessExecutor(n_workers=2**70),
        "threads_zero": lambda: ProcessExecutor(threads=0), "threads_bool": lambda: ProcessExecutor(threads=True),
        "max_retries_negative": lambda: ProcessExecutor(max_retries=-1),
        "max_pending_zero": lambda: ProcessExecutor(max_pending=0),
        "ray_address_int": lambda: RayExecutor(address=6379), "ray_address_empty": lambda: RayExecutor(address=""),
        "ray_init_kwargs": lambda: RayExecutor(init_kwargs=[("num_cpus", 1)]),
        "ray_cpus_zero": lambda: RayExecutor(cpus_per_task=0),
        "executor_base": Executor,
    }[recipe]()  # fmt: skip


def _executor_call(entry, executor, batch, address=None):
    from recsys_ltr.executors import recommend_all, score_users
    from recsys_ltr.febr import febr_features
    from recsys_ltr.metrics import evaluate

    X7, T7 = base_matrix(), _test_matrix()
    kw = {"executor": executor, **({"address": address} if address is not None else {})}
    if entry == "evaluate":
        return dict(evaluate(fitted("ItemKNN"), X7, T7, k=3, batch_size=batch, **kw))
    if address is not None:
        raise AssertionError("address is evaluate's")  # the other entries take no address
    if entry == "score_users":  # blocks come as they finish: in the order of their users
        return sorted(((u.tolist(), s) for u, s in score_users(fitted("ItemKNN"), batch_size=batch, **kw)), key=_first)
    if entry == "recommend_all":
        return recommend_all(fitted("ItemKNN"), N=3, batch_size=batch, **kw)
    blocks = febr_features(fitted("FEBR"), batch_size=batch, **kw)
    return sorted(((u.tolist(), *rest) for u, *rest in blocks), key=_first)


def _first(block):
    return block[0]


def executor_case_outcome(entry, case) -> Outcome:
    """An ``executor=`` argument (a name, an instance, a bad constructor argument): a clear error
    naming it before any task runs, or the answers of ``executor=None``."""
    from recsys_ltr.executors import Executor

    recipe, batch = case["value"], case["batch"]
    expect = EXECUTOR_VALUES[recipe]
    address = "auto" if recipe.startswith("address_") else None
    if address is not None and entry != "evaluate":
        recipe, expect, address = "bogus", EXECUTOR_VALUES["bogus"], None
    # the ray_ recipes are bad arguments, refused before Ray is imported: the same error without Ray

    def call():
        executor = _executor_value(recipe)
        try:
            return _executor_call(entry, executor, batch, address)
        finally:
            if isinstance(executor, Executor):
                executor.close()

    if expect == "valid":
        return judge(call, Same(lambda: _executor_call(entry, None, batch), finite=entry != "febr_features"))
    return judge(call, Reject(expect, ""))


# ============================================================================ the evaluation cache
#: damage done to a cache file: None for the intact file (a hit), else it must be a miss
CACHE_DAMAGES = {
    "intact": None, "edit_test": "miss", "edit_per_user": "miss", "edit_users": "miss", "edit_params": "miss",
    "wrong_key": "miss", "key_missing": "miss", "sha_missing": "miss", "sha_wrong": "miss", "broken_json": "miss",
    "truncated": "miss", "empty": "miss", "not_object": "miss", "result_missing_field": "miss",
    "result_extra_field": "miss", "nan_literal": "miss", "deep_nesting": "miss", "binary": "miss",
    "directory": "miss", "forged": "forged", "forged_users_huge": "forged", "forged_per_user_str": "forged",
    "forged_mean": "forged", "forged_users_float": "forged",
}  # fmt: skip
FORGED_CACHE = (
    "a cache file forged with a consistently recomputed sha256 is read (the digest guards integrity, not "
    "authenticity: README)"
)


@st.composite
def cache_cases(draw, entry=None):
    return {"damage": draw(st.sampled_from(sorted(CACHE_DAMAGES))), "val": draw(st.integers(0, 10**6))}


def _cache_result():
    from recsys_ltr.eval.results import FoldResult

    users = np.array([0, 2, 5], dtype=np.int64)
    per_user = {"ADG": np.array([0.5, 0.25, 1.0]), "NDCG@10": np.array([0.1, 0.2, 0.3])}
    return FoldResult(
        method="popularity", fold=0, params={"k": 3}, validation=0.4,
        test={m: float(v.mean()) for m, v in per_user.items()}, test_stderr=dict.fromkeys(per_user, 0.1),
        per_user=per_user, users=users, fit_seconds=0.5, trials=[{"level": 1, "params": {"k": 3}, "validation": 0.4}],
    )  # fmt: skip


def _cache_digest(key, result):
    import hashlib

    return hashlib.sha256(json.dumps({"key": key, "result": result}, sort_keys=True).encode()).hexdigest()


def cache_case_outcome(case, directory) -> Outcome:
    """A damaged, edited or forged cache file of one unit: ``UnitCache.load`` must return ``None`` (the
    unit is recomputed) with no exception, never a result; the intact file loads as stored."""
    import contextlib
    import io
    import shutil

    from recsys_ltr.eval.cache import UnitCache

    damage, val = case["damage"], case["val"]
    where = os.path.join(directory, f"cache-{damage}-{val}")
    shutil.rmtree(where, ignore_errors=True)
    settings = {"dataset": "synthetic", "protocol": "standard", "budget": "quick", "seed": 0, "k": 10}
    cache = UnitCache(where, **settings)
    stored = _cache_result()
    path = cache.store(stored)
    payload = json.loads(open(path).read())
    key, result = payload["key"], payload["result"]
    text = None
    if damage == "edit_test":
        result["test"]["ADG"] += 0.01 * (1 + val % 5)
    elif damage == "edit_per_user":
        result["per_user"]["ADG"][val % 3] = 0.0
        result["test"]["ADG"] = float(np.mean(result["per_user"]["ADG"]))
    elif damage == "edit_users":
        result["users"][val % 3] += 1
    elif damage == "edit_params":
        result["params"] = {"k": 4}
    elif damage == "wrong_key":
        key["seed"] = 1 + val % 7
    elif damage == "key_missing":
        payload.pop("key")
    elif damage == "sha_missing":
        payload.pop("sha256")
    elif damage == "sha_wrong":
        payload["sha256"] = payload["sha256"][::-1]
    elif damage == "not_object":
        text = json.dumps([payload])
    elif damage == "result_missing_field":
        result.pop("test")
    elif damage == "result_extra_field":
        result["bogus"] = 1
    elif damage.startswith("forged"):
        forged = {"forged": lambda: (result["per_user"].__setitem__("ADG", [1.0, 1.0, 1.0]),
                                     result["test"].__setitem__("ADG", 1.0)),
                  "forged_users_huge": lambda: result.__setitem__("users", [10**30, 2, 5]),
                  "forged_per_user_str": lambda: result["per_user"].__setitem__("ADG", ["a", "b", "c"]),
                  "forged_mean": lambda: result["test"].__setitem__("ADG", 99.0),
                  "forged_users_float": lambda: result.__setitem__("users", [0.5, 2.0, 5.0])}  # fmt: skip
        forged[damage]()
        result = json.loads(json.dumps(result))
    if damage in ("edit_test", "edit_per_user", "edit_users", "edit_params", "result_missing_field",
                  "result_extra_field") or damage.startswith("forged"):  # fmt: skip
        payload["result"] = result
        if damage.startswith("forged"):
            payload["sha256"] = _cache_digest(payload["key"], result)
    raw = (text if text is not None else json.dumps(payload)).encode()
    raw = {
        "broken_json": lambda: raw[: len(raw) // 2] + b"}{" + raw[len(raw) // 2 :],
        "truncated": lambda: raw[: val % len(raw)],
        "empty": lambda: b"",
        "nan_literal": lambda: raw.replace(b'"validation": 0.4', b'"validation": NaN', 1),
        "deep_nesting": lambda: b"[" * 100_000 + b"]" * 100_000,
        "binary": lambda: bytes(np.random.default_rng(val).integers(0, 256, 200, dtype=np.uint8)),
    }.get(damage, lambda: raw)()
    os.unlink(path)
    if damage == "directory":
        os.makedirs(path)
    else:
        with open(path, "wb") as f:
            f.write(raw)

    def load():
        with contextlib.redirect_stderr(io.StringIO()):
            return cache.load("popularity", 0, stored.users)

    got, exc = _call(load)
    if exc is not None:
        return Outcome("unexplained", f"UnitCache.load raised {_message(exc)}")
    expect = CACHE_DAMAGES[damage]
    if expect is None:
        return Outcome("right") if got is not None and equal(got.to_json(), stored.to_json()) else (
            Outcome("wrong", f"the intact cache file gave {_short(got)}"))  # fmt: skip
    if got is None:
        return Outcome("right")
    if damage == "forged":
        return Outcome("accepted", FORGED_CACHE)
    if expect == "forged":  # a forgery whose content is malformed: refused all the same
        return Outcome("undocumented", f"a malformed forged cache file ({damage}) was read: {_short(got)}")
    return Outcome("wrong", f"a {damage} cache file was reported as a result: {_short(got)}")


# ============================================================================ command line
_CLI_BAD = [
    ["--k", "abc"], ["--k", "0"], ["--k", "-3"], ["--k", "1.5"], ["--k", ""], ["--k", "999999"], ["--folds", "0"],
    ["--folds", "x"], ["--seed", "-1"], ["--seed", "1e3"], ["--jobs", "0"], ["--jobs", "two"],
    ["--exclude-top", "-1"], ["--exclude-top", "100000", "--protocol", "novelty"], ["--protocol", "bogus"],
    ["--budget", "huge"], ["--models", "nonexistent"], ["--models", ""], ["--models", ",,,"],
    ["--models", "item-p,bogus"], ["--dataset", "nonexistent"], ["--dataset", "../../etc/passwd"],
    ["--data-dir", "/nonexistent/dir", "--dataset", "movielens-100k"], ["--out", "@FILE"], ["--cache-dir", "@FILE"],
    ["--bogus"], ["--k"], ["--folds", "99999999999999999999999999"], ["--seed", str(2**64)],
]  # fmt: skip


@st.composite
def cli_cases(draw):
    bad = draw(st.sampled_from(_CLI_BAD))
    rest = draw(st.sampled_from([[], ["--models", "popularity"], ["--folds", "1", "--quiet"]]))
    return {"args": ["--dataset", "synthetic", *rest, *bad] if "--dataset" not in bad else [*rest, *bad],
            "flag": bad[0]}  # fmt: skip


def cli_case_outcome(case, directory) -> Outcome:
    """``python -m recsys_ltr.eval`` with a bad argument must stop with a usage error (exit 2, a
    message naming the flag or its value), never a traceback and never start an experiment."""
    import contextlib
    import io

    from recsys_ltr.eval.__main__ import main

    existing = os.path.join(directory, "a-file")
    with open(existing, "w") as f:
        f.write("x")
    args = [existing if a == "@FILE" else a for a in case["args"]]
    err = io.StringIO()
    exc = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
        except (SystemExit, Exception) as caught:
            exc = caught
    text = err.getvalue()
    if not isinstance(exc, SystemExit):
        return Outcome("unexplained" if exc is not None else "undocumented", _message(exc) if exc else "it ran")
    value = args[args.index(case["flag"]) + 1] if args.index(case["flag"]) + 1 < len(args) else case["flag"]
    if exc.code != 2 or "error:" not in text:
        return Outcome("misleading", f"exit {exc.code}: {text[-300:]}")
    if case["flag"] not in text and value not in text and case["flag"].lstrip("-") not in text:
        return Outcome("misleading", f"the usage error does not name {case['flag']}: {text[-300:]}")
    return Outcome("clear")


# ============================================================================ finite in, finite out
#: the surfaces added since the third campaign: time cuts, DataFrame roles, weighting, graph filters
VALUE_ENTRIES = ("time_cut", "from_dataframe", "bm25_weight", "log_weight", "tfidf_weight", "BSPM", "GFCF", "ChebyCF")
_CUTS = ["1435-01-01", "1600-01-01", "1677-01-01", "1969-12-31", "2020-01-02", "2020-01-05T12:00", "2020-01-10",
         "2020-02-01", "2262-04-12", "2263-01-01", "2300-01-01", "2604-08-09T20:04:33", "9999-12-31"]  # fmt: skip
_COLUMNS = ["u", "i", "w", "t", "missing"]
_HUGE = [0.0, 5e-324, 1e-300, 0.5, 1.0, 1.2, 2.5, 40.0, 100.0, 1e3, 1e100, 1e300, 1e308, -1.0, "nan", "inf"]


@st.composite
def value_cases(draw, entry):
    if entry == "time_cut":
        return {"unit": draw(st.sampled_from(["ns", "us", "s", "D"])), "test": draw(st.sampled_from(_CUTS)),
                "val": draw(st.sampled_from([None, *_CUTS]))}  # fmt: skip
    if entry == "from_dataframe":
        roles = ("user_col", "item_col", "weight_col", "timestamp_col")
        return {r: draw(st.sampled_from(_COLUMNS + [None] * (j >= 2))) for j, r in enumerate(roles)}
    if entry in ("BSPM", "GFCF", "ChebyCF"):
        return {"beta": draw(st.sampled_from(_HUGE)), "sharpen_time": draw(st.sampled_from(_HUGE)),
                "blur_time": draw(st.sampled_from(_HUGE)), "sharpen_steps": draw(st.integers(0, 3)),
                "solver": draw(st.sampled_from(["rk4", "euler"]))}  # fmt: skip
    return {"count": draw(st.sampled_from([1.0, 3.0, 5e-324, 1e-300, 1e100, 1e300, 1e308])),
            "K1": draw(st.sampled_from(_HUGE)), "B": draw(st.sampled_from([0.0, 0.5, 1.0, 1.5, "nan"])),
            "alpha": draw(st.sampled_from(_HUGE)), "epsilon": draw(st.sampled_from(_HUGE))}  # fmt: skip


def _number(v):
    return float(v) if isinstance(v, str) else v


def _time_cut_outcome(case) -> Outcome:
    """A cut anywhere in years 1435-9999 of data stamped in ``unit``: the parts a brute force over
    pandas Timestamps gives (the cut floored to the data's day for daily stamps), or the error naming
    the part really left empty."""
    from recsys_ltr import Interactions, split

    unit, test, val = case["unit"], case["test"], case["val"]
    times = (np.datetime64("2020-01-01", "D") + np.arange(10)).astype(f"M8[{unit}]")
    data = Interactions.from_arrays(np.arange(10) % 3, np.arange(10), timestamps=times)
    stamps = [pd.Timestamp(t) for t in times]

    def at(cut):
        c = pd.Timestamp(cut)
        return c.floor("D") if unit == "D" else c

    call = lambda: tuple(m.nnz for m in split.time_cut(data, test, val_start=val))  # noqa: E731
    cut = at(test)
    if all(t >= cut for t in stamps):
        return judge(call, Reject(r"test_start=.* leaves the training part empty", "test_start"))
    if not any(t >= cut for t in stamps):
        return judge(call, Reject(r"test_start=.* leaves the test part empty", "test_start"))
    lo = cut if val is None else at(val)
    if val is not None and not (min(stamps) < lo < cut):
        return judge(call, Reject(r"val_start=.* must be after the first time and before test_start", "val_start"))
    n_test, n_train = sum(t >= cut for t in stamps), sum(t < lo for t in stamps)
    return judge(call, Same(lambda: (n_train, 10 - n_test - n_train, n_test)))


def _dataframe_outcome(case) -> Outcome:
    """Column roles: a missing column or one column in two roles is refused naming it; otherwise
    the answer (or the error) of ``from_arrays`` on the same columns."""
    from recsys_ltr import Interactions

    df = pd.DataFrame({"u": ["a", "b", "b", "c"], "i": [1, 2, 1, 3], "w": [1.0, 2.0, 3.0, 1.0],
                       "t": pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"])})  # fmt: skip
    call = lambda: _interactions_answers(Interactions.from_dataframe(df, **case))  # noqa: E731
    named = [c for c in case.values() if c is not None]
    if "missing" in named:
        return judge(call, Reject(r"not in the DataFrame", "missing"))
    if len(set(named)) < len(named):
        return judge(call, Reject(r"both name the column .*: one column cannot play two roles", ""))
    w, t = case["weight_col"], case["timestamp_col"]
    ref = lambda: _interactions_answers(Interactions.from_arrays(  # noqa: E731
        df[case["user_col"]].to_numpy(), df[case["item_col"]].to_numpy(), None if w is None else df[w].to_numpy(),
        timestamps=None if t is None else df[t]))  # fmt: skip
    return judge(call, Same(ref))


def _interactions_answers(data):
    return data.matrix, list(data.user_ids), list(data.item_ids), data.timestamps


def _weighting_reference(entry, X, p):
    """The weights in extended precision (np.longdouble: no overflow below ~1e4932)."""
    x = X.data.astype(np.longdouble)
    if entry == "log_weight":
        return 1 + np.longdouble(p["alpha"]) * np.log1p(x / np.longdouble(p["epsilon"]))
    n_rows = np.longdouble(X.shape[0])
    idf = np.log(n_rows) - np.log1p(np.bincount(X.indices, minlength=X.shape[1]).astype(np.longdouble))
    if entry == "tfidf_weight":
        return np.sqrt(x) * idf[X.indices]
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    lengths = np.zeros(X.shape[0], np.longdouble)
    np.add.at(lengths, rows, x)
    K1, B = np.longdouble(p["K1"]), np.longdouble(p["B"])
    norm = (1 - B) + B * lengths / lengths.mean()
    return x * (K1 + 1) / (K1 * norm[rows] + x) * idf[X.indices]


def _weighting_outcome(entry, case) -> Outcome:
    """Hostile counts and parameters: a clear error naming the parameter, or finite weights equal to
    the extended-precision reference; a weight beyond float64's range must be refused."""
    from recsys_ltr import weighting

    X = sp.csr_matrix(
        np.array([[3.0, 0.0, 1.0, 0.0], [0.0, 5.0, 1.0, 0.0], [2.0, 0.0, 0.0, 7.0], [0.0, 1.0, 0.0, 0.0]])
    )
    X.data[0] = case["count"]
    p = {k: _number(case[k]) for k in ("K1", "B", "alpha", "epsilon")}
    kw = {"bm25_weight": {"K1": p["K1"], "B": p["B"]}, "log_weight": {"alpha": p["alpha"], "epsilon": p["epsilon"]},
          "tfidf_weight": {}}[entry]  # fmt: skip
    call = lambda: getattr(weighting, entry)(X, **kw).data  # noqa: E731
    bounds = {"K1": (0.0, False), "B": (0.0, False), "alpha": (0.0, False), "epsilon": (0.0, True)}
    bad = [
        n
        for n, v in kw.items()
        if not np.isfinite(v) or v < bounds[n][0] or (bounds[n][1] and v == 0) or (n == "B" and v > 1)
    ]
    if bad:
        return judge(call, Reject("|".join(bad), ""))
    with np.errstate(all="ignore"):
        ref = _weighting_reference(entry, X, p)
    overflow = Reject(r"overflows float64", "")
    if not np.all(np.abs(ref) <= np.finfo(np.float64).max):
        return judge(call, overflow)
    same = Same(lambda: ref.astype(np.float64), finite=True, tol=1e-9)
    return judge(call, same if entry == "tfidf_weight" else Either(overflow, same))


def _graph_filter_outcome(entry, case) -> Outcome:
    """Hostile filter settings: refused naming the parameter (invalid, or scores that could leave
    float64's range), or finite scores."""
    from recsys_ltr.models import BSPM, GFCF, ChebyCF

    names = ("beta",) if entry == "GFCF" else ("beta", "sharpen_time", "blur_time")
    p = {n: _number(case[n]) for n in names}
    if entry == "BSPM":
        make = lambda: BSPM(factors=2, sharpen_steps=case["sharpen_steps"], solver=case["solver"], num_threads=1, **p)  # noqa: E731
    elif entry == "ChebyCF":  # its alpha, beta and flatness from the case's three numbers
        cheby = dict(alpha=p["beta"], beta=p["sharpen_time"], flatness=p["blur_time"])
        make = lambda: ChebyCF(order=case["sharpen_steps"], factors=2, num_threads=1, **cheby)  # noqa: E731
    else:
        make = lambda: GFCF(factors=2, alpha=p["beta"], num_threads=1)  # noqa: E731
    call = lambda: make().fit(base_matrix()).score(np.arange(7))  # noqa: E731
    bad = [name for name, v in p.items() if not np.isfinite(v) or v < 0 or (name == "blur_time" and v == 0)]
    if bad:  # named in the model's order of checks: any of them will do
        named = {
            "GFCF": {"beta": "alpha"},
            "ChebyCF": {"beta": "alpha", "sharpen_time": "beta", "blur_time": "flatness"},
        }
        return judge(call, Reject("|".join(named.get(entry, {}).get(b, b) for b in bad), ""))
    return judge(call, Either(Reject(r"beyond float64's range: \w+=.* grows them", ""), Same(call, finite=True)))


def value_case_outcome(entry, case) -> Outcome:
    if entry == "time_cut":
        return _time_cut_outcome(case)
    if entry == "from_dataframe":
        return _dataframe_outcome(case)
    if entry in ("BSPM", "GFCF", "ChebyCF"):
        return _graph_filter_outcome(entry, case)
    return _weighting_outcome(entry, case)


# ============================================================================ families and batches
def families() -> dict:
    """family -> (strategy of one record's case given its entry, entries, outcome(entry, case, directory))."""
    sparse = cached("sparse_entries", sparse_entries)
    return {
        "sparse": (
            lambda e, crash=None: sparse_cases(shape=_shape(sparse[e]), crash=crash),
            sorted(sparse),
            lambda e, c, d: sparse_case_outcome(e, c),
        ),
        "ids": (
            lambda e, crash=None: id_cases(),
            sorted(cached("id_entries", id_entries)),
            lambda e, c, d: id_case_outcome(e, c),
        ),
        "params": (
            lambda e, crash=None: param_cases([e]),
            sorted(cached("param_targets", param_targets)),
            lambda e, c, d: param_case_outcome(c),
        ),
        "files": (
            lambda e, crash=None: file_cases(crash).map(lambda c: {**c, "model": e}),
            sorted(cached("file_models", file_models)),
            lambda e, c, d: file_case_outcome(c, d),
        ),
        "letor": (lambda e, crash=None: letor_cases(), ["read_svmlight_ltr"], lambda e, c, d: letor_case_outcome(c, d)),
        "knn_index": (lambda e, crash=None: knn_index_cases(), ["KnnIndex"], lambda e, c, d: knn_index_case_outcome(c)),
        "warp": (lambda e, crash=None: warp_cases(), ["WarpSampler.state"], lambda e, c, d: warp_case_outcome(c)),
        "cli": (
            lambda e, crash=None: cli_cases(),
            ["python -m recsys_ltr.eval"],
            lambda e, c, d: cli_case_outcome(c, d),
        ),
        "arrays": (
            lambda e, crash=None: array_cases(e),
            sorted(cached("array_targets", array_targets)),
            lambda e, c, d: array_case_outcome(c),
        ),
        "febr": (
            lambda e, crash=None: febr_cases(e),
            sorted(FEBR_KINDS),
            lambda e, c, d: febr_case_outcome(c),
        ),
        "executors": (
            lambda e, crash=None: executor_cases(e),
            list(EXECUTOR_ENTRIES),
            lambda e, c, d: executor_case_outcome(e, c),
        ),
        "cache": (lambda e, crash=None: cache_cases(), ["UnitCache.load"], lambda e, c, d: cache_case_outcome(c, d)),
        "values": (lambda e, crash=None: value_cases(e), list(VALUE_ENTRIES), lambda e, c, d: value_case_outcome(e, c)),
        "selftest": (lambda e, crash=None: st.just({}), ["abort", "hang"], lambda e, c, d: _selftest(e)),
    }


def _selftest(what):
    """A case that kills (``abort``) or hangs (``hang``) its worker: checks the batch runner."""
    import time

    if what == "abort":
        os.abort()
    time.sleep(3600)


#: families whose every case runs in a subprocess in the test suite (hand-built kernel inputs)
CRASH_PRONE_FAMILIES = ("knn_index", "warp")


def _shape(entry):
    return list(entry.shape) if entry.shape else None


def run_record(record, directory) -> Outcome:
    """Outcome of one ``{"family", "entry", "case"}`` record."""
    outcome_of = cached("families", families)[record["family"]][2]
    return outcome_of(record["entry"], record["case"], directory)


def worker(path) -> None:
    """Subprocess side of :func:`run_batch_subprocess`: run the records of the JSON-lines file
    ``path`` from line ``start``, announcing each before running it."""
    import tempfile

    start = int(os.environ.get("FUZZ_START", "0"))
    with open(path) as f:
        records = [json.loads(line) for line in f]
    with tempfile.TemporaryDirectory() as directory:
        for i in range(start, len(records)):
            print(f"START {i}", flush=True)
            outcome = run_record(records[i], directory)
            print("DONE " + json.dumps({"i": i, "category": outcome.category, "detail": outcome.detail}), flush=True)


def run_batch_subprocess(records, directory, timeout=600, env=None) -> list[Outcome]:
    """Run ``records`` in worker subprocesses: a case that kills its worker (a signal, an abort) is a
    ``crash``, one that outlives ``timeout`` seconds of its batch a ``timeout``; the worker restarts
    after it."""
    path = os.path.join(directory, f"records-{os.getpid()}-{id(records)}.jsonl")
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    outcomes: dict[int, Outcome] = {}
    start = 0
    code = f"import sys; sys.path.insert(0, {HERE!r}); import _fuzz; _fuzz.worker({path!r})"
    base_env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([ROOT, HERE])}
    while start < len(records):
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code], env={**base_env, "FUZZ_START": str(start)}, capture_output=True,
                text=True, timeout=timeout,
            )  # fmt: skip
            out, rc, err = proc.stdout, proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as exc:
            out, rc, err = (
                (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""),
                None,
                "",
            )
        last = start - 1
        for line in out.splitlines():
            if line.startswith("START "):
                last = int(line.split()[1])
            elif line.startswith("DONE "):
                done = json.loads(line[5:])
                outcomes[done["i"]] = Outcome(done["category"], done["detail"])
        if last >= start and last not in outcomes:  # the worker died or hung inside case `last`
            kind = "timeout" if rc is None else "crash"
            outcomes[last] = Outcome(kind, f"exit code {rc}: {err.strip().splitlines()[-1:] if err else ''}")
        elif rc not in (0, None) and last == start - 1:
            raise RuntimeError(f"the fuzz worker failed before its first case (exit {rc}):\n{err[-2000:]}")
        start = last + 1
    return [outcomes[i] for i in range(len(records))]


# ============================================================================ dense arrays (rankings, features, labels)
#: kind of an array argument -> {defect: regex of the error (None: a valid input)}
ARRAY_KINDS = {
    "labels": {"none": None, "list": None, "int": None, "huge": None, "nan": r"finite|NaN", "inf": r"finite|infinite",
               "complex": r"finite|real|complex|numeric", "str": r"finite|numeric|real", "negative": r"non-negative",
               "short": r"shape|mismatch", "2d": r"1-D|shape|mismatch", "ragged": r"1-D|nested|shape"},
    "scores": {"none": None, "list": None, "int": None, "inf": None, "nan": r"NaN", "complex": r"real|complex",
               "str": r"real|numeric", "short": r"shape|mismatch", "2d": r"1-D|shape|mismatch",
               "ragged": r"1-D|nested|shape"},
    "qid": {"none": None, "list": None, "negative": None, "huge": None, "float": r"integer", "nan": r"integer",
            "str": r"integer", "short": r"shape|mismatch", "2d": r"1-D|shape|mismatch", "ragged": r"1-D|nested|shape"},
    "features": {"none": None, "list": None, "int": None, "nan": NONFINITE, "inf": NONFINITE,
                 "complex": r"complex", "str": r"numeric", "short": r"shape|rows|mismatch|features|samples|\(",
                 "1d": r"2-D|2D array", "ragged": r"2-D|different lengths"},
    "block": {"none": None, "list": None, "int": None, "inf": None, "nan": r"NaN", "complex": r"real|complex",
              "str": r"real|numeric", "narrow": r"shape", "1d": r"shape"},
    "weights": {"none": None, "list": None, "int": None, "nan": r"NaN or infinite", "inf": r"NaN or infinite",
                "complex": r"complex", "str": r"numeric", "negative": r"negative", "short": r"length",
                "2d": r"1-D", "ragged": r"1-D numbers"},
    "keys": {"none": None, "list": None, "str": None, "short": r"length", "2d": r"1-D", "ragged": r"1-D hashable"},
    "classes": {"none": None, "list": None, "str_classes": None, "nan": r"NaN", "short": r"shape|labels|samples",
                "2d": r"1-D|shape", "ragged": r"1-D|shape|nested"},
}  # fmt: skip


def _apply_array_defect(a, defect, val):
    """The hostile form of the valid array ``a`` (values, shape or container)."""
    a = np.asarray(a)
    flat = a.astype(np.float64).ravel().copy()
    at = val % flat.size
    if defect in ("nan", "inf", "negative", "huge", "float"):
        flat[at] = {"nan": np.nan, "inf": -np.inf if val % 2 else np.inf, "negative": -1.0 - val % 3,
                    "huge": 2000.0 if a.dtype.kind == "f" else 2**62, "float": 0.5}[defect]  # fmt: skip
        out = flat.reshape(a.shape)
        return out if defect not in ("negative", "huge") or a.dtype.kind == "f" else out.astype(np.int64)
    edits = {
        "none": lambda: a,
        "list": lambda: a.tolist(),
        "int": lambda: np.round(a).astype(np.int64),
        "complex": lambda: a.astype(np.complex128) + 1j,
        "str": lambda: a.astype(str),
        "short": lambda: a[:-1],
        "narrow": lambda: a[:, :-1],
        "2d": lambda: a[:, None],
        "1d": lambda: a.ravel(),
        "ragged": lambda: [a.tolist()[:-1], a.tolist()] if a.ndim == 1 else [*a.tolist()[:-1], a.tolist()[-1][:-1]],
        "str_classes": lambda: np.array([f"c{x}" for x in a]),
    }
    return edits[defect]()


def _ndcg_brute(y, scores, qid, k):
    """NDCG@k per query (ascending qid), loop by loop: gains ``2**l - 1`` scaled by ``2**-max`` (the
    exponent taken in Python ints, so that a label of 2**62 stays finite)."""
    out = []
    for q in sorted(set(np.asarray(qid).tolist())):
        rows = [i for i in range(len(qid)) if qid[i] == q]
        labels = [int(y[i]) for i in rows]
        order = sorted(range(len(rows)), key=lambda j: (-scores[rows[j]], j))
        top = max(labels)
        if top <= 0:
            out.append(np.nan)
            continue
        gain = [2.0 ** (lab - top) - 2.0 ** (-top) for lab in labels]
        cut = min(k, len(rows))
        dcg = sum(gain[order[i]] / np.log2(i + 2.0) for i in range(cut))
        idcg = sum(g / np.log2(i + 2.0) for i, g in enumerate(sorted(gain, reverse=True)[:cut]))
        out.append(dcg / idcg)
    return np.array(out)


def _ap_brute(y, scores, qid):
    out = []
    for q in sorted(set(np.asarray(qid).tolist())):
        rows = [i for i in range(len(qid)) if qid[i] == q]
        order = sorted(range(len(rows)), key=lambda j: (-scores[rows[j]], j))
        hits = [i for i, j in enumerate(order) if y[rows[j]] > 0]
        out.append(np.mean([(n + 1) / (i + 1) for n, i in enumerate(hits)]) if hits else np.nan)
    return np.array(out)


def _query_rankers() -> dict:
    """Small, seeded configurations of the listwise query-document learners."""
    from recsys_ltr.ltr import RPCMTL, LambdaMART, ListMLE, ListNet, RankBlend

    few = dict(iterations=2, random_state=0)
    out = {"ListMLE": lambda: ListMLE(**few), "ListNet": lambda: ListNet(**few),
           "RPCMTL": lambda: RPCMTL(n_clusters=2, max_iter=5, kappa1=1, kappa2=2, **few),
           "RankBlend": lambda: RankBlend([ListMLE(**few), ListNet(**few)])}  # fmt: skip
    try:
        import lightgbm  # noqa: F401  (optional dependency)
    except ImportError:
        return out
    return {**out, "LambdaMART": lambda: LambdaMART(n_estimators=3, min_child_samples=2, random_state=0)}


def _interactions(users, items, weights):
    from recsys_ltr import Interactions

    inter = Interactions.from_arrays(users, items, weights)
    return inter.matrix, inter.user_ids.tolist(), inter.item_ids.tolist()


def _rows(block, users):
    """Rows ``users`` of a score block given as an array or a nested list (a score function's answer)."""
    return [block[u] for u in users] if isinstance(block, list) else block[users]


def array_targets() -> dict:
    """name -> ({argument: (valid value, kind)}, call(**args), brute(**args) or None)."""
    from recsys_ltr.ltr import LGMML
    from recsys_ltr.metric_learning import FRML, GMML
    from recsys_ltr.metrics import evaluate, rank_test_items, retrieval_metrics
    from recsys_ltr.query_metrics import average_precision, ndcg_at_k

    Xq, yq, qid = _ltr_data()
    y_int = np.array(yq, dtype=np.int64)
    s = -np.round(Xq[:, 0], 2)
    Xl, yl = _labels_data()
    X7, T7 = base_matrix(), _test_matrix()
    block = _ranking_scores(np.arange(7)) + np.arange(7)[:, None] / 10
    rel = sp.csr_matrix(np.eye(4)[:3])
    return {
        "ndcg_at_k": ({"y": (y_int, "labels"), "scores": (s, "scores"), "qid": (qid, "qid")},
                      lambda y, scores, qid: ndcg_at_k(y, scores, qid, k=3),
                      lambda y, scores, qid: _ndcg_brute(y, scores, qid, 3)),
        "average_precision": ({"y": (y_int, "labels"), "scores": (s, "scores"), "qid": (qid, "qid")},
                              average_precision, _ap_brute),
        "LGMML": ({"X": (Xq, "features"), "y": (y_int, "labels"), "qid": (qid, "qid")},
                  lambda X, y, qid: LGMML(n_metrics=2, queries_per_metric=2, iterations=1, random_state=0)
                  .fit(X, y, qid).predict(X, qid), None),
        **{name: ({"X": (Xq, "features"), "y": (y_int, "labels"), "qid": (qid, "qid")},
                  lambda X, y, qid, make=make: make().fit(X, y, qid).predict(X, qid), None)
           for name, make in _query_rankers().items()},
        "GMML": ({"X": (Xl, "features"), "y": (yl, "classes")},
                 lambda X, y: GMML(random_state=0).fit(X, y).components_, None),
        "FRML": ({"X": (Xl, "features"), "y": (yl, "classes")},
                 lambda X, y: FRML(max_iter=3, random_state=0, num_threads=1).fit(X, y=y).components_, None),
        "retrieval_metrics": ({"Zq": (np.eye(4)[:3] + 0.5, "features"), "Zdb": (np.eye(4) * 2, "features")},
                              lambda Zq, Zdb: retrieval_metrics(Zq, Zdb, rel, ks=(1,)), None),
        "Interactions.from_arrays": ({"users": (np.array([1, 1, 2, 3, 3]), "keys"),
                                      "weights": (np.array([1.0, 2.0, 3.0, 1.0, 2.0]), "weights")},
                                     lambda users, weights: _interactions(users, [5, 6, 5, 6, 7], weights), None),
        "rank_test_items": ({"scores": (block, "block")},
                            lambda scores: rank_test_items(scores, X7, T7), None),
        "evaluate(score block)": ({"block": (block, "block")},
                                  lambda block: dict(evaluate(lambda u: _rows(block, u), X7, T7, k=3)), None),
    }  # fmt: skip


@st.composite
def array_cases(draw, target=None):
    target = target or draw(st.sampled_from(sorted(cached("array_targets", array_targets))))
    args = cached("array_targets", array_targets)[target][0]
    arg = draw(st.sampled_from(sorted(args)))
    defect = draw(st.sampled_from(sorted(ARRAY_KINDS[args[arg][1]])))
    return {"target": target, "arg": arg, "defect": defect, "val": draw(st.integers(0, 10**6))}


def array_case_outcome(case) -> Outcome:
    args, call, brute = cached("array_targets", array_targets)[case["target"]]
    valid = {name: value for name, (value, _) in args.items()}
    value, kind = args[case["arg"]]
    hostile = {**valid, case["arg"]: _apply_array_defect(value, case["defect"], case["val"])}
    pattern = ARRAY_KINDS[kind][case["defect"]]
    reason = ""
    if kind == "block" and case["defect"] == "nan" and not _ranked(*divmod(case["val"] % value.size, 6)):
        pattern, reason = (
            None,
            "a NaN score that is never ranked (a training item, a user without test items) is ignored",
        )
    if kind == "classes" and case["defect"] == "2d":  # refused (FRML), or raveled (GMML: scikit-learn's convention)
        reason = "a column-vector y is raveled (scikit-learn's convention, with a DataConversionWarning)"
        same = Same(lambda: call(**{**valid, case["arg"]: value}), reason)
        return judge(lambda: call(**hostile), Either(Reject(pattern, ""), same))
    if pattern is not None:
        return judge(lambda: call(**hostile), Reject(pattern, ""))
    if kind == "qid" and case["defect"] in ("negative", "huge"):  # a new id inside a query splits it in two runs
        same = Same(
            lambda: (brute or call)(**{**valid, case["arg"]: hostile[case["arg"]]}), tol=1e-12 if brute else 0.0
        )
        return judge(lambda: call(**hostile), Either(Reject(r"qid is not grouped", "qid"), same))
    canonical_args = {**valid, case["arg"]: _canonical_array(hostile[case["arg"]], kind)}
    if brute is not None:  # exact rationals against the float implementation
        return judge(lambda: call(**hostile), Same(lambda: brute(**canonical_args), reason, tol=1e-12))
    return judge(lambda: call(**hostile), Same(lambda: call(**canonical_args), reason))


def _ranked(user, item) -> bool:
    """Whether the score of (user, item) is ranked: a candidate (not a training item) of a user with test items."""
    return _test_matrix()[user].nnz > 0 and base_matrix()[user, item] == 0


def _canonical_array(a, kind):
    a = np.asarray(a)
    if kind == "classes":
        return a.ravel()
    if kind == "qid" or a.dtype.kind in "iuU":
        return a
    return a.astype(np.float64)
