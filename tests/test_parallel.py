"""Row kernels compiled in parallel and serially (recsys_ltr._parallel): same results, the
version chosen by the call's size, separate cache entries."""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import random_feedback

from recsys_ltr import _parallel, _ranking, _topk, split
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import RP3beta, UserKNN
from recsys_ltr.neighbors import knn

KERNELS = (knn._knn_kernel, _topk.top_k_sparse_product, _ranking.evaluate_product_block)


@pytest.fixture(scope="module")
def data():
    D = sp.csr_matrix(random_feedback(np.random.default_rng(5), 80, 50, 0.3))
    train, _, test = split.holdout(D, val=0.0, test=0.3, random_state=0)
    return train, test


def outputs(make, train, test):
    model = make().fit(train)
    n_users, n_items = train.shape
    table = evaluate(model, train, test, k=5)
    return [
        model.item_scorer_.toarray() if hasattr(model, "item_scorer_") else np.zeros(0),
        *model.recommend(np.arange(n_users), train, N=7),
        *model.similar_items(np.arange(n_items), N=4),
        np.stack(list(table.per_user.values())),
    ]


@pytest.mark.kernels
@pytest.mark.parametrize("make", [lambda: UserKNN(k=6), lambda: RP3beta(k=5)])
def test_serial_and_parallel_versions_give_the_same_results_bit_for_bit(monkeypatch, make, data):
    train, test = data
    runs = []
    for serial_seconds in (np.inf, 0.0):
        monkeypatch.setattr(_parallel, "SERIAL_SECONDS", serial_seconds)
        runs.append(outputs(make, train, test))
    for serial, parallel in zip(*runs, strict=True):
        np.testing.assert_array_equal(serial, parallel)


def test_each_call_runs_the_version_its_work_pays_for(monkeypatch, data):
    ran = []
    for kernel in KERNELS:
        for version in ("serial", "parallel"):
            compiled = getattr(kernel, version)
            monkeypatch.setattr(kernel, version, lambda *a, _f=compiled, _v=version: ran.append(_v) or _f(*a))
    train, test = data
    monkeypatch.setattr(_parallel, "SERIAL_SECONDS", 0.03)  # the default: small data, serial
    outputs(lambda: UserKNN(k=6), train, test)
    assert ran and set(ran) == {"serial"}
    ran.clear()
    monkeypatch.setattr(_parallel, "SERIAL_SECONDS", 1e-7)  # a few hundred units at most
    outputs(lambda: UserKNN(k=6), train, test)
    assert ran and set(ran) == {"parallel"}
    kernel = _topk.top_k_sparse_product
    limit = 1e-7 / kernel.seconds_per_unit
    assert kernel.runs_serially(int(limit) - 1) and not kernel.runs_serially(int(limit) + 1)


def test_an_operation_in_blocks_runs_the_version_of_its_whole_work(monkeypatch, data):
    # evaluate in many small blocks: each block alone would run serially, the evaluation does not
    train, test = data
    model = UserKNN(k=6).fit(train)
    seen = []
    call = _parallel.RowKernel.__call__

    def spy(kernel, *args, work, calls=1):
        seen.append((work, calls, kernel.runs_serially(work, calls)))
        return call(kernel, *args, work=work, calls=calls)

    monkeypatch.setattr(_parallel.RowKernel, "__call__", spy)
    whole = evaluate(model, train, test, k=5)
    ((work, calls, _),) = seen
    limit = 0.5 * work * _ranking.evaluate_product_block.seconds_per_unit
    monkeypatch.setattr(_parallel, "SERIAL_SECONDS", limit)  # the whole evaluation: parallel
    seen.clear()
    blocked = evaluate(model, train, test, k=5, batch_size=5)
    assert len(seen) > 2 and calls == 1 and all(c == len(seen) for _, c, _ in seen)
    assert not any(serially for _, _, serially in seen)
    assert all(_ranking.evaluate_product_block.runs_serially(w) for w, _, _ in seen)  # each block alone
    for name in whole.per_user:
        np.testing.assert_array_equal(whole.per_user[name], blocked.per_user[name])


def test_work_counts_the_scatter_and_the_rows():
    R = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]]))
    B = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 0]]))  # rows of length 2, 0, 3
    assert _parallel.product_work(R.indices, B.indptr, 3, 10) == (2 + 0) + 3 + 3 * 10


def test_the_two_versions_are_cached_apart(tmp_path):
    # numba's cache tells functions apart by name, not by compile flags: the serial copy is renamed
    script = (
        "import numpy as np, scipy.sparse as sp\n"
        "from recsys_ltr import _parallel\n"
        "from recsys_ltr.models import ItemKNN\n"
        "X = sp.random(40, 30, density=0.3, format='csr', random_state=0)\n"
        "X.data[:] = 1\n"
        "for seconds in (np.inf, 0.0):\n"
        "    _parallel.SERIAL_SECONDS = seconds\n"
        "    ItemKNN(k=5).fit(X).recommend(np.arange(40), X, N=3)\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "RECSYS_LTR_COMPILE_NOTICE": "0"}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    names = {path.name.split("-")[0] for path in tmp_path.rglob("*.nbi")}
    for kernel in ("knn._knn_kernel", "_topk.top_k_sparse_product"):
        assert kernel in names and f"{kernel}_serial" in names, sorted(names)
