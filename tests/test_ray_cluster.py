"""A real two-node Ray cluster on this machine: a head and a worker started as separate processes
(``ray start --head``, ``ray start --address=...``), joined by address from a driver process of its
own; ``recommend_all``, ``evaluate`` and FEBR's feature extraction sharded over both nodes give the
in-process results bit for bit.  Skipped when ray is not installed.

The cluster's processes get a token of their own (Ray's token authentication, ``RAY_AUTH_MODE``),
a temporary directory of their own (so no other test's ``ray.init()`` finds this cluster) and the
environment of this process, so their workers import the same ``recsys_ltr``.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
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
NODE = ["--num-cpus=1", "--object-store-memory=100000000", "--disable-usage-stats", "--block"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ray start --head exited with {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"the Ray head did not listen on port {port} within {seconds} s")


@pytest.fixture(scope="module")
def cluster():
    """``(address, env)`` of a running head and worker; both stopped (SIGTERM) at the end."""
    pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[ray]' to run the cluster test")
    ray = shutil.which("ray", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if ray is None:
        pytest.skip("the ray command line is not on PATH")
    temp = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=uuid.uuid4().hex, RAY_USAGE_STATS_ENABLED="0")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), str(HERE), env.get("PYTHONPATH", "")])
    env.pop("RAY_ADDRESS", None)
    port, processes = free_port(), []
    try:
        head = [ray, "start", "--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}", *NODE]
        with open(Path(temp) / "head.log", "w") as log:
            processes.append(subprocess.Popen(head, env=env, stdout=log, stderr=subprocess.STDOUT))
        wait_for_port(port, processes[0])
        with open(Path(temp) / "worker.log", "w") as log:
            worker = [ray, "start", f"--address=127.0.0.1:{port}", *NODE]
            processes.append(subprocess.Popen(worker, env=env, stdout=log, stderr=subprocess.STDOUT))
        yield f"127.0.0.1:{port}", env
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(temp, ignore_errors=True)


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
