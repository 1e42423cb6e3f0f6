"""Executors without Ray: the in-process and local-process executors, argument checks, threads.

The Ray executor's tests are in ``test_ray.py``.
"""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from _helpers import KillOnce, assert_same_evaluation, synthetic_split

from recsys_ltr._threads import check_num_threads, numba_threads, task_threads
from recsys_ltr.eval.methods import METHODS, Method
from recsys_ltr.eval.runner import run_experiment
from recsys_ltr.executors import (
    EXECUTORS,
    Executor,
    ProcessExecutor,
    RayExecutor,
    SerialExecutor,
    check_executor,
    executor_scope,
    get_executor,
    map_user_blocks,
    recommend_all,
    serialized_bytes,
)
from recsys_ltr.febr import FEBR, AffinityFEBR, febr_features
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ItemKNN, Popularity, UserKNN
from recsys_ltr.neighbors import cosine_affinity


@pytest.fixture(scope="module")
def data():
    return synthetic_split(200, 90, 11)


@pytest.fixture(scope="module")
def model(data):
    return ItemKNN(k=15).fit(data[1])


# ----------------------------------------------------------------------------- tasks used below
def square(shared, task):
    return shared * task * task


def fail_on(shared, task):
    if task == shared:
        raise KeyError(f"task {task} refuses to run")
    return task


def worker_threads(shared, task):
    return numba.get_num_threads(), check_num_threads(0), check_num_threads(64)


# ----------------------------------------------------------------------------- choosing
def test_names_and_instances():
    assert EXECUTORS == ("serial", "processes", "ray")
    assert isinstance(get_executor(), SerialExecutor) and isinstance(get_executor("serial"), SerialExecutor)
    assert isinstance(get_executor("processes"), ProcessExecutor)
    mine = SerialExecutor()
    assert get_executor(mine) is mine and check_executor(mine) is mine
    assert check_executor(None) == "serial" and check_executor("ray") == "ray"


@pytest.mark.parametrize(
    "executor, address, error, match",
    [
        ("threads", None, ValueError, "unknown executor 'threads'; choose one of serial, processes, ray"),
        (2, None, TypeError, "executor must be an Executor or one of"),
        ("serial", "auto", ValueError, "address applies to executor='ray', not 'serial'"),
        (SerialExecutor(), "auto", ValueError, "address applies to executor='ray'"),
    ],
)
def test_bad_executor_arguments(executor, address, error, match):
    with pytest.raises(error, match=match):
        get_executor(executor, address=address)


def test_bad_executor_fails_before_any_work(data, model):
    _, train, _val, test = data
    with pytest.raises(ValueError, match="unknown executor"):
        evaluate(model, train, test, executor="gpu")
    with pytest.raises(ValueError, match="unknown executor"):
        cosine_affinity(train, 5, executor="gpu")
    with pytest.raises(ValueError, match="unknown executor"):
        recommend_all(model, executor="gpu")


def test_executor_scope_closes_only_what_it_created():
    closed = []

    class Tracked(SerialExecutor):
        def close(self):
            closed.append(self)

    mine = Tracked()
    with executor_scope(mine) as ex:
        assert ex is mine
    assert closed == []


def test_ray_missing_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'recsys-ltr\[ray\]'"):
        RayExecutor()
    # bad arguments are named before Ray is imported, with or without it (the fuzz suite's oracle)
    with pytest.raises(TypeError, match="address must be a non-empty string"):
        RayExecutor(address="")
    with pytest.raises(ValueError, match="cpus_per_task"):
        RayExecutor(cpus_per_task=0)


