import math

import numpy as np
import pytest

from recsys_ltr.warp import NML_KINDS, nml_loss


def brute_alpha(kind, n, k=None):
    """alpha_1..alpha_n written straight from the definitions (Def. 3.1, Eq. 4.8, su2017 Eq. 16)."""
    if kind == "reciprocal":
        return [1 / i for i in range(1, n + 1)]
    if kind == "pak":
        return [1 / k if i <= k else 0.0 for i in range(1, n + 1)]
    if kind == "uniform":
        return [1 / n] * n
    if kind == "adg":
        C = [1 - 1 / math.log2(j + 2) for j in range(n + 1)]
        return [C[i] - C[i - 1] for i in range(1, n + 1)]
    return [1 / math.log2(i + 1) for i in range(1, n + 1)]


@pytest.mark.parametrize("kind", NML_KINDS)
@pytest.mark.parametrize("n", [1, 2, 7, 250])
def test_matches_definition_and_is_nml(kind, n):
    k = 5 if kind == "pak" else None
    L = nml_loss(kind, n, k=k, normalize=False)
    expected = np.concatenate(([0.0], np.cumsum(brute_alpha(kind, n, k))))
    np.testing.assert_allclose(L, expected, rtol=1e-12, atol=1e-15)
    alpha = np.diff(L)
    assert L[0] == 0 and np.all(alpha >= 0) and np.all(np.diff(alpha) <= 1e-15)
    Ln = nml_loss(kind, n, k=k)
    assert Ln[-1] == pytest.approx(1.0)
    np.testing.assert_allclose(Ln, L / L[-1])


def test_hand_values():
    np.testing.assert_allclose(nml_loss("reciprocal", 3, normalize=False), [0, 1, 1.5, 1.5 + 1 / 3])
    np.testing.assert_allclose(nml_loss("pak", 4, k=2), [0, 0.5, 1, 1, 1])
    np.testing.assert_allclose(nml_loss("uniform", 4), [0, 0.25, 0.5, 0.75, 1])
    # ADG: C(0) = 0 (top item has gain 1), C(1) = 1 - 1/log2(3), C(2) = 1/2
    np.testing.assert_allclose(nml_loss("adg", 2, normalize=False), [0, 1 - 1 / np.log2(3), 0.5])
    np.testing.assert_allclose(
        nml_loss("lgmml", 3, normalize=False), [0, 1, 1 + 1 / np.log2(3), 1 + 1 / np.log2(3) + 0.5]
    )
    # pak with k beyond n: normalised to L(n) = 1
    np.testing.assert_allclose(nml_loss("pak", 2, k=4), [0, 0.5, 1])


@pytest.mark.parametrize(
    "args, kwargs, exc",
    [
        (("ndcg", 5), {}, ValueError),
        (("reciprocal", 0), {}, ValueError),
        (("reciprocal", 2.5), {}, TypeError),
        (("pak", 5), {}, ValueError),
        (("pak", 5), {"k": 0}, ValueError),
        (("uniform", 5), {"k": 3}, ValueError),
    ],
)
def test_bad_input(args, kwargs, exc):
    with pytest.raises(exc):
        nml_loss(*args, **kwargs)
