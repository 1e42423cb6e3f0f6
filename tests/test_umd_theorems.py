"""Statistical checks of dissertation Theorems 4.1 and 4.2 through ``evaluate``.

Missing-data model (sec. 4.4): user u has a complete relevant set P+; the observed positives O+
are a simple random sample of P+ of unknown size.  For a fixed ranking:

* Theorem 4.1: the observed UMD measures (ADG, and also ATOP and REC@k, Eq. 4.2) are unbiased
  for their values on P+.
* Theorem 4.2: NDCG_obs is biased unless |O+| = |P+|.  Given |O+| = s, NDCG_obs = ADG_obs * s /
  IDCG(s), so E[NDCG_obs | s] = ADG_comp * s / IDCG(s) while NDCG_comp = ADG_comp * |P+| /
  IDCG(|P+|).

Each row of the test matrices is one draw (planted user, observed subset); all draws of a planted
user share its scores and training items, hence its candidates and ranking.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from recsys_ltr.metrics import evaluate

pytestmark = pytest.mark.kernels

N_PLANTED, N_DRAWS, N_ITEMS, N_RELEVANT = 4, 600, 150, 25
UMD = ("ADG", "ATOP", "REC@20")


def idcg(s):
    return np.sum(1 / np.log2(np.arange(s) + 2))


@pytest.fixture(scope="module")
def experiment():
    rng = np.random.default_rng(12345)
    planted = np.repeat(np.arange(N_PLANTED), N_DRAWS)  # planted user of each draw
    n_rows = planted.size
    user_scores = rng.normal(size=(N_PLANTED, N_ITEMS))
    relevant = np.empty((N_PLANTED, N_RELEVANT), dtype=np.int64)
    train = np.zeros((n_rows, N_ITEMS), dtype=bool)
    for p in range(N_PLANTED):
        perm = rng.permutation(N_ITEMS)
        relevant[p] = perm[:N_RELEVANT]
        train[np.ix_(planted == p, perm[N_RELEVANT : N_RELEVANT + 10])] = True  # same 10 training items
    complete = np.zeros_like(train)
    observed = np.zeros_like(train)
    sizes = rng.integers(1, N_RELEVANT, size=n_rows)  # random size, always < |P+|
    for row in range(n_rows):
        complete[row, relevant[planted[row]]] = True
        observed[row, rng.choice(relevant[planted[row]], size=sizes[row], replace=False)] = True
    as_csr = lambda m: sp.csr_matrix(m.astype(np.float64))  # noqa: E731
    score_fn = lambda u: user_scores[planted[u]]  # noqa: E731
    comp = evaluate(score_fn, as_csr(train), as_csr(complete), metrics=UMD + ("NDCG",), k=20)
    obs = evaluate(score_fn, as_csr(train), as_csr(observed), metrics=UMD + ("NDCG",), k=20)
    return planted, sizes, comp, obs


@pytest.mark.parametrize("metric", UMD)
def test_theorem_4_1_umd_measures_unbiased(experiment, metric):
    planted, _, comp, obs = experiment
    for p in range(N_PLANTED):
        draws = obs.per_user[metric][planted == p]
        truth = comp.per_user[metric][planted == p]
        assert np.ptp(truth) == 0  # every draw of a planted user has the same complete value
        stderr = draws.std(ddof=1) / np.sqrt(draws.size)
        assert abs(draws.mean() - truth[0]) < 4 * stderr, (metric, p, draws.mean(), truth[0], stderr)


def test_theorem_4_2_ndcg_biased(experiment):
    planted, sizes, comp, obs = experiment
    for p in range(N_PLANTED):
        mask = planted == p
        ndcg_obs, adg_comp = obs.per_user["NDCG"][mask], comp.per_user["ADG"][mask][0]
        ndcg_comp = comp.per_user["NDCG"][mask][0]
        assert ndcg_comp == pytest.approx(adg_comp * N_RELEVANT / idcg(N_RELEVANT), rel=1e-12)
        stderr = ndcg_obs.std(ddof=1) / np.sqrt(ndcg_obs.size)
        # Biased: the mean observed NDCG misses the complete one by many standard errors ...
        assert abs(ndcg_obs.mean() - ndcg_comp) > 10 * stderr
        # ... and agrees with the theorem's expectation ADG_comp * s / IDCG(s) given the sizes.
        predicted = adg_comp * np.mean([s / idcg(s) for s in sizes[mask]])
        assert abs(ndcg_obs.mean() - predicted) < 4 * stderr
        # Conditioning on small observed sets leaves ADG unbiased but makes NDCG far worse.
        small = mask & (sizes <= 5)
        adg_small = obs.per_user["ADG"][small]
        assert abs(adg_small.mean() - adg_comp) < 4 * adg_small.std(ddof=1) / np.sqrt(adg_small.size)
        assert ndcg_comp - obs.per_user["NDCG"][small].mean() > ndcg_comp - ndcg_obs.mean()