def test_importing_the_package_does_not_import_ray():
    code = (
        "import sys, recsys_ltr, recsys_ltr.executors, recsys_ltr.metrics, recsys_ltr.models, "
        "recsys_ltr.neighbors, recsys_ltr.eval.runner, recsys_ltr.eval.__main__; "
        "assert 'ray' not in sys.modules, 'ray imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())


def test_bad_worker_parameters():
    with pytest.raises(ValueError, match="n_workers"):
        ProcessExecutor(0)
    with pytest.raises(ValueError, match="max_retries"):
        ProcessExecutor(1, max_retries=-1)
    with pytest.raises(TypeError, match="threads"):
        ProcessExecutor(1, threads=1.5)


# ----------------------------------------------------------------------------- threads
def test_a_task_caps_every_thread_count_at_its_share():
    cores = numba.config.NUMBA_NUM_THREADS
    before = numba.get_num_threads()
    import lightgbm  # noqa: F401  (its OpenMP pool is one a task must hold to its share)
    from threadpoolctl import threadpool_info

    with task_threads(1):
        assert numba.get_num_threads() == 1
        assert check_num_threads(0) == check_num_threads(64) == 1  # a model's num_threads too
        assert {p["num_threads"] for p in threadpool_info()} == {1}  # BLAS and OpenMP pools alike
        with numba_threads(0):
            assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before and check_num_threads(0) == cores
    assert check_num_threads(64) == cores


# ----------------------------------------------------------------------------- in-process
def test_serial_map_runs_in_order_and_counts():
    ex = SerialExecutor()
    assert list(ex.map(square, [1, 2, 3], shared=10)) == [(0, 10), (1, 40), (2, 90)]
    assert ex.stats.tasks == 3 and ex.parallelism == 1
    with pytest.raises(KeyError, match="task 2 refuses"):
        list(ex.map(fail_on, [1, 2, 3], shared=2))


def test_serialized_bytes_counts_array_buffers():
    a = np.zeros(1000)
    assert 8000 <= serialized_bytes(a) < 8200
    assert serialized_bytes({"x": a, "y": a.copy()}) >= 16000


def test_blocks_per_task_changes_nothing_in_process(data, model):
    _, train, val, test = data
    reference = evaluate(model, train, test, exclude=val, batch_size=9)
    assert_same_evaluation(reference, evaluate(model, train, test, exclude=val, batch_size=9, blocks_per_task=5))


def test_user_maps_in_process(data, model):
    blocks = list(map_user_blocks(user_sum, model, batch_size=64))
    assert [b.size for b, _ in blocks] == [64, 64, 64, 8]
    np.testing.assert_array_equal(np.concatenate([r for _, r in blocks]), np.arange(200) * 2)
    ids, scores = recommend_all(model, N=5, batch_size=33)
    ref_ids, ref_scores = model.recommend(np.arange(200), N=5)
    assert np.array_equal(ids, ref_ids) and np.array_equal(scores, ref_scores)


def user_sum(model, users):
    return users * 2


@pytest.fixture(scope="module")
def stacked_febr(data):
    _, train, val, _ = data
    bases = [ItemKNN(k=15), UserKNN(k=15)]
    kw = dict(candidates=12, max_iter=2000, eval_every=1000, fallback_p=None, random_state=0, num_threads=1)
    return FEBR(bases=bases, show_progress=False, **kw).fit(train, validation=val)


def brute_head(model, u):
    """The union of each base's ``candidates`` best unseen items (score, then popularity, then id)."""
    seen = set(model.user_items_[u].indices)
    popularity = np.bincount(model.user_items_.indices, minlength=model.n_items_)
    head = set()
    for base in model.bases_:
        s = base.score(np.array([u]))[0]
        order = sorted((i for i in range(model.n_items_) if i not in seen), key=lambda i: (-s[i], -popularity[i], i))
        head.update(order[: model.candidates])
    return sorted(head)


def test_febr_features_are_the_heads_block_by_block(stacked_febr):
    m = stacked_febr
    blocks = list(febr_features(m, batch_size=37))
    assert [b.size for b, _ in blocks] == [37] * 5 + [15]
    whole = m.head_features(np.arange(m.n_users_))
    offset = 0
    for block, (_, items, phi) in blocks:  # a block's heads do not depend on its other users
        np.testing.assert_array_equal(items, whole[1][whole[0][block[0]] : whole[0][block[-1] + 1]])
        np.testing.assert_array_equal(phi, whole[2][offset : offset + items.size])
        offset += items.size
    indptr, items, phi = whole
    assert phi.shape == (items.size, len(m.feature_names_))
    for u in (0, 1, 57, 199):
        head = items[indptr[u] : indptr[u + 1]]
        assert head.tolist() == brute_head(m, u)
        raw = [(m.bases_[b].score(np.array([u]))[0][head] - m.context_mean_[b]) / m.context_scale_[b] for b in (0, 1)]
        np.testing.assert_allclose(phi[indptr[u] : indptr[u + 1], [0, 3]], np.array(raw).T, rtol=1e-12)
        np.testing.assert_array_equal(
            phi[indptr[u] : indptr[u + 1], m.feature_names_.index("pop")], m.context_pop_[head]
        )


def test_febr_features_of_the_dissertation_and_bad_input(data, stacked_febr):
    _, train, val, _ = data
    kw = dict(max_iter=2000, eval_every=1000, random_state=0, num_threads=1, show_progress=False)
    m = AffinityFEBR(affinity="cosine", k=10, **kw).fit(train, validation=val)
    blocks = list(febr_features(m, users=[5, 3, 8], batch_size=2))
    assert [b.tolist() for b, _ in blocks] == [[5, 3], [8]]
    np.testing.assert_array_equal(np.concatenate([f for _, f in blocks]), m.transform([5, 3, 8]))
    assert not hasattr(m, "head_features")  # stacked FEBR's
    with pytest.raises(TypeError, match="model must be a fitted FEBR"):
        febr_features(Popularity().fit(train))
    with pytest.raises(ValueError, match="out of range|users"):
        febr_features(stacked_febr, users=[10_000])
    with pytest.raises(ValueError, match="unknown executor"):
        febr_features(stacked_febr, executor="dask")


class RecordingExecutor(SerialExecutor):
    """In-process executor that records the tasks of every map and whether it was closed."""

    def __init__(self):
        super().__init__()
        self.maps, self.closed = [], False

    def _map(self, fn, tasks, shared):
        tasks = list(tasks)
        self.maps.append(tasks)
        return super()._map(fn, tasks, shared)

    def close(self):
        self.closed = True


def test_stacking_units_run_on_the_executor_after_their_bases(data, monkeypatch):
    seen = []

    def stacked(bases, **params):
        seen.append([b.get_params()["k"] for _, b in bases])
        return Popularity()

    monkeypatch.setitem(METHODS, "stack-pop", Method("stack-pop", stacked, stack_on=("item-p",)))
    ex = RecordingExecutor()
    exp = run_experiment(data[0], ["stack-pop", "popularity"], folds=2, executor=ex, show_progress=False)
    bases, stacking = ex.maps  # one executor, one map per wave
    assert sorted(bases) == sorted((m, f) for m in ("item-p", "popularity") for f in (0, 1))
    assert stacking == [("stack-pop", 0), ("stack-pop", 1)] and not ex.closed
    chosen = {(r.params["k"],) for r in exp.results if r.method == "item-p"}  # the fold's tuned base
    assert seen and set(map(tuple, seen)) <= chosen
    assert [r.method for r in exp.results] == ["item-p", "stack-pop", "popularity"] * 2


# ----------------------------------------------------------------------------- local processes
@pytest.mark.slow
def test_processes_give_the_same_numbers_and_survive_a_killed_worker(data, model, tmp_path):
    _, train, val, test = data
    ex = ProcessExecutor(2, max_retries=2)
    assert ex.threads == max(1, numba.config.NUMBA_NUM_THREADS // 2)
    reference = evaluate(model, train, test, exclude=val, batch_size=30)
    marker = tmp_path / "killed"
    got = evaluate(KillOnce(model, marker), train, test, exclude=val, batch_size=30, executor=ex)
    assert marker.exists() and ex.stats.retries == 1
    assert_same_evaluation(reference, got)
    assert ex.stats.shared_bytes > 0 and len(ex.stats.peak_rss) >= 1 and ex.stats.cpu_seconds > 0
    assert set(dict(ex.map(worker_threads, range(4))).values()) == {(ex.threads,) * 3}
    with pytest.raises(KeyError, match="task 3 refuses to run"):
        list(ex.map(fail_on, range(6), shared=3))


def test_executor_base_is_abstract():
    ex = Executor()
    with pytest.raises(NotImplementedError):
        list(ex.map(square, [1]))
