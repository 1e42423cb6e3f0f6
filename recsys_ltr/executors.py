"""Where independent tasks run: in this process, in local worker processes, or on a Ray cluster.

The package's large jobs split into independent tasks that share one big read-only input:
scoring, evaluating or extracting FEBR's features of blocks of users against one fitted model
(:func:`score_users`, :func:`recommend_users`, ``evaluate(executor=)``,
:func:`recsys_ltr.febr.febr_features`),
building the neighbours of blocks
of items against one indexed matrix, running the (method, fold) units of the benchmark grid on one
set of splits.  An :class:`Executor` runs such a job: ``executor.map(fn, tasks, shared)`` calls
``fn(shared, task)`` for every task and yields ``(position, result)`` pairs *as tasks finish*, so
results are consumed one block at a time and never gathered into one huge array.

=============  ===============================================================================
``serial``     :class:`SerialExecutor` -- in this process, in task order (the default, the
               package's behaviour without an executor).
``processes``  :class:`ProcessExecutor` -- spawned local worker processes; the shared input is
               sent once to each worker.  A worker that dies costs a retry of the unfinished
               tasks, not the result.
``ray``        :class:`RayExecutor` -- tasks on Ray (the optional extra ``recsys-ltr[ray]``); the
               shared input is put into the object store once (``ray.put``: numpy arrays, hence
               each CSR matrix as its three arrays, are stored out of band and read zero-copy by
               every worker on a node) and each task receives a reference.  A worker that dies
               mid-task costs a retry (``max_retries``); a task that raises re-raises its
               original exception, message unchanged, in the caller.
=============  ===============================================================================

Every function taking ``executor=`` accepts an instance or one of the names :data:`EXECUTORS`
(:func:`get_executor`); ``"ray"`` joins the running Ray session, else the cluster named by
``$RAY_ADDRESS``, else starts a local one with the machine's cores (Ray's own rule).  To join a
given cluster pass ``RayExecutor(address="auto")`` or ``RayExecutor(address="ray://head:10001")``.
Importing this module (or ``recsys_ltr``) never imports ray.

Threads.  A task of a worker executor runs on ``threads`` numba threads (Ray: one per CPU the
task reserves, ``cpus_per_task``; processes: ``cores // n_workers``) with BLAS limited to as many
(threadpoolctl), and every ``num_threads`` inside the task -- an estimator's, ``evaluate``'s --
is capped at that share (:func:`recsys_ltr._threads.task_threads`), so the busy threads never
exceed the CPUs granted, whatever a shipped model was configured with.  numba's threading
layer is left to numba's default choice (TBB, else OpenMP, else workqueue): every worker runs one
task at a time from one thread, so even the workqueue layer (not thread-safe) is safe, and
workers are started fresh (spawned by multiprocessing or by Ray's raylet, never forked from a
process whose thread pool is running), so the OpenMP layer's fork hazard cannot arise.  Every
kernel is compiled with ``cache=True``: a worker loads the machine code cached by the first
process that compiled it instead of recompiling (the cache lives next to the sources, else in
numba's user-wide cache directory, or in ``$NUMBA_CACHE_DIR``).  Arrays read zero-copy from Ray's
object store are read-only, which numba types apart from writable arrays: a kernel fed such an
array is compiled once more, by the first worker on a machine that needs it, and every later
worker loads that from the cache.

Each executor counts what it shipped (:class:`TaskStats`): the serialized size of the shared
input (pickle protocol 5, buffers out of band, as Ray stores it) times the number of places
holding a copy (Ray nodes; worker processes), the task payloads and results, and the peak
resident memory of every worker process.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import pickle
import resource
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._memory import TASK_BYTES, rows_per_block
from ._progress import progress, progress_enabled
from ._threads import cores, task_threads
from ._validation import check_ids, check_item_selection, check_positive_int

__all__ = [
    "EXECUTORS",
    "Executor",
    "ProcessExecutor",
    "RayExecutor",
    "SerialExecutor",
    "TaskStats",
    "check_executor",
    "check_model_users",
    "executor_scope",
    "get_executor",
    "map_user_blocks",
    "method_block",
    "recommend_all",
    "recommend_users",
    "score_users",
    "user_stream",
]

#: Names accepted wherever an ``executor=`` argument is.
EXECUTORS = ("serial", "processes", "ray")


@dataclass
class TaskStats:
    """What an executor ran and shipped (accumulated over its :meth:`Executor.map` calls).

    Attributes
    ----------
    tasks : int
        Tasks finished.
    retries : int
        Restarts after a worker died (processes: resubmissions of the unfinished tasks; Ray
        retries tasks itself and does not report them here).
    shared_bytes : int
        Serialized size of the shared inputs (once per ``map``).
    shipped_bytes : int
        Bytes sent to workers: each shared input times the places holding a copy (Ray nodes that
        ran a task, worker processes), plus every task payload.
    result_bytes : int
        Serialized size of the results sent back.
    peak_rss : dict of int -> int
        Peak resident memory (bytes) of every worker process that ran a task, by process id
        (memory-mapped object-store pages a worker read count towards it).
    cpu_seconds : float
        CPU time the tasks used, all their threads included (``time.process_time`` around each
        task): unlike wall time, it does not depend on what else the machine runs.
    """

    tasks: int = 0
    retries: int = 0
    shared_bytes: int = 0
    shipped_bytes: int = 0
    result_bytes: int = 0
    peak_rss: dict[int, int] = field(default_factory=dict)
    cpu_seconds: float = 0.0


def serialized_bytes(obj, dumps=pickle.dumps) -> int:
    """Size of ``obj`` pickled with protocol 5 and its buffers (numpy arrays) out of band."""
    buffers = []
    head = dumps(obj, protocol=5, buffer_callback=buffers.append)
    return len(head) + sum(b.raw().nbytes for b in buffers)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _run_task(fn, shared, task, threads):
    """Run one task in a worker on ``threads`` numba and BLAS threads; returns ``(result, pid,
    peak resident bytes, CPU seconds)``."""
    start = time.process_time()
    with task_threads(threads):
        result = fn(shared, task)
    return result, os.getpid(), _peak_rss(), time.process_time() - start


class Executor:
    """Runs ``fn(shared, task)`` for a list of tasks (see the module docstring).

    Subclasses implement ``_map``; ``fn`` must be picklable by reference (a module-level
    function or a ``functools.partial`` of one) for the worker executors.
    """

    name = "executor"

    def __init__(self):
        self.stats = TaskStats()

    @property
    def threads(self) -> int:
        """numba threads each task runs on."""
        raise NotImplementedError

    @property
    def parallelism(self) -> int:
        """How many tasks run at once."""
        raise NotImplementedError

    def map(self, fn: Callable[[Any, Any], Any], tasks: Iterable, shared=None) -> Iterator[tuple[int, Any]]:
        """Yield ``(position, fn(shared, task))`` for every task, in the order tasks finish.

        ``shared`` is sent to the workers once per call; each task travels with its own call.
        ``tasks`` is consumed lazily, a bounded number ahead of the results consumed, so it may
        generate the tasks' inputs (e.g. the rows of a block) on demand.  An exception raised by
        ``fn`` propagates from the generator (same type and message); closing the generator early
        cancels the tasks not yet finished.
        """
        return self._map(fn, iter(tasks), shared)

    def _map(self, fn, tasks, shared):
        raise NotImplementedError

    def close(self) -> None:
        """Release the executor's resources (a no-op unless a subclass holds some)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"{type(self).__name__}()"


