"""Session fixtures shared by the test modules."""

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance with 2 CPUs for the whole test session (tests using it are skipped
    when ray is not installed).  Workers inherit this process's environment (``PYTHONPATH``,
    ``NUMBA_NUM_THREADS``), so they import the same ``recsys_ltr``."""
    ray = pytest.importorskip(
        "ray", reason="ray is not installed: pip install -e '.[ray]' to run the distributed tests"
    )
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=256 * 2**20)
    yield ray
    if started:
        ray.shutdown()
