"""The driver of ``test_ray_cluster.py``: a process of its own joins the cluster by address, waits
for its two nodes, and writes what the executor computed there (``python _cluster_driver.py
ADDRESS DIR``: the split and the models are read from ``DIR``, the results written to
``DIR/cluster.npz`` and ``DIR/cluster.json``)."""

import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from recsys_ltr.executors import RayExecutor, recommend_all
from recsys_ltr.febr import FEBR, febr_features
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ItemKNN


def node_of(shared, task):
    """The id of the node running this task (it holds its CPU a while, so both nodes get one)."""
    import ray

    time.sleep(2.0)
    return ray.get_runtime_context().get_node_id()


def main(address, folder):
    folder = Path(folder)
    train, val, test = (sp.load_npz(folder / f"{part}.npz") for part in ("train", "val", "test"))
    knn, febr = ItemKNN.load(folder / "knn.npz"), FEBR.load(folder / "febr.npz")
    executor = RayExecutor(address=address)
    import ray

    deadline = time.monotonic() + 120
    while len([n for n in ray.nodes() if n["Alive"]]) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    nodes = sorted({node for _, node in executor.map(node_of, range(6))})  # and both nodes' workers started
    out = {}
    out["ids"], out["scores"] = recommend_all(knn, N=10, batch_size=50, executor=executor)
    for name, model in (("knn", knn), ("febr", febr)):
        result = evaluate(model, train, test, exclude=val, batch_size=40, executor=executor)
        out.update({f"{name}:{metric}": values for metric, values in result.per_user.items()})
    for block, (indptr, items, phi) in febr_features(febr, batch_size=40, executor=executor):
        out.update({f"features:{block[0]}:indptr": indptr, f"features:{block[0]}:items": items})
        out[f"features:{block[0]}:phi"] = phi
    np.savez(folder / "cluster.npz", **out)
    alive = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    stats = {"nodes_used": nodes, "nodes_alive": alive, "peak_rss": list(executor.stats.peak_rss.values())}
    (folder / "cluster.json").write_text(json.dumps(stats))


if __name__ == "__main__":
    main(*sys.argv[1:])
