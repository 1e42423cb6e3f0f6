"""How far can a linear stack of the default bases go on ``make_tastes``?  The ceiling of issue 48's
"FEBR() above its best base" on the generated catalogue.

``datasets.make_tastes(n_users, n_items, random_state=seed)``, the per-user 20% holdout of
``benchmarks/tastes_catalogue.py`` and, inside its training part, a validation carve (12.5% of each
user's positives, ``--val-users`` sampled users).  The bases are fitted on the carved training part:
``GFCF()``, its ideal low-pass filter alone at each of ``--ranks`` singular vectors (``GFCF(factors=k,
alpha=1e4)``, ``LP<k>``), ``ALS()``, ``RP3beta()`` and ``EASE()``.  On validation: every base, and
the best base plus ``w`` times each other base on the within-user standardised scores of every item
(``w`` in ``WEIGHTS``: the mixes a linear scorer over these features could reach); then a
*non-linear* base, a user-level mixture of ``--components`` multinomials over the items (EM from
k-means of the users' rows in the best low-pass filter's embedding; a user's scores are the
components' item distributions weighted by the component posterior given the user's positives: the
generator's own model class), alone and mixed.  The best base, the best linear mix and the best mix
with the mixture by validation ADG are refitted on the whole training part and judged once on
``--eval-users`` test users beside ``GFCF()`` and the generator's ``inferred`` ranking::

    NUMBA_NUM_THREADS=2 PYTHONPATH=. python benchmarks/tastes_linear_stack.py [--users 100000] \\
        [--items 30000] [--ranks 32,64,128] [--components 64,128]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.cluster import MiniBatchKMeans
from tastes_catalogue import generator_scorer

from recsys_ltr import split
from recsys_ltr.datasets import make_tastes
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, EASE, GFCF, RP3beta

METRICS = ["ADG", "MAP", "REC@20", "NDCG@20"]
WEIGHTS = (-0.25, 0.25, 0.5, 1.0, 2.0)
EM_ITERATIONS = 30
SMOOTHING = 0.1  # pseudo-count of every item in every component


def bases(ranks):
    """The bases by name: unfitted models."""
    out = {"GF-CF": GFCF()}
    out.update({f"LP{k}": GFCF(factors=k, alpha=1e4) for k in ranks})
    out.update({"ALS": ALS(), "RP3beta": RP3beta(), "EASE": EASE()})
    return out


def scorer(model):
    """Score rows of a fitted base (its public ``score``, as float64)."""
    return lambda ids: np.asarray(model.score(ids), np.float64)


def mixture(R, low_pass, components, seed):
    """Score rows of a user-level mixture of multinomials fitted by EM on ``R``, started from k-means
    of the rows in the fitted ``low_pass`` filter's embedding (module docstring)."""
    embedding = np.asarray(R @ low_pass.left_)
    embedding /= np.linalg.norm(embedding, axis=1, keepdims=True) + 1e-12
    labels = MiniBatchKMeans(components, random_state=seed, n_init=3, batch_size=4096).fit_predict(embedding)
    responsibility = np.zeros((R.shape[0], components))
    responsibility[np.arange(R.shape[0]), labels] = 1.0
    for _ in range(EM_ITERATIONS):
        counts = np.asarray((R.T @ responsibility).T) + SMOOTHING
        theta = counts / counts.sum(axis=1, keepdims=True)
        log_theta_t, log_prior = np.log(theta).T, np.log(responsibility.mean(axis=0) + 1e-12)
        responsibility = _posterior(R, log_theta_t, log_prior)

    def score(ids):
        return _posterior(R[ids], log_theta_t, log_prior) @ theta

    return score


def _posterior(rows, log_theta_t, log_prior):
    log_joint = np.asarray(rows @ log_theta_t) + log_prior
    log_joint -= log_joint.max(axis=1, keepdims=True)
    posterior = np.exp(log_joint)
    return posterior / posterior.sum(axis=1, keepdims=True)


def standardised(scores):
    return (scores - scores.mean(axis=1, keepdims=True)) / (scores.std(axis=1, keepdims=True) + 1e-12)


