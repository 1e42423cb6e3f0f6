"""This checkout against a git ref: the one helper of the benchmarks that compare the code with an
earlier version of itself (``bench_regression.py``).

:func:`checkout` puts a ref in a temporary detached worktree (removed afterwards) and
:func:`fresh_process` runs code in a new Python process on this checkout or on that worktree, so that
both sides import their own package and compile or load their own numba cache.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def checkout(ref: str):
    """The path of a temporary detached worktree of ``ref``, removed on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(path), ref], check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=True)


def fresh_process(code: str, path: Path, env: dict | None = None, cold: bool = False, timeout=None) -> str:
    """Standard output of ``python -c code`` run from ``path`` (this checkout or a :func:`checkout`),
    with ``env`` added; ``cold``: an empty numba cache (the first contact of a new user); killed
    after ``timeout`` seconds (``RuntimeError``)."""
    inherited = os.environ.get("PYTHONPATH")  # after the checkout: its own package first
    env = {**os.environ, **(env or {}), "RECSYS_LTR_COMPILE_NOTICE": "0"}
    env["PYTHONPATH"] = os.pathsep.join([str(path), inherited]) if inherited else str(path)
    with tempfile.TemporaryDirectory() as cache:
        if cold:
            env["NUMBA_CACHE_DIR"] = cache
        # cwd: ``python -c`` puts the working directory first on sys.path, ahead of PYTHONPATH
        try:
            done = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=path, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"over the budget: stopped after {timeout:,.0f} s") from None
    if done.returncode:
        raise RuntimeError(f"subprocess failed ({path}):\n{done.stderr[-3000:]}")
    return done.stdout
