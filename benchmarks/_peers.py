"""The peer environment of the metric-learning benchmarks: metric-learn in a pinned virtual environment.

metric-learn 0.7.0 calls a scikit-learn argument removed in recent releases, so LMNN, ITML and NCA
run under ``scikit-learn==1.5.*`` in a virtual environment created on first use under
``~/.cache/recsys_ltr/bench-venv``, through a subprocess: :func:`run_peer_script` writes the input
arrays to an ``.npz``, runs a script there with ``(inputs.npz, outputs.npz, *args)`` and returns
the JSON object the script prints last and the arrays it saved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

VENV = Path.home() / ".cache" / "recsys_ltr" / "bench-venv"
PEER_REQUIREMENTS = ["scikit-learn==1.5.*", "metric-learn==0.7.0"]


def peer_python() -> Path:
    """The peer interpreter, creating the environment on first use."""
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"# creating the peer environment {VENV} ({', '.join(PEER_REQUIREMENTS)})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_REQUIREMENTS], check=True)
    return python


def run_peer_script(script: str, arrays: dict, args, timeout: float, threads: int | None = None):
    """Run ``script`` in the peer environment on ``arrays``.

    Returns ``(result, outputs, note)``: the last JSON line printed and the arrays saved to the
    output ``.npz``, or ``(None, None, reason)`` when the script fails or exceeds ``timeout`` s.
    ``threads`` caps the peer's BLAS threads.
    """
    env = dict(os.environ)
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
    with tempfile.TemporaryDirectory() as tmp:
        inputs, out, path = (os.path.join(tmp, name) for name in ("in.npz", "out.npz", "peer.py"))
        np.savez(inputs, **arrays)
        Path(path).write_text(script)
        try:
            proc = subprocess.run(
                [str(peer_python()), path, inputs, out, *map(str, args)],
                capture_output=True, text=True, timeout=timeout, env=env,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return None, None, f"timeout > {timeout:.0f} s"
        if proc.returncode != 0:
            return None, None, "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:120]
        with np.load(out, allow_pickle=False) as data:
            outputs = {key: data[key] for key in data.files}
        return json.loads(proc.stdout.strip().splitlines()[-1]), outputs, ""
