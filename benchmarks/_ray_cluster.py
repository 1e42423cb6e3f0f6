"""A Ray cluster of separate processes on this machine: a head and workers started by Ray's command
line (``ray start --head``, ``ray start --address=...``), each a node of its own, that a driver joins
by address -- as on several machines (``docs/scaling.rst``).

The processes get a token of their own (Ray's token authentication, ``RAY_AUTH_MODE``), a temporary
directory of their own (no ``ray.init()`` elsewhere finds the cluster) and this process's
environment, so their workers import the same ``recsys_ltr``.  Used by ``tests/test_ray_cluster.py``
and ``benchmarks/ray_cluster_throughput.py``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path


def ray_command() -> str | None:
    """The ``ray`` command line next to this interpreter, else on ``PATH``; ``None`` when absent."""
    return shutil.which("ray", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


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


@contextmanager
def local_cluster(nodes=2, cpus=1, object_store_bytes=100_000_000, pythonpath=(), token=None):
    """Yields ``(address, env)`` of a head and ``nodes - 1`` worker nodes of ``cpus`` CPUs each, and
    the environment a driver process needs to join it (its token); every node stopped (SIGTERM) at
    the end.  ``pythonpath``: folders put first on the nodes' ``PYTHONPATH``; ``token``: the cluster's
    (default: a new one), for a driver that imported ray with it in its environment (ray reads it
    at import)."""
    ray = ray_command()
    if ray is None:
        raise FileNotFoundError("the ray command line is not installed: pip install -e '.[ray]'")
    temp = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token or uuid.uuid4().hex, RAY_USAGE_STATS_ENABLED="0")
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), env.get("PYTHONPATH", "")])
    env.pop("RAY_ADDRESS", None)
    node = [f"--num-cpus={cpus}", f"--object-store-memory={object_store_bytes}", "--disable-usage-stats", "--block"]
    port, processes = free_port(), []
    try:
        head = [ray, "start", "--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}", *node]
        with open(Path(temp) / "head.log", "w") as log:
            processes.append(subprocess.Popen(head, env=env, stdout=log, stderr=subprocess.STDOUT))
        wait_for_port(port, processes[0])
        for n in range(nodes - 1):
            with open(Path(temp) / f"worker{n}.log", "w") as log:
                worker = [ray, "start", f"--address=127.0.0.1:{port}", *node]
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