class SerialExecutor(Executor):
    """Every task in this process, in order (the package's default).

    Examples
    --------
    >>> import operator
    >>> from recsys_ltr.executors import SerialExecutor
    >>> executor = SerialExecutor()
    >>> sorted(executor.map(operator.add, [1, 2, 3], shared=10))  # (position, shared + task)
    [(0, 11), (1, 12), (2, 13)]
    >>> executor.stats.tasks
    3
    """

    name = "serial"

    @property
    def threads(self) -> int:
        return cores()

    @property
    def parallelism(self) -> int:
        return 1

    def _map(self, fn, tasks, shared):
        for position, task in enumerate(tasks):
            start = time.process_time()
            result = fn(shared, task)
            self.stats.cpu_seconds += time.process_time() - start
            self.stats.tasks += 1
            yield position, result


class _WorkerExecutor(Executor):
    """Shared bookkeeping of the executors whose tasks run in other processes."""

    def __init__(self, max_retries, max_pending):
        super().__init__()
        self.max_retries = check_positive_int(max_retries, "max_retries", minimum=0)
        self.max_pending = None if max_pending is None else check_positive_int(max_pending, "max_pending")

    def _pending_limit(self) -> int:
        """Tasks submitted ahead of the results consumed (bounds the memory held by results)."""
        return self.max_pending or 2 * self.parallelism

    def _record(self, task, output, dumps=pickle.dumps) -> tuple[Any, int]:
        """Account for one finished task; returns its result and worker pid."""
        result, pid, rss, cpu = output
        self.stats.tasks += 1
        self.stats.cpu_seconds += cpu
        self.stats.shipped_bytes += serialized_bytes(task, dumps)
        self.stats.result_bytes += serialized_bytes(result, dumps)
        self.stats.peak_rss[pid] = max(rss, self.stats.peak_rss.get(pid, 0))
        return result, pid


