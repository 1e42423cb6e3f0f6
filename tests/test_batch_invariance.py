"""One rule for every model: a user's scores and recommendations are a function of that user and the
fitted model, never of the other users of the batch (order, composition, duplicates, empty users).

Bit for bit for every model whose scores are computed row by row (numba kernels, scipy's sparse
products); to :data:`BLAS_RTOL` of the row's largest score for the models whose scores are dense
BLAS products (``U @ V.T``, GF-CF's and BSPM's low-pass filter), whose blocked kernels round the last
bit differently for different batch shapes.  Their recommendations then agree up to such near-ties.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import exported_recommenders, small_models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

N_USERS, N_ITEMS = 24, 18
#: relative tolerance (to the row's largest absolute score) of the BLAS-scored models
BLAS_RTOL = 1e-12
BLAS = {"ALS", "BPR", "LightFMWARP", "GFCF", "BSPM", "ChebyCF"}


#: every exported recommender, small and seeded, and variants (the coverage test of _helpers keeps it complete)
CONFIGS = small_models(N_ITEMS, variants=True)


def _matrix() -> sp.csr_matrix:
    """Half the users empty, the others with 1 to 4 positives (item 0 shared by all, so every
    held-out fold has a label among the bases' candidates)."""
    rng = np.random.default_rng(3)
    D = np.zeros((N_USERS, N_ITEMS))
    for u in range(1, N_USERS, 2):
        D[u, rng.choice(np.arange(1, N_ITEMS), rng.integers(1, 4), replace=False)] = 1.0
        D[u, 0] = 1.0
    return sp.csr_matrix(D)


_FITTED = {}


def _fitted(name):
    if name not in _FITTED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _FITTED[name] = CONFIGS[name]().fit(_matrix())
    return _FITTED[name]


def test_every_exported_recommender_is_covered():
    covered = {type(make()).__name__ for make in CONFIGS.values()}
    assert exported_recommenders() <= covered, exported_recommenders() - covered


def _assert_row(name, single, batch_row):
    if name in BLAS:
        scale = max(1.0, float(np.max(np.abs(single[np.isfinite(single)]), initial=0.0)))
        np.testing.assert_allclose(batch_row, single, rtol=0, atol=BLAS_RTOL * scale)
    else:
        np.testing.assert_array_equal(batch_row, single)


batches = st.lists(st.integers(0, N_USERS - 1), min_size=1, max_size=12)


@pytest.mark.kernels
@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=batches)
def test_a_users_scores_do_not_depend_on_the_batch(name, batch):
    model = _fitted(name)
    S = model.score(batch)
    for j, u in enumerate(batch):
        _assert_row(name, model.score([u])[0], S[j])


@pytest.mark.kernels
@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=10, deadline=None)
@given(batch=batches, N=st.integers(1, N_ITEMS))
def test_a_users_recommendations_do_not_depend_on_the_batch(name, batch, N):
    model = _fitted(name)
    ids, scores = model.recommend(np.array(batch), N=N)
    for j, u in enumerate(batch):
        one_ids, one_scores = model.recommend(u, N=N)  # a single user's lists are not padded
        kept = ids[j] >= 0
        assert kept.sum() == one_ids.size and not kept[one_ids.size :].any()
        if name in BLAS:  # equal up to near-ties: the same scores in the same order
            _assert_row(name, one_scores, scores[j][kept])
        else:
            np.testing.assert_array_equal(ids[j][kept], one_ids)
            np.testing.assert_array_equal(scores[j][kept], one_scores)


def test_stacked_febr_scores_a_user_alone_as_in_a_batch():
    """The campaign's case (febr_stack/few_positives/half_users_empty/holdoutK3): the head's key was a
    BLAS product of the block, whose last bit split or joined ties of the head (-1 against 0)."""
    model = _fitted("FEBR")
    batch = np.arange(N_USERS)
    S = model.score(batch)
    for u in batch:
        np.testing.assert_array_equal(model.score([u])[0], S[u])
    ids, _ = model.recommend(batch, N=5)
    assert all(np.array_equal(model.recommend(u, N=5)[0], ids[u][ids[u] >= 0]) for u in batch)
