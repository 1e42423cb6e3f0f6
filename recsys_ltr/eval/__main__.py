"""``python -m recsys_ltr.eval``: compare recommenders under the dissertation's protocol.

Example::

    python -m recsys_ltr.eval --dataset movielens-100k --folds 3 --protocol standard \\
        --models popularity --out runs/ml100k
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from recsys_ltr import datasets
from recsys_ltr.eval.methods import METHODS
from recsys_ltr.eval.report import format_table, summarize, write_outputs
from recsys_ltr.eval.runner import PROTOCOLS, TABLE_METRICS, run_experiment

DEFAULT_REAL = "movielens-100k"
DEFAULT_MODELS = "popularity,item-p,user-p,KUNN,SLIM"


def default_dataset(data_dir) -> str:
    """The default data set: movielens-100k when the data directory has it, else synthetic.

    The synthetic fallback applies only to the implicit default directory: when a directory is
    given explicitly (``data_dir`` or ``$RECSYS_LTR_DATA``) and lacks movielens-100k, a
    ``FileNotFoundError`` is raised rather than silently running on synthetic data.
    """
    if DEFAULT_REAL in datasets.available(data_dir):
        return DEFAULT_REAL
    explicit = data_dir if data_dir is not None else os.environ.get(datasets.ENV_VAR)
    if explicit:
        raise FileNotFoundError(
            f"the default data set {DEFAULT_REAL} is not in the data directory {explicit}; "
            "pass --dataset (e.g. --dataset synthetic) or fix --data-dir/$" + datasets.ENV_VAR
        )
    return "synthetic"


def _at_least(minimum):
    def parse(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = "int"  # argparse names the type in its "invalid int value" message
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m recsys_ltr.eval", description=__doc__.split("\n")[0])
    p.add_argument("--dataset", help=f"registered data set or 'synthetic' (default: {DEFAULT_REAL} if present)")
    p.add_argument("--data-dir", help="data directory (default: $RECSYS_LTR_DATA, else ../shared/datasets)")
    p.add_argument("--folds", type=_at_least(1), default=3, help="number of seeded splits (default 3)")
    p.add_argument("--protocol", choices=PROTOCOLS, default="standard")
    p.add_argument("--exclude-top", type=_at_least(0), default=100,
                   help="novelty protocol: popular items to exclude")
    p.add_argument("--models", default=DEFAULT_MODELS,
                   help=f"comma-separated (default {DEFAULT_MODELS}); known: {','.join(METHODS)}")
    p.add_argument("--budget", choices=("quick", "paper"), default="quick", help="tuning grid size")
    p.add_argument("--k", type=_at_least(1), default=10, help="cut-off for REC@k and P@k (default 10)")
    p.add_argument("--seed", type=_at_least(0), default=0)
    p.add_argument("--out", help="directory for results.csv, summary.csv, table.md, summary.json")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def load_data(name: str, data_dir):
    if name == "synthetic":
        # Strong enough latent structure that personalised models beat popularity.
        return datasets.make_synthetic(n_users=1000, n_items=500, factor_scale=3.0, seed=0)
    return datasets.load(name, data_dir=data_dir)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        parser.error(f"unknown model(s) {','.join(unknown) or '(none given)'}; known: {','.join(METHODS)}")
    try:
        name = args.dataset or default_dataset(args.data_dir)
        data = load_data(name, args.data_dir)
    except (FileNotFoundError, ValueError) as exc:  # unknown, missing or corrupt data set
        parser.error(str(exc).splitlines()[0])
    print(f"{name}: {data.n_users} users x {data.n_items} items, {data.nnz} interactions; "
          f"protocol {args.protocol}, {args.folds} fold(s)", file=sys.stderr)
    t0 = time.perf_counter()
    results = run_experiment(
        data.matrix, methods, folds=args.folds, protocol=args.protocol, exclude_top=args.exclude_top,
        seed=args.seed, budget=args.budget, k=args.k, show_progress=not args.quiet,
    )
    metrics = [m.format(k=args.k) for m in TABLE_METRICS]
    summary = summarize(results, metrics)
    table = format_table(summary, metrics)
    source = " (SYNTHETIC data, not a real data set)" if name == "synthetic" else ""
    print(f"\n{name}{source}, {args.protocol} protocol, mean (standard error) over {args.folds} fold(s):\n")
    print(table)
    if args.out:
        meta = {"dataset": name, "protocol": args.protocol, "folds": args.folds, "budget": args.budget,
                "seed": args.seed, "k": args.k, "methods": methods, "seconds": time.perf_counter() - t0,
                "command": " ".join(["python -m recsys_ltr.eval", *(argv if argv is not None else sys.argv[1:])])}
        for path in write_outputs(args.out, results, summary, table, meta):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
