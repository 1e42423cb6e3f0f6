"""The Ray executor: distributed evaluation, recommendation, affinities and benchmark grid give the
in-process results bit for bit; a killed worker costs a retry; a failing task reports its error.

All tests share one local Ray instance with 2 CPUs (the ``ray_session`` fixture of conftest.py) and
are skipped when ray is not installed.
"""

import os
import signal
import sys
import threading
import time

import _helpers
import numba
import numpy as np
import pandas as pd
import pytest
from _helpers import KillOnce, assert_same_evaluation, synthetic_split

from recsys_ltr._threads import check_num_threads
from recsys_ltr.eval.__main__ import main
from recsys_ltr.eval.runner import run_experiment
from recsys_ltr.executors import (
    RayExecutor,
    map_user_blocks,
    recommend_all,
    recommend_users,
    score_users,
)
from recsys_ltr.febr import FEBR, AffinityFEBR, febr_features
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ItemKNN, Popularity, RP3beta, UserKNN
from recsys_ltr.neighbors import cosine_affinity, knn_index, knn_query, kunn_affinity, rp3beta_affinity


@pytest.fixture(scope="module")
def ray_executor(ray_session):
    # the helpers of the test modules travel by value (workers cannot import them)
    for module in (sys.modules[__name__], _helpers):
        ray_session.cloudpickle.register_pickle_by_value(module)
    return RayExecutor()


@pytest.fixture(scope="module")
def data():
    return synthetic_split(300, 150, 3)


@pytest.fixture(scope="module")
def item_knn(data):
    return ItemKNN(k=20).fit(data[1])


def assert_same_csr(a, b):
    for part in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, part), getattr(b, part))
    assert a.shape == b.shape and a.indices.dtype == b.indices.dtype == np.int32


# ----------------------------------------------------------------------------- helpers run in workers
class CustomError(Exception):
    pass


def failing_scores(users):
    raise CustomError(f"no scores for the {users.size} users of this block")


def wrong_shape(users):
    return np.zeros((users.size, 3))


def array_flags(X, task):
    return [(a.flags.writeable, a.flags.owndata) for a in (X.data, X.indices, X.indptr)]


def thread_counts(shared, task):
    return numba.config.NUMBA_NUM_THREADS, numba.get_num_threads(), check_num_threads(0), check_num_threads(64)


def row_best(users, scores):
    return scores.max(axis=1)


def first_item(model, users):
    return model.user_items_[users].indices[:1]


def cache_stats_in_a_new_worker(model, train, test):
    from recsys_ltr._ranking import evaluate_product_block  # the kernel ranking item-p's sparse scores

    evaluate(model, train, test, batch_size=50)
    stats = [version.stats for version in (evaluate_product_block.serial, evaluate_product_block.parallel)]
    return os.getpid(), *(
        {k: v for s in stats for k, v in getattr(s, name).items()} for name in ("cache_hits", "cache_misses")
    )


# ----------------------------------------------------------------------------- evaluate
@pytest.mark.parametrize("make", [lambda: ItemKNN(k=20), lambda: UserKNN(k=15), lambda: RP3beta(k=10)])
def test_evaluate_is_bit_identical(ray_executor, data, make):
    _, train, val, test = data
    model = make().fit(train)
    for kwargs in (
        dict(batch_size=17),
        dict(batch_size=7, blocks_per_task=4),
        dict(batch_size=1000, metrics=("ADG", "REC@5", "P@3", "MRR"), k=5, users=np.arange(0, 300, 3)),
    ):
        reference = evaluate(model, train, test, exclude=val, **kwargs)
        got = evaluate(model, train, test, exclude=val, executor=ray_executor, **kwargs)
        assert_same_evaluation(reference, got)
    assert ray_executor.stats.cpu_seconds > 0 and ray_executor.stats.shipped_bytes > ray_executor.stats.shared_bytes


