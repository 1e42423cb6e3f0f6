"""Session fixtures shared by the test modules, and the ``--row-kernels`` option."""

import math

import pytest

_SERIAL_SECONDS = {"serial": math.inf, "parallel": 0.0}


def pytest_addoption(parser):
    parser.addoption(
        "--row-kernels",
        choices=["auto", *_SERIAL_SECONDS],
        default="auto",
        help="which version of the chunked row kernels runs (recsys_ltr._parallel.RowKernel): by the "
        "call's size (auto), or always one of them; the small test data would otherwise run serially only",
    )


def pytest_configure(config):
    choice = config.getoption("--row-kernels")
    if choice != "auto":
        from recsys_ltr import _parallel

        _parallel.SERIAL_SECONDS = _SERIAL_SECONDS[choice]


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
