"""In-place inverse of a dense symmetric positive definite matrix in BLAS-3 panel steps.

``potrf`` + ``potri``, one LAPACK call each, cannot report progress.  Here the three stages of the
inverse -- Cholesky ``A = U^T U``, triangular inverse ``W = U^{-1}``, product ``A^{-1} = W W^T`` --
are the blocked algorithms of LAPACK's ``dpotrf``, ``dtrtri`` and ``dlauum``, run panel by panel
on the matrix in place through scipy's BLAS/LAPACK function pointers.  Every panel step is one
progress update; nearly all the work is in ``syrk``/``gemm``/``trsm``/``trmm`` calls.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
from numba.extending import get_cython_function_address

__all__ = ["inverse_flops", "spd_inverse_inplace", "symmetrise_upper"]

#: Panel width: large enough for BLAS-3 rates, small enough for frequent progress steps.
BLOCK = 256

_PREFIX = {np.dtype(np.float64): "d", np.dtype(np.float32): "s"}
_FUNCTIONS: dict[str, Callable] = {}


def _routine(name: str) -> Callable:
    """scipy's BLAS/LAPACK routine ``name`` (Fortran calling convention: every argument a pointer)."""
    if name not in _FUNCTIONS:
        module = "scipy.linalg.cython_lapack" if name[1:] in ("potrf", "trtri", "lauum") else "scipy.linalg.cython_blas"
        address = get_cython_function_address(module, name)
        _FUNCTIONS[name] = ctypes.CFUNCTYPE(None)(address)  # arguments are passed as ctypes pointers
    return _FUNCTIONS[name]


class _Matrix:
    """Fortran-ordered square matrix handed to BLAS by the address of element ``(i, j)``."""

    def __init__(self, A: np.ndarray):
        self.A = A  # keeps the memory alive during the calls
        self.ld = ctypes.byref(ctypes.c_int(A.shape[0]))
        self._base, self._n, self._size = A.ctypes.data, A.shape[0], A.itemsize
        real = ctypes.c_double if A.dtype == np.float64 else ctypes.c_float
        self.one, self.minus_one = ctypes.byref(real(1.0)), ctypes.byref(real(-1.0))
        self.prefix = _PREFIX[A.dtype]

    def at(self, i: int, j: int):
        return ctypes.c_void_p(self._base + (i + j * self._n) * self._size)

    def call(self, name: str, *args):
        """Call ``<prefix><name>``; ``str`` arguments become ``char *``, ``int`` ones ``int *``."""
        converted = [
            ctypes.c_char_p(a.encode())
            if isinstance(a, str)
            else ctypes.byref(ctypes.c_int(a))
            if isinstance(a, int)
            else a
            for a in args
        ]
        _routine(self.prefix + name)(*converted)

    def lapack(self, name: str, *args):
        """A LAPACK call whose last argument is ``info``; raises on a non-positive-definite block."""
        info = ctypes.c_int(0)
        self.call(name, *args, ctypes.byref(info))
        return info.value


def inverse_flops(n: int, block: int = BLOCK) -> list[float]:
    """Floating-point operations of every panel step of :func:`spd_inverse_inplace` (``~ n^3`` in all)."""
    steps = []
    for k in range(0, n, block):  # Cholesky: potrf, trsm, syrk on the trailing matrix
        b, m = min(block, n - k), n - k - min(block, n - k)
        steps.append(b**3 / 3 + b * b * m + b * m * m)
    for j in range(0, n, block):  # triangular inverse: trmm, trsm, trtri
        b = min(block, n - j)
        steps.append(j * j * b + j * b * b + b**3 / 3)
    for i in range(0, n, block):  # W W^T: trmm, lauum, gemm, syrk
        b, m = min(block, n - i), n - i - min(block, n - i)
        steps.append(i * i * b + b**3 / 3 + 2 * i * b * m + b * b * m)
    return steps


