"""GMML (su2017 Algorithm 1): Riccati equation, SPD, geodesic, pair sampling, bad inputs."""

import json
import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from _helpers import resave
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from recsys_ltr.ltr.lgmml import LGMML
from recsys_ltr.metric_learning.gmml import GMML, SingularScatterWarning, cross_scatter, gmml_components, within_scatter

pytestmark = pytest.mark.kernels


def _spd(rng, d, rank=None, ridge=0.1):
    A = rng.normal(size=(d, rank or d))
    return A @ A.T + ridge * np.eye(d)


def _reference(S, D, t):
    """Eq. 9 generalised to the geodesic, written plainly with scipy's matrix powers."""
    Sh = sla.sqrtm(S).real
    Sih = np.linalg.inv(Sh)
    return Sih @ sla.fractional_matrix_power(Sh @ D @ Sh, t).real @ Sih


def _metric(S, D, t=0.5):
    L = gmml_components(S, D, t)
    return L.T @ L


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(1, 8), swap=st.booleans())
def test_riccati_and_spd(seed, d, swap):
    rng = np.random.default_rng(seed)
    S, D = _spd(rng, d), _spd(rng, d, ridge=1e-3)
    if swap:  # exercise both pivots of gmml_components
        S, D = D, S
    M = _metric(S, D)
    assert np.allclose(M, M.T, atol=0)
    assert np.linalg.eigvalsh(M).min() > 0
    scale = np.linalg.norm(M) ** 2 * np.linalg.norm(S) + np.linalg.norm(D)
    assert np.linalg.norm(M @ S @ M - D) / scale < 1e-12
    assert np.allclose(M, _reference(S, D, 0.5), rtol=1e-7, atol=1e-9 * np.abs(M).max())


def test_riccati_nearly_singular_S():
    rng = np.random.default_rng(1)
    S = _spd(rng, 12, rank=3, ridge=1e-12)  # condition number ~1e13
    D = _spd(rng, 12, rank=30, ridge=0.0)
    M = _metric(S, D)
    assert np.all(np.isfinite(M))
    assert np.linalg.eigvalsh(M).min() > 0
    scale = np.linalg.norm(M) ** 2 * np.linalg.norm(S)
    assert np.linalg.norm(M @ S @ M - D) / scale < 1e-12


@pytest.mark.parametrize("t", [0.0, 0.25, 0.5, 0.8, 1.0])
def test_geodesic_points(t):
    rng = np.random.default_rng(2)
    S, D = _spd(rng, 5), _spd(rng, 5)
    M = _metric(S, D, t)
    assert np.allclose(M, _reference(S, D, t), rtol=1e-8, atol=1e-10)
    if t == 0.0:
        assert np.allclose(M, np.linalg.inv(S), atol=1e-10)
    if t == 1.0:
        assert np.allclose(M, D, atol=1e-10)


def test_scatter_closed_forms_match_loops():
    rng = np.random.default_rng(3)
    P, N = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    within = sum(np.outer(a - b, a - b) for i, a in enumerate(P) for j, b in enumerate(P) if i != j)
    cross = sum(np.outer(a - b, a - b) for a in P for b in N)
    assert np.allclose(within_scatter(P), within)
    assert np.allclose(cross_scatter(P, N), cross)


@pytest.mark.parametrize("offset", [1e3, 1e7])
def test_scatter_accurate_on_uncentred_data(offset):
    """Far from the origin the uncentred shortcut 2n P^T P - 2 s s^T loses every digit."""
    rng = np.random.default_rng(4)
    P, N = offset + rng.normal(size=(30, 3)), offset + rng.normal(size=(40, 3))
    within = sum(np.outer(a - b, a - b) for a in P for b in P)  # i == j adds 0
    cross = sum(np.outer(a - b, a - b) for a in P for b in N)
    np.testing.assert_allclose(within_scatter(P), within, rtol=0, atol=1e-8 * np.abs(within).max())
    np.testing.assert_allclose(cross_scatter(P, N), cross, rtol=0, atol=1e-8 * np.abs(cross).max())


