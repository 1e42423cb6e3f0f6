"""ApproximateTopN (recsys_ltr.models.approximate): equal to exact at a full scan, filters honoured,
close to exact at the default scan, and its boundary."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

from recsys_ltr.datasets import make_synthetic
from recsys_ltr.models import ALS, BPR, ItemKNN

faiss = pytest.importorskip("faiss", reason="faiss-cpu is the optional ann extra")
from recsys_ltr.models.approximate import ApproximateTopN  # noqa: E402

pytestmark = pytest.mark.kernels
ONE = dict(num_threads=1)


@pytest.fixture(scope="module")
def model():
    X = make_synthetic(n_users=300, n_items=900, density=0.04, random_state=0).matrix
    return ALS(factors=12, iterations=4, random_state=0, **ONE).fit(X)


USERS = np.arange(300)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"filter_items": np.arange(0, 900, 7)},
        {"filter_already_liked_items": False},
        {"items": np.arange(100, 400)},
        {"N": 1},
    ],
)
def test_a_full_scan_equals_the_exact_answers(model, kw):
    served = ApproximateTopN(model, nprobe=10**6, **ONE)  # every cell scanned
    want = model.recommend(USERS, **{"N": 10, **kw})
    got = served.recommend(USERS, **{"N": 10, **kw})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    assert got[0].dtype == np.int32


def test_default_scan_is_close_and_honours_the_filters(model):
    served = ApproximateTopN(model, nprobe=1, **ONE)  # 1 of 23 cells
    banned = np.arange(0, 900, 90)  # few: a request past an eighth of the catalogue is ranked exactly
    ids, scores = served.recommend(USERS, N=20, filter_items=banned)
    exact = model.recommend(USERS, N=20, filter_items=banned)[0]
    recall = np.mean([np.intersect1d(a, b).size for a, b in zip(ids, exact)]) / 20
    assert 0.5 < recall < 1.0  # approximate, not exact
    assert not np.isin(ids, banned).any() and (ids >= 0).all()
    liked = model.user_items_
    assert all(not np.isin(ids[u], liked[u].indices).any() for u in USERS)
    assert np.all(np.diff(scores, axis=1) <= 0)  # ranked


def test_scalar_user_and_fold_in(model):
    served = ApproximateTopN(model, nprobe=10**6, **ONE)
    ids, scores = served.recommend(3, N=5)
    assert ids.shape == (5,) and scores.shape == (5,)
    row = model.user_items_[[3]]
    got = served.recommend(400, user_items=row, N=5, recalculate_user=True)
    np.testing.assert_array_equal(got[0], model.recommend(400, user_items=row, N=5, recalculate_user=True)[0])


def test_the_same_index_twice(model):
    a, b = ApproximateTopN(model, nprobe=3, **ONE), ApproximateTopN(model, nprobe=3, **ONE)
    np.testing.assert_array_equal(a.recommend(USERS, N=10)[0], b.recommend(USERS, N=10)[0])


def test_boundary(model):
    X = model.user_items_
    with pytest.raises(TypeError, match="fitted ALS, BPR or LightFMWARP"):
        ApproximateTopN(ItemKNN(k=3).fit(X))
    with pytest.raises(NotFittedError):
        ApproximateTopN(ALS())
    with pytest.raises(ValueError, match="nlist"):
        ApproximateTopN(model, nlist=10**6)
    with pytest.raises(ValueError, match="nprobe"):
        ApproximateTopN(model, nprobe=0)
    with pytest.raises(ValueError, match="out of range"):
        ApproximateTopN(model).recommend([300], N=3)
    with pytest.raises(ValueError, match="one row per userid"):
        ApproximateTopN(model).recommend([0], user_items=sp.csr_matrix((2, 900)), N=3)
    bpr = BPR(factors=4, iterations=2, random_state=0, **ONE).fit(X)
    assert ApproximateTopN(bpr, nprobe=10**6).recommend(0, N=3)[0].tolist() == bpr.recommend(0, N=3)[0].tolist()