def spd_inverse_inplace(A: np.ndarray, block: int = BLOCK, step: Callable[[float], None] | None = None) -> None:
    """Overwrite the upper triangle of the symmetric positive definite ``A`` with ``A^{-1}``'s.

    Parameters
    ----------
    A : ndarray of shape (n, n), float64 or float32, Fortran-ordered and writeable
        Only its upper triangle is read; on return the upper triangle holds the inverse and the
        strict lower triangle is left untouched.
    block : int
        Panel width.
    step : callable, optional
        Called after every panel step with the step's operation count (the entries of
        :func:`inverse_flops`), e.g. a progress bar's ``update``.

    Raises
    ------
    numpy.linalg.LinAlgError
        When ``A`` is not (numerically) positive definite.
    """
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.dtype not in _PREFIX:
        raise ValueError(f"A must be a square float64 or float32 matrix, got {A.dtype} of shape {A.shape}")
    if not (A.flags.f_contiguous and A.flags.writeable):
        raise ValueError("A must be a writeable Fortran-ordered array (the inverse is computed in place)")
    M, n = _Matrix(A), A.shape[0]
    flops = iter(inverse_flops(n, block))
    report = step or (lambda _: None)
    for stage in (_cholesky, _triangular_inverse, _product_with_transpose):
        for _ in stage(M, n, block):
            report(next(flops))


def _cholesky(M: _Matrix, n: int, block: int):
    """``A = U^T U`` in the upper triangle (right-looking blocked ``potrf``)."""
    for k in range(0, n, block):
        b = min(block, n - k)
        info = M.lapack("potrf", "U", b, M.at(k, k), M.ld)
        if info:
            raise np.linalg.LinAlgError(f"the matrix is not positive definite (leading minor {k + info} of {n})")
        m = n - k - b
        if m:
            M.call("trsm", "L", "U", "T", "N", b, m, M.one, M.at(k, k), M.ld, M.at(k, k + b), M.ld)
            M.call("syrk", "U", "T", m, b, M.minus_one, M.at(k, k + b), M.ld, M.one, M.at(k + b, k + b), M.ld)
        yield


def _triangular_inverse(M: _Matrix, n: int, block: int):
    """``U <- U^{-1}`` (blocked ``trtri``: columns left to right, the leading block already inverted)."""
    for j in range(0, n, block):
        b = min(block, n - j)
        if j:
            M.call("trmm", "L", "U", "N", "N", j, b, M.one, M.at(0, 0), M.ld, M.at(0, j), M.ld)
            M.call("trsm", "R", "U", "N", "N", j, b, M.minus_one, M.at(j, j), M.ld, M.at(0, j), M.ld)
        M.lapack("trtri", "U", "N", b, M.at(j, j), M.ld)  # non-singular: its diagonal came from potrf
        yield


def _product_with_transpose(M: _Matrix, n: int, block: int):
    """``W <- W W^T`` in the upper triangle (blocked ``lauum``: block rows top to bottom)."""
    for i in range(0, n, block):
        b = min(block, n - i)
        m = n - i - b
        if i:
            M.call("trmm", "R", "U", "T", "N", i, b, M.one, M.at(i, i), M.ld, M.at(0, i), M.ld)
        M.lapack("lauum", "U", b, M.at(i, i), M.ld)
        if m:
            if i:
                M.call(
                    "gemm",
                    "N",
                    "T",
                    i,
                    b,
                    m,
                    M.one,
                    M.at(0, i + b),
                    M.ld,
                    M.at(i, i + b),
                    M.ld,
                    M.one,
                    M.at(0, i),
                    M.ld,
                )
            M.call("syrk", "U", "N", b, m, M.one, M.at(i, i + b), M.ld, M.one, M.at(i, i), M.ld)
        yield


#: Rows of the blocks that :func:`symmetrise_upper` copies at once.
SYMMETRISE_BLOCK = 1024


def symmetrise_upper(P):
    """Copy the upper triangle of the square ``P`` onto its lower one, in place, block by block."""
    n = P.shape[0]
    for lo in range(0, n, SYMMETRISE_BLOCK):
        hi = min(n, lo + SYMMETRISE_BLOCK)
        P[lo:hi, :lo] = P[:lo, lo:hi].T
        diag = P[lo:hi, lo:hi]
        diag[...] = np.triu(diag) + np.triu(diag, 1).T