def test_bad_input_fails_before_any_task_with_the_in_process_message(ray_executor, data, item_knn):
    _, train, val, test = data
    before = (ray_executor.stats.tasks, ray_executor.stats.shared_bytes)
    cases = [
        dict(test=train),  # overlaps train
        dict(metrics=["XYZ"]),
        dict(k=10**6, metrics=["REC"]),
        dict(batch_size=0),
        dict(blocks_per_task=0),
        dict(users=[10**6]),
        dict(exclude=test),
    ]
    for case in cases:
        kwargs = {**dict(train=train, test=test, exclude=val), **case}
        with pytest.raises((ValueError, TypeError)) as local:
            evaluate(item_knn, **kwargs)
        with pytest.raises(type(local.value)) as remote:
            evaluate(item_knn, executor=ray_executor, **kwargs)
        assert str(remote.value) == str(local.value)
    for kwargs, match in (
        (dict(users=[-1]), "users out of range"),
        (dict(N=0), "N"),
        (dict(filter_items=[1], items=[2]), "give filter_items or items, not both"),
        (dict(batch_size=-3), "batch_size"),
    ):
        with pytest.raises(ValueError, match=match):
            recommend_all(item_knn, executor=ray_executor, **kwargs)
    with pytest.raises(ValueError, match="k_max"):
        cosine_affinity(train, 10**6, executor=ray_executor)
    with pytest.raises(ValueError, match="block_size"):
        cosine_affinity(train, 5, executor=ray_executor, block_size=0)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        recommend_all(ItemKNN(), executor=ray_executor)
    assert (ray_executor.stats.tasks, ray_executor.stats.shared_bytes) == before  # nothing shipped


def test_a_raising_task_reports_its_error(ray_executor, data):
    _, train, _val, test = data
    with pytest.raises(CustomError, match="no scores for the 40 users of this block") as info:
        evaluate(failing_scores, train, test, batch_size=40, executor=ray_executor)
    assert type(info.value) is CustomError
    with pytest.raises(ValueError) as local:
        evaluate(wrong_shape, train, test)
    with pytest.raises(ValueError) as remote:
        evaluate(wrong_shape, train, test, executor=ray_executor)
    assert str(remote.value) == str(local.value) and "score block" in str(local.value)


def test_a_killed_worker_costs_a_retry_not_the_result(ray_executor, data, item_knn, tmp_path):
    _, train, val, test = data
    reference = evaluate(item_knn, train, test, exclude=val, batch_size=25)
    marker = tmp_path / "killed"
    got = evaluate(KillOnce(item_knn, marker), train, test, exclude=val, batch_size=25, executor=ray_executor)
    assert marker.exists()
    assert_same_evaluation(reference, got)


# ----------------------------------------------------------------------------- recommend and score
@pytest.mark.parametrize("make", [lambda: ItemKNN(k=20), lambda: UserKNN(k=15), Popularity])
def test_recommend_matches_in_process(ray_executor, data, make):
    model = make().fit(data[1])
    users = np.array([5, 0, 299, 17, 17, 42])
    reference = model.recommend(users, N=7, filter_items=[1, 2, 3])
    got = recommend_all(model, users, N=7, filter_items=[1, 2, 3], batch_size=2, executor=ray_executor)
    assert np.array_equal(got[0], reference[0]) and np.array_equal(got[1], reference[1])
    reference = model.recommend(np.arange(300), N=5, items=np.arange(0, 150, 2))
    got = recommend_all(model, N=5, items=np.arange(0, 150, 2), executor=ray_executor)
    assert np.array_equal(got[0], reference[0]) and np.array_equal(got[1], reference[1])
    blocks = list(recommend_users(model, N=5, items=np.arange(0, 150, 2), batch_size=64, executor=ray_executor))
    assert sorted(block[0] for block, _, _ in blocks) == [0, 64, 128, 192, 256]
    for block, ids, scores in blocks:
        assert np.array_equal(ids, reference[0][block]) and np.array_equal(scores, reference[1][block])


