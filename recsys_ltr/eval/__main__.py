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

Messages: the header (standard error) says what runs -- the methods asked for and those added as
the bases of a stacking method, and why --; a usage error is one line and a hint, the full usage
only with ``--help``.  Outside a terminal (CI, nohup, a scheduler) the run logs its stages and each
finished (method, fold) unit on standard error: one ``INFO`` line per unit (``--log-level INFO`` adds
every stage of every unit and fit; in a terminal the progress bar shows the progress and the level
defaults to ``WARNING``).
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import shutil
import sys
import textwrap
import time

from recsys_ltr import datasets, split
from recsys_ltr._progress import progress_write
from recsys_ltr.eval.methods import METHODS, get_method
from recsys_ltr.eval.report import error_caption, format_table, paired_tests, summarize, write_outputs
from recsys_ltr.eval.results import HOLDOUT_PROTOCOLS, PROTOCOLS, method_of, selection_metric, table_metrics
from recsys_ltr.eval.runner import LOG_FORMAT, check_unit_executor, run_experiment, unit_executor, with_bases
from recsys_ltr.executors import EXECUTORS, RayExecutor
from recsys_ltr.febr.bases import Workload

DEFAULT_REAL = "movielens-100k"
DEFAULT_MODELS = "all"
RUNS_DIR = "runs"
PROG = "python -m recsys_ltr.eval"
#: The temporal protocol's split: per user the latest 20% of the positives as test and the 10%
#: before them as validation (:func:`recsys_ltr.split.last_fraction`).
TEMPORAL_VAL, TEMPORAL_TEST = 0.1, 0.2
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

_DESCRIPTION = """\
Compare top-N recommenders under the dissertation's protocol (sec. 4.7.3-4.7.5): per user, 10% of \
the positives are held out for validation and 20% for test; each method is tuned in two levels on \
validation ADG, evaluated on test, and compared with the runner-up by a paired Wilcoxon test over \
users. Under --protocol fixed, a data set's published train / valid / test split is used instead \
(gowalla as LightGCN's papers use it): settings are chosen on validation Recall@k, the chosen one is \
refitted on train + valid and tested on test, with Recall@k and NDCG@k at --k 20 by default. Under \
--protocol temporal (data sets with timestamps), each user's latest 20% of the positives are the test \
part and the 10% before them the validation part; settings are chosen on validation ADG and the chosen \
one is refitted on train + valid (one split). Tables, CSV/JSON files, one bar chart per metric and a \
resumable cache are written to --out (default: runs/<data set>/)."""

