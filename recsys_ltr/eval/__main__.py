"""``python -m recsys_ltr.eval``: compare recommenders under the dissertation's protocol.

Example::

    python -m recsys_ltr.eval --dataset movielens-100k --folds 3 --protocol both \\
        --models popularity,item-p,FEBRi-cos --budget quick --jobs 2 --out runs/ml100k

Writes ``<out>/<protocol>/`` (table.md, summary.csv/json, wilcoxon.csv, results.csv, tuning.csv,
one PNG per metric) and caches every finished (method, fold) unit, and every finished setting of
an unfinished one, under ``<out>/cache/`` (or ``--cache-dir``), so that an interrupted run resumes
where it stopped.

Reproducibility: splits, tuning and every deterministic model give the same numbers for a seed
whatever ``--jobs``; Hogwild-trained models (FEBR, BPR, LightFM) are bit-for-bit reproducible only
on one thread per job (e.g. ``--jobs`` equal to the number of cores).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from recsys_ltr import datasets
from recsys_ltr.eval.methods import METHODS
from recsys_ltr.eval.report import format_table, paired_tests, summarize, write_outputs
from recsys_ltr.eval.runner import PROTOCOLS, run_experiment, table_metrics, threads_per_job

DEFAULT_REAL = "movielens-100k"
DEFAULT_MODELS = "all"


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


_INT64_MAX = 2**63 - 1


def _at_least(minimum):
    def parse(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if value > _INT64_MAX:
            raise argparse.ArgumentTypeError(f"must be <= {_INT64_MAX}, got {value}")
        return value

    parse.__name__ = "int"  # argparse names the type in its "invalid int value" message
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m recsys_ltr.eval", description=__doc__.split("\n")[0])
    p.add_argument("--dataset", help=f"registered data set or 'synthetic' (default: {DEFAULT_REAL} if present)")
    p.add_argument("--data-dir", help="data directory (default: $RECSYS_LTR_DATA, else ../shared/datasets)")
    p.add_argument("--folds", type=_at_least(1), default=3, help="number of seeded splits (default 3)")
    p.add_argument("--protocol", choices=(*PROTOCOLS, "both"), default="standard")
    p.add_argument("--exclude-top", type=_at_least(0), default=100, help="novelty protocol: popular items to exclude")
    p.add_argument(
        "--models", default=DEFAULT_MODELS, help=f"comma-separated, or 'all' (default); known: {','.join(METHODS)}"
    )
    p.add_argument("--budget", choices=("quick", "paper"), default="quick", help="tuning grid size")
    p.add_argument("--k", type=_at_least(1), default=10, help="cut-off for REC@k and P@k (default 10)")
    p.add_argument("--seed", type=_at_least(0), default=0)
    p.add_argument("--out", help="output directory (tables, CSV, JSON, PNG per protocol; cache/)")
    p.add_argument(
        "--jobs",
        type=_at_least(1),
        default=1,
        help="(method, fold) units run in parallel processes, each on max(1, cores // jobs) threads",
    )
    p.add_argument("--cache-dir", help="result cache (default: <out>/cache; none without --out)")
    p.add_argument("--no-cache", action="store_true", help="recompute every unit (finished ones are re-cached)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def load_data(name: str, data_dir):
    if name == "synthetic":
        # Strong enough latent structure that personalised models beat popularity.
        return datasets.make_synthetic(n_users=1000, n_items=500, factor_scale=3.0, seed=0)
    return datasets.load(name, data_dir=data_dir)


def parse_methods(parser, text) -> list[str]:
    methods = list(METHODS) if text.strip() == "all" else [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        parser.error(f"unknown model(s) {','.join(unknown) or '(none given)'}; known: {','.join(METHODS)}")
    return methods


def check_arguments(parser, args, data, protocols) -> None:
    """Usage errors for settings the data cannot satisfy (before any work)."""
    for flag, path in (("--out", args.out), ("--cache-dir", args.cache_dir)):
        if path and os.path.exists(path) and not os.path.isdir(path):
            parser.error(f"{flag} {path} names a file; give a directory (it is created if missing)")
    if args.k > data.n_items:
        parser.error(f"--k {args.k} is larger than the catalogue ({data.n_items} items)")
    if "novelty" in protocols and args.exclude_top >= data.n_items:
        parser.error(f"--exclude-top {args.exclude_top} leaves no item to hold out ({data.n_items} items)")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    methods = parse_methods(parser, args.models)
    try:
        name = args.dataset or default_dataset(args.data_dir)
        data = load_data(name, args.data_dir)
    except (FileNotFoundError, ValueError) as exc:  # unknown, missing or corrupt data set
        parser.error(str(exc).splitlines()[0])
    protocols = PROTOCOLS if args.protocol == "both" else (args.protocol,)
    check_arguments(parser, args, data, protocols)
    cache_dir = args.cache_dir or (os.path.join(args.out, "cache") if args.out else None)
    print(
        f"{name}: {data.n_users} users x {data.n_items} items, {data.nnz} interactions; "
        f"{len(methods)} method(s), {args.folds} fold(s), {args.budget} budget, {args.jobs} job(s) x "
        f"{threads_per_job(args.jobs)} thread(s)",
        file=sys.stderr,
    )
    metrics = table_metrics(args.k)
    command = " ".join(["python -m recsys_ltr.eval", *(argv if argv is not None else sys.argv[1:])])
    for protocol in protocols:
        t0 = time.perf_counter()
        experiment = run_experiment(
            data.matrix,
            methods,
            folds=args.folds,
            protocol=protocol,
            exclude_top=args.exclude_top,
            seed=args.seed,
            budget=args.budget,
            k=args.k,
            jobs=args.jobs,
            dataset=name,
            cache_dir=cache_dir,
            read_cache=not args.no_cache,
            show_progress=not args.quiet,
        )
        summary = summarize(experiment.results, metrics, experiment.skipped)
        tests = paired_tests(experiment.results, summary, metrics)
        table = format_table(summary, metrics, tests)
        source = " (SYNTHETIC data, not a real data set)" if name == "synthetic" else ""
        print(f"\n{name}{source}, {protocol} protocol, mean (standard error) over {args.folds} fold(s):\n")
        print(table)
        if args.out:
            meta = {
                "dataset": name,
                "protocol": protocol,
                "folds": args.folds,
                "budget": args.budget,
                "seed": args.seed,
                "k": args.k,
                "methods": methods,
                "jobs": args.jobs,
                "computed_units": len(experiment.computed),
                "seconds": time.perf_counter() - t0,
                "command": command,
            }
            for path in write_outputs(
                os.path.join(args.out, protocol), experiment, summary, tests, table, meta, metrics
            ):
                print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
