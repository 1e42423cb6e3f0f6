"""Hostile-user fuzz campaign: the fuzz suite's case generators (``tests/_fuzz.py``) at scale.

Every public entry point gets thousands of hostile inputs -- malformed matrices of every scipy
format and class, bad ids, bad parameters, damaged model and LETOR files, bad command lines,
hand-built kernel inputs, stacked FEBR's configurations, ``executor=`` arguments, damaged evaluation
cache files, time cuts, DataFrame column roles, weighting and graph-filter values -- each classified by the suite's oracles:

* clear error       -- TypeError/ValueError (or an expected subclass) naming the problem;
* right answer      -- a valid input answered as its canonical form is;
* accepted          -- a documented acceptance (each reason is listed with its count);
* crash             -- the worker died of a signal or an abort;
* timeout           -- the worker hung;
* silent wrong      -- an answer that differs from the reference;
* unexplained       -- any other exception type;
* misleading        -- the right type, a message that does not name the problem;
* undocumented      -- a malformed input accepted without a documented reason.

Cases run in worker subprocesses, in batches; a case that kills its worker is recorded as a crash
and the batch resumes after it.  A subset is rerun under ``NUMBA_BOUNDSCHECK=1`` (with its own
numba cache), where an out-of-bounds access in a kernel raises ``IndexError`` (unexplained).

    python benchmarks/fuzz_campaign.py                     # ~5,000 cases, 1,000 rerun bounds-checked
    python benchmarks/fuzz_campaign.py --cases 600 --boundscheck 100 --jobs 2

Exit status 1 when any crash, timeout, silent wrong answer, unexplained exception, misleading
message or undocumented acceptance remains.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import _fuzz
from hypothesis import HealthCheck, Phase, given, seed, settings

#: share of the cases per family (the rest of the entry points are cheap and numerous)
SHARES = {"sparse": 0.33, "ids": 0.13, "params": 0.14, "files": 0.11, "arrays": 0.07, "letor": 0.04,
          "knn_index": 0.02, "warp": 0.02, "cli": 0.02, "febr": 0.05, "executors": 0.02, "cache": 0.02,
          "values": 0.03}  # fmt: skip
#: families rerun under NUMBA_BOUNDSCHECK=1: those whose cases reach numba kernels
KERNEL_FAMILIES = ("sparse", "ids", "params", "files", "arrays", "knn_index", "warp", "febr", "executors", "values")
BAD = ("crash", "timeout", "wrong", "unexplained", "misleading", "undocumented")
LABELS = {
    "clear": "clear errors",
    "right": "right answers (valid inputs)",
    "accepted": "questionable acceptances (documented)",
    "crash": "crashes (signal or abort)",
    "timeout": "hangs",
    "wrong": "silent wrong answers",
    "unexplained": "unexplained exceptions",
    "misleading": "misleading messages",
    "undocumented": "undocumented acceptances",
}


def draw(strategy, n, seed_value):
    """Up to ``n`` distinct examples of ``strategy``, the same for the same seed."""
    out = {}

    @seed(seed_value)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(strategy)
    def collect(case):
        out.setdefault(json.dumps(case, sort_keys=True), case)

    collect()
    return list(out.values())


def records(total, seed_value, families=tuple(SHARES)):
    """The campaign's records of ``families``, family by family and entry by entry."""
    out = []
    for family, share in ((f, SHARES[f]) for f in families):
        make, entries, _ = _fuzz.families()[family]
        per_entry = max(2, round(total * share / len(entries)))
        for i, entry in enumerate(entries):
            for case in draw(make(entry), per_entry, seed_value + i):
                out.append({"family": family, "entry": entry, "case": case})
    return out


def run(recs, batch, jobs, env, timeout):
    """Outcomes of ``recs`` in batches of ``batch`` cases, ``jobs`` worker processes at once."""
    chunks = [recs[i : i + batch] for i in range(0, len(recs), batch)]
    with tempfile.TemporaryDirectory() as directory, ThreadPoolExecutor(jobs) as pool:
        results = pool.map(lambda c: _fuzz.run_batch_subprocess(c, directory, timeout=timeout, env=env), chunks)
        return [o for chunk in results for o in chunk]


def report(title, recs, outcomes, seconds):
    counts = collections.Counter(o.category for o in outcomes)
    print(f"\n## {title}: {len(recs)} inputs, {seconds:.0f} s\n")
    print("| outcome | count |\n|---|---:|")
    print(f"| inputs tried | {len(recs)} |")
    for key, label in LABELS.items():
        print(f"| {label} | {counts.get(key, 0)} |")
    by_family = collections.defaultdict(collections.Counter)
    for r, o in zip(recs, outcomes):
        by_family[r["family"]][o.category] += 1
    print("\n| family | entry points | inputs | clear | right | accepted | bad |\n|---|---:|---:|---:|---:|---:|---:|")
    for family, c in by_family.items():
        n_entries = len({r["entry"] for r in recs if r["family"] == family})
        bad = sum(c[k] for k in BAD)
        print(f"| {family} | {n_entries} | {sum(c.values())} | {c['clear']} | {c['right']} | {c['accepted']} | {bad} |")
    reasons = collections.Counter(o.detail for o in outcomes if o.category == "accepted")
    if reasons:
        print("\nDocumented acceptances:")
        for reason, n in reasons.most_common():
            print(f"  {n:5d}  {reason}")
    failures = [(r, o) for r, o in zip(recs, outcomes) if o.category in BAD]
    for r, o in failures[:30]:
        print(
            f"  {o.category.upper()}: {r['family']} / {r['entry']}: {o.detail[:300]}\n      case: {json.dumps(r['case'])[:300]}"
        )
    return sum(counts.get(k, 0) for k in BAD)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", type=int, default=5000, help="inputs of the main run (approximate)")
    p.add_argument("--boundscheck", type=int, default=1000, help="inputs rerun under NUMBA_BOUNDSCHECK=1 (0: none)")
    p.add_argument("--batch", type=int, default=150, help="cases per worker process")
    p.add_argument("--jobs", type=int, default=2, help="worker processes at once")
    p.add_argument("--timeout", type=float, default=1800, help="seconds a batch may take before its case is a hang")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--families", default=",".join(SHARES), help=f"comma-separated subset of {','.join(SHARES)}")
    args = p.parse_args(argv)
    families = args.families.split(",")
    if not set(families) <= set(SHARES):
        p.error(f"unknown families {sorted(set(families) - set(SHARES))}; known: {', '.join(SHARES)}")
    threads = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

    t0 = time.perf_counter()
    recs = records(args.cases, args.seed, families)
    print(f"generated {len(recs)} inputs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    t0 = time.perf_counter()
    bad = report("main run", recs, run(recs, args.batch, args.jobs, threads, args.timeout), time.perf_counter() - t0)

    if args.boundscheck:
        kernel = [r for r in recs if r["family"] in KERNEL_FAMILIES]
        subset = random.Random(args.seed).sample(kernel, min(args.boundscheck, len(kernel)))
        with tempfile.TemporaryDirectory() as cache:
            env = {**threads, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": cache}
            t0 = time.perf_counter()
            outcomes = run(subset, args.batch, args.jobs, env, args.timeout)
            bad += report("NUMBA_BOUNDSCHECK=1 rerun", subset, outcomes, time.perf_counter() - t0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
