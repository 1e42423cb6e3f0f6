"""Threads: the one owner of how many threads numba, BLAS and an executor's task run on.

Every ``num_threads`` parameter of the package means the same: ``0`` all the cores numba sees, ``n``
at most ``n``; inside a worker task of :mod:`recsys_ltr.executors` every count is capped at the
task's share of the CPUs (:func:`task_threads`), whatever a shipped estimator was configured with.
:func:`limit_threads` runs a block on that many numba threads and as many BLAS threads (or one,
where numba's threads each call BLAS); nothing else in the package sets a thread count.
"""

from __future__ import annotations

import contextlib
import functools

import numba
from threadpoolctl import ThreadpoolController

from ._validation import check_positive_int

__all__ = ["check_num_threads", "cores", "limit_threads", "numba_threads", "task_threads", "thread_pools"]

#: Threads a worker task may use (``None``: no limit), set by :func:`task_threads`.
_TASK_THREADS = None


def check_num_threads(num_threads) -> int:
    """Validate a ``num_threads`` parameter and resolve it: 0 means all cores numba sees, and inside
    a worker task every count is capped at the task's share (:func:`task_threads`)."""
    n = check_positive_int(num_threads, "num_threads", minimum=0)
    limit = cores() if _TASK_THREADS is None else min(_TASK_THREADS, cores())
    return limit if n == 0 else min(n, limit)


@functools.cache
def thread_pools() -> ThreadpoolController:
    """The BLAS / OpenMP pools of this process, found once (a scan costs about 1 ms)."""
    return ThreadpoolController()


@contextlib.contextmanager
def numba_threads(num_threads):
    """Run the enclosed numba kernels on ``num_threads`` threads (0 = all), then restore."""
    previous = numba.get_num_threads()
    numba.set_num_threads(check_num_threads(num_threads))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


@contextlib.contextmanager
def limit_threads(num_threads, blas=None):
    """Run the enclosed block on ``num_threads`` numba threads and as many BLAS threads, or on
    ``blas`` BLAS threads when given (``blas=1`` where every numba thread calls BLAS itself, or
    where a library such as implicit runs threads of its own)."""
    n = check_num_threads(num_threads)
    with numba_threads(n), thread_pools().limit(limits=n if blas is None else blas, user_api="blas"):
        yield


@contextlib.contextmanager
def task_threads(threads: int):
    """Run the enclosed block as a worker task granted ``threads`` CPUs: every ``num_threads`` is
    capped at ``threads``, and numba and every native pool (BLAS, OpenMP: LightGBM's, implicit's)
    run on that many, then restore."""
    global _TASK_THREADS
    previous = _TASK_THREADS
    _TASK_THREADS = check_positive_int(threads, "threads")
    try:
        with numba_threads(0), thread_pools().limit(limits=_TASK_THREADS):
            yield
    finally:
        _TASK_THREADS = previous


def cores() -> int:
    """The cores numba sees (``NUMBA_NUM_THREADS``): what ``num_threads=0`` means outside a task."""
    return numba.config.NUMBA_NUM_THREADS
