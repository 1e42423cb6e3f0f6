"""A real two-node Ray cluster on this machine: a head and a worker started as separate processes
(``ray start --head``, ``ray start --address=...``), joined by address from a driver process of its
own; ``recommend_all``, ``evaluate`` and FEBR's feature extraction sharded over both nodes give the
in-process results bit for bit.  Skipped when ray is not installed.

The cluster is ``benchmarks/_ray_cluster.py``'s (its own token, temporary directory and this
process's environment), as ``benchmarks/ray_cluster_throughput.py`` measures it.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import synthetic_split

from recsys_ltr.executors import recommend_all
from recsys_ltr.febr import FEBR, febr_features
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ItemKNN, UserKNN

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "benchmarks"))
from _ray_cluster import local_cluster, ray_command  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """``(address, env)`` of a running head and worker of one CPU each (``benchmarks/_ray_cluster.py``)."""
    pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[ray]' to run the cluster test")
    if ray_command() is None:
        pytest.skip("the ray command line is not on PATH")
    with local_cluster(nodes=2, cpus=1, object_store_bytes=100_000_000, pythonpath=[HERE.parent, HERE]) as running:
        yield running


def test_two_node_cluster_gives_the_in_process_results(cluster, tmp_path):
    address, env = cluster
    _, train, val, test = synthetic_split(300, 150, 3)
    for name, part in (("train", train), ("val", val), ("test", test)):
        sp.save_npz(tmp_path / f"{name}.npz", part)
    knn = ItemKNN(k=20).fit(train)
    kw = dict(max_iter=2000, eval_every=1000, random_state=0, num_threads=1, show_progress=False)
    febr = FEBR(bases=[ItemKNN(k=15), UserKNN(k=10)], candidates=12, **kw).fit(train, validation=val)
    knn.save(tmp_path / "knn.npz")
    febr.save(tmp_path / "febr.npz")

    driver = [sys.executable, str(HERE / "_cluster_driver.py"), address, str(tmp_path)]
    done = subprocess.run(driver, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    stats = json.loads((tmp_path / "cluster.json").read_text())
    assert len(stats["nodes_alive"]) == 2 and sorted(stats["nodes_used"]) == sorted(stats["nodes_alive"])

    with np.load(tmp_path / "cluster.npz") as got:
        ids, scores = recommend_all(knn, N=10, batch_size=50)
        assert np.array_equal(got["ids"], ids) and np.array_equal(got["scores"], scores)
        for name, model in (("knn", knn), ("febr", febr)):
            reference = evaluate(model, train, test, exclude=val, batch_size=40)
            for metric, values in reference.per_user.items():
                assert np.array_equal(got[f"{name}:{metric}"], values), (name, metric)
        blocks = list(febr_features(febr, batch_size=40))
        assert len(blocks) == 8
        for block, parts in blocks:
            for part, array in zip(("indptr", "items", "phi"), parts, strict=True):
                assert np.array_equal(got[f"features:{block[0]}:{part}"], array), (block[0], part)