def mix(first, second, weight):
    return lambda ids: standardised(first(ids)) + weight * standardised(second(ids))


def judge(score, R, held_out, users):
    return evaluate(score, R, held_out, metrics=METRICS, users=users, show_progress=False)


def line(name, result):
    return f"| {name} | " + " | ".join(f"{result[m]:.4f}" for m in METRICS) + " |"


def choose(args, carved, validation, users):
    """Every row on validation, printed; returns ``(best base, best linear mix, best mixture mix, best
    low-pass filter)``, a mix as ``(first, second, weight)`` (the mixture named ``mixture<K>``)."""
    print("| validation | " + " | ".join(METRICS) + " |\n|---|" + "---:|" * len(METRICS))
    fitted = {name: model.fit(carved) for name, model in bases(args.ranks).items()}
    scores = {name: scorer(model) for name, model in fitted.items()}
    values = {name: judge(score, carved, validation, users) for name, score in scores.items()}
    for name, result in values.items():
        print(line(name, result), flush=True)
    best = max(values, key=lambda n: values[n]["ADG"])
    linear = _best_mix(best, {n: s for n, s in scores.items() if n != best}, scores[best], carved, validation, users)
    low_pass = max((n for n in fitted if n.startswith("LP")), key=lambda n: values[n]["ADG"])
    mixtures = {f"mixture{k}": mixture(carved, fitted[low_pass], k, args.seed) for k in args.components}
    for name, score in mixtures.items():
        print(line(name, judge(score, carved, validation, users)), flush=True)
    nonlinear = _best_mix(best, mixtures, scores[best], carved, validation, users)
    return best, linear, nonlinear, low_pass


def _best_mix(best, others, best_score, carved, validation, users):
    top = None
    for name, score in others.items():
        for weight in WEIGHTS:
            result = judge(mix(best_score, score, weight), carved, validation, users)
            print(line(f"{best} + {weight} {name}", result), flush=True)
            if top is None or result["ADG"] > top[0]:
                top = (result["ADG"], (best, name, weight))
    return top[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ranks", type=lambda s: [int(k) for k in s.split(",")], default=[32, 64, 128])
    parser.add_argument("--components", type=lambda s: [int(k) for k in s.split(",")], default=[64, 128])
    parser.add_argument("--val-users", type=int, default=3000)
    parser.add_argument("--eval-users", type=int, default=5000)
    args = parser.parse_args()
    X, planted = make_tastes(args.users, args.items, random_state=args.seed, return_params=True)
    train, _, test = split.holdout(X.matrix, val=0.0, test=0.2, random_state=args.seed)
    carved, _, validation = split.holdout(train, val=0.0, test=0.125, random_state=args.seed + 1)
    rng = np.random.default_rng(args.seed)
    with_validation, with_test = (np.flatnonzero(np.diff(m.indptr)) for m in (validation, test))
    val_users = np.sort(rng.choice(with_validation, min(args.val_users, with_validation.size), False))
    users = np.sort(rng.choice(with_test, min(args.eval_users, with_test.size), False))
    best, linear, nonlinear, low_pass = choose(args, carved, validation, val_users)

    models = bases(args.ranks)
    fitted = {name: models[name].fit(train) for name in {"GF-CF", best, linear[1], low_pass}}
    scores = {name: scorer(model) for name, model in fitted.items()}
    mixed = mixture(train, fitted[low_pass], int(nonlinear[1].removeprefix("mixture")), args.seed)
    rows = {
        "GFCF()": scores["GF-CF"],
        f"best base on validation: {best}": scores[best],
        f"best linear mix: {best} + {linear[2]} {linear[1]}": mix(scores[best], scores[linear[1]], linear[2]),
        f"{nonlinear[1]} alone": mixed,
        f"best with the mixture: {best} + {nonlinear[2]} {nonlinear[1]}": mix(scores[best], mixed, nonlinear[2]),
        "generator, taste inferred": generator_scorer("inferred", planted, train),
    }
    print("\n| test | " + " | ".join(METRICS) + " |\n|---|" + "---:|" * len(METRICS))
    for name, score in rows.items():
        print(line(name, judge(score, train, test, users)), flush=True)


if __name__ == "__main__":
    main()