_EXAMPLES = (
    ("standard protocol", "python -m recsys_ltr.eval --dataset movielens-100k --models item-p,KUNN,ease"),
    ("novelty protocol", "python -m recsys_ltr.eval --dataset lastfm-2k --protocol novelty --exclude-top 100"),
    ("both protocols", "python -m recsys_ltr.eval --dataset msweb --protocol both --folds 3 --jobs 2"),
    ("published split", "python -m recsys_ltr.eval --dataset gowalla --protocol fixed --models GF-CF,ALS,FEBR-stack"),
    ("time-ordered split", "python -m recsys_ltr.eval --dataset movielens-100k --protocol temporal --models EASE,ALS"),
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


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors are one line and a hint (the full usage is ``--help``'s)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n{HINT}\n")


HINT = f"({PROG} --help lists every option, the data sets and the models)"


def fail(message: str) -> None:
    """Exit with status 2 and ``message`` as the one line on standard error (no usage, no hint):
    for a problem of the environment rather than of the arguments."""
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(2)


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
        where = "--data-dir" if data_dir is not None else f"${datasets.ENV_VAR}"
        raise FileNotFoundError(
            f"the default data set {DEFAULT_REAL} is not in the data directory {explicit} ({where}): "
            f"{', '.join(missing)} missing in {os.path.join(explicit, DEFAULT_REAL)}; pass --dataset (e.g. --dataset "
            f"synthetic), or point --data-dir or ${datasets.ENV_VAR} at the directory holding {DEFAULT_REAL}/"
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
    p = _Parser(
        prog=PROG,
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
        "--folds",
        type=_at_least(1),
        help="number of seeded splits (default: 3; the fixed and temporal protocols have one)",
    )
    p.add_argument(
        "--protocol",
        choices=(*PROTOCOLS, "both"),
        default="standard",
        help="standard (Table 4.3), novelty (Table 4.4: the most popular items are never held out, and every "
        "non-stacking method gets a second row with them ranked last), both of these, fixed (the data set's "
        f"published train / valid / test split: {', '.join(datasets.PRESPLIT)}), or temporal (per user the latest "
        f"20%% of the positives as test, the 10%% before them as validation: data sets with timestamps, "
        f"{', '.join(datasets.TIMESTAMPED)})",
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
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help="what the run logs on standard error: INFO logs each stage of each unit and fit; default: one line "
        "per finished (method, fold) unit when standard error is not a terminal (CI, nohup, a scheduler), else "
        f"WARNING (the progress bar shows the progress); one of {', '.join(LOG_LEVELS)}",
    )
    return p


def load_data(name: str, data_dir, protocol: str = "standard", seed: int = 0):
    """``(data, parts)``: the data set, and the one split of the protocols that have one: the
    published ``(train, valid, test)`` under ``"fixed"``, the time-ordered one under
    ``"temporal"`` (:data:`TEMPORAL_VAL`, :data:`TEMPORAL_TEST`; ties in time ordered by ``seed``)."""
    if protocol == "fixed":
        data, parts = datasets.load_presplit(name, data_dir=data_dir)
        return data, (parts["train"], parts["valid"], parts["test"])
    if name == "synthetic":
        # Strong enough latent structure that personalised models beat popularity.
        data = datasets.make_synthetic(n_users=1000, n_items=500, factor_scale=3.0, random_state=0)
    else:
        data = datasets.load(name, data_dir=data_dir)
    if protocol != "temporal":
        return data, None
    if data.timestamps is None:
        raise ValueError(
            f"--protocol temporal needs the time of each interaction and {name} has none; data sets with "
            f"timestamps: {', '.join(datasets.TIMESTAMPED)}"
        )
    return data, split.last_fraction(data, val=TEMPORAL_VAL, test=TEMPORAL_TEST, random_state=seed)


def check_dataset(parser, name: str, data_dir) -> None:
    """Usage errors for a data set that cannot be loaded: an unknown name (with the closest known
    ones), or a registered set whose files are missing (where they were looked for, how to point
    ``--data-dir`` or ``$RECSYS_LTR_DATA`` at them, how to get them)."""
    known = [*datasets.list_datasets(), "synthetic"]
    if name == "synthetic" or (name in datasets.list_datasets(include_ltr=True) and name not in known):
        return  # a learning-to-rank set: datasets.load says what to use instead
    if name not in known:
        close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        parser.error(f"unknown data set {name!r}{hint}; known: {', '.join(known)}")
    missing = datasets.missing_files(name, data_dir)
    if missing:
        searched = " and ".join(str(d / name) for d in datasets.search_dirs(data_dir))
        get = (
            f"python -c \"from recsys_ltr import datasets; datasets.download('{name}')\" fetches it, or put"
            if datasets.dataset_info(name).get("sources")
            else "put"
        )
        parser.error(
            f"data set {name} not found: {', '.join(missing)} missing in {searched}; {get} its files in "
            f"<dir>/{name}/ and pass --data-dir <dir> or set ${datasets.ENV_VAR}=<dir> (see datasets/README.md)"
        )


def check_data_dir(parser, data_dir) -> None:
    """A data directory given (``--data-dir``, ``$RECSYS_LTR_DATA``) that does not exist: one line."""
    if data_dir is not None:
        if not os.path.isdir(os.path.expanduser(data_dir)):
            parser.error(f"--data-dir {data_dir} does not exist (it is the directory holding <data set>/ folders)")
        return
    env = os.environ.get(datasets.ENV_VAR)
    if env and not os.path.isdir(os.path.expanduser(env)):
        fail(
            f"${datasets.ENV_VAR}={env} does not exist: point it at the directory holding the data sets' folders, "
            "or unset it"
        )


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
    if args.protocol == "temporal" and args.folds not in (None, 1):
        parser.error(f"--folds {args.folds}: the temporal protocol has one split, the time-ordered one")
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


def added_methods(methods, workload=None) -> dict[str, list[str]]:
    """The methods the run adds to ``methods`` (the bases its stacking methods stack on data of
    ``workload``), each with the stacking methods that need it."""
    added = {}
    for name in with_bases(methods, workload):
        if name not in methods:
            added[name] = [m for m in methods if name in get_method(m).stacked(workload)]
    return added


def describe_methods(methods, added) -> str:
    """The header's line of what runs: the methods asked for, then the added ones and why."""
    text = f"runs {len(methods) + len(added)} method(s): {', '.join(methods)}"
    groups = {}
    for name, needed_by in added.items():
        groups.setdefault(tuple(needed_by), []).append(name)
    for needed_by, names in groups.items():
        text += f"; added {', '.join(names)}: bases of {' and '.join(needed_by)}"
    return text


class _ProgressHandler(logging.StreamHandler):
    """Log records on standard error above any progress bar (``tqdm.write``), not through it."""

    def emit(self, record):
        try:
            progress_write(self.format(record))
        except Exception:  # logging's own habit: a failing handler reports, never raises
            self.handleError(record)


def configure_logging(level):
    """Log the package's records at ``level`` on standard error for this run (``logging.basicConfig``,
    other libraries at ``WARNING``); ``None``: in a terminal ``WARNING``, outside one the runner's line
    per finished unit (its logger at ``INFO``, the rest of the package at ``WARNING``: the main job on
    movielens-100k logs 70 lines instead of about 980).  Returns the function that restores the
    previous configuration."""
    units = logging.getLogger(run_experiment.__module__)
    if level is None:
        level = "WARNING"
        units_level = logging.WARNING if sys.stderr.isatty() else logging.INFO
    else:
        units_level = logging.NOTSET
    root, package = logging.getLogger(), logging.getLogger("recsys_ltr")
    saved = (list(root.handlers), root.level, package.level, units.level)
    units.setLevel(units_level)
    for h in saved[0]:  # set aside, not closed: an embedding application gets them back
        root.removeHandler(h)
    handler = _ProgressHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    package.setLevel(level)

    def restore():
        root.removeHandler(handler)
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
        package.setLevel(saved[2])
        units.setLevel(saved[3])

    return restore


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    restore = configure_logging(args.log_level)
    try:
        return _run(parser, args, argv)
    finally:
        restore()


def _run(parser, args, argv) -> int:
    methods = parse_methods(parser, args.models)
    note = None
    name = args.dataset or None
    if name != "synthetic":
        check_data_dir(parser, args.data_dir)
    if name is not None:
        check_dataset(parser, name, args.data_dir)
    if name is None:
        try:
            name, note = default_dataset(args.data_dir)
        except FileNotFoundError as exc:
            parser.error(str(exc))
    if note:
        print(note, file=sys.stderr)  # once, before anything else
    try:
        data, parts = load_data(name, args.data_dir, args.protocol, args.seed)
    except (FileNotFoundError, ValueError) as exc:  # unknown, missing, corrupt, not pre-split or untimed data set
        parser.error(str(exc).splitlines()[0])
    added = added_methods(methods, Workload.of(data.matrix))
    protocols = HOLDOUT_PROTOCOLS if args.protocol == "both" else (args.protocol,)
    one_split = args.protocol in ("fixed", "temporal")
    args.k = args.k or (20 if args.protocol == "fixed" else 10)
    args.out = args.out or os.path.join(RUNS_DIR, name)
    check_arguments(parser, args, data, protocols)
    args.folds = 1 if one_split else args.folds or 3
    executor = make_executor(parser, args)
    cache_dir = args.cache_dir or os.path.join(args.out, "cache")
    rows = ""
    if "novelty" in protocols:
        rows = f"; under the novelty protocol each non-stacking method also gets a (top-{args.exclude_top} last) row"
    print(
        f"{name}: {data.n_users} users x {data.n_items} items, {data.nnz} interactions; "
        f"{' and '.join(protocols)} protocol{'s' if len(protocols) > 1 else ''}, {args.folds} fold(s), {args.budget} "
        f"budget; results go to {os.path.join(args.out, '')} (cache: {cache_dir})\n"
        f"{describe_methods(methods, added)}{rows}\n"
        f"{executor.name} executor: {executor.parallelism} unit(s) at once x {executor.threads} thread(s)",
        file=sys.stderr,
    )
    command = " ".join([PROG, *(argv if argv is not None else sys.argv[1:])])
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
        asked = [row for row in summary["method"] if method_of(row) not in added]
        tests = paired_tests(experiment.results, summary, metrics, among=asked)
        table = format_table(summary, metrics, tests, added=added)
        source = " (SYNTHETIC data, not a real data set)" if name == "synthetic" else ""
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
            "added": added,
            "executor": executor.name,
            "jobs": executor.parallelism,
            "computed_units": len(experiment.computed),
            "seconds": time.perf_counter() - t0,
            "command": command,
        }
        if protocol == "temporal":
            meta["split"] = f"split.last_fraction(val={TEMPORAL_VAL}, test={TEMPORAL_TEST}, random_state={args.seed})"
        paths = write_outputs(os.path.join(args.out, protocol), experiment, summary, tests, table, meta, metrics)
        print(f"\nwrote {len(paths)} files to {os.path.join(args.out, protocol, '')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