# ------------------------------------------------------------------------------ local processes
_SHARED = None  # the shared input of the current pool, in a worker process


def _init_process(shared):
    global _SHARED
    _SHARED = shared


def _process_task(fn, task, threads):
    return _run_task(fn, _SHARED, task, threads)


class ProcessExecutor(_WorkerExecutor):
    """Tasks in ``n_workers`` spawned local processes (one pool per :meth:`~Executor.map`).

    Parameters
    ----------
    n_workers : int, optional
        Worker processes (default: the cores numba sees).
    threads : int, optional
        numba/BLAS threads per task (default ``max(1, cores // n_workers)``).
    max_retries : int
        How many times the pool is restarted after a worker process died (the unfinished tasks
        are resubmitted); one more death raises ``RuntimeError``.
    max_pending : int, optional
        Tasks in flight ahead of the consumer (default ``2 * n_workers``).

    Examples
    --------
    >>> import operator
    >>> from recsys_ltr.executors import ProcessExecutor
    >>> with ProcessExecutor(n_workers=2, threads=1) as executor:  # doctest: +SKIP
    ...     print(sorted(executor.map(operator.add, [1, 2, 3], shared=10)))
    [(0, 11), (1, 12), (2, 13)]
    """

    name = "processes"

    def __init__(self, n_workers=None, *, threads=None, max_retries=3, max_pending=None):
        super().__init__(max_retries, max_pending)
        n_cores = cores()
        self.n_workers = n_cores if n_workers is None else check_positive_int(n_workers, "n_workers")
        self._threads = max(1, n_cores // self.n_workers) if threads is None else check_positive_int(threads, "threads")

    @property
    def threads(self) -> int:
        return self._threads

    @property
    def parallelism(self) -> int:
        return self.n_workers

    def __repr__(self):
        return f"ProcessExecutor(n_workers={self.n_workers}, threads={self.threads})"

    def _map(self, fn, tasks, shared):
        shared_bytes = serialized_bytes(shared)
        self.stats.shared_bytes += shared_bytes
        queue = enumerate(tasks)
        unfinished = {}  # position -> task, submitted to a pool and not finished
        failures = 0
        while True:
            workers = set()
            retry = list(unfinished.items())
            unfinished.clear()
            try:
                yield from self._run_pool(fn, itertools.chain(retry, queue), shared, unfinished, workers)
                return
            except BrokenProcessPool as exc:
                failures += 1
                if failures > self.max_retries:
                    raise RuntimeError(
                        f"a worker process died {failures} times (max_retries={self.max_retries}); "
                        f"{len(unfinished)} submitted task(s) unfinished"
                    ) from exc
                self.stats.retries += 1
            finally:
                self.stats.shipped_bytes += shared_bytes * len(workers)

    def _run_pool(self, fn, queue, shared, unfinished, workers):
        """Run the ``(position, task)`` pairs of ``queue`` in one pool; ``unfinished`` holds those
        [(0, 3), (1, 6)]
        submitted and not finished, ``workers`` collects the pids that finished one."""
        context = multiprocessing.get_context("spawn")  # forking after numba started threads is unsafe
        pool = ProcessPoolExecutor(self.n_workers, mp_context=context, initializer=_init_process, initargs=(shared,))
        futures, limit = {}, self._pending_limit()
        try:
            while True:
                for position, task in queue:
                    unfinished[position] = task  # first: a broken pool makes submit raise
                    futures[pool.submit(_process_task, fn, task, self.threads)] = position
                    if len(futures) >= limit:
                        break
                if not futures:
                    return
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in done:
                    output = future.result()  # raises BrokenProcessPool if a worker died
                    position = futures.pop(future)
                    result, pid = self._record(unfinished.pop(position), output)
                    workers.add(pid)
                    yield position, result
        finally:  # on an error, an interrupt or a closed generator, drop the queued tasks
            pool.shutdown(wait=True, cancel_futures=True)


# ------------------------------------------------------------------------------ Ray
def _import_ray():
    try:
        import ray  # the optional extra recsys-ltr[ray]
    except ImportError:
        raise ImportError("the 'ray' executor needs Ray: pip install 'recsys-ltr[ray]' (or pip install ray)") from None
    return ray


def _ray_run(fn, shared, task, threads):
    """The Ray task: :func:`_run_task` plus the id of the node it ran on."""
    return *_run_task(fn, shared, task, threads), _import_ray().get_runtime_context().get_node_id()


@cache
def _ray_remote():
    return _import_ray().remote(_ray_run)


class RayExecutor(_WorkerExecutor):
    """Tasks on a Ray cluster, each reserving ``cpus_per_task`` CPUs.

    Parameters
    ----------
    address : str, optional
        Cluster to join when Ray is not initialised yet: ``"auto"`` (the cluster of this
        machine), ``"ray://host:10001"`` (Ray Client) or ``"host:6379"``.  ``None``: the running
        session, else ``$RAY_ADDRESS``, else a new local instance with the machine's cores.
    cpus_per_task : int
        CPUs each task reserves; it runs on as many numba and BLAS threads.
    max_retries : int
        Ray retries of a task whose worker died (application errors are never retried).
    max_pending : int, optional
        Tasks in flight ahead of the consumer (default: twice the tasks the cluster runs at once).
    init_kwargs : dict, optional
        More keyword arguments of ``ray.init`` (e.g. ``runtime_env``) when this executor starts
        or joins Ray.

    The executor leaves Ray running when closed (later executors reuse the session); a local
    instance it started stops at interpreter exit or with :meth:`shutdown`.

    Examples
    --------
    >>> import operator
    >>> from recsys_ltr.executors import RayExecutor
    >>> with RayExecutor(address="auto") as executor:  # doctest: +SKIP
    ...     print(sorted(executor.map(operator.add, [1, 2, 3], shared=10)))
    [(0, 11), (1, 12), (2, 13)]
    """

    name = "ray"

    def __init__(self, address=None, *, cpus_per_task=1, max_retries=3, max_pending=None, init_kwargs=None):
        super().__init__(max_retries, max_pending)
        if address is not None and (not isinstance(address, str) or not address):
            raise TypeError(f"address must be a non-empty string such as 'auto' or 'ray://host:10001', got {address!r}")
        if init_kwargs is not None and not isinstance(init_kwargs, dict):
            raise TypeError(f"init_kwargs must be a dict of ray.init arguments, got {type(init_kwargs).__name__}")
        self.address = address
        self.cpus_per_task = check_positive_int(cpus_per_task, "cpus_per_task")
        ray = self._ray = _import_ray()
        self._started = False
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, **(init_kwargs or {})}
            ray.init(address=address, **kwargs)
            self._started = address is None and not os.environ.get("RAY_ADDRESS")
        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus < self.cpus_per_task:
            raise ValueError(f"cpus_per_task={self.cpus_per_task} exceeds the cluster's {cpus:g} CPUs")

    @property
    def threads(self) -> int:
        return self.cpus_per_task

    @property
    def parallelism(self) -> int:
        return max(1, int(self._ray.cluster_resources().get("CPU", 0) // self.cpus_per_task))

    def __repr__(self):
        return f"RayExecutor(address={self.address!r}, cpus_per_task={self.cpus_per_task})"

    def shutdown(self) -> None:
        """Stop the local Ray instance this executor started (no effect on a joined cluster)."""
        if self._started:
            self._ray.shutdown()
            self._started = False

    def _map(self, fn, tasks, shared):
        ray = self._ray
        dumps = ray.cloudpickle.dumps
        shared_bytes = serialized_bytes(shared, dumps)
        self.stats.shared_bytes += shared_bytes
        ref = ray.put(shared)
        remote = _ray_remote().options(
            num_cpus=self.cpus_per_task, max_retries=self.max_retries, retry_exceptions=False
        )
        queue = enumerate(tasks)
        pending, nodes, limit = {}, set(), self._pending_limit()  # pending: task ref -> (position, task)
        try:
            while True:
                for position, task in queue:
                    pending[remote.remote(fn, ref, task, self.threads)] = position, task
                    if len(pending) >= limit:
                        break
                if not pending:
                    return
                done, _ = ray.wait(list(pending), num_returns=1)
                position, task = pending.pop(done[0])
                *output, node = _ray_result(ray, done[0])
                nodes.add(node)
                result, _ = self._record(task, output, dumps)
                yield position, result
        finally:
            for task_ref in pending:  # closed early or failed: stop what is left
                ray.cancel(task_ref)
            self.stats.shipped_bytes += shared_bytes * len(nodes)
            del ref


def _ray_result(ray, ref):
    """``ray.get`` of one task, re-raising an application error as the task's own exception."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            raise cause from exc  # same type and message as in-process; the Ray error carries the remote traceback
        raise


# ------------------------------------------------------------------------------ choosing one
def get_executor(executor=None, *, address=None) -> Executor:
    """The executor named by ``executor`` (one of :data:`EXECUTORS`; ``None``: ``"serial"``), or
    ``executor`` itself when it is an :class:`Executor`.  ``address`` is the Ray address of
    ``"ray"`` (see :class:`RayExecutor`).

    Examples
    --------
    >>> from recsys_ltr.executors import get_executor
    >>> get_executor("serial")
    SerialExecutor()
    """
    executor = check_executor(executor, address=address)
    if isinstance(executor, Executor):
        return executor
    if executor == "ray":
        return RayExecutor(address)
    return ProcessExecutor() if executor == "processes" else SerialExecutor()


def check_executor(executor, *, address=None):
    """Check an ``executor=`` argument without starting anything: an :class:`Executor` is returned
    as is, a name (``None``: ``"serial"``) as a member of :data:`EXECUTORS`.

    Examples
    --------
    >>> from recsys_ltr.executors import check_executor
    >>> check_executor(None), check_executor("processes")  # names are checked, nothing starts
    ('serial', 'processes')
    """
    if isinstance(executor, Executor):
        if address is not None:
            raise ValueError("address applies to executor='ray'; give it to RayExecutor(address=...) instead")
        return executor
    if executor is None:
        executor = "serial"
    if not isinstance(executor, str):
        raise TypeError(f"executor must be an Executor or one of {EXECUTORS}, got {type(executor).__name__}")
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)} or pass an Executor")
    if address is not None and executor != "ray":
        raise ValueError(f"address applies to executor='ray', not {executor!r}")
    return executor


@contextlib.contextmanager
def executor_scope(executor=None, *, address=None):
    """:func:`get_executor` as a context: an executor created from a name is closed on exit, one
    passed in is left open for its owner.

    Examples
    --------
    >>> import operator
    >>> from recsys_ltr.executors import executor_scope
    >>> with executor_scope("serial") as executor:  # closed on exit: it was created from a name
    ...     print(sorted(executor.map(operator.mul, [1, 2], shared=3)))
    [(0, 3), (1, 6)]
    """
    resolved = get_executor(executor, address=address)
    try:
        yield resolved
    finally:
        if resolved is not executor:
            resolved.close()


# ------------------------------------------------------------------------------ sharded over users
def map_user_blocks(fn, model, users=None, *, batch_size=None, executor=None, show_progress=None):
    """Run ``fn(model, user_ids)`` on blocks of users; yield ``(user_ids, result)`` as blocks finish.

    The generic user-sharded job: the fitted ``model`` is shipped once (Ray: one ``ray.put``) and
    each task handles one block, so a task holds at most what ``fn`` builds for ``batch_size``
    users.  Arguments are checked here, before any task is submitted.  A model's own jobs build on
    it (e.g. :func:`recsys_ltr.febr.febr_features`).

    Parameters
    ----------
    fn : callable ``(model, user_ids) -> result``
        Picklable by reference for worker executors (a module-level function or a
        ``functools.partial`` of one).
    model : fitted recommender
        Anything with ``n_users_`` and ``n_items_`` (every :class:`~recsys_ltr.models.Recommender`).
    users : array of int, optional
        Training users, in the order blocks are cut (default: all).
    batch_size : int, optional
        Users per task (default: a dense ``float64`` block of scores of at most
        :data:`recsys_ltr._memory.TASK_BYTES`).
    executor : Executor or str, optional
        See :func:`get_executor` (default in-process).
    show_progress : bool or None
        Progress bar over blocks (``None``: on when standard error is a terminal).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.executors import map_user_blocks
    >>> from recsys_ltr.models import Popularity
    >>> model = Popularity().fit(make_synthetic(n_users=300, n_items=100, random_state=0).matrix)
    >>> def best_score(model, users):  # any (model, user_ids) -> result; module-level for worker executors
    ...     return model.score(users).max(axis=1)
    >>> [(users.size, best.shape) for users, best in map_user_blocks(best_score, model, batch_size=128)]
    [(128, (128,)), (128, (128,)), (44, (44,))]
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable (model, user_ids) -> result, got {type(fn).__name__}")
    users, n_items = check_model_users(model, users, "users")
    batch_size = _batch_size(batch_size, n_items)
    stream = user_stream(fn, model, users, batch_size, executor, show_progress)
    return ((block, result) for _, block, result in stream)


def score_users(model, users=None, reduce=None, *, batch_size=None, executor=None, show_progress=None):
    """Scores of blocks of users (``model.score``), yielded as ``(user_ids, scores)`` when they
    finish; with ``reduce``, ``(user_ids, reduce(user_ids, scores))`` computed in the task, so only
    the reduction travels back.  See :func:`map_user_blocks` for the other arguments.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.executors import score_users
    >>> from recsys_ltr.models import Popularity
    >>> model = Popularity().fit(make_synthetic(n_users=300, n_items=100, random_state=0).matrix)
    >>> blocks = score_users(model, users=range(250), batch_size=100, reduce=lambda users, s: s.argmax(axis=1))
    >>> [(users.size, best.shape) for users, best in blocks]
    [(100, (100,)), (100, (100,)), (50, (50,))]
    """
    if reduce is not None and not callable(reduce):
        raise TypeError(f"reduce must be a callable (user_ids, scores) -> result, got {type(reduce).__name__}")
    return map_user_blocks(
        partial(_score_block, reduce=reduce),
        model,
        users,
        batch_size=batch_size,
        executor=executor,
        show_progress=show_progress,
    )


def recommend_users(model, users=None, N=10, **kwargs):
    """Top-``N`` lists of blocks of users by ``model.recommend``, yielded as ``(user_ids, ids,
    scores)`` when each block finishes (``ids``/``scores`` as ``recommend`` returns them for an
    array of users).  Never builds a users x items matrix: a task scores its block in the
    model's own bounded sub-blocks.

    Keyword arguments: ``filter_already_liked_items``, ``filter_items`` and ``items`` of
    :meth:`~recsys_ltr.models.Recommender.recommend`, and ``batch_size``, ``executor``,
    ``show_progress`` of :func:`map_user_blocks`.  The default ``batch_size`` is a multiple of
    ``recommend``'s sub-block, so every user is scored in the same sub-block as by one in-process
    ``recommend`` call.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.executors import recommend_users
    >>> from recsys_ltr.models import RP3beta
    >>> model = RP3beta(k=20).fit(make_synthetic(n_users=300, n_items=100, random_state=0).matrix)
    >>> for users, ids, scores in recommend_users(model, N=5, batch_size=128):
    ...     print(users.size, ids.shape)  # write each block somewhere as it arrives
    128 (128, 5)
    128 (128, 5)
    44 (44, 5)
    """
    stream = _recommend_stream(model, users, N, **kwargs)
    return ((block, ids, scores) for _, block, (ids, scores) in stream)


def recommend_all(model, users=None, N=10, **kwargs):
    """:func:`recommend_users` gathered into ``(ids, scores)`` arrays aligned with ``users``
    (default: every training user), as ``model.recommend(users, N)`` returns them: ``len(users) x
    N'`` values, the only arrays held whole.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.executors import recommend_all
    >>> from recsys_ltr.models import RP3beta
    >>> model = RP3beta(k=20).fit(make_synthetic(n_users=300, n_items=100, random_state=0).matrix)
    >>> ids, scores = recommend_all(model, N=5, batch_size=128)
    >>> ids.shape
    (300, 5)
    """
    stream = _recommend_stream(model, users, N, **kwargs)
    ids = scores = None
    for start, block, (block_ids, block_scores) in stream:
        if ids is None:
            ids = np.empty((stream.n_users, block_ids.shape[1]), block_ids.dtype)
            scores = np.empty((stream.n_users, block_ids.shape[1]))
        ids[start : start + block.size] = block_ids
        scores[start : start + block.size] = block_scores
    return ids, scores


def _recommend_stream(
    model,
    users,
    N,
    *,
    filter_already_liked_items=True,
    filter_items=None,
    items=None,
    batch_size=None,
    executor=None,
    show_progress=None,
):
    users, n_items = check_model_users(model, users, "users")
    N = check_positive_int(N, "N")
    check_item_selection(filter_items, items, n_items, "items")  # recommend's own checks, before any task
    if batch_size is None:
        step = rows_per_block(8 * n_items)  # recommend's sub-block
        batch_size = step * max(1, _batch_size(None, n_items) // step)
    fn = partial(
        method_block,
        method="recommend",
        N=N,
        filter_already_liked_items=filter_already_liked_items,
        filter_items=filter_items,
        items=items,
    )
    return user_stream(fn, model, users, _batch_size(batch_size, n_items), executor, show_progress)


def check_model_users(model, users, name):
    """``(users, n_items)`` of a fitted model: ``users`` checked against its training users."""
    check_is_fitted(model)
    n_users, n_items = model.n_users_, model.n_items_
    users = np.arange(n_users, dtype=np.int64) if users is None else check_ids(users, n_users, name)
    if users.size == 0:
        raise ValueError(f"{name} is empty: no user to process")
    return users, n_items


def _batch_size(batch_size, n_items) -> int:
    if batch_size is None:
        return rows_per_block(8 * n_items, TASK_BYTES)
    return check_positive_int(batch_size, "batch_size")


class _UserStream:
    """Generator of ``(start, user_ids, result)`` over blocks of users, with the number of users."""

    def __init__(self, fn, model, users, batch_size, executor, show_progress):
        self.n_users = users.size
        self._args = (fn, model, users, batch_size, executor, show_progress)

    def __iter__(self):
        fn, model, users, batch_size, executor, show_progress = self._args
        starts = range(0, users.size, batch_size)
        blocks = [users[s : s + batch_size] for s in starts]
        with (
            executor_scope(executor) as ex,
            progress(show_progress, total=len(blocks), desc="users", unit="block") as bar,
        ):
            for position, result in ex.map(_apply_to_block, blocks, (fn, model)):
                bar.update()
                yield starts[position], blocks[position], result


def user_stream(fn, model, users, batch_size, executor, show_progress) -> _UserStream:
    """``fn(model, block)`` over the blocks of ``batch_size`` of the checked ``users``, yielding
    ``(start, block, result)``; the arguments are checked here, before anything runs."""
    batch_size = check_positive_int(batch_size, "batch_size")
    check_executor(executor)
    progress_enabled(show_progress)
    return _UserStream(fn, model, users, batch_size, executor, show_progress)


def _apply_to_block(shared, block):
    fn, model = shared
    return fn(model, block)


def _score_block(model, users, reduce=None):
    scores = model.score(users)
    return scores if reduce is None else reduce(users, scores)


def method_block(model, users, *, method, **kwargs):
    """``getattr(model, method)(users, **kwargs)``: a block task calling one of the model's methods."""
    return getattr(model, method)(users, **kwargs)