def test_score_and_generic_user_maps(ray_executor, item_knn):
    best = {b[0]: r for b, r in score_users(item_knn, reduce=row_best, batch_size=70, executor=ray_executor)}
    np.testing.assert_array_equal(
        np.concatenate([best[s] for s in sorted(best)]), item_knn.score(np.arange(300)).max(1)
    )
    users = np.array([9, 3, 7])
    ((block, scores),) = score_users(item_knn, users, executor=ray_executor)
    assert np.array_equal(block, users) and np.array_equal(scores, item_knn.score(users))
    got = {b[0]: r for b, r in map_user_blocks(first_item, item_knn, batch_size=100, executor=ray_executor)}
    assert sorted(got) == [0, 100, 200] and np.array_equal(got[100], first_item(item_knn, np.array([100])))


# ----------------------------------------------------------------------------- FEBR
@pytest.mark.parametrize(
    "make", [lambda: FEBR(bases=[ItemKNN(k=15), UserKNN(k=10)], candidates=12), lambda: AffinityFEBR(k=10)]
)
def test_febr_features_and_evaluation_match_in_process(ray_executor, data, make):
    _, train, val, test = data
    kw = dict(max_iter=2000, eval_every=1000, random_state=0, num_threads=1, show_progress=False)
    model = make().set_params(**kw).fit(train, validation=val)
    reference = list(febr_features(model, batch_size=40))
    got = sorted(febr_features(model, batch_size=40, executor=ray_executor), key=lambda bf: bf[0][0])
    assert len(got) == len(reference) == 8
    for (block, features), (ref_block, ref) in zip(got, reference):
        assert np.array_equal(block, ref_block)
        assert all(np.array_equal(f, r) for f, r in zip(parts(features), parts(ref), strict=True))
    evaluated = evaluate(model, train, test, exclude=val, batch_size=50)
    assert_same_evaluation(evaluated, evaluate(model, train, test, exclude=val, batch_size=50, executor=ray_executor))


def parts(features):
    """The arrays of a block's features: ``(indptr, items, phi)`` of stacked FEBR, the dense array else."""
    return features if isinstance(features, tuple) else (features,)


# ----------------------------------------------------------------------------- affinities
@pytest.mark.parametrize(
    "build, kwargs",
    [
        (cosine_affinity, {"side": "item"}),
        (cosine_affinity, {"side": "user"}),
        (kunn_affinity, {"side": "item"}),
        (kunn_affinity, {"side": "user"}),
        (rp3beta_affinity, {"alpha": 0.7, "beta": 0.3}),
    ],
)
def test_affinities_are_identical(ray_executor, data, build, kwargs):
    X = data[0]
    reference = build(X, 25, **kwargs)
    for block_size in (None, 7):
        got = build(X, 25, executor=ray_executor, block_size=block_size, **kwargs)
        assert_same_csr(got.matrix, reference.matrix)
        assert (got.k_max, got.kind, got.side) == (reference.k_max, reference.kind, reference.side)


def test_knn_query_with_scales_and_ids(ray_executor, data):
    X = data[0]
    index = knn_index(X, weights=np.linspace(0.5, 2.0, X.shape[1]))
    queries = X[::3]
    ids = np.arange(0, X.shape[0], 3)
    scale = np.linspace(1.0, 3.0, queries.shape[0])
    reference = knn_query(index, queries, 12, ids, query_scale=scale)
    got = knn_query(index, queries, 12, ids, query_scale=scale, executor=ray_executor, block_size=9)
    assert_same_csr(got, reference)


# ----------------------------------------------------------------------------- workers
def test_shared_csr_is_read_zero_copy(ray_executor, data):
    flags = dict(ray_executor.map(array_flags, [0, 1], data[1]))
    assert all(f == [(False, False)] * 3 for f in flags.values())  # object-store views, not copies


@pytest.mark.parametrize("cpus", [1, 2])
def test_one_numba_thread_per_ray_cpu(ray_session, cpus):
    ex = RayExecutor(cpus_per_task=cpus)
    for config, threads, zero, many in dict(ex.map(thread_counts, range(4))).values():
        assert threads == zero == many == min(cpus, config)  # a model's num_threads=64 too
    with pytest.raises(ValueError, match="exceeds the cluster's 2 CPUs"):
        RayExecutor(cpus_per_task=3)


