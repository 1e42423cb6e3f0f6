"""``python -m recsys_ltr.eval``: compare recommenders under the dissertation's protocol.

Example::

    python -m recsys_ltr.eval --dataset movielens-100k --folds 3 --protocol both \\
        --models popularity,item-p,FEBRi-cos --budget quick --jobs 2 --out runs/ml100k

Writes ``<out>/<protocol>/`` (table.md, summary.csv/json, wilcoxon.csv, results.csv, tuning.csv,
one PNG per metric; ``<out>`` defaults to ``runs/<data set>``) and caches every finished
(method, fold) unit, and every finished setting of an unfinished one, under ``<out>/cache/`` (or
``--cache-dir``), so that an interrupted run resumes where it stopped.

Scaling out: ``--executor ray`` runs every unit as a Ray task (one CPU, one numba thread), on a new
local Ray instance or, with ``--ray-address auto`` (or ``ray://head:10001``), on an existing
cluster; the cache is written by this process as units finish, so a run interrupted by a lost
worker (Ray retries the unit) or a restart resumes where it stopped.

Reproducibility: splits, tuning and every deterministic model give the same numbers for a seed
whatever the executor and ``--jobs``; Hogwild-trained models (FEBR, BPR, LightFM) are bit-for-bit
reproducible only on one thread per job (e.g. ``--jobs`` equal to the number of cores).
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import sys
import textwrap
import time

from recsys_ltr import datasets
from recsys_ltr.eval.methods import METHODS
from recsys_ltr.eval.report import error_caption, format_table, paired_tests, summarize, write_outputs
from recsys_ltr.eval.runner import (
    HOLDOUT_PROTOCOLS,
    PROTOCOLS,
    check_unit_executor,
    run_experiment,
    selection_metric,
    table_metrics,
    unit_executor,
)
from recsys_ltr.executors import EXECUTORS, RayExecutor

DEFAULT_REAL = "movielens-100k"
DEFAULT_MODELS = "all"
RUNS_DIR = "runs"

_DESCRIPTION = """\
Compare top-N recommenders under the dissertation's protocol (sec. 4.7.3-4.7.5): per user, 10% of \
the positives are held out for validation and 20% for test; each method is tuned in two levels on \
validation ADG, evaluated on test, and compared with the runner-up by a paired Wilcoxon test over \
users. Under --protocol fixed, a data set's published train / valid / test split is used instead \
(gowalla as LightGCN's papers use it): settings are chosen on validation Recall@k, the chosen one is \
refitted on train + valid and tested on test, with Recall@k and NDCG@k at --k 20 by default. \
Tables, CSV/JSON files, one bar chart per metric and a resumable cache are written to --out \
(default: runs/<data set>/)."""

_EXAMPLES = (
    ("standard protocol", "python -m recsys_ltr.eval --dataset movielens-100k --models item-p,KUNN,ease"),
    ("novelty protocol", "python -m recsys_ltr.eval --dataset lastfm-2k --protocol novelty --exclude-top 100"),
    ("both protocols", "python -m recsys_ltr.eval --dataset msweb --protocol both --folds 3 --jobs 2"),
    ("published split", "python -m recsys_ltr.eval --dataset gowalla --protocol fixed --models GF-CF,ALS,FEBR-stack"),
)


def _paragraph(text: str, indent: str = "", hanging: str | None = None) -> str:
    """``text`` wrapped to the help width without breaking words at hyphens (model names)."""
    width = min(100, shutil.get_terminal_size().columns - 2)  # argparse's width, capped
    return textwrap.fill(
        text, width, initial_indent=indent, subsequent_indent=indent if hanging is None else hanging,
        break_on_hyphens=False, break_long_words=False,
    )  # fmt: skip


def _epilog() -> str:
    examples = "\n".join(f"  {label}:\n    {command}" for label, command in _EXAMPLES)
    names = datasets.list_datasets()
    data = _paragraph(
        f"{', '.join(names)} (files in the data directory, see datasets/README.md); synthetic (generated, no files).",
        "  ",
    )
    width = max(map(len, METHODS))
    models = "\n".join(
        _paragraph(f"{name:<{width}}  {m.description}", "  ", " " * (width + 4)) for name, m in METHODS.items()
    )
    return (
        f"examples:\n{examples}\n\ndata sets (--dataset):\n{data}\n\n"
        f"models (--models, case-insensitive; default all):\n{models}"
    )


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's layout, with option help wrapped without breaking words at hyphens."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def default_dataset(data_dir) -> tuple[str, str | None]:
    """The default data set and, when it falls back to synthetic data, the reason.

    movielens-100k when the data directory has it, else ``("synthetic", note)`` with ``note``
    saying which files were missing, where they were looked for and how to get them.  The
    synthetic fallback applies only to the implicit default directory: when a directory is given
    explicitly (``data_dir`` or ``$RECSYS_LTR_DATA``) and lacks movielens-100k, a
    ``FileNotFoundError`` is raised rather than silently running on synthetic data.
    """
    missing = datasets.missing_files(DEFAULT_REAL, data_dir)
    if not missing:
        return DEFAULT_REAL, None
    explicit = data_dir if data_dir is not None else os.environ.get(datasets.ENV_VAR)
    if explicit:
        raise FileNotFoundError(
            f"the default data set {DEFAULT_REAL} is not in the data directory {explicit}; "
            "pass --dataset (e.g. --dataset synthetic) or fix --data-dir/$" + datasets.ENV_VAR
        )
    searched = " and ".join(str(d / DEFAULT_REAL) for d in datasets.search_dirs(data_dir))
    shared = os.path.join("..", "shared", "datasets")
    note = (
        f"NOTE: {DEFAULT_REAL} was not found ({', '.join(missing)} missing in {searched}; ${datasets.ENV_VAR} "
        f"is not set{'' if os.path.isdir(shared) else f' and {shared} does not exist'}), so this "
        f"runs on a generated SYNTHETIC data set. To get the real set: "
        f"python -c \"from recsys_ltr import datasets; datasets.download('{DEFAULT_REAL}')\" "
        f"(from GroupLens, research use only), or put its files in <dir>/{DEFAULT_REAL}/ and pass --data-dir "
        f"<dir> (or set ${datasets.ENV_VAR}=<dir>); see datasets/README.md."
    )
    return "synthetic", note


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
    p = argparse.ArgumentParser(
        prog="python -m recsys_ltr.eval",
        description=_paragraph(_DESCRIPTION),
        epilog=_epilog(),
        formatter_class=_HelpFormatter,
    )
    p.add_argument(
        "--dataset",
        metavar="NAME",
        help=f"a data set listed below, or synthetic (default: {DEFAULT_REAL} when the data directory has it, "
        "else synthetic, saying why)",
    )
    p.add_argument(
        "--data-dir", metavar="DIR", help=f"data directory (default: ${datasets.ENV_VAR}, else ../shared/datasets)"
    )
    p.add_argument(
        "--folds", type=_at_least(1), help="number of seeded splits (default: 3; the fixed protocol has one)"
    )
    p.add_argument(
        "--protocol",
        choices=(*PROTOCOLS, "both"),
        default="standard",
        help="standard (Table 4.3), novelty (Table 4.4: the most popular items are never held out, and every "
        "non-stacking method gets a second row with them ranked last), both of these, or fixed (the data set's "
        f"published train / valid / test split: {', '.join(datasets.PRESPLIT)})",
    )
    p.add_argument(
        "--exclude-top",
        type=_at_least(0),
        default=100,
        metavar="N",
        help="novelty protocol: number of most popular items excluded from validation and test (default: 100)",
    )
    p.add_argument(
        "--models",
        default=DEFAULT_MODELS,
        metavar="LIST",
        help="comma-separated model names (listed below, case-insensitive), or all (default)",
    )
    p.add_argument(
        "--budget",
        choices=("quick", "paper"),
        default="quick",
        help="tuning grids: quick (small) or paper (the dissertation's); default: quick",
    )
    p.add_argument(
        "--k", type=_at_least(1), help="cut-off of REC@k, P@k (and NDCG@k: fixed protocol); default: 10, fixed: 20"
    )
    p.add_argument("--seed", type=_at_least(0), default=0, help="seed of fold f is seed + f (default: 0)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help=f"output directory: <out>/<protocol>/ tables, CSV, JSON and charts, <out>/cache/ (default: {RUNS_DIR}/<data set>)",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        help="where the (method, fold) units run: in this process (serial, the default), in local worker "
        "processes, or as Ray tasks (one CPU and one numba thread each)",
    )
    p.add_argument(
        "--jobs",
        type=_at_least(1),
        metavar="N",
        help="local worker processes (--executor processes; default: one per core), each on "
        "max(1, cores // N) threads; --jobs N > 1 alone means --executor processes",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --executor ray: the cluster to join (auto, host:6379 or ray://host:10001); "
        "default: $RAY_ADDRESS, else a new local Ray instance with this machine's cores",
    )
    p.add_argument("--cache-dir", metavar="DIR", help="result cache (default: <out>/cache)")
    p.add_argument("--no-cache", action="store_true", help="recompute every unit (finished ones are re-cached)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (it is shown only in a terminal anyway)")
    return p


def load_data(name: str, data_dir, fixed: bool = False):
    """``(data, parts)``: the data set, and its published ``(train, valid, test)`` when ``fixed``."""
    if fixed:
        data, parts = datasets.load_presplit(name, data_dir=data_dir)
        return data, (parts["train"], parts["valid"], parts["test"])
    if name == "synthetic":
        # Strong enough latent structure that personalised models beat popularity.
        return datasets.make_synthetic(n_users=1000, n_items=500, factor_scale=3.0, random_state=0), None
    return datasets.load(name, data_dir=data_dir), None


def parse_methods(parser, text) -> list[str]:
    """Method names from ``--models``: case-insensitive, unknown names answered with the closest ones."""
    if text.strip().lower() == "all":
        return list(METHODS)
    by_key = {name.lower(): name for name in METHODS}
    methods, unknown = [], []
    for given in (m.strip() for m in text.split(",")):
        if given:
            (methods if given.lower() in by_key else unknown).append(by_key.get(given.lower(), given))
    if unknown or not methods:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name.lower(), by_key, n=3, cutoff=0.6)
            if close:
                hints.append(f"{name}: did you mean {' or '.join(by_key[c] for c in close)}?")
        parser.error(
            f"unknown model(s) {','.join(unknown) or '(none given)'}"
            + (f" ({'; '.join(hints)})" if hints else "")
            + f"; known: {','.join(METHODS)}"
        )
    return list(dict.fromkeys(methods))


def check_arguments(parser, args, data, protocols) -> None:
    """Usage errors for settings the data cannot satisfy (before any work)."""
    for flag, path in (("--out", args.out), ("--cache-dir", args.cache_dir)):
        if path and os.path.exists(path) and not os.path.isdir(path):
            parser.error(f"{flag} {path} names a file; give a directory (it is created if missing)")
    if args.protocol == "fixed" and args.folds not in (None, 1):
        parser.error(f"--folds {args.folds}: the fixed protocol has one split, the published one")
    if args.k > data.n_items:
        parser.error(f"--k {args.k} is larger than the catalogue ({data.n_items} items)")
    if "novelty" in protocols and args.exclude_top >= data.n_items:
        parser.error(f"--exclude-top {args.exclude_top} leaves no item to hold out ({data.n_items} items)")


def make_executor(parser, args):
    """The executor of ``--executor``/``--jobs``/``--ray-address`` (usage errors before any work)."""
    if args.ray_address is not None and args.executor != "ray":
        parser.error("--ray-address needs --executor ray")
    try:
        executor, jobs = check_unit_executor(args.executor, args.jobs)
    except ValueError:
        parser.error(f"--jobs {args.jobs} sets the number of local worker processes: it needs --executor processes")
    if executor == "ray":
        try:
            return RayExecutor(args.ray_address)
        except ImportError as exc:
            parser.error(str(exc))
    return unit_executor(executor, jobs)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    methods = parse_methods(parser, args.models)
    note = None
    fixed = args.protocol == "fixed"
    try:
        name = args.dataset or None
        if name is None:
            name, note = default_dataset(args.data_dir)
        data, parts = load_data(name, args.data_dir, fixed)
    except (FileNotFoundError, ValueError) as exc:  # unknown, missing, corrupt or not pre-split data set
        parser.error(str(exc).splitlines()[0])
    if note:
        print(note, file=sys.stderr)
    protocols = HOLDOUT_PROTOCOLS if args.protocol == "both" else (args.protocol,)
    args.k = args.k or (20 if fixed else 10)
    args.out = args.out or os.path.join(RUNS_DIR, name)
    check_arguments(parser, args, data, protocols)
    args.folds = 1 if fixed else args.folds or 3
    executor = make_executor(parser, args)
    cache_dir = args.cache_dir or os.path.join(args.out, "cache")
    print(
        f"{name}: {data.n_users} users x {data.n_items} items, {data.nnz} interactions; "
        f"{len(methods)} method(s), {args.folds} fold(s), {args.budget} budget; {executor.name} executor: "
        f"{executor.parallelism} unit(s) at once x {executor.threads} thread(s); "
        f"results go to {os.path.join(args.out, '')} (cache: {cache_dir})",
        file=sys.stderr,
    )
    command = " ".join(["python -m recsys_ltr.eval", *(argv if argv is not None else sys.argv[1:])])
    for protocol in protocols:
        t0 = time.perf_counter()
        metrics = table_metrics(args.k, protocol)
        experiment = run_experiment(
            data.matrix,
            methods,
            folds=args.folds,
            protocol=protocol,
            exclude_top=args.exclude_top,
            random_state=args.seed,
            budget=args.budget,
            k=args.k,
            executor=executor,
            dataset=name,
            cache_dir=cache_dir,
            read_cache=not args.no_cache,
            show_progress=False if args.quiet else None,
            parts=parts,
        )
        summary = summarize(experiment.results, metrics, experiment.skipped)
        tests = paired_tests(experiment.results, summary, metrics)
        table = format_table(summary, metrics, tests)
        source = " (SYNTHETIC data, not a real data set)" if name == "synthetic" else ""
        if note:
            print(f"\n{note}")
        print(f"\n{name}{source}, {protocol} protocol, mean ({error_caption(args.folds)}):\n")
        print(table)
        meta = {
            "dataset": name,
            "protocol": protocol,
            "folds": args.folds,
            "budget": args.budget,
            "seed": args.seed,
            "k": args.k,
            "select": selection_metric(protocol, args.k),
            "methods": methods,
            "executor": executor.name,
            "jobs": executor.parallelism,
            "computed_units": len(experiment.computed),
            "seconds": time.perf_counter() - t0,
            "command": command,
        }
        paths = write_outputs(os.path.join(args.out, protocol), experiment, summary, tests, table, meta, metrics)
        print(f"\nwrote {len(paths)} files to {os.path.join(args.out, protocol, '')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
