"""Cold start through content (issue 7 sec. 4): recommend items nobody has consumed, from content alone.

Protocol (per data set and seed)
--------------------------------
* Catalogue: the ``--items`` most popular items having content after the tag filter (tags used by
  >= 3 of the candidate items, at most ``--max-tags`` most frequent ones); content = tf-idf of the
  tag counts, rows L2-normalised.  Users without any interaction with these items are dropped.
* Cold items: a random 20% of the catalogue (seeded).  ALL their interactions are removed from
  training; the test set is every user's interactions with cold items.
* Candidates are the cold items only: every scorer gives warm items ``-inf``, so a cold test
  item's rank counts cold candidates only (ADG, REC@10 depend on the rank alone; ties by id, since
  cold items all have training popularity 0).  Users with no training interaction (nothing to
  build on) or no cold test item are not evaluated.
* FRML is fit on the warm items' content with relevance = each warm item's nearest warm items by
  cosine of their user vectors in the training matrix (a fraction ``relevance`` of them).  Fixed:
  ``FRML_FIXED`` (the learning rate and init chosen on validation in ``bench_frml.py``); chosen per
  seed from ``FRML_GRID`` (rank, relevance fraction) and ``BLEND_WEIGHTS`` by validation ADG on
  pseudo-cold items: 20% of the WARM items have their training interactions hidden, the metric is
  fit on the remaining warm items, and item-p recommends the pseudo-cold ones.  The cold test items
  are never used for selection.
* Every content affinity (Euclid, FRML, blend, L-GMML) is Gaussian, ``exp(-s / sigma^2)``, and
  every one gets the same bandwidth choice: ``sigma^2`` = ``c`` times the median stored ``s``, ``c``
  from ``BANDWIDTHS`` chosen on validation with the model's other settings (no refit).  Before,
  only L-GMML had this choice (the median for the others): an advantage the others lacked.

Methods
-------
* ``random (pop)``: popularity is undefined on cold items (all counts 0), so popularity degrades
  to an arbitrary order; we report a seeded random order (and not the id order, which may leak
  the data set's construction).
* ``content-pop``: the popularity a cold item is predicted to have, the affinity-weighted mean
  training popularity of its Euclidean content neighbours (same list for every user).
* ``item-p Euclid``: content item-p (ContentItemKNN) over ContentAffinity(metric=None): Euclidean
  on tf-idf/L2 content (the cosine neighbourhood of tag vectors).
* ``item-p FRML``: the same over ContentAffinity(metric=FRML fitted as above; the grid setting
  with the best validation ADG for FRML alone).
* ``item-p blend``: the same over :class:`BlendedMetric` (raw tag distance and FRML's distance,
  weight ``w`` of the learned one), ``w`` and FRML's setting chosen on validation; ``w = 0``
  (Euclidean) is a candidate, so this row equals ``item-p Euclid`` when FRML does not help on
  validation.
* ``item-p L-GMML``: the same over :class:`~recsys_ltr.ltr.LGMMLAffinity`:
  L-GMML trained on the warm items (relevance = co-consumption, as FRML's, fraction 0.01)
  re-ranks each item's ``n_candidates`` nearest content neighbours by the cost
  ``(1 - w) (-f) + w (content distance)``; pair vector ``|u_q - u_c|`` of the SVD-reduced content
  (on lastfm-2k seed-0 validation ADG: absdiff .284, product .186, both .213, so absdiff is
  fixed); pre-selection 150 (validation ADG equal to 300's at half the fit time); 128 components.
  The content weight ``w`` (``LGMML_CONTENT_WEIGHTS``) and the bandwidth multiple
  (``BANDWIDTHS``) are chosen on validation (one fit, re-weighted from its candidate
  scores).  lastfm-2k seed-0 validation ADG (Euclid .3087; best bandwidth multiple of each):
  64 components, L-GMML alone (w = 0) .288, w = .5 .305, .75 .307, .9 .309, content order
  (w = 1) .309; 128 components .294, .308, .310, .310; 16 components .278 alone; 256 components:
  L-GMML alone .302, best (w = .75) .3105 against .3097 at 128, but on test (3 seeds) L-GMML
  item-p ADG / REC@10 .2906 / .3153 on lastfm-2k (128: .2900 / .3102) and .3397 / .4197 on
  citeulike-a (128: .3401 / .4161) for 2-3x the fit time (136 s against 66 s and 49 s: the local
  distances take ``m d^2`` flops a pair), so 128 stays.  Relevance fractions .03 and .05 (128 components):
  best .3093 and .3089, L-GMML alone .296 and .294.  Tried there
  without gain (w = 0, 64 components): the pair's content distance as an extra feature
  (``distance_feature``, .289; .294 at 128), relevance within each query's candidates
  (``relevance_scope="candidates"``, fractions .05 to .2: .288), ``distance="mahalanobis"``
  (.291); anchors at the origin (the absdiff vector of identical content, Φ refit for them):
  best .3096 on seed 0 against .3116, .3013 on seed 1 against .3012; bandwidth multiples .0625
  and .125 (every method drops) and ``w`` .95 (at most .3105).  Earlier, also without gain: 30 Φ epochs, 100 metrics x 40 queries,
  ``test_anchors="candidates"``.  The relevance fraction is fixed at 0.01 (the earlier grid
  (0.01, 0.005) doubled the fits).  GMML's geodesic weight ``t`` is chosen on validation from
  (0.5, 0.2) (``LGMML_GRID``).  Probe on lastfm-2k seed-0 validation (128 components; best ADG over
  ``w`` and bandwidth): ``t`` .5 .3097 (three fit seeds .3094-.3097), .3 .3105, .25 .3104, .2 .3116
  (.3112-.3116), .15 .3067, .1 .2578, .7 .3092, while L-GMML alone drops from .294 at .5 to .186 at .2;
  without gain: ``regularization`` 1e-2 to 10 (alone up to .298, best .309), ``phi_mode="per_query"``,
  ``margin`` .01 and 1, ``learning_rate`` .01 and .25.  On test (3 seeds; lastfm-2k picks ``t`` = .2 for
  seeds 0 and 2, .5 for seed 1; citeulike-a .5 for all, so its rows are unchanged) L-GMML item-p
  ADG / REC@10 on lastfm-2k is .2899 / .3184 (``t`` = .5 alone: .2900 / .3102) and LG+blend .2962 /
  .3219 (.2950 / .3164), ahead of every other row on both metrics; L-GMML item-p stays below FRML's
  .2918 ADG.  Per seed (ADG, every affinity with a bandwidth chosen on validation): L-GMML item-p
  .2899 / .2977 / .2829 against FRML's .2918 / .2967 / .2811, ahead on two seeds of three and on
  the mean (.2902 against .2899), behind on the median by .0019.
* ``item-p LG+blend``: item-p over :func:`~recsys_ltr.neighbors.blend_affinity` of the
  ``item-p blend`` affinity and L-GMML's, L-GMML's weight (``LG_BLEND_WEIGHTS``, 0 included:
  then this row equals ``item-p blend``) chosen on validation.
* ``oracle pop``: the cold items' TEST counts, a reference only (not a valid method: it reads the
  test set); it shows how much of the task pure popularity explains.

Figures are medians over ``--runs`` seeds (each: new cold split, new FRML and L-GMML seeds).  Usage::

    NUMBA_NUM_THREADS=2 python benchmarks/cold_start.py [--datasets lastfm-2k citeulike-a]
        [--runs 3] [--items 3000] [--k 100]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recsys_ltr.ltr import LGMML, LGMMLAffinity
from recsys_ltr.ltr.content import rerank_costs
from recsys_ltr.metric_learning.frml import FRML
from recsys_ltr.metrics import evaluate
from recsys_ltr.models.content import ContentItemKNN
from recsys_ltr.neighbors import Affinity, ContentAffinity, blend_affinity, coconsumption_relevance

METRICS = ("ADG", "REC@10")
COLD_FRACTION = 0.2
FRML_FIXED = dict(learning_rate=16.0, init="pca", kappa=0.1, max_iter=5000)  # as tuned in bench_frml.py
FRML_GRID = [dict(n_components=m, relevance=f) for m in (32, 64) for f in (0.05, 0.01)]
BLEND_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # weight of the learned distance (0: Euclidean on tags)
LGMML_FIXED = dict(n_candidates=150, n_components=128, pair="absdiff")  # chosen on validation (docstring)
LGMML_RANKER = dict(n_metrics=50, queries_per_metric=20, iterations=10)  # LGMML's defaults
LGMML_GRID = [dict(relevance_fraction=0.01, t=t) for t in (0.5, 0.2)]  # t: LGMML's GMML geodesic weight
BANDWIDTHS = (0.25, 0.5, 1.0)  # multiples of every content affinity's median bandwidth, chosen on validation
LGMML_CONTENT_WEIGHTS = (0.0, 0.5, 0.75, 0.9)  # weight of the content distance in the re-ranking cost (no refit)
LG_BLEND_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # weight of L-GMML's affinity against the tag + FRML blend's


def catalogue(name, n_items, max_tags):
    """Binary users x items matrix and tf-idf/L2 content of the selected items."""
    from recsys_ltr import datasets

    data = datasets.load(name)
    X = sp.csc_matrix(data.matrix > 0, dtype=np.float64)
    F = sp.csr_matrix(data.item_features)
    tagged = np.flatnonzero(np.diff(F.indptr) > 0)
    df = np.diff(sp.csc_matrix(F[tagged] > 0).indptr)
    keep = np.flatnonzero(df >= 3)
    keep = keep[np.argsort(-df[keep], kind="stable")[:max_tags]]
    F = F[:, keep]
    popularity = np.diff(X.indptr)
    eligible = np.flatnonzero((np.diff(F.indptr) > 0) & (popularity > 0))
    items = np.sort(eligible[np.argsort(-popularity[eligible], kind="stable")[:n_items]])
    X = sp.csr_matrix(X[:, items])
    X = X[np.diff(X.indptr) > 0]
    content = normalize(TfidfTransformer().fit_transform(F[items]))
    return X, sp.csr_matrix(content)


def cold_split(X, seed, candidates=None):
    """(train, test, cold ids): test holds all interactions with a random 20% of ``candidates``
    (default: every item)."""
    n = X.shape[1]
    candidates = np.arange(n) if candidates is None else candidates
    cold = np.sort(
        np.random.default_rng(seed).choice(candidates, int(round(COLD_FRACTION * candidates.size)), replace=False)
    )
    is_cold = np.zeros(n, bool)
    is_cold[cold] = True
    coo = X.tocoo()
    on_cold = is_cold[coo.col]
    part = lambda mask: sp.csr_matrix((coo.data[mask], (coo.row[mask], coo.col[mask])), shape=X.shape)  # noqa: E731
    return part(~on_cold), part(on_cold), cold


def fit_frml(train, content, cold, setting, seed, threads):
    """FRML on the warm items, relevance = the ``setting["relevance"]`` fraction of nearest warm
    items by cosine of user vectors in ``train``."""
    params = dict(setting)
    frac = params.pop("relevance")
    warm = np.setdiff1d(np.arange(train.shape[1]), cold)
    R = coconsumption_relevance(train, frac, warm)
    return FRML(random_state=seed, num_threads=threads, **FRML_FIXED, **params).fit(content[warm], relevance=R)


def with_bandwidth(affinity, c):
    """The Gaussian affinity ``exp(-s / sigma^2)`` with ``sigma^2`` multiplied by ``c``: what
    ``LGMMLAffinity(bandwidth=c * bandwidth_)`` gives with the same ranker."""
    M = affinity.matrix.copy()
    M.data = M.data ** (1.0 / c)
    return Affinity(M, affinity.k_max, affinity.kind, affinity.side)


class BlendedMetric:
    """Content embedding whose squared distance mixes the raw and the learned one:
    ``(1 - w) d_F(i, j)^2 / s_F + w d_L(i, j)^2 / s_L``, each ``s`` the mean squared distance between
    distinct items with content (so ``w`` weighs comparable scales; ``w = 0`` is Euclidean on F,
    ``w = 1`` FRML alone, up to a scale that the affinity's median bandwidth absorbs)."""

    def __init__(self, frml, weight, F):
        self.frml, self.weight = frml, weight
        rows = np.diff(sp.csr_matrix(F).indptr) > 0
        self.scales = [_mean_sq_distance(Z[rows]) for Z in self._parts(F)]

    def _parts(self, F):
        return np.asarray(sp.csr_matrix(F).toarray()), self.frml.transform(F)

    def transform(self, F):
        (ZF, ZL), (sF, sL) = self._parts(F), self.scales
        return np.hstack((np.sqrt((1 - self.weight) / sF) * ZF, np.sqrt(self.weight / sL) * ZL))


def _mean_sq_distance(Z):
    """Mean of ||z_i - z_j||^2 over ordered pairs i != j, in closed form."""
    n = Z.shape[0]
    return 2.0 * n / (n - 1) * float((Z * Z).sum(axis=1).mean() - (Z.mean(axis=0) ** 2).sum())


def cold_scorer(score_rows, cold, n_items):
    """Score function for :func:`evaluate`: the model's scores on cold items, ``-inf`` elsewhere."""
    warm = np.setdiff1d(np.arange(n_items), cold)

    def score(ids):
        S = np.array(score_rows(ids), dtype=np.float64)
        S[:, warm] = -np.inf
        return S

    return score


def constant_scorer(values):
    return lambda ids: np.broadcast_to(values, (len(ids), values.size))


def cold_metrics(score, train, test, cold, threads, metrics=METRICS):
    """ADG / REC@10 of ``score`` over the cold items, for users with a training interaction."""
    users = np.flatnonzero(np.diff(train.indptr) > 0)
    res = evaluate(
        cold_scorer(score, cold, train.shape[1]), train, test, metrics=metrics, users=users, num_threads=threads
    )
    return {m: res[m] for m in metrics}, len(res.users)


def item_p_over(affinity, train, k, threads):
    return ContentItemKNN(affinity, k=k, num_threads=threads).fit(train).score


def fit_lgmml(train, content, setting, seed, k, threads):
    """LGMMLAffinity on the items with training interactions (the warm ones), co-consumption relevance."""
    ranker_keys = LGMML().get_params().keys()
    ranker = LGMML(**LGMML_RANKER, **{key: value for key, value in setting.items() if key in ranker_keys})
    setting = {key: value for key, value in setting.items() if key not in ranker_keys and key != "bandwidth"}
    model = LGMMLAffinity(k=k, lgmml=ranker, random_state=seed, num_threads=threads, **LGMML_FIXED, **setting)
    start = time.perf_counter()
    model.fit(content, train)
    model.fit_time_ = time.perf_counter() - start
    return model


def reweighted(model, content, weight, c, k):
    """The affinity ``model`` gives with ``content_weight=weight`` and ``c`` times the median
    bandwidth, from its candidate scores (no refit)."""
    S = rerank_costs(*model.candidate_scores(content), k, weight)
    median = float(np.median(S.data))
    S.data = np.exp(-S.data / (c * (median if median > 0 else 1.0)))
    return Affinity.trusted(S, k, "custom", "item")


def select(train, content, cold, seed, k, threads):
    """Choose FRML's setting (``FRML_GRID``), the blend weight (``BLEND_WEIGHTS``), L-GMML's setting
    (``LGMML_GRID``, ``LGMML_CONTENT_WEIGHTS``, ``LGMML_BANDWIDTHS``) and the weight of L-GMML in its blend with the tag + FRML blend
    (``LG_BLEND_WEIGHTS``) by ADG on pseudo-cold items: 20% of the warm items whose training
    interactions are hidden in turn.  Returns ``({w: (best setting at w, its validation ADG)},
    (L-GMML setting, its ADG), {v: ADG of the L-GMML blend with weight v})``."""
    warm = np.setdiff1d(np.arange(train.shape[1]), cold)
    vtrain, vtest, vcold = cold_split(train, seed + 1000, candidates=warm)
    hidden = np.union1d(cold, vcold)

    def adg(affinity):
        score = item_p_over(affinity, vtrain, k, threads)
        return cold_metrics(score, vtrain, vtest, vcold, threads, ("ADG",))[0]["ADG"]

    best, affinities = {}, {}

    def consider(w, setting, metric):
        A = ContentAffinity(k=k, metric=metric).fit(content).affinity_
        for c in BANDWIDTHS:
            Ac = with_bandwidth(A, c)
            value = adg(Ac)
            if value > best.get(w, (None, -np.inf))[1]:
                best[w], affinities[w] = ({"setting": setting, "bandwidth": c}, value), Ac

    consider(0.0, None, None)
    for setting in FRML_GRID:
        frml = fit_frml(vtrain, content, hidden, setting, seed, threads)
        for w in BLEND_WEIGHTS[1:]:
            consider(w, setting, BlendedMetric(frml, w, content))
    w_best = max(best, key=lambda w: best[w][1])
    lgmml = (None, -np.inf)
    for setting in LGMML_GRID:
        model = fit_lgmml(vtrain, content, setting, seed, k, threads)  # vtrain: warm minus pseudo-cold
        for w in LGMML_CONTENT_WEIGHTS:
            for c in BANDWIDTHS:
                A = reweighted(model, content, w, c, k)
                value = adg(A)
                if value > lgmml[1]:
                    lgmml, lg_affinity = ({**setting, "content_weight": w, "bandwidth": c}, value), A
    blends = {v: adg(blend_affinity(affinities[w_best], lg_affinity, v, k)) for v in LG_BLEND_WEIGHTS}
    return best, lgmml, blends


def run(name, X, content, seed, k, threads):
    train, test, cold = cold_split(X, seed)
    n_items = X.shape[1]
    chosen, (lg_setting, _), lg_blends = select(train, content, cold, seed, k, threads)
    w_best = max(chosen, key=lambda w: chosen[w][1])
    v_best = max(lg_blends, key=lambda v: lg_blends[v])
    frml_setting = chosen[1.0][0]["setting"]
    frml = fit_frml(train, content, cold, frml_setting, seed, threads)
    blend_setting = chosen[w_best][0]["setting"]
    if w_best == 0.0:
        blend = None
    elif blend_setting == frml_setting:
        blend = BlendedMetric(frml, w_best, content)
    else:
        blend = BlendedMetric(fit_frml(train, content, cold, blend_setting, seed, threads), w_best, content)
    lgmml = fit_lgmml(train, content, lg_setting, seed, k, threads)
    lg_affinity = with_bandwidth(lgmml.affinity_, lg_setting["bandwidth"])

    euclid = ContentAffinity(k=k).fit(content).affinity_

    def content_affinity(w, metric):
        """ContentAffinity over ``metric`` with the bandwidth chosen for blend weight ``w``."""
        A = euclid if metric is None else ContentAffinity(k=k, metric=metric).fit(content).affinity_
        return with_bandwidth(A, chosen[w][0]["bandwidth"])

    blend_affinity_ = content_affinity(w_best, blend)

    popularity = np.diff(train.tocsc().indptr).astype(np.float64)
    A = euclid.matrix
    mass = np.asarray(A.sum(axis=1)).ravel()
    content_pop = (A @ popularity) / np.where(mass > 0, mass, 1.0)
    scorers = {
        "random (pop)": constant_scorer(np.random.default_rng(seed + 1).random(n_items)),
        "content-pop": constant_scorer(content_pop),
        "item-p Euclid": item_p_over(content_affinity(0.0, None), train, k, threads),
        "item-p FRML": item_p_over(content_affinity(1.0, frml), train, k, threads),
        "item-p blend": item_p_over(blend_affinity_, train, k, threads),
        "item-p L-GMML": item_p_over(lg_affinity, train, k, threads),
        "item-p LG+blend": item_p_over(blend_affinity(blend_affinity_, lg_affinity, v_best, k), train, k, threads),
        "oracle pop": constant_scorer(np.diff(test.tocsc().indptr).astype(np.float64)),
    }
    results = {}
    for method, score in scorers.items():
        results[method], n_users = cold_metrics(score, train, test, cold, threads)
    info = dict(
        users=n_users,
        cold=cold.size,
        test=test.nnz,
        frml_fit=frml.fit_time_,
        lgmml_fit=lgmml.fit_time_,
        euclid=f"bandwidth={chosen[0.0][0]['bandwidth']}",
        frml=_describe({**frml_setting, "bandwidth": chosen[1.0][0]["bandwidth"]}),
        blend=f"w={w_best}, bandwidth={chosen[w_best][0]['bandwidth']}"
        + ("" if blend is None else f", {_describe(blend_setting)}"),
        val={w: round(v[1], 4) for w, v in sorted(chosen.items())},
        lgmml=_describe(lg_setting),
        lg_val={v: round(a, 4) for v, a in sorted(lg_blends.items())},
    )
    return results, info


def _describe(setting):
    return ", ".join(f"{key}={value}" for key, value in setting.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["lastfm-2k", "citeulike-a"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--max-tags", type=int, default=1000)
    parser.add_argument("--k", type=int, default=100)
    args = parser.parse_args()
    threads = int(os.environ.get("NUMBA_NUM_THREADS", "2"))
    print(
        f"# cold_start: {' '.join(sys.argv)}  (NUMBA_NUM_THREADS={threads}, medians over {args.runs} seeds; "
        f"{COLD_FRACTION:.0%} of the items cold; candidates = cold items)"
    )
    for name in args.datasets:
        try:
            X, content = catalogue(name, args.items, args.max_tags)
        except (FileNotFoundError, ValueError, ImportError) as exc:
            print(f"\n## {name}: skipped ({exc})")
            continue
        runs = [run(name, X, content, seed, args.k, threads) for seed in range(args.runs)]
        keys = ("users", "cold", "test", "frml_fit", "lgmml_fit")
        info = {key: float(np.median([r[1][key] for r in runs])) for key in keys}
        print(
            f"\n## {name}: {X.shape[0]} users x {X.shape[1]} items ({content.shape[1]} tags), "
            f"{info['cold']:.0f} cold items, {info['test']:.0f} test interactions, {info['users']:.0f} users "
            f"evaluated; k = {args.k}; FRML fit {info['frml_fit']:.1f} s, L-GMML fit {info['lgmml_fit']:.1f} s; "
            f"load {os.getloadavg()[0]:.1f}"
        )
        for seed, (_, r) in enumerate(runs):
            print(
                f"#   seed {seed}: Euclid {r['euclid']}; FRML {r['frml']}; blend {r['blend']}; "
                f"validation ADG by w {r['val']}"
            )
            print(
                f"#   seed {seed}: L-GMML {r['lgmml']}; validation ADG of the LG+blend by L-GMML weight {r['lg_val']}"
            )
        base = {m: np.median([r[0]["item-p Euclid"][m] for r in runs]) for m in METRICS}
        print(
            f"{'method':<15} "
            + " ".join(f"{m:>8}" for m in METRICS)
            + " "
            + " ".join(f"{m + '/Eu':>10}" for m in METRICS)
            + "  ADG by seed"
        )
        for method in runs[0][0]:
            med = {m: float(np.median([r[0][method][m] for r in runs])) for m in METRICS}
            print(
                f"{method:<15} "
                + " ".join(f"{med[m]:8.4f}" for m in METRICS)
                + " "
                + " ".join(f"{med[m] / base[m]:10.3f}" for m in METRICS)
                + "  "
                + " ".join(f"{r[0][method]['ADG']:.4f}" for r in runs)
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