def test_new_workers_load_cached_kernels(ray_session, ray_executor, data, item_knn):
    # a worker's arrays from the object store are read-only: another numba signature than this
    # process's, so the first new worker may compile it; the next one must load it from the cache
    _, train, _, test = data
    pids = set()
    for name in ("first", "second"):
        fresh = ray_session.remote(cache_stats_in_a_new_worker).options(
            runtime_env={"env_vars": {"RECSYS_LTR_TEST_WORKER": name}}  # a new environment: a new process
        )
        pid, hits, misses = ray_session.get(fresh.remote(item_knn, train, test))
        pids.add(pid)
    assert len(pids) == 2 and os.getpid() not in pids and hits and not misses


# ----------------------------------------------------------------------------- benchmark grid
def grid_results(directory):
    rows = pd.read_csv(directory / "standard" / "results.csv").drop(columns="fit_seconds")
    return rows.sort_values(list(rows.columns[:-1])).reset_index(drop=True)


def test_cli_grid_on_ray_matches_in_process_and_resumes(ray_session, tmp_path, capsys):
    argv = ["--dataset", "synthetic", "--folds", "2", "--models", "popularity,item-p"]
    assert main([*argv, "--quiet", "--out", str(tmp_path / "serial")]) == 0
    assert main([*argv, "--out", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    assert "ray executor: 2 unit(s) at once x 1 thread(s)" in capsys.readouterr().err
    pd.testing.assert_frame_equal(grid_results(tmp_path / "ray"), grid_results(tmp_path / "serial"))
    assert main([*argv, "--quiet", "--out", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    summary = pd.read_json(tmp_path / "ray" / "standard" / "summary.json", typ="series")
    assert summary["meta"]["computed_units"] == 0 and summary["meta"]["executor"] == "ray"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--ray-address", "auto"], "--ray-address needs --executor ray"),
        (["--executor", "ray", "--jobs", "2"], "--jobs 2 sets the number of local worker processes"),
        (["--executor", "serial", "--jobs", "3"], "--jobs 3 sets the number of local worker processes"),
    ],
)
def test_cli_executor_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(["--dataset", "synthetic", "--models", "popularity", *argv])
    assert message in capsys.readouterr().err


def running_tasks():
    """Pids of the Ray workers running a task now (Ray titles them ``ray::_ray_run``)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                title = f.read().split(b"\0")[0]
        except (OSError, ValueError):
            continue
        if title == b"ray::_ray_run":
            pids.append(int(entry))
    return pids


def kill_a_running_unit(thread, timeout=120.0) -> int | None:
    """SIGKILL the first Ray worker seen running a task while ``thread`` runs; its pid or None."""
    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        for pid in running_tasks():
            os.kill(pid, signal.SIGKILL)
            return pid
        time.sleep(0.02)
    return None


def test_progress_bar_counts_units_finished_on_ray(ray_executor, data, capsys):
    run_experiment(data[0], ["popularity", "item-p"], folds=2, executor=ray_executor, show_progress=True)
    assert "4/4" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the Ray workers through /proc (Linux)")
def test_grid_survives_a_killed_worker(ray_session, ray_executor, data):
    X = data[0]
    kwargs = dict(methods=["item-p", "user-p", "KUNN"], folds=2, show_progress=False)
    reference = run_experiment(X, **kwargs)
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(run=run_experiment(X, executor=ray_executor, **kwargs)))
    thread.start()
    killed = kill_a_running_unit(thread)
    thread.join()
    assert killed is not None, "no unit was seen running"
    assert len(outcome["run"].results) == len(reference.results) == 6
    for got, ref in zip(outcome["run"].results, reference.results):
        assert (got.method, got.fold, got.params) == (ref.method, ref.fold, ref.params)
        for name in ref.per_user:
            assert np.array_equal(got.per_user[name], ref.per_user[name])
