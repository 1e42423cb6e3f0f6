"""When the row kernels run on numba's threads, and how they share the rows out.

A row kernel deals its rows to ``n_chunks`` strided chunks (``for c in prange(n_chunks)``), each with
its own scratch.  :class:`RowKernel` compiles such a kernel twice from the same source: with
``parallel=True`` for large calls, and serially (``prange`` runs as ``range``) for calls whose
estimated serial time -- over all the calls of one operation, such as an evaluation's user blocks --
is under :data:`SERIAL_SECONDS`.  There threads save at most that much, while a parallel kernel costs
about a second more to compile on first use (numba's parfor passes): the README's tour on
movielens-100k and a single user's ``recommend`` compile no parallel kernel at all.  Both versions
return the same results bit for bit (each row is computed alone).
"""

from __future__ import annotations

import types

import numba
import numpy as np
from numba import njit

__all__ = ["SERIAL_SECONDS", "RowKernel", "product_work", "row_kernel", "strided_chunks"]

#: Estimated serial time under which a row kernel runs serially.
SERIAL_SECONDS = 0.03


def strided_chunks(n_rows: int) -> int:
    """Chunks a row kernel deals ``n_rows`` rows to: several per numba thread, so that a thread slowed
    by another process on its core holds up little of the loop."""
    return min(n_rows, 8 * numba.get_num_threads())


def product_work(r_indices, b_indptr, n_rows: int, row_units: int) -> int:
    """Work units of a kernel over the ``n_rows`` rows of ``R @ B`` (CSR parts): the multiply-adds of
    scattering the rows (each column of ``R`` times the length of that row of ``B``), plus
    ``row_units`` per row for ranking it."""
    n_b = b_indptr.shape[0] - 1
    return int(np.bincount(r_indices, minlength=n_b) @ np.diff(b_indptr).astype(np.int64)) + n_rows * row_units


class RowKernel:
    """A chunked row kernel compiled in parallel and serially; calling it runs the version that
    pays for the call's ``work``, in units that cost ``seconds_per_unit`` serially (the largest that
    ``benchmarks/bench_throughput.py --only serial`` measured on movielens-100k, lastfm-2k and
    movielens-1m-implicit).

    The serial version is compiled from a renamed copy of the function: numba's cache tells
    versions apart by the function's name, not by its compile flags.
    """

    def __init__(self, fn, seconds_per_unit: float):
        self.parallel = njit(parallel=True, cache=True)(fn)
        serial = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        serial.__qualname__ = f"{fn.__qualname__}_serial"  # the docstring comes with the code object
        self.serial = njit(cache=True)(serial)
        self.seconds_per_unit = seconds_per_unit
        self.__doc__ = fn.__doc__

    def runs_serially(self, work: int, calls: int = 1) -> bool:
        """Whether a call of ``work`` units, one of ``calls`` alike in its operation, runs serially."""
        return work * calls * self.seconds_per_unit < SERIAL_SECONDS

    def __call__(self, *args, work: int, calls: int = 1):
        return (self.serial if self.runs_serially(work, calls) else self.parallel)(*args)


def row_kernel(seconds_per_unit: float):
    """Decorator making a chunked row kernel a :class:`RowKernel`."""
    return lambda fn: RowKernel(fn, seconds_per_unit)