def test_singular_scatter_without_ridge_warns():
    """regularization=0 and rank-deficient S: eigenvalues are clamped, and the user is told."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(8, 3))
    B = A.copy()
    B[:4, 0] += rng.normal(size=4)  # similar pairs differ along e_0 only: S has rank 1
    B[4:] += rng.normal(size=(4, 3))
    similar = np.arange(8) < 4
    with pytest.warns(SingularScatterWarning, match="clamped"):
        GMML(regularization=0.0).fit_pairs(A, B, similar)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingularScatterWarning)
        GMML(regularization=1e-3).fit_pairs(A, B, similar)


def test_fit_pairs_solves_regularised_riccati():
    rng = np.random.default_rng(4)
    A, B = rng.normal(size=(40, 4)), rng.normal(size=(40, 4))
    similar = np.arange(40) < 15
    g = GMML(regularization=0.5).fit_pairs(A, B, similar)
    diff = A - B
    S = diff[similar].T @ diff[similar] + 0.5 * np.eye(4)
    D = diff[~similar].T @ diff[~similar] + 0.5 * np.eye(4)
    M = g.get_mahalanobis_matrix()
    assert np.allclose(M @ S @ M, D, rtol=1e-9, atol=1e-9)
    assert np.allclose(g.components_.T @ g.components_, M)
    assert np.allclose(g.pair_distance(np.stack([A, B], axis=1)) ** 2, np.einsum("ij,jk,ik->i", diff, M, diff))
    assert np.allclose(g.transform(A), A @ g.components_.T)


def test_fit_samples_valid_pairs_and_learns_class_structure():
    rng = np.random.default_rng(5)
    y = np.repeat([0, 1, 2], 50)
    X = rng.normal(size=(150, 3))
    X[:, 0] += 4.0 * y  # the class signal lives in feature 0, features 1-2 are noise
    g = GMML(num_constraints=300, random_state=0).fit(X, y)
    M = g.get_mahalanobis_matrix()
    assert M[0, 0] > 3 * max(M[1, 1], M[2, 2])
    g2 = clone(g).fit(X, y)
    assert np.array_equal(g2.components_, g.components_)  # same seed -> same metric


def test_pair_sampler_semantics():
    from recsys_ltr.metric_learning.gmml import _sample_pairs

    cls = np.array([2, 0, 1, 0, 2, 2, 1, 0])
    counts = np.bincount(cls)
    a_s, b_s, a_d, b_d = _sample_pairs(cls, counts, 2000, np.random.default_rng(0))
    assert np.all(cls[a_s] == cls[b_s]) and np.all(a_s != b_s)
    assert np.all(cls[a_d] != cls[b_d])
    # partners cover the whole other-class pool
    assert set(b_d[a_d == 1]) == set(np.flatnonzero(cls != 0))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"regularization": -1.0}, "regularization"),
        ({"t": 1.5}, "t must"),
        ({"regularization": np.nan}, "regularization"),
        ({"regularization": True}, "regularization must be a real"),
        ({"t": False}, "t must be a real"),
        ({"t": "0.5"}, "t must be a real"),
        ({"num_constraints": 0}, "num_constraints"),
    ],
)
def test_bad_params(params, match):
    X = np.eye(4)
    with pytest.raises((ValueError, TypeError), match=match):
        GMML(**params).fit_pairs(X, X[::-1], np.array([True, False, True, False]))


def test_bad_inputs():
    X = np.random.default_rng(0).normal(size=(6, 2))
    with pytest.raises(ValueError, match="two classes"):
        GMML().fit(X, np.zeros(6))
    with pytest.raises(ValueError, match="similar pairs"):
        GMML().fit(X[:2], [0, 1])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        GMML().fit(X, [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        GMML().fit(np.full((4, 2), np.nan), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="one similar and one dissimilar"):
        GMML().fit_pairs(X, X, np.ones(6, dtype=bool))
    with pytest.raises(ValueError, match="shape mismatch"):
        GMML().fit_pairs(X, X[:3], np.ones(6, dtype=bool))
    with pytest.raises(NotFittedError):
        GMML().transform(X)
    g = GMML().fit(X, [0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="features"):
        g.transform(np.ones((2, 3)))
    with pytest.raises(ValueError, match="zero"):
        GMML(regularization=0.0).fit_pairs(X, X, np.arange(6) < 3)


def test_save_load_roundtrip_and_malformed(tmp_path):
    X = np.random.default_rng(0).normal(size=(30, 3))
    g = GMML(regularization=0.3, random_state=2).fit(X, np.arange(30) % 3)
    g.save(tmp_path / "g")
    h = GMML.load(tmp_path / "g")
    assert h.get_params() == g.get_params()
    assert np.array_equal(h.get_mahalanobis_matrix(), g.get_mahalanobis_matrix())
    assert np.array_equal(h.transform(X), g.transform(X))
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable recsys_ltr model file"):
        GMML.load(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", header=np.array('{"format": "x"}'), components_=np.eye(2))
    with pytest.raises(ValueError, match="does not describe a recsys_ltr file"):
        GMML.load(tmp_path / "other.npz")
    GMML(regularization=0.3, random_state=2).fit(X, np.arange(30) % 3).save(tmp_path / "g2")
    with pytest.raises(ValueError, match="holds a 'GMML', not a LGMML"):
        LGMML.load(tmp_path / "g2.npz")
    for key, value in (("t", 7), ("regularization", -1.0), ("t", True)):
        bad = dict(np.load(tmp_path / "g.npz"))
        header = json.loads(str(bad["header"]))
        header["params"][key] = value
        bad["header"] = np.array(json.dumps(header))
        resave(tmp_path / "bad.npz", **bad)
        with pytest.raises(ValueError, match=f"invalid parameters: {key}"):
            GMML.load(tmp_path / "bad.npz")
    with pytest.raises(ValueError, match="JSON-serialisable"):
        GMML(random_state=np.random.default_rng(0)).fit(X, np.arange(30) % 3).save(tmp_path / "gen")
